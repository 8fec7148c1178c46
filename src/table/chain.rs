//! A partition's claims chain from a table position on, as a committer reads it from the archive: each
//! claim, and whether its data object is durable (and how large it is). Thin I/O around
//! [`super::plan`]: one LIST of the claims folder, then a GET per claim and a HEAD per data object.

use crate::archive::claim::{Claim, ClaimKey};
use crate::archive::keys::ListRequest;
use crate::archive::object_key::Prefix;
use crate::archive::partition::TopicPartition;
use crate::store::{list_between, ObjectStore};

use super::committer::TableError;
use super::plan::Link;

/// A durable link with what the table records of its data object.
#[derive(Debug, Clone)]
pub struct DurableLink {
    pub link: Link,
    pub claim: Claim,
    /// The data object's size in bytes (0 for a link without one).
    pub size: u64,
}

/// The chain of `tp` from chain position `from` on: its durable links, in order, up to the first claim
/// whose data is not in the store (only the last claim may lack it, while its writer uploads), and the
/// chain position after the last claim listed.
pub async fn read_chain(
    store: &dyn ObjectStore,
    prefix: &Prefix,
    tp: &TopicPartition,
    from: i64,
) -> Result<(Vec<DurableLink>, i64), TableError> {
    let req =
        ListRequest { prefix: prefix.claims_folder(tp), start_after: Some(ClaimKey::start_after(prefix, tp, from)) };
    let (keys, _) = list_between(store, req, None).await?;
    let mut claims = Vec::new();
    for key in keys {
        let Ok(claim_key) = ClaimKey::parse(prefix, &key) else { continue };
        if claim_key.chain_start < from {
            continue;
        }
        let body = store.get(&key).await?;
        claims.push(Claim::from_json(&key, &body)?);
    }
    let next = claims.last().map_or(from, |c| c.end + 1);
    let mut links = Vec::new();
    for (i, claim) in claims.iter().enumerate() {
        let object = claim
            .object_key(prefix)
            .ok_or_else(|| TableError::OldClaim { tp: tp.to_string(), start: claim.chain_start })?;
        let key = object.to_string();
        let link = match store.head(&key).await? {
            Some(size) => {
                DurableLink { link: Link { covers: claim.covers(), object: Some(key) }, claim: claim.clone(), size }
            }
            // Its range held no records when it was read again: the next claim says so.
            None if claims.get(i + 1).is_some_and(|n| n.no_records_from == Some(claim.chain_start)) => {
                DurableLink { link: Link { covers: claim.covers(), object: None }, claim: claim.clone(), size: 0 }
            }
            None => break,
        };
        links.push(link);
    }
    Ok((links, next))
}

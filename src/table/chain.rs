//! A partition's claims chain from a table position on, as a committer reads it from the archive: each
//! claim, whether its data object is durable, and what the table records of the object (its offsets,
//! its size, its record count and columns from its Parquet footer). Thin I/O around [`super::plan`]:
//! one LIST of the claims folder, then a GET per claim, a HEAD and a ranged GET (the footer) per object
//! (none for the objects this process has just created: [`RecentObjects`]).

use std::sync::Arc;

use arrow_schema::Schema;
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};

use crate::archive::claim::{Claim, ClaimKey};
use crate::archive::keys::ListRequest;
use crate::archive::object_key::{FileKind, ObjectKey, Prefix};
use crate::archive::partition::{OffsetRange, TopicPartition};
use crate::store::{list_between, ObjectStore};

use super::committer::TableError;
use super::plan::Link;
use super::recent::RecentObjects;

/// How much of an object's end is read first for its footer (most footers are smaller).
const FOOTER_GUESS: u64 = 64 << 10;

/// A durable link with what the table records of its data object.
#[derive(Debug, Clone)]
pub struct DurableLink {
    pub link: Link,
    pub claim: Claim,
    /// The data object's offsets, size in bytes and record count (none for a link without one).
    pub object: Option<(OffsetRange, u64, u64)>,
    /// The data object's footer, read to find it durable, when the chain was read `keep_footers` (a
    /// commit takes its columns and statistics).
    pub footer: Option<Arc<ParquetMetaData>>,
}

/// The chain of `tp` from chain position `from` on: its durable links, in order, up to the one holding
/// the `max_objects`-th data object (a claim whose data is not in the store is left out: the last one's
/// writer may be uploading it, and a missing one before a durable one is a hole the plan refuses to
/// pass), and the chain position after the last claim read. Claims are read one ahead of the link
/// being looked at, so nothing past the last link returned is read. `keep_footers`: each link keeps
/// its object's footer (a commit's few links; a whole partition's would hold them all in memory).
/// Objects in `recent` (this process created them) are taken from there, not read back.
pub async fn read_chain(
    (store, recent): (&dyn ObjectStore, &RecentObjects),
    prefix: &Prefix,
    tp: &TopicPartition,
    from: i64,
    max_objects: usize,
    keep_footers: bool,
) -> Result<(Vec<DurableLink>, i64), TableError> {
    let req =
        ListRequest { prefix: prefix.claims_folder(tp), start_after: Some(ClaimKey::start_after(prefix, tp, from)) };
    let (keys, _) = list_between(store, req, None).await?;
    let mut keys = keys.into_iter().filter(|k| ClaimKey::parse(prefix, k).is_ok_and(|c| c.chain_start >= from));
    let mut current = read_claim(store, keys.next()).await?;
    let (mut links, mut objects, mut next) = (Vec::new(), 0, from);
    while let Some(claim) = current {
        let following = read_claim(store, keys.next()).await?;
        next = claim.end + 1;
        if let Some(mut link) = durable_link((store, recent), prefix, tp, claim, following.as_ref()).await? {
            if !keep_footers {
                link.footer = None;
            }
            objects += usize::from(link.object.is_some());
            links.push(link);
            if objects >= max_objects {
                break;
            }
        }
        current = following;
    }
    Ok((links, next))
}

async fn read_claim(store: &dyn ObjectStore, key: Option<String>) -> Result<Option<Claim>, TableError> {
    let Some(key) = key else { return Ok(None) };
    let body = store.get(&key).await?;
    Ok(Some(Claim::from_json(&key, &body)?))
}

/// The link of `claim` if its data is durable (or it has none by design, as `following` says).
async fn durable_link(
    (store, recent): (&dyn ObjectStore, &RecentObjects),
    prefix: &Prefix,
    tp: &TopicPartition,
    claim: Claim,
    following: Option<&Claim>,
) -> Result<Option<DurableLink>, TableError> {
    let named = claim
        .object_key(prefix)
        .ok_or_else(|| TableError::OldClaim { tp: tp.to_string(), start: claim.chain_start })?;
    let created = recent.get(&named.to_string());
    let object = match created {
        Some((size, footer)) => Some((named, size, Some(footer))),
        None => match store.head(&named.to_string()).await? {
            Some(size) => Some((named, size, None)),
            None => rewritten(store, &named, &claim).await?.map(|(key, size)| (key, size, None)),
        },
    };
    Ok(match object {
        Some((key, size, footer)) => {
            if key.kind != FileKind::Parquet {
                return Err(TableError::NotParquet { key: key.to_string() });
            }
            let footer = match footer {
                Some(footer) => footer,
                None => Arc::new(read_footer(store, &key.to_string(), size).await?),
            };
            let records = footer.file_metadata().num_rows().max(0) as u64;
            let link = Link { covers: claim.covers(), object: Some(key.to_string()) };
            Some(DurableLink { link, claim, object: Some((key.range, size, records)), footer: Some(footer) })
        }
        None if emptied(&claim, following) => {
            Some(DurableLink { link: Link { covers: claim.covers(), object: None }, claim, object: None, footer: None })
        }
        None => None,
    })
}

/// Whether the claim has no data object by design, as the next claim says: its range held no records
/// when it was read again (compaction), or retention deleted all of it before it was archived.
fn emptied(claim: &Claim, next: Option<&Claim>) -> bool {
    next.is_some_and(|n| {
        n.no_records_from == Some(claim.chain_start)
            || (n.retention_gap && n.retention_gap_from.is_some_and(|gap| gap <= claim.first))
    })
}

/// The object a claim's range was re-written to when retention had taken its first offsets: named by
/// what it holds (a later first offset, the claim's end), in the folder of the one the claim names.
async fn rewritten(
    store: &dyn ObjectStore,
    named: &ObjectKey,
    claim: &Claim,
) -> Result<Option<(ObjectKey, u64)>, TableError> {
    let key = named.to_string();
    let folder = &key[..key.rfind('/').map_or(0, |i| i + 1)];
    let tp = &named.tp;
    let start_after = format!("{folder}{}+{}+{:020}", tp.topic(), tp.partition(), claim.first);
    let page = store.list(&ListRequest { prefix: folder.to_string(), start_after: Some(start_after) }, 100).await?;
    let within = |k: &ObjectKey| k.tp == *tp && k.range.end() == claim.end && k.range.start() > claim.first;
    let found = page.keys.iter().filter_map(|k| ObjectKey::parse(&named.prefix, k).ok()).find(within);
    match found {
        Some(object) => Ok(store.head(&object.to_string()).await?.map(|size| (object, size))),
        None => Ok(None),
    }
}

/// A Parquet object's footer (`size` bytes long): its end read once, and again if the footer is larger.
pub async fn read_footer(store: &dyn ObjectStore, key: &str, size: u64) -> Result<ParquetMetaData, TableError> {
    let bad = |why: String| TableError::Footer { key: key.to_string(), why };
    if size < 12 {
        return Err(bad(format!("{size} bytes is too short for a Parquet file")));
    }
    let tail = store.get_range(key, size - size.min(FOOTER_GUESS)..size).await?;
    let length = u32::from_le_bytes(tail[tail.len() - 8..tail.len() - 4].try_into().expect("4 bytes")) as u64;
    if &tail[tail.len() - 4..] != b"PAR1" || length + 8 > size {
        return Err(bad("it does not end with a Parquet footer".into()));
    }
    let footer = match (length + 8) as usize <= tail.len() {
        true => tail.slice(tail.len() - 8 - length as usize..tail.len() - 8),
        false => store.get_range(key, size - 8 - length..size - 8).await?,
    };
    ParquetMetaDataReader::decode_metadata(&footer).map_err(|e| bad(e.to_string()))
}

/// The Arrow columns a Parquet footer declares.
pub fn columns(key: &str, footer: &ParquetMetaData) -> Result<Arc<Schema>, TableError> {
    let file = footer.file_metadata();
    parquet::arrow::parquet_to_arrow_schema(file.schema_descr(), file.key_value_metadata())
        .map(Arc::new)
        .map_err(|e| TableError::Footer { key: key.to_string(), why: e.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(start: i64, first: i64, end: i64) -> Claim {
        Claim::for_test(start, first, end)
    }

    #[test]
    fn a_claim_is_empty_by_design_only_when_the_next_one_says_so() {
        let this = claim(10, 12, 19);
        assert!(!emptied(&this, None), "the last claim: its data may be on its way");
        assert!(!emptied(&this, Some(&claim(20, 20, 29))), "a hole");
        let compacted = Claim { no_records_from: Some(10), ..claim(20, 20, 29) };
        assert!(emptied(&this, Some(&compacted)));
        let retention_all = Claim { retention_gap: true, retention_gap_from: Some(12), ..claim(20, 25, 29) };
        assert!(emptied(&this, Some(&retention_all)));
        let retention_part = Claim { retention_gap: true, retention_gap_from: Some(15), ..claim(20, 25, 29) };
        assert!(!emptied(&this, Some(&retention_part)), "its later records are in a re-written object");
        let own_gap = Claim { retention_gap: true, retention_gap_from: None, ..claim(20, 25, 29) };
        assert!(!emptied(&this, Some(&own_gap)), "the next claim's own range had the gap");
    }
}

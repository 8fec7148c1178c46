//! Reading claims back for what they record of their objects.

use crate::archive::claim::{Claim, ClaimKey};
use crate::archive::object_key::{ObjectKey, Prefix};
use crate::store::{ObjectStore, StoreError};

/// The record timestamps of `object` as its claim (chain start `claim_start`) says them; `None` when
/// that claim does not describe exactly this object, or does not say.
pub async fn claimed_timestamps(
    store: &dyn ObjectStore,
    prefix: &Prefix,
    object: &ObjectKey,
    claim_start: i64,
) -> Result<Option<(i64, i64)>, StoreError> {
    let key = ClaimKey::new(prefix.clone(), object.tp.clone(), claim_start).to_string();
    let claim = match store.get(&key).await {
        Ok(body) => Claim::from_json(&key, &body).ok(),
        Err(StoreError::NotFound(_)) => None,
        Err(e) => return Err(e),
    };
    Ok(claim.filter(|c| c.data() == object.range).and_then(|c| c.timestamps))
}

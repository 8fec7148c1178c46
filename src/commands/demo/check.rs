//! Reads an archive back and checks it independently of the archiver's own state: every object is
//! decoded, its records must match its name, and each partition's offsets must appear exactly once.
//! Used by `demo` and the integration tests; `verify` audits an archive on its own terms (`audit`).

use std::collections::{BTreeMap, BTreeSet};

use thiserror::Error;

use crate::archive::claim::covering_claim;
use crate::archive::claim::{Claim, ClaimKey};
use crate::archive::keys::{classify, ArchiveKey};
use crate::archive::object_key::{ObjectKey, Prefix};
use crate::archive::record::Record;
use crate::commands::verify::audit::ObjectContents;
use crate::encode::{decode, EncodeError};
use crate::store::{list_all, ObjectStore, StoreError};

#[derive(Debug, Error)]
pub enum CheckError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("object {key} cannot be decoded: {source}")]
    Decode { key: String, source: EncodeError },
}

/// One partition's archive, read back.
#[derive(Debug, Default)]
pub struct PartitionArchive {
    pub objects: Vec<ObjectKey>,
    /// Every record of every object, in key order (so offsets ascend unless objects overlap).
    pub records: Vec<Record>,
    /// Objects whose contents disagree with their name (first/last offset, order).
    pub mislabelled: Vec<String>,
}

#[derive(Debug, Default)]
pub struct ArchiveContents {
    pub partitions: BTreeMap<i32, PartitionArchive>,
    /// Keys under the topic's folder that are not archive objects.
    pub ignored_keys: Vec<String>,
}

/// Reads every object of `topic` under `prefix`.
pub async fn read_topic(store: &dyn ObjectStore, prefix: &Prefix, topic: &str) -> Result<ArchiveContents, CheckError> {
    let mut contents = ArchiveContents::default();
    for raw in list_all(store, &prefix.topic_folder(topic)).await? {
        let key = match classify(prefix, &raw) {
            ArchiveKey::Data(k) if k.tp.topic() == topic => k,
            ArchiveKey::Marker { .. } => continue,
            _ => {
                contents.ignored_keys.push(raw);
                continue;
            }
        };
        let data = store.get(&raw).await?;
        let records = decode(key.kind, data)
            .map(|d| d.records)
            .map_err(|source| CheckError::Decode { key: raw.clone(), source })?;
        let part = contents.partitions.entry(key.tp.partition()).or_default();
        let read = ObjectContents::of(&records);
        let rewritten = |claim: Claim| claim.records > records.len() as u64;
        if read.mismatch(&key, false).is_some()
            && read.mismatch(&key, claim_naming(store, &key).await?.is_some_and(rewritten)).is_some()
        {
            part.mislabelled.push(raw.clone());
        }
        part.records.extend(records);
        part.objects.push(key);
    }
    Ok(contents)
}

/// The claim covering `key`, when it names it (then, holding fewer records than the claim, the object
/// was written again after compaction removed some).
async fn claim_naming(store: &dyn ObjectStore, key: &ObjectKey) -> Result<Option<Claim>, StoreError> {
    let starts: BTreeSet<i64> = list_all(store, &key.prefix.claims_folder(&key.tp))
        .await?
        .iter()
        .filter_map(|k| classify(&key.prefix, k).claim().map(|c| c.chain_start))
        .collect();
    let Some(start) = covering_claim(&starts, key.range.start()) else { return Ok(None) };
    let claim_key = ClaimKey::new(key.prefix.clone(), key.tp.clone(), start).to_string();
    let claim = Claim::from_json(&claim_key, &store.get(&claim_key).await?).ok();
    Ok(claim.filter(|c| c.object.as_deref() == Some(key.relative().as_str())))
}

/// The highest archived end offset per partition of `topic`, from the listing alone.
pub async fn archived_ends(
    store: &dyn ObjectStore,
    prefix: &Prefix,
    topic: &str,
) -> Result<BTreeMap<i32, i64>, StoreError> {
    let mut ends = BTreeMap::new();
    for raw in list_all(store, &prefix.topic_folder(topic)).await? {
        if let Some(k) = classify(prefix, &raw).data() {
            let end = ends.entry(k.tp.partition()).or_insert(k.range.end());
            *end = (*end).max(k.range.end());
        }
    }
    Ok(ends)
}

/// How an archive compares with what was produced.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Comparison {
    pub expected: u64,
    pub archived: u64,
    pub missing: u64,
    pub duplicates: u64,
    /// Offsets present in both whose key, value, headers or timestamp differ.
    pub different: u64,
    /// Offsets in the archive that were never produced.
    pub unexpected: u64,
    pub mislabelled_objects: u64,
}

impl Comparison {
    pub fn is_exact(&self) -> bool {
        self.missing == 0
            && self.duplicates == 0
            && self.different == 0
            && self.unexpected == 0
            && self.mislabelled_objects == 0
    }
}

/// Compares an archive with the records produced, per partition.
pub fn compare(produced: &BTreeMap<i32, Vec<Record>>, archive: &ArchiveContents) -> Comparison {
    let mut c = Comparison::default();
    let empty = PartitionArchive::default();
    let partitions: std::collections::BTreeSet<i32> =
        produced.keys().chain(archive.partitions.keys()).copied().collect();
    for p in partitions {
        let part = archive.partitions.get(&p).unwrap_or(&empty);
        let mut by_offset: BTreeMap<i64, &Record> = BTreeMap::new();
        for r in &part.records {
            if by_offset.insert(r.offset, r).is_some() {
                c.duplicates += 1;
            }
        }
        c.archived += part.records.len() as u64;
        c.mislabelled_objects += part.mislabelled.len() as u64;
        let expected = produced.get(&p).map(Vec::as_slice).unwrap_or(&[]);
        c.expected += expected.len() as u64;
        for want in expected {
            match by_offset.remove(&want.offset) {
                None => c.missing += 1,
                Some(got) if got != want => c.different += 1,
                Some(_) => {}
            }
        }
        c.unexpected += by_offset.len() as u64;
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::record::TimestampKind;

    fn rec(offset: i64, value: &str) -> Record {
        Record {
            offset,
            timestamp_ms: Some(1),
            timestamp_kind: TimestampKind::CreateTime,
            key: None,
            value: Some(value.as_bytes().to_vec()),
            headers: vec![],
        }
    }

    fn archive(records: Vec<Record>) -> ArchiveContents {
        let mut a = ArchiveContents::default();
        a.partitions.insert(0, PartitionArchive { records, ..Default::default() });
        a
    }

    #[test]
    fn compare_counts_each_kind_of_difference() {
        let produced = BTreeMap::from([(0, vec![rec(0, "a"), rec(1, "b"), rec(2, "c"), rec(3, "d")])]);
        assert!(compare(&produced, &archive(vec![rec(0, "a"), rec(1, "b"), rec(2, "c"), rec(3, "d")])).is_exact());
        let c = compare(&produced, &archive(vec![rec(0, "a"), rec(1, "b"), rec(1, "b"), rec(2, "X"), rec(9, "z")]));
        assert_eq!(
            c,
            Comparison {
                expected: 4,
                archived: 5,
                missing: 1,
                duplicates: 1,
                different: 1,
                unexpected: 1,
                mislabelled_objects: 0
            }
        );
        assert!(!c.is_exact());
    }
}

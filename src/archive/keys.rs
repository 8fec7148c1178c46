//! What a key under an archive's prefix is. Every reader of a mixed listing (verify, restore, the tail's
//! data listing, ddl, the markers, the demo's check) asks this one function, so they agree on what is
//! the archive's and what is not; the tail search's planner (`recovery/search.rs`) and the stale-upload
//! sweep (`store/stale.rs`) list one kind of key each and parse that kind directly.

use super::claim::ClaimKey;
use super::completeness::MARKER_NAME;
use super::group_offsets::SnapshotKey;
use super::object_key::{ObjectKey, Prefix};
use super::time_bucket::Bucket;

/// The folder below the prefix that holds the topics' tables.
pub const TABLES_FOLDER: &str = "_tables/";

/// A listed key, classified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArchiveKey {
    /// A data object: its topic, partition, offset range, format and time bucket.
    Data(ObjectKey),
    /// A claim of the claims chain: its partition and chain position.
    Claim(ClaimKey),
    /// A time bucket's `_SUCCESS` marker.
    Marker { topic: String, bucket: Bucket },
    /// A file of a topic's table (`<prefix>/_tables/...`: Iceberg's metadata and manifests).
    Table,
    /// A snapshot of consumer groups' committed offsets (`<prefix>/_group-offsets/...`).
    GroupOffsets(SnapshotKey),
    /// Anything else: not written by the archiver (stray files, another tool's objects).
    Foreign,
}

/// What `key` is under `prefix`.
pub fn classify(prefix: &Prefix, key: &str) -> ArchiveKey {
    if let Ok(object) = ObjectKey::parse(prefix, key) {
        return ArchiveKey::Data(object);
    }
    if let Ok(claim) = ClaimKey::parse(prefix, key) {
        return ArchiveKey::Claim(claim);
    }
    if key.strip_prefix(&prefix.root()).is_some_and(|rest| rest.starts_with(TABLES_FOLDER)) {
        return ArchiveKey::Table;
    }
    if let Some(snapshot) = SnapshotKey::parse(prefix, key) {
        return ArchiveKey::GroupOffsets(snapshot);
    }
    match marker(prefix, key) {
        Some((topic, bucket)) => ArchiveKey::Marker { topic, bucket },
        None => ArchiveKey::Foreign,
    }
}

impl ArchiveKey {
    /// The data object, if it is one.
    pub fn data(self) -> Option<ObjectKey> {
        match self {
            ArchiveKey::Data(key) => Some(key),
            _ => None,
        }
    }

    /// The claim key, if it is one.
    pub fn claim(self) -> Option<ClaimKey> {
        match self {
            ArchiveKey::Claim(key) => Some(key),
            _ => None,
        }
    }
}

/// `<prefix>/topic=<t>/dt=<date>[/hour=<h>]/_SUCCESS`: the topic and bucket of a marker key.
fn marker(prefix: &Prefix, key: &str) -> Option<(String, Bucket)> {
    let rest = key.strip_prefix(&prefix.root())?.strip_suffix(MARKER_NAME)?.strip_suffix('/')?;
    let mut dirs = rest.split('/');
    let topic = dirs.next()?.strip_prefix("topic=")?;
    let (dt, hour) = (dirs.next()?, dirs.next());
    if topic.is_empty() || dirs.next().is_some() {
        return None;
    }
    Some((topic.to_string(), Bucket::parse(dt, hour)?))
}

/// One listing request: keys under `prefix`, strictly after `start_after`, in key order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListRequest {
    pub prefix: String,
    pub start_after: Option<String>,
}

/// One page of a listing, as S3 ListObjectsV2 returns it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ListPage {
    pub keys: Vec<String>,
    pub truncated: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::object_key::FileKind;
    use crate::archive::partition::{OffsetRange, TopicPartition};

    #[test]
    fn every_kind_of_key_is_told_apart() {
        let prefix = Prefix::new("arch");
        let tp = TopicPartition::new("orders", 3).unwrap();
        let data = ObjectKey::new(prefix.clone(), tp.clone(), OffsetRange::new(0, 9).unwrap(), FileKind::Parquet);
        assert_eq!(classify(&prefix, &data.to_string()), ArchiveKey::Data(data.clone()));
        let claim = ClaimKey::new(prefix.clone(), tp, 10);
        assert_eq!(classify(&prefix, &claim.to_string()), ArchiveKey::Claim(claim));
        let bucket = Bucket::parse("dt=2026-11-29", Some("hour=10")).unwrap();
        assert_eq!(
            classify(&prefix, "arch/topic=orders/dt=2026-11-29/hour=10/_SUCCESS"),
            ArchiveKey::Marker { topic: "orders".into(), bucket }
        );
        assert_eq!(classify(&prefix, "arch/_tables/kafka/orders/metadata/00000-x.metadata.json"), ArchiveKey::Table);
        let snapshot = SnapshotKey::slot("orders", 1_796_418_451_250, 60_000);
        assert_eq!(classify(&prefix, &snapshot.to_key(&prefix)), ArchiveKey::GroupOffsets(snapshot));
        for foreign in [
            "arch/topic=orders/partition=3/README.txt",
            "arch/topic=orders/_SUCCESS",
            "arch/topic=orders/dt=2026-11-29/partition=3/_SUCCESS",
            "arch/topic=/dt=2026-11-29/_SUCCESS",
            "other/topic=orders/dt=2026-11-29/_SUCCESS",
            "arch/_probe/x",
            "other/_tables/kafka/orders/metadata/x.avro",
            "arch/_group-offsets/topic=orders/latest.json",
        ] {
            assert_eq!(classify(&prefix, foreign), ArchiveKey::Foreign, "{foreign}");
        }
    }
}

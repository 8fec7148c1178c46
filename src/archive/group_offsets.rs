//! Consumer-group offset snapshots: now and then (`run --archive-group-offsets`), the committed offsets
//! of the consumer groups that read an archived topic are put into the archive, one small JSON object
//! per topic and time slot, outside the data folders:
//!
//! `<prefix>/_group-offsets/topic=<t>/<YYYYMMDDTHHMMSSZ>.json`
//!
//! The time is the slot's start (UTC, the snapshot interval's multiple), so the instances sharing a
//! group that take the same slot's snapshot put the same key and only the first one's lands
//! (`If-None-Match: *`); the names sort by time, so `restore --translate-group-offsets --at T` finds the
//! latest at or before T with one listing. A group's offset is the next record it would consume, as
//! Kafka commits it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::object_key::Prefix;
use super::partition::TopicPartition;

/// The folder below the prefix that holds the snapshots.
pub const GROUP_OFFSETS_FOLDER: &str = "_group-offsets/";
const EXTENSION: &str = ".json";
/// `YYYYMMDDTHHMMSSZ`.
const STAMP_LEN: usize = 16;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum SnapshotError {
    #[error("group offsets snapshot {key} is not valid JSON of a snapshot: {why}")]
    Body { key: String, why: String },
}

/// The name of one topic's snapshot of one time slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotKey {
    pub topic: String,
    /// The slot's start, milliseconds since the epoch, whole seconds.
    pub taken_ms: i64,
}

impl SnapshotKey {
    /// The key of the slot of `interval_ms` that holds `now_ms`.
    pub fn slot(topic: &str, now_ms: i64, interval_ms: i64) -> Self {
        let interval_ms = interval_ms.max(1000) / 1000 * 1000;
        Self { topic: topic.to_string(), taken_ms: now_ms - now_ms.rem_euclid(interval_ms) }
    }

    /// The folder of a topic's snapshots.
    pub fn folder(prefix: &Prefix, topic: &str) -> String {
        format!("{}{GROUP_OFFSETS_FOLDER}topic={topic}/", prefix.root())
    }

    pub fn to_key(&self, prefix: &Prefix) -> String {
        format!("{}{}{EXTENSION}", Self::folder(prefix, &self.topic), stamp(self.taken_ms))
    }

    /// Parses exactly what `to_key` writes; anything else is not a snapshot.
    pub fn parse(prefix: &Prefix, key: &str) -> Option<Self> {
        let rest = key.strip_prefix(&prefix.root())?.strip_prefix(GROUP_OFFSETS_FOLDER)?;
        let (topic_dir, file) = rest.split_once('/')?;
        let topic = topic_dir.strip_prefix("topic=")?;
        TopicPartition::new(topic, 0).ok()?;
        let taken_ms = parse_stamp(file.strip_suffix(EXTENSION)?)?;
        Some(Self { topic: topic.to_string(), taken_ms })
    }
}

/// `YYYYMMDDTHHMMSSZ` of a time in milliseconds since the epoch (UTC, whole seconds).
fn stamp(ms: i64) -> String {
    let time = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms.max(0) as u64);
    humantime::format_rfc3339_seconds(time).to_string().replace(['-', ':'], "")
}

fn parse_stamp(stamp: &str) -> Option<i64> {
    if stamp.len() != STAMP_LEN || !stamp.is_ascii() {
        return None;
    }
    let (date, time) = (&stamp[..8], &stamp[9..15]);
    let rfc3339 =
        format!("{}-{}-{}T{}:{}:{}Z", &date[..4], &date[4..6], &date[6..], &time[..2], &time[2..4], &time[4..]);
    let parsed = humantime::parse_rfc3339(&rfc3339).ok()?;
    let ms = parsed.duration_since(std::time::UNIX_EPOCH).ok()?.as_millis() as i64;
    (stamp == self::stamp(ms)).then_some(ms)
}

/// What one snapshot holds: per group, per partition of the topic, the committed offset (the next
/// record the group would consume). Groups without a committed offset on the topic are left out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupOffsetsSnapshot {
    pub topic: String,
    /// When the offsets were read (milliseconds since the epoch); the slot's start is in the key.
    pub read_ms: i64,
    /// The instance that took it (host:pid).
    pub writer: String,
    /// The topic's ID (KIP-516) when the offsets were read, if the brokers told it: offsets of another
    /// incarnation of the topic (deleted and created again) are not the archived records'.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic_id: Option<String>,
    pub groups: BTreeMap<String, BTreeMap<i32, i64>>,
}

impl GroupOffsetsSnapshot {
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec_pretty(self).expect("a snapshot serialises")
    }

    pub fn from_json(key: &str, body: &[u8]) -> Result<Self, SnapshotError> {
        serde_json::from_slice(body).map_err(|e| SnapshotError::Body { key: key.to_string(), why: e.to_string() })
    }

    /// Whether its offsets are of the incarnation of the topic whose ID the archive's claims record
    /// (unknown on either side: taken as the same).
    pub fn of_incarnation(&self, archived_id: Option<&str>) -> bool {
        match (self.topic_id.as_deref(), archived_id) {
            (Some(ours), Some(archived)) => ours == archived,
            _ => true,
        }
    }
}

/// Those of `keys` (a topic's snapshots, in any order) taken at or before `at_ms` (all when none), the
/// latest first.
pub fn latest_first(keys: impl IntoIterator<Item = SnapshotKey>, at_ms: Option<i64>) -> Vec<SnapshotKey> {
    let mut keys: Vec<SnapshotKey> = keys.into_iter().filter(|k| at_ms.is_none_or(|at| k.taken_ms <= at)).collect();
    keys.sort_by_key(|k| std::cmp::Reverse(k.taken_ms));
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prefix() -> Prefix {
        Prefix::new("archive")
    }

    #[test]
    fn a_slot_is_named_by_its_start_and_the_name_parses_back() {
        // 2026-12-04T21:07:31.250Z, in 5-minute slots.
        let key = SnapshotKey::slot("orders", 1_796_418_451_250, 300_000);
        assert_eq!(key.to_key(&prefix()), "archive/_group-offsets/topic=orders/20261204T210500Z.json");
        assert_eq!(SnapshotKey::parse(&prefix(), &key.to_key(&prefix())), Some(key.clone()));
        assert_eq!(key.taken_ms, 1_796_418_300_000);
        // Two instances a little apart in the same slot name the same object.
        assert_eq!(SnapshotKey::slot("orders", 1_796_418_599_999, 300_000), key);
        assert_ne!(SnapshotKey::slot("orders", 1_796_418_600_000, 300_000), key);
    }

    #[test]
    fn other_keys_are_not_snapshots() {
        for key in [
            "archive/_group-offsets/topic=orders/20261204T210500Z.json.tmp",
            "archive/_group-offsets/topic=orders/20261304T210500Z.json",
            "archive/_group-offsets/topic=orders/2026-12-04T21:05:00Z.json",
            "archive/_group-offsets/topic=or/ders/20261204T210500Z.json",
            "archive/_group-offsets/orders/20261204T210500Z.json",
            "archive/_claims/topic=orders/partition=0/00000000000000000000.json",
            "other/_group-offsets/topic=orders/20261204T210500Z.json",
        ] {
            assert_eq!(SnapshotKey::parse(&prefix(), key), None, "{key}");
        }
    }

    #[test]
    fn snapshots_at_or_before_a_time_come_latest_first() {
        let keys = || [3_000, 1_000, 2_000].map(|ms| SnapshotKey { topic: "t".into(), taken_ms: ms });
        let times = |at| latest_first(keys(), at).iter().map(|k| k.taken_ms).collect::<Vec<_>>();
        assert_eq!(times(None), [3_000, 2_000, 1_000]);
        assert_eq!(times(Some(2_999)), [2_000, 1_000]);
        assert_eq!(times(Some(2_000)), [2_000, 1_000]);
        assert_eq!(times(Some(999)), Vec::<i64>::new());
    }

    #[test]
    fn a_snapshot_round_trips_through_its_json() {
        let snapshot = GroupOffsetsSnapshot {
            topic: "orders".into(),
            read_ms: 1_796_418_451_250,
            writer: "host:1".into(),
            topic_id: Some("IpVhSJ1CSrKiMz/pEvcRiw".into()),
            groups: BTreeMap::from([("billing".into(), BTreeMap::from([(0, 42), (1, 7)]))]),
        };
        let json = snapshot.to_json();
        assert_eq!(GroupOffsetsSnapshot::from_json("k", &json), Ok(snapshot.clone()));
        assert!(snapshot.of_incarnation(Some("IpVhSJ1CSrKiMz/pEvcRiw")) && snapshot.of_incarnation(None));
        assert!(!snapshot.of_incarnation(Some("another")), "the topic was created again since");
        let older = GroupOffsetsSnapshot { topic_id: None, ..snapshot };
        assert!(older.of_incarnation(Some("another")), "unknown: taken as the same");
        assert!(matches!(GroupOffsetsSnapshot::from_json("k", b"{}"), Err(SnapshotError::Body { .. })));
    }
}

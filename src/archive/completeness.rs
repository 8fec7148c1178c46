//! When a topic's time buckets are complete: no object will ever be added to their folders.
//!
//! Two rules make a bucket final for one partition:
//! - its chain has moved past it: a partition never writes into a bucket earlier than its last claimed
//!   object's (`time_bucket`), so every bucket ending at or before that bucket's start is final;
//! - the partition is caught up and its records' lateness is bounded by the broker: with
//!   `message.timestamp.type=LogAppendTime`, or `CreateTime` with a finite
//!   `message.timestamp.before.max.ms` (KIP-937), a record appended after the log end was read at `t` is
//!   stamped no earlier than `t - bound`, so no later record goes into a bucket ending at or before
//!   `t - bound - CLOCK_SKEW_MS` (archiver clocks may differ a little from the reader's). Without a
//!   bound (Kafka's default) a quiet partition holds its last bucket open until it moves on.
//!
//! A topic's bucket is complete once it is final for every partition.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::keys::{classify, ArchiveKey};
use super::object_key::Prefix;
use super::time_bucket::{Bucket, BucketWidth, TimeSource};

/// The name of a complete bucket's marker object, in the bucket's folder (Spark and Hive skip names
/// starting with `_`; `*.parquet` globs do not match it).
pub const MARKER_NAME: &str = "_SUCCESS";

/// The body of a `_SUCCESS` marker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Marker {
    pub topic: String,
    /// The bucket's folder below the topic's: `dt=<YYYY-MM-DD>[/hour=<HH>]`.
    pub bucket: String,
    /// The bucket's first instant and the first after it, ms since the Unix epoch.
    pub start_ms: i64,
    pub end_ms: i64,
    /// The topic's partition count.
    pub partitions: usize,
    /// Per partition, the highest offset archived when the bucket was found complete (every record of
    /// the bucket is at or below it); absent for a partition with nothing archived.
    pub archived_through: BTreeMap<i32, i64>,
    /// How many data objects the folder holds (absent in markers written before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub objects: Option<u64>,
    /// The smallest and largest record timestamp in the folder's objects, from their claims, so a restore
    /// by time can skip the whole folder; absent when the folder holds none or a claim does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamps: Option<(i64, i64)>,
    pub writer: String,
    pub time_ms: i64,
}

/// The timestamps of a folder's records, from its objects' (`None`: unknown for that object): their
/// span, unknown if any object's is.
pub fn folder_timestamps(objects: impl IntoIterator<Item = Option<(i64, i64)>>) -> Option<(i64, i64)> {
    let mut span: Option<(i64, i64)> = None;
    for times in objects {
        let (min, max) = times?;
        let (lo, hi) = span.unwrap_or((min, max));
        span = Some((lo.min(min), hi.max(max)));
    }
    span
}

/// The key of a bucket's marker.
pub fn marker_key(prefix: &Prefix, topic: &str, bucket: &Bucket) -> String {
    format!("{}{MARKER_NAME}", prefix.bucket_folder(topic, bucket))
}

/// The time bucket a key of the topic's folder is in: a data object's or a marker's.
pub fn bucket_of_key(prefix: &Prefix, topic: &str, key: &str) -> Option<Bucket> {
    match classify(prefix, key) {
        ArchiveKey::Data(object) => object.bucket.filter(|_| object.tp.topic() == topic),
        ArchiveKey::Marker { topic: of, bucket } => Some(bucket).filter(|_| of == topic),
        ArchiveKey::Claim(_) | ArchiveKey::Table | ArchiveKey::GroupOffsets(_) | ArchiveKey::Foreign => None,
    }
}

/// Allowed difference between the clocks of the archivers and of the host reading the log end.
pub const CLOCK_SKEW_MS: i64 = 60_000;

/// How late a topic's records can be stamped, as its broker settings enforce it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lateness {
    /// No record is stamped more than this many ms before it was appended.
    Bounded(i64),
    Unbounded,
}

impl Lateness {
    /// From a topic's `message.timestamp.type` and `message.timestamp.before.max.ms` settings.
    pub fn of_topic(timestamp_type: Option<&str>, before_max_ms: Option<&str>) -> Self {
        if timestamp_type == Some("LogAppendTime") {
            return Lateness::Bounded(0);
        }
        match before_max_ms.and_then(|v| v.parse::<i64>().ok()) {
            Some(ms) if (0..i64::MAX).contains(&ms) => Lateness::Bounded(ms),
            _ => Lateness::Unbounded,
        }
    }
}

/// What the archive and the log say about one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionProgress {
    /// The time bucket of the partition's last claimed object, when it is in one.
    pub last_bucket: Option<Bucket>,
    /// Every record the log held when its end was read is in a durable object.
    pub caught_up: bool,
    /// What put its last claimed object into its bucket (from the claim): by arrival, a record consumed
    /// later goes into a later bucket whatever its timestamp, so lateness is bounded by nothing but the
    /// clocks, whatever the topic's settings.
    pub time_source: Option<TimeSource>,
}

impl PartitionProgress {
    /// The same, bucketed by `source` when its claims do not say (it has none yet).
    pub fn bucketed_by_default(self, source: Option<TimeSource>) -> Self {
        Self { time_source: self.time_source.or(source), ..self }
    }
}

/// The time (ms) up to which the partition's bucket folders are final (every bucket ending at or
/// before it), the log end having been read at `log_read_ms`; `None`: none is known to be.
pub fn final_through(p: &PartitionProgress, width: BucketWidth, lateness: Lateness, log_read_ms: i64) -> Option<i64> {
    let lateness = if p.time_source == Some(TimeSource::Arrival) { Lateness::Bounded(0) } else { lateness };
    let quiet = match (p.caught_up, lateness) {
        (true, Lateness::Bounded(bound)) => {
            Some(Bucket::containing(width, log_read_ms.saturating_sub(bound).saturating_sub(CLOCK_SKEW_MS)).start_ms())
        }
        _ => None,
    };
    p.last_bucket.map(|b| b.start_ms()).max(quiet)
}

/// The time up to which a topic's bucket folders are final: the earliest of its partitions'.
pub fn topic_final_through(partitions: impl IntoIterator<Item = Option<i64>>) -> Option<i64> {
    let mut through: Option<i64> = None;
    for p in partitions {
        let p = p?;
        through = Some(through.map_or(p, |t| t.min(p)));
    }
    through
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: i64 = 60_000;
    const HOUR: i64 = 60 * MIN;
    /// 2026-11-30T00:00:00Z.
    const DAY: i64 = 1_795_996_800_000;

    #[test]
    fn a_partitions_last_bucket_makes_every_earlier_one_final() {
        let p = PartitionProgress {
            last_bucket: Some(Bucket::containing(BucketWidth::Hour, DAY + 5 * HOUR)),
            caught_up: false,
            time_source: None,
        };
        assert_eq!(final_through(&p, BucketWidth::Hour, Lateness::Bounded(0), DAY + 9 * HOUR), Some(DAY + 5 * HOUR));
        let nothing = PartitionProgress { last_bucket: None, caught_up: false, time_source: None };
        assert_eq!(final_through(&nothing, BucketWidth::Hour, Lateness::Bounded(0), DAY + 9 * HOUR), None);
    }

    #[test]
    fn a_caught_up_partition_counts_when_the_broker_bounds_lateness() {
        let quiet = PartitionProgress {
            last_bucket: Some(Bucket::containing(BucketWidth::Hour, DAY + 5 * HOUR)),
            caught_up: true,
            time_source: None,
        };
        let at = |t| final_through(&quiet, BucketWidth::Hour, Lateness::Bounded(15 * MIN), t);
        // 09:10 read, 15 minutes of lateness and one of clock skew: a later record is stamped 08:54 or later.
        assert_eq!(at(DAY + 9 * HOUR + 10 * MIN), Some(DAY + 8 * HOUR));
        assert_eq!(at(DAY + 9 * HOUR + 16 * MIN), Some(DAY + 9 * HOUR));
        // Unbounded: only the chain counts.
        assert_eq!(
            final_through(&quiet, BucketWidth::Hour, Lateness::Unbounded, DAY + 20 * HOUR),
            Some(DAY + 5 * HOUR)
        );
        // A partition that never had a record counts from when it was read.
        let empty = PartitionProgress { last_bucket: None, caught_up: true, time_source: None };
        assert_eq!(final_through(&empty, BucketWidth::Day, Lateness::Bounded(0), DAY + 9 * HOUR), Some(DAY));
    }

    #[test]
    fn an_archive_by_arrival_time_is_final_once_caught_up_whatever_the_topic_allows() {
        let by_arrival = PartitionProgress {
            last_bucket: Some(Bucket::containing(BucketWidth::Hour, DAY + 5 * HOUR)),
            caught_up: true,
            time_source: Some(TimeSource::Arrival),
        };
        let at = final_through(&by_arrival, BucketWidth::Hour, Lateness::Unbounded, DAY + 9 * HOUR + 10 * MIN);
        assert_eq!(at, Some(DAY + 9 * HOUR), "09:10 less a minute of skew: hours before 09:00 are final");
        let by_record = PartitionProgress { time_source: Some(TimeSource::Record), ..by_arrival };
        let at = final_through(&by_record, BucketWidth::Hour, Lateness::Unbounded, DAY + 9 * HOUR + 10 * MIN);
        assert_eq!(at, Some(DAY + 5 * HOUR), "by record time an unbounded topic counts only the chain");
    }

    #[test]
    fn the_bound_comes_from_the_topics_timestamp_settings() {
        assert_eq!(Lateness::of_topic(Some("LogAppendTime"), None), Lateness::Bounded(0));
        assert_eq!(Lateness::of_topic(Some("CreateTime"), Some("600000")), Lateness::Bounded(600_000));
        assert_eq!(Lateness::of_topic(Some("CreateTime"), Some("9223372036854775807")), Lateness::Unbounded);
        assert_eq!(Lateness::of_topic(None, None), Lateness::Unbounded);
    }

    #[test]
    fn markers_sit_in_their_bucket_folder_and_are_told_from_data_keys() {
        let prefix = Prefix::new("a");
        let hour = Bucket::containing(BucketWidth::Hour, DAY + 7 * HOUR);
        let key = marker_key(&prefix, "orders", &hour);
        assert_eq!(key, "a/topic=orders/dt=2026-11-30/hour=07/_SUCCESS");
        assert_eq!(bucket_of_key(&prefix, "orders", &key), Some(hour));
        let data = "a/topic=orders/dt=2026-11-30/hour=07/partition=1/orders+1+00000000000000000000+00000000000000000009.parquet";
        assert_eq!(bucket_of_key(&prefix, "orders", data), Some(hour));
        let is_marker = |prefix: &Prefix, key: &str| matches!(classify(prefix, key), ArchiveKey::Marker { .. });
        assert!(is_marker(&prefix, &key) && !is_marker(&prefix, data));
        assert!(!is_marker(&prefix, "a/topic=orders/_SUCCESS") && !is_marker(&Prefix::new("b"), &key));
        let day = Bucket::containing(BucketWidth::Day, DAY);
        assert_eq!(bucket_of_key(&prefix, "orders", "a/topic=orders/dt=2026-11-30/_SUCCESS"), Some(day));
        for other in [
            "a/topic=other/dt=2026-11-30/_SUCCESS",
            "a/topic=orders/dt=2026-11-30/x/hour=07/_SUCCESS",
            "a/topic=orders/_SUCCESS",
            "a/topic=orders/partition=1/orders+1+00000000000000000000+00000000000000000009.parquet",
        ] {
            assert_eq!(bucket_of_key(&prefix, "orders", other), None, "{other}");
        }
    }

    #[test]
    fn a_topic_is_as_final_as_its_least_final_partition() {
        assert_eq!(topic_final_through([Some(5), Some(3), Some(9)]), Some(3));
        assert_eq!(topic_final_through([Some(5), None]), None);
        assert_eq!(topic_final_through([]), None);
    }

    #[test]
    fn a_folders_timestamps_span_its_objects_and_are_unknown_if_one_is() {
        assert_eq!(folder_timestamps([Some((5, 9)), Some((1, 3)), Some((4, 12))]), Some((1, 12)));
        assert_eq!(folder_timestamps([Some((5, 9)), None, Some((1, 3))]), None);
        assert_eq!(folder_timestamps([]), None);
    }

    #[test]
    fn markers_written_before_the_folder_summary_still_parse() {
        let old = br#"{"topic":"t","bucket":"dt=2026-11-30","start_ms":0,"end_ms":1,"partitions":1,
            "archived_through":{"0":7},"writer":"w","time_ms":2}"#;
        let m: Marker = serde_json::from_slice(old).unwrap();
        assert_eq!((m.objects, m.timestamps), (None, None));
        let new = Marker { objects: Some(3), timestamps: Some((4, 5)), ..m };
        assert_eq!(serde_json::from_slice::<Marker>(&serde_json::to_vec(&new).unwrap()).unwrap(), new);
    }
}

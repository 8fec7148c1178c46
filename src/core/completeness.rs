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

use super::time_bucket::{Bucket, BucketWidth};

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
    /// The start (ms) of the time bucket of the partition's last claimed object, when it is in one.
    pub last_bucket_start: Option<i64>,
    /// Every record the log held when its end was read is in a durable object.
    pub caught_up: bool,
}

/// The time (ms) up to which the partition's bucket folders are final (every bucket ending at or
/// before it), the log end having been read at `log_read_ms`; `None`: none is known to be.
pub fn final_through(p: &PartitionProgress, width: BucketWidth, lateness: Lateness, log_read_ms: i64) -> Option<i64> {
    let quiet = match (p.caught_up, lateness) {
        (true, Lateness::Bounded(bound)) => {
            Some(Bucket::containing(width, log_read_ms.saturating_sub(bound).saturating_sub(CLOCK_SKEW_MS)).start_ms())
        }
        _ => None,
    };
    p.last_bucket_start.max(quiet)
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
        let p = PartitionProgress { last_bucket_start: Some(DAY + 5 * HOUR), caught_up: false };
        assert_eq!(final_through(&p, BucketWidth::Hour, Lateness::Bounded(0), DAY + 9 * HOUR), Some(DAY + 5 * HOUR));
        let nothing = PartitionProgress { last_bucket_start: None, caught_up: false };
        assert_eq!(final_through(&nothing, BucketWidth::Hour, Lateness::Bounded(0), DAY + 9 * HOUR), None);
    }

    #[test]
    fn a_caught_up_partition_counts_when_the_broker_bounds_lateness() {
        let quiet = PartitionProgress { last_bucket_start: Some(DAY + 5 * HOUR), caught_up: true };
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
        let empty = PartitionProgress { last_bucket_start: None, caught_up: true };
        assert_eq!(final_through(&empty, BucketWidth::Day, Lateness::Bounded(0), DAY + 9 * HOUR), Some(DAY));
    }

    #[test]
    fn the_bound_comes_from_the_topics_timestamp_settings() {
        assert_eq!(Lateness::of_topic(Some("LogAppendTime"), None), Lateness::Bounded(0));
        assert_eq!(Lateness::of_topic(Some("CreateTime"), Some("600000")), Lateness::Bounded(600_000));
        assert_eq!(Lateness::of_topic(Some("CreateTime"), Some("9223372036854775807")), Lateness::Unbounded);
        assert_eq!(Lateness::of_topic(None, None), Lateness::Unbounded);
    }

    #[test]
    fn a_topic_is_as_final_as_its_least_final_partition() {
        assert_eq!(topic_final_through([Some(5), Some(3), Some(9)]), Some(3));
        assert_eq!(topic_final_through([Some(5), None]), None);
        assert_eq!(topic_final_through([]), None);
    }
}

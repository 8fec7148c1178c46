//! When an open file is sealed and uploaded: by record count, by size, by age, or at wall-clock
//! schedule boundaries. Age is a deadline measured from the file's first record, checked by a timer, so
//! an idle partition's file still rolls; a schedule (`--roll-schedule 1h`) rolls every file open at each
//! UTC multiple of its interval, whether records arrive or not.

use std::time::{Duration, Instant};

/// The time, read once and passed in: the monotonic clock for ages, the wall clock (ms since the Unix
/// epoch) for schedules and time buckets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Now {
    pub mono: Instant,
    pub wall_ms: i64,
}

/// Why a file was rolled (also logged and counted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RollReason {
    Records,
    Bytes,
    Age,
    /// A `--roll-schedule` boundary passed.
    Schedule,
    /// The next record belongs to a later time bucket.
    Bucket,
    /// The next record has fields the file's inferred value schema lacks (`--value-schema infer`).
    Schema,
    /// The global memory or spool budget was reached and this was one of the largest open files.
    Budget,
    /// The partition was revoked or the process is shutting down.
    Flush,
    /// The file re-writes a claimed range whose data object was missing, and reached the claim's end.
    Rewrite,
    /// Retention deleted the offsets after the file's last record before they were archived.
    RetentionGap,
}

impl RollReason {
    pub fn as_str(self) -> &'static str {
        match self {
            RollReason::Records => "records",
            RollReason::Bytes => "bytes",
            RollReason::Age => "age",
            RollReason::Schedule => "schedule",
            RollReason::Bucket => "bucket",
            RollReason::Schema => "schema",
            RollReason::Budget => "budget",
            RollReason::Flush => "flush",
            RollReason::Rewrite => "rewrite",
            RollReason::RetentionGap => "retention-gap",
        }
    }
}

/// The limits a file rolls on; whichever hits first wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RollPolicy {
    pub max_records: u64,
    pub max_bytes: u64,
    pub max_age: Duration,
    /// Roll every open file at each multiple of this interval since the Unix epoch (UTC).
    pub schedule: Option<Duration>,
}

/// What the policy needs to know about an open file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenFileStats {
    pub records: u64,
    pub bytes: u64,
    /// When the file's first record arrived.
    pub opened: Now,
}

impl RollPolicy {
    /// Checked before an append of a record of `record_bytes`: a record that would push a non-empty file
    /// past the size limit goes into the next file (so one larger than the limit gets a file of its own).
    pub fn before_append(&self, stats: &OpenFileStats, record_bytes: u64) -> Option<RollReason> {
        (stats.records > 0 && stats.bytes.saturating_add(record_bytes) > self.max_bytes).then_some(RollReason::Bytes)
    }

    /// Checked after every append.
    pub fn after_append(&self, stats: &OpenFileStats) -> Option<RollReason> {
        if stats.records >= self.max_records {
            Some(RollReason::Records)
        } else if stats.bytes >= self.max_bytes {
            Some(RollReason::Bytes)
        } else {
            None
        }
    }

    /// When the file must roll by age at the latest.
    pub fn deadline(&self, stats: &OpenFileStats) -> Instant {
        stats.opened.mono + self.max_age
    }

    /// The first schedule boundary after the file opened (ms since the epoch), if rolls are scheduled.
    pub fn next_boundary(&self, stats: &OpenFileStats) -> Option<i64> {
        let every = i64::try_from(self.schedule?.as_millis()).ok().filter(|ms| *ms > 0)?;
        let opened = stats.opened.wall_ms;
        Some(opened - opened.rem_euclid(every) + every)
    }

    /// Checked by the timer.
    pub fn due(&self, stats: &OpenFileStats, now: Now) -> Option<RollReason> {
        if stats.records == 0 {
            None
        } else if self.next_boundary(stats).is_some_and(|boundary| now.wall_ms >= boundary) {
            Some(RollReason::Schedule)
        } else {
            (now.mono >= self.deadline(stats)).then_some(RollReason::Age)
        }
    }
}

/// Which open files to roll early when the global budget is exceeded: the largest first, until the
/// sum of what remains is within `budget`. `sizes` is (index, bytes); returns indexes.
pub fn pick_largest_over_budget(sizes: &[(usize, u64)], budget: u64) -> Vec<usize> {
    let mut total: u64 = sizes.iter().map(|(_, b)| b).sum();
    if total <= budget {
        return Vec::new();
    }
    let mut by_size: Vec<(usize, u64)> = sizes.to_vec();
    by_size.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut picked = Vec::new();
    for (idx, bytes) in by_size {
        if total <= budget {
            break;
        }
        total -= bytes;
        picked.push(idx);
    }
    picked
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> RollPolicy {
        RollPolicy { max_records: 100, max_bytes: 1000, max_age: Duration::from_secs(30), schedule: None }
    }

    fn at(mono: Instant, wall_ms: i64) -> Now {
        Now { mono, wall_ms }
    }

    #[test]
    fn rolls_on_records_then_bytes() {
        let t0 = Instant::now();
        let p = policy();
        let s = |records, bytes| OpenFileStats { records, bytes, opened: at(t0, 0) };
        assert_eq!(p.after_append(&s(99, 999)), None);
        assert_eq!(p.after_append(&s(100, 0)), Some(RollReason::Records));
        assert_eq!(p.after_append(&s(1, 1000)), Some(RollReason::Bytes));
        assert_eq!(p.after_append(&s(100, 5000)), Some(RollReason::Records));
    }

    #[test]
    fn a_record_that_does_not_fit_starts_the_next_file() {
        let t0 = Instant::now();
        let p = policy();
        let s = |records, bytes| OpenFileStats { records, bytes, opened: at(t0, 0) };
        assert_eq!(p.before_append(&s(0, 0), 5000), None, "an empty file takes any record");
        assert_eq!(p.before_append(&s(3, 900), 100), None);
        assert_eq!(p.before_append(&s(3, 900), 101), Some(RollReason::Bytes));
        assert_eq!(p.before_append(&s(1, 10), u64::MAX), Some(RollReason::Bytes));
    }

    #[test]
    fn age_uses_the_clock_passed_in() {
        let t0 = Instant::now();
        let p = policy();
        let stats = OpenFileStats { records: 1, bytes: 10, opened: at(t0, 0) };
        assert_eq!(p.due(&stats, at(t0, 0)), None);
        assert_eq!(p.due(&stats, at(t0 + Duration::from_millis(29_999), 0)), None);
        assert_eq!(p.due(&stats, at(t0 + Duration::from_secs(30), 0)), Some(RollReason::Age));
        assert_eq!(p.deadline(&stats), t0 + Duration::from_secs(30));
        let empty = OpenFileStats { records: 0, ..stats };
        assert_eq!(p.due(&empty, at(t0 + Duration::from_secs(3600), 0)), None);
    }

    #[test]
    fn a_schedule_rolls_at_each_utc_multiple_whatever_the_age() {
        let t0 = Instant::now();
        let hour = 3_600_000;
        let p = RollPolicy {
            max_age: Duration::from_secs(24 * 3600),
            schedule: Some(Duration::from_secs(3600)),
            ..policy()
        };
        // Opened at 10:59:00 (wall clock); the monotonic clock barely moves.
        let opened = 10 * hour + 59 * 60_000;
        let stats = OpenFileStats { records: 1, bytes: 10, opened: at(t0, opened) };
        assert_eq!(p.next_boundary(&stats), Some(11 * hour));
        assert_eq!(p.due(&stats, at(t0, 11 * hour - 1)), None);
        assert_eq!(p.due(&stats, at(t0, 11 * hour)), Some(RollReason::Schedule));
        // A file opened right at a boundary rolls at the next one.
        let on_edge = OpenFileStats { opened: at(t0, 11 * hour), ..stats };
        assert_eq!(p.due(&on_edge, at(t0, 12 * hour - 1)), None);
        assert_eq!(p.due(&on_edge, at(t0, 12 * hour)), Some(RollReason::Schedule));
        // The age still applies; an empty file never rolls.
        assert_eq!(p.due(&stats, at(t0 + Duration::from_secs(24 * 3600), opened)), Some(RollReason::Age));
        assert_eq!(p.due(&OpenFileStats { records: 0, ..stats }, at(t0, 13 * hour)), None);
        // Without a schedule, the wall clock plays no part.
        assert_eq!(policy().due(&stats, at(t0, 13 * hour)), None);
    }

    #[test]
    fn budget_rolls_largest_first() {
        assert!(pick_largest_over_budget(&[(0, 10), (1, 20)], 30).is_empty());
        assert_eq!(pick_largest_over_budget(&[(0, 10), (1, 50), (2, 30)], 50), vec![1]);
        assert_eq!(pick_largest_over_budget(&[(0, 10), (1, 50), (2, 30)], 5), vec![1, 2, 0]);
        assert_eq!(pick_largest_over_budget(&[(3, 40), (7, 40)], 50), vec![3]);
    }
}

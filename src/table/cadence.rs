//! When a table commit is due: files are batched across partitions, at most one commit per interval
//! unless as many files as a commit may hold are waiting (a catalog commit per file would make
//! thousands of snapshots a day and throttle on the catalog).

use std::time::{Duration, Instant};

/// The default time between two commits of one table (`--table-commit-interval`).
pub const DEFAULT_COMMIT_INTERVAL: Duration = Duration::from_secs(60);
/// The default number of waiting files that makes a commit due before its interval is up.
pub const DEFAULT_COMMIT_FILES: usize = 1000;

/// How often a table is committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cadence {
    pub interval: Duration,
    pub max_files: usize,
}

impl Default for Cadence {
    fn default() -> Self {
        Self { interval: DEFAULT_COMMIT_INTERVAL, max_files: DEFAULT_COMMIT_FILES }
    }
}

impl Cadence {
    /// Whether to commit now, `waiting` durable files not in the table yet, the last commit at
    /// `last` (none: not since start, so the first files wait a whole interval from `started`).
    pub fn due(&self, waiting: usize, last: Option<Instant>, started: Instant, now: Instant) -> bool {
        waiting > 0
            && (waiting >= self.max_files || now.saturating_duration_since(last.unwrap_or(started)) >= self.interval)
    }

    /// When the next commit falls due if no more files come (none with no file waiting).
    pub fn next_due(&self, waiting: usize, last: Option<Instant>, started: Instant) -> Option<Instant> {
        (waiting > 0).then(|| last.unwrap_or(started) + self.interval)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commit_waits_for_its_interval_unless_a_full_batch_waits() {
        let cadence = Cadence { interval: Duration::from_secs(60), max_files: 100 };
        let t0 = Instant::now();
        let at = |s| t0 + Duration::from_secs(s);
        assert!(!cadence.due(0, None, t0, at(3600)), "nothing to commit");
        assert!(!cadence.due(5, None, t0, at(59)));
        assert!(cadence.due(5, None, t0, at(60)));
        assert!(cadence.due(100, Some(at(50)), t0, at(51)), "a full batch goes at once");
        assert!(!cadence.due(99, Some(at(50)), t0, at(109)));
        assert!(cadence.due(1, Some(at(50)), t0, at(110)));
        assert_eq!(cadence.next_due(1, Some(at(50)), t0), Some(at(110)));
        assert_eq!(cadence.next_due(0, Some(at(50)), t0), None);
    }
}

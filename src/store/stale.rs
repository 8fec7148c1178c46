//! Which never-completed uploads to abort. A crash during a multipart upload leaves parts that cost
//! storage but are invisible to readers; the archiver aborts those that are ours (the key names an
//! archive object under our prefix) and old enough that no live writer can still be completing them.
//!
//! How old an upload is cannot be left to the store's `Initiated` time alone: some S3-compatible
//! stores report a fixed or wrong one (moto reports 2010-11-10 for every upload), and aborting a live
//! writer's upload on the strength of it would fail that writer's file. So an upload's age is the
//! smaller of what the store says and how long this process has itself seen it pending: a sweep at
//! start only takes note, and later sweeps abort what stayed pending for the whole threshold.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use crate::archive::object_key::{ObjectKey, Prefix};

/// An upload that was started and never completed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingUpload {
    pub key: String,
    pub id: String,
    /// When the store says it was started.
    pub started: SystemTime,
}

/// The uploads this process has seen pending, and since when (by its own clock).
#[derive(Debug, Default)]
pub struct PendingSeen {
    first_seen: HashMap<String, SystemTime>,
}

impl PendingSeen {
    /// Takes note of one listing made at `now` (uploads no longer listed are forgotten) and returns the
    /// ones to abort: ours, and pending for more than `older_than` by the store's word and by ours.
    pub fn observe<'a>(
        &mut self,
        uploads: &'a [PendingUpload],
        prefix: &Prefix,
        now: SystemTime,
        older_than: Duration,
    ) -> Vec<&'a PendingUpload> {
        self.first_seen.retain(|id, _| uploads.iter().any(|u| &u.id == id));
        let mut stale = Vec::new();
        for u in uploads.iter().filter(|u| ObjectKey::parse(prefix, &u.key).is_ok()) {
            let seen = *self.first_seen.entry(u.id.clone()).or_insert(now);
            let age = |since: SystemTime| now.duration_since(since).unwrap_or(Duration::ZERO);
            if age(u.started).min(age(seen)) > older_than {
                stale.push(u);
            }
        }
        stale
    }

    /// Forgets an upload once aborted.
    pub fn forget(&mut self, id: &str) {
        self.first_seen.remove(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OURS: &str = "p/topic=t/partition=0/t+0+00000000000000000000+00000000000000000009.parquet";

    fn up(key: &str, id: &str, started: SystemTime) -> PendingUpload {
        PendingUpload { key: key.into(), id: id.into(), started }
    }

    #[test]
    fn only_our_uploads_pending_long_enough_are_stale() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let hour = Duration::from_secs(3600);
        let uploads = vec![
            up(OURS, "old", t0 - 2 * hour),
            // The store says this one began 10 minutes after our first look.
            up(OURS, "fresh", t0 + Duration::from_secs(600)),
            up("p/topic=t/partition=0/notes.txt", "foreign", t0 - 2 * hour),
            up("other/topic=t/partition=0/t+0+00000000000000000000+00000000000000000009.parquet", "elsewhere", t0),
        ];
        let mut seen = PendingSeen::default();
        // The first sweep only takes note, whatever the store says.
        assert!(seen.observe(&uploads, &Prefix::new("p"), t0, hour).is_empty());
        // Half an hour later: still too young by our own observation.
        assert!(seen.observe(&uploads, &Prefix::new("p"), t0 + hour / 2, hour).is_empty());
        // Past the threshold by both clocks: only the old one of ours (the store's clock makes the fresh
        // one 50 minutes old).
        let stale = seen.observe(&uploads, &Prefix::new("p"), t0 + hour + Duration::from_secs(1), hour);
        assert_eq!(stale.iter().map(|u| u.id.as_str()).collect::<Vec<_>>(), vec!["old"]);
    }

    #[test]
    fn a_store_that_misreports_the_start_does_not_make_live_uploads_stale() {
        // moto says every upload began in 2010.
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let uploads = vec![up(OURS, "live", SystemTime::UNIX_EPOCH + Duration::from_secs(1_289_421_713))];
        let mut seen = PendingSeen::default();
        assert!(seen.observe(&uploads, &Prefix::new("p"), t0, Duration::from_secs(3600)).is_empty());
        assert!(seen
            .observe(&uploads, &Prefix::new("p"), t0 + Duration::from_secs(600), Duration::from_secs(3600))
            .is_empty());
        // An upload the store stamps in the future (clock skew) is never stale either.
        let future = vec![up(OURS, "skewed", t0 + Duration::from_secs(3 * 3600))];
        seen.observe(&future, &Prefix::new("p"), t0, Duration::ZERO);
        assert!(seen.observe(&future, &Prefix::new("p"), t0 + Duration::from_secs(7200), Duration::ZERO).is_empty());
    }

    #[test]
    fn uploads_no_longer_pending_are_forgotten() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let mut seen = PendingSeen::default();
        let first = vec![up(OURS, "a", t0 - Duration::from_secs(7200))];
        seen.observe(&first, &Prefix::new("p"), t0, Duration::from_secs(60));
        seen.observe(&[], &Prefix::new("p"), t0 + Duration::from_secs(30), Duration::from_secs(60));
        // Seen again later (a store re-using the id): its age starts over.
        assert!(seen
            .observe(&first, &Prefix::new("p"), t0 + Duration::from_secs(120), Duration::from_secs(60))
            .is_empty());
    }
}

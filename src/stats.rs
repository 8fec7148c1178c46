//! Counters of what the archiver did, shared by its tasks and reported at exit (and by `demo`).

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub struct Stats {
    pub records_received: AtomicU64,
    pub duplicates_skipped: AtomicU64,
    pub records_archived: AtomicU64,
    pub objects_uploaded: AtomicU64,
    pub objects_already_present: AtomicU64,
    pub bytes_uploaded: AtomicU64,
    pub upload_retries: AtomicU64,
    pub files_dropped: AtomicU64,
    pub retention_gaps: AtomicU64,
    /// Partitions stopped because the archive is ahead of the log (topic re-created?).
    pub partitions_stopped: AtomicU64,
    pub recoveries: AtomicU64,
    pub claims_created: AtomicU64,
    /// Claims another writer held for another range (this instance was a zombie, or raced one).
    pub claims_lost: AtomicU64,
    /// Claimed ranges whose data object was missing at recovery, re-written.
    pub claims_rewritten: AtomicU64,
    pub recovery_list_requests: AtomicU64,
    /// Objects listed by recoveries (one per partition when the commit hint is exact).
    pub recovery_objects_seen: AtomicU64,
}

impl Stats {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }

    /// One line for logs.
    pub fn summary(&self) -> String {
        format!(
            "records received {}, archived {}, duplicates skipped {}; objects uploaded {} ({} bytes), already present {}, \
             upload retries {}, files dropped {}; claims created {}, lost {}, re-written {}; recoveries {} ({} list requests); \
             retention gaps {}, partitions stopped {}",
            Self::get(&self.records_received),
            Self::get(&self.records_archived),
            Self::get(&self.duplicates_skipped),
            Self::get(&self.objects_uploaded),
            Self::get(&self.bytes_uploaded),
            Self::get(&self.objects_already_present),
            Self::get(&self.upload_retries),
            Self::get(&self.files_dropped),
            Self::get(&self.claims_created),
            Self::get(&self.claims_lost),
            Self::get(&self.claims_rewritten),
            Self::get(&self.recoveries),
            Self::get(&self.recovery_list_requests),
            Self::get(&self.retention_gaps),
            Self::get(&self.partitions_stopped),
        )
    }
}

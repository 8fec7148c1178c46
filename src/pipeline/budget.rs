//! The one memory and disk budget that every partition's files share: what the open encoders hold,
//! plus what sealed files hold in memory and in the spool directory until they are uploaded.

use std::sync::Arc;

use tokio::sync::Notify;

use crate::encode::spool::SpoolUsage;

pub(super) struct Budget {
    max_memory: u64,
    max_spool: u64,
    /// Sealed files' memory and spool-directory usage (kept by the spool itself).
    spool: Arc<SpoolUsage>,
    /// What the open encoders hold.
    open_files: u64,
    /// Signalled whenever an upload finished or a file was dropped, so records held back can flow again.
    freed: Arc<Notify>,
}

impl Budget {
    pub(super) fn new(max_memory: u64, max_spool: u64, spool: Arc<SpoolUsage>) -> Self {
        Self { max_memory, max_spool, spool, open_files: 0, freed: Arc::new(Notify::new()) }
    }

    pub(super) fn memory_used(&self) -> u64 {
        self.spool.memory() + self.open_files
    }

    /// Spools moved from memory to the spool directory so far.
    pub(super) fn files_to_disk(&self) -> u64 {
        self.spool.moved_to_disk()
    }

    pub(super) fn exceeded(&self) -> bool {
        self.memory_used() > self.max_memory || self.spool.disk() > self.max_spool
    }

    /// What the open files may hold together once the largest are rolled early.
    pub(super) fn early_roll_target(&self) -> u64 {
        self.max_memory.min(self.max_spool) / 2
    }

    /// An open file's encoder went from holding `before` to `after` bytes.
    pub(super) fn resize(&mut self, before: u64, after: u64) {
        self.open_files = self.open_files + after - before;
    }

    /// An open file holding `bytes` was sealed (its spool now counts) or dropped.
    pub(super) fn release(&mut self, bytes: u64) {
        self.open_files -= bytes;
    }

    /// Wakes whoever waits for room.
    pub(super) fn notify_freed(&self) {
        self.freed.notify_one();
    }

    pub(super) fn freed(&self) -> Arc<Notify> {
        self.freed.clone()
    }
}

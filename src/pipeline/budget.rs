//! The one memory and disk budget that every partition's files share: what the open encoders hold,
//! plus what the files' spools (open ones, and sealed ones until they are uploaded) hold in memory and in
//! the spool directory.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::encode::spool::SpoolUsage;

pub(super) struct Budget {
    max_memory: u64,
    max_spool: u64,
    /// The spools' memory and spool-directory usage, open and sealed (kept by the spools themselves).
    spool: Arc<SpoolUsage>,
    /// What the open encoders hold.
    open_files: u64,
    /// Signalled whenever an upload finished or a file was dropped, so records held back can flow again.
    freed: Arc<Notify>,
    /// Since when records are held back, while they are.
    holding_since: Option<Instant>,
    /// How long records were held back before that.
    held: Duration,
}

impl Budget {
    pub(super) fn new(max_memory: u64, max_spool: u64, spool: Arc<SpoolUsage>) -> Self {
        Self {
            max_memory,
            max_spool,
            spool,
            open_files: 0,
            freed: Arc::new(Notify::new()),
            holding_since: None,
            held: Duration::ZERO,
        }
    }

    pub(super) fn memory_used(&self) -> u64 {
        self.spool.memory() + self.open_files
    }

    /// Spools moved from memory to the spool directory so far.
    pub(super) fn files_to_disk(&self) -> u64 {
        self.spool.moved_to_disk()
    }

    /// Notes whether records are (`true`) or are not held back for room, as of `now`.
    pub(super) fn note_holding_back(&mut self, holding: bool, now: Instant) {
        match (holding, self.holding_since) {
            (true, None) => self.holding_since = Some(now),
            (false, Some(since)) => {
                self.held += now.saturating_duration_since(since);
                self.holding_since = None;
            }
            _ => {}
        }
    }

    /// How long records were held back for room in all, as of `now`.
    pub(super) fn held_back(&self, now: Instant) -> Duration {
        self.held + self.holding_since.map_or(Duration::ZERO, |since| now.saturating_duration_since(since))
    }

    pub(super) fn exceeded(&self) -> bool {
        self.memory_used() > self.max_memory || self.spool.disk() > self.max_spool
    }

    /// Whether memory, not the spool directory, is what is over budget.
    pub(super) fn memory_exceeded(&self) -> bool {
        self.memory_used() > self.max_memory
    }

    /// Within a quarter of the memory budget (or over the spool directory's): shrinking the open files
    /// left too little room, so the largest roll early too.
    pub(super) fn nearly_full(&self) -> bool {
        self.memory_used() > self.max_memory - self.max_memory / 4 || self.spool.disk() > self.max_spool
    }

    /// What the open files' encoder buffers may hold together once the largest are shrunk.
    pub(super) fn shrink_target(&self) -> u64 {
        self.max_memory / 4
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_time_records_are_held_back_adds_up_across_spells() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let mut budget = Budget::new(1, 1, Arc::new(SpoolUsage::default()));
        budget.note_holding_back(false, at(0));
        budget.note_holding_back(true, at(100));
        budget.note_holding_back(true, at(150));
        assert_eq!(budget.held_back(at(160)), Duration::from_millis(60), "a spell counts while it lasts");
        budget.note_holding_back(false, at(300));
        budget.note_holding_back(false, at(400));
        budget.note_holding_back(true, at(1000));
        budget.note_holding_back(false, at(1050));
        assert_eq!(budget.held_back(at(2000)), Duration::from_millis(250));
    }

    /// Shrinking stops at a quarter of the budget for the buffers; rolls follow when the budget is still
    /// within a quarter of full.
    #[test]
    fn the_budget_is_nearly_full_within_a_quarter_of_it() {
        let mut budget = Budget::new(100, 1000, Arc::new(SpoolUsage::default()));
        assert_eq!(budget.shrink_target(), 25);
        budget.resize(0, 75);
        assert!(!budget.nearly_full());
        budget.resize(75, 76);
        assert!(budget.nearly_full() && !budget.exceeded());
        budget.resize(76, 101);
        assert!(budget.memory_exceeded() && budget.exceeded());
    }
}

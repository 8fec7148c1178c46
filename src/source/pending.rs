//! Records the consumer thread polled but has not handed to the pipeline yet (its channel was full),
//! with their payload bytes: past a threshold, fetching is paused.

use std::collections::VecDeque;

use super::messages::Fetched;
use crate::archive::partition::TopicPartition;

#[derive(Debug, Default)]
pub(super) struct Pending {
    queue: VecDeque<Fetched>,
    /// Payload bytes of the queued records.
    bytes: u64,
}

impl Pending {
    pub(super) fn push_back(&mut self, fetched: Fetched) {
        self.bytes += fetched.record.payload_size();
        self.queue.push_back(fetched);
    }

    /// The oldest `max` records (fewer if fewer are queued), in order.
    pub(super) fn take_batch(&mut self, max: usize) -> Vec<Fetched> {
        let batch: Vec<Fetched> = self.queue.drain(..max.min(self.queue.len())).collect();
        self.bytes -= batch.iter().map(|f| f.record.payload_size()).sum::<u64>();
        batch
    }

    /// Forgets the records of `tps` (revoked, or moved by a seek): never archived from here, so they
    /// are read again.
    pub(super) fn forget(&mut self, tps: &[TopicPartition]) {
        self.queue.retain(|f| !tps.contains(&f.tp));
        self.bytes = self.queue.iter().map(|f| f.record.payload_size()).sum();
    }

    pub(super) fn clear(&mut self) {
        self.queue.clear();
        self.bytes = 0;
    }

    pub(super) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    pub(super) fn bytes(&self) -> u64 {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::record::{Record, TimestampKind};

    fn fetched(p: i32, offset: i64, size: usize) -> Fetched {
        let record = Record {
            offset,
            timestamp_ms: None,
            timestamp_kind: TimestampKind::NotAvailable,
            key: Some(vec![b'k'; 1]),
            value: Some(vec![b'v'; size]),
            headers: vec![],
        };
        Fetched { tp: TopicPartition::new("t", p).unwrap(), epoch: 1, record, retention_gap: None }
    }

    #[test]
    fn bytes_follow_what_is_queued() {
        let mut pending = Pending::default();
        for offset in 0..3 {
            pending.push_back(fetched(0, offset, 10 * (offset as usize + 1)));
        }
        // key 1 + value + 32 bytes of per-record overhead each
        assert_eq!(pending.bytes(), 43 + 53 + 63);
        let batch = pending.take_batch(2);
        assert_eq!(batch.iter().map(|f| f.record.offset).collect::<Vec<_>>(), vec![0, 1]);
        assert_eq!(pending.bytes(), 63);
        assert_eq!(pending.take_batch(10).len(), 1);
        assert!(pending.is_empty() && pending.bytes() == 0);
        assert!(pending.take_batch(10).is_empty());
    }

    #[test]
    fn forgetting_partitions_keeps_the_others_in_order() {
        let mut pending = Pending::default();
        for (p, offset) in [(0, 0), (1, 0), (0, 1), (1, 1), (2, 0)] {
            pending.push_back(fetched(p, offset, 10));
        }
        pending.forget(&[TopicPartition::new("t", 1).unwrap(), TopicPartition::new("t", 2).unwrap()]);
        assert_eq!(pending.bytes(), 2 * 43);
        let left: Vec<(i32, i64)> =
            pending.take_batch(10).into_iter().map(|f| (f.tp.partition(), f.record.offset)).collect();
        assert_eq!(left, vec![(0, 0), (0, 1)]);
        assert!(pending.is_empty() && pending.bytes() == 0);
        pending.push_back(fetched(0, 2, 5));
        pending.clear();
        assert!(pending.is_empty() && pending.bytes() == 0);
    }
}

//! What follows durability, in one place: each uploader reports every object that became durable (its
//! claim won, its data created or found already there), in its partition's order, and the stage acts
//! on it: Kafka's commit, a hint for the next recovery, and, with tables, the size and footer of each
//! object it created, so the table commits of this process need not read them back.

use std::sync::mpsc::Sender;
use std::sync::Arc;

use parquet::file::metadata::ParquetMetaData;

use crate::archive::object_key::ObjectKey;
use crate::source::{Commit, SourceCommand};
use crate::table::recent::RecentObjects;

/// An object that is in the archive for good.
#[derive(Debug, Clone)]
pub struct Durable {
    /// Its key: topic, partition, offset range, format and time bucket.
    pub key: ObjectKey,
    /// Its chain position (its claim's start; below `key.range.start()` where offsets had no records).
    pub chain_start: i64,
    pub records: u64,
    pub bytes: u64,
    /// A Parquet object's footer: row groups and column statistics.
    pub footer: Option<Arc<ParquetMetaData>>,
}

/// The stages after durability, shared by the pipeline's uploaders.
pub(super) struct CommitStage {
    /// The consumer thread, which commits to Kafka.
    source: Sender<SourceCommand>,
    /// The objects created lately, for the table commits of this process (none without tables).
    recent: Option<Arc<RecentObjects>>,
}

impl CommitStage {
    pub(super) fn new(source: Sender<SourceCommand>) -> Self {
        Self { source, recent: None }
    }

    pub(super) fn with_recent(self, recent: Arc<RecentObjects>) -> Self {
        Self { recent: Some(recent), ..self }
    }

    /// `object` was created by this upload (not found there already, when it may hold other bytes):
    /// a table commit of this process may take its size and footer as they are.
    pub(super) fn created(&self, object: &Durable) {
        if let (Some(recent), Some(footer)) = (&self.recent, &object.footer) {
            recent.created(&object.key.to_string(), object.bytes, footer.clone());
        }
    }

    /// `object` is durable: the group's committed offset moves past it, with its chain position in the
    /// commit metadata. A consumer that is gone (shutting down) has nothing left to commit.
    pub(super) fn durable(&self, object: &Durable) {
        let commit =
            Commit { tp: object.key.tp.clone(), next_offset: object.key.range.next(), chain_start: object.chain_start };
        let _ = self.source.send(SourceCommand::Commit(commit));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::object_key::{FileKind, Prefix};
    use crate::archive::partition::{OffsetRange, TopicPartition};

    #[test]
    fn a_durable_object_moves_the_commit_past_it_with_its_chain_position() {
        let (tx, rx) = std::sync::mpsc::channel();
        let tp = TopicPartition::new("t", 2).unwrap();
        let key = ObjectKey::new(Prefix::new("a"), tp.clone(), OffsetRange::new(10, 19).unwrap(), FileKind::Parquet);
        CommitStage::new(tx).durable(&Durable { key, chain_start: 7, records: 4, bytes: 100, footer: None });
        match rx.try_recv().unwrap() {
            SourceCommand::Commit(Commit { tp: committed, next_offset, chain_start }) => {
                assert_eq!((committed, next_offset, chain_start), (tp, 20, 7))
            }
            other => panic!("not a commit: {other:?}"),
        }
    }
}

//! What follows durability, in one place: each uploader reports every object that became durable (its
//! claim won, its data created or found already there), in its partition's order, and the stage acts
//! on it. Today that is Kafka's commit, a hint for the next recovery; a table commit (Iceberg) is the
//! next stage here, and needs what `Durable` carries (the range, the chain position, the footer).

use std::sync::Arc;

use parquet::file::metadata::ParquetMetaData;
use std::sync::mpsc::Sender;

use crate::archive::object_key::ObjectKey;
use crate::source::{Commit, SourceCommand};

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
}

impl CommitStage {
    pub(super) fn new(source: Sender<SourceCommand>) -> Self {
        Self { source }
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

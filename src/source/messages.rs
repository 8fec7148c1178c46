//! What the consumer thread and the pipeline tell each other. Records go over a bounded channel,
//! rebalances over a separate control channel (so a rebalance is handled even while the pipeline holds
//! records back), and the pipeline's commits and seeks back over a command channel.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc as std_mpsc, Arc};

use crate::archive::partition::{OffsetRange, TopicPartition};
use crate::archive::record::Record;

use crate::recovery::{CommitHint, TopicIdentity};

/// Where a partition whose archive is empty starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StartFrom {
    Earliest,
    Latest,
}

impl std::fmt::Display for StartFrom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StartFrom::Earliest => "earliest",
            StartFrom::Latest => "latest",
        })
    }
}

/// Where the consumer resumes a partition, as the pipeline recovered it from the archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResumeAt {
    Offset(i64),
    /// Nothing archived yet, and `--start-from earliest`.
    Earliest,
    /// Nothing archived yet, and `--start-from latest`.
    Latest,
    /// Do not consume this partition; the reason was reported.
    Stop,
}

#[derive(Debug, Clone)]
pub struct AssignedPartition {
    pub tp: TopicPartition,
    /// Identifies this assignment of the partition; its records carry it.
    pub epoch: u64,
    pub hint: Option<CommitHint>,
    /// The partition's log start offset (low watermark), when the broker told it.
    pub log_start: Option<i64>,
    /// The partition's log-end offset (high watermark), when the broker told it: bounds the search
    /// for the archive's end.
    pub log_end: Option<i64>,
    /// The topic's identity (KIP-516), when the brokers told it at the assignment (otherwise recovery
    /// asks again until they do).
    pub topic: Option<TopicIdentity>,
}

/// One consumed record.
#[derive(Debug)]
pub struct Fetched {
    pub tp: TopicPartition,
    pub epoch: u64,
    pub record: Record,
    /// Offsets right before this record that retention deleted before they were archived (found when
    /// the consumer's position fell below the log start mid-stream). Carried with the record, so the
    /// pipeline sees the gap exactly between the records around it.
    pub retention_gap: Option<OffsetRange>,
}

/// Rebalance and position news for the pipeline.
#[derive(Debug)]
pub enum Control {
    /// Recover these partitions and answer with where each resumes, each as soon as it is known.
    Assigned { partitions: Vec<AssignedPartition>, reply: std_mpsc::Sender<Vec<(TopicPartition, ResumeAt)>> },
    /// Flush (or, when `lost`, drop) these partitions and answer once nothing of them will be uploaded.
    Revoked { partitions: Vec<TopicPartition>, lost: bool, reply: std_mpsc::SyncSender<()> },
    /// The assignment `epoch` of `tp` has no record left in `range`, and its log starts at `log_start`
    /// (answering `CheckRange`).
    RangeEmpty { tp: TopicPartition, epoch: u64, range: OffsetRange, log_start: i64 },
}

/// A durable object's end, to be committed to Kafka as a hint.
#[derive(Debug, Clone)]
pub struct Commit {
    pub tp: TopicPartition,
    pub next_offset: i64,
    pub chain_start: i64,
}

/// What the pipeline asks of the consumer thread.
#[derive(Debug)]
pub enum SourceCommand {
    Commit(Commit),
    /// Move a partition whose records carry `from_epoch` to `position`; records from then on carry
    /// `epoch`. Sent when the pipeline re-recovered the partition (it lost a claim).
    Seek {
        tp: TopicPartition,
        from_epoch: u64,
        epoch: u64,
        position: ResumeAt,
    },
    /// Find out whether `range` of `tp` still holds a record; answered with `Control::RangeEmpty` when
    /// it does not. Sent for a re-write whose records stopped coming.
    CheckRange {
        tp: TopicPartition,
        epoch: u64,
        range: OffsetRange,
    },
}

/// What the pipeline holds of the source.
#[derive(Debug, Clone)]
pub struct SourceLink {
    pub commands: std_mpsc::Sender<SourceCommand>,
    /// Epochs are drawn from one counter by the consumer (assignments) and the pipeline (seeks).
    pub epochs: Arc<AtomicU64>,
    /// The consumer's last word on whether its assignment was lost (e.g. it stalled past the session
    /// timeout): checked before claiming, to narrow a zombie's window (claims close it).
    pub assignment_lost: Arc<AtomicBool>,
}

impl SourceLink {
    pub fn new() -> (Self, std_mpsc::Receiver<SourceCommand>) {
        let (commands, rx) = std_mpsc::channel();
        let link = Self { commands, epochs: Arc::new(AtomicU64::new(1)), assignment_lost: Arc::default() };
        (link, rx)
    }

    pub fn next_epoch(&self) -> u64 {
        self.epochs.fetch_add(1, Ordering::SeqCst)
    }
}

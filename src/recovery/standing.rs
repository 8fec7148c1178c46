//! What `status` shows for one partition: the archive's tail (from S3), the group's committed offset
//! and the log's offsets (from Kafka), and flags where they disagree in a way that matters.

use serde::Serialize;

use crate::archive::claim::Claim;
use crate::archive::partition::TopicPartition;
use crate::recovery::LogOffsets;
use crate::recovery::{check_incarnation, IncarnationMismatch, Tail, TopicIdentity};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StatusFlag {
    /// The group committed past what the archive holds: commits are made only after objects are
    /// durable, so objects were removed, or another tool committed for this group.
    CommitAheadOfArchive,
    /// The archive holds offsets the log does not have (topic deleted and re-created?).
    ArchiveAheadOfLog,
    /// The log starts after the archive's end: retention deleted records before they were archived.
    RetentionGap,
    /// The archive belongs to another incarnation of the topic (its last claim names another topic
    /// ID): the topic was deleted and re-created. The archiver stops this partition.
    TopicRecreated,
    /// The archive's last claim names a topic ID but the brokers have none: the archiver stops this
    /// partition (another cluster, or brokers without topic IDs).
    IncarnationUnverifiable,
}

impl StatusFlag {
    pub fn as_str(self) -> &'static str {
        match self {
            StatusFlag::CommitAheadOfArchive => "COMMIT AHEAD OF ARCHIVE",
            StatusFlag::ArchiveAheadOfLog => "ARCHIVE AHEAD OF LOG",
            StatusFlag::RetentionGap => "RETENTION GAP",
            StatusFlag::TopicRecreated => "TOPIC RE-CREATED",
            StatusFlag::IncarnationUnverifiable => "TOPIC ID UNKNOWN",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PartitionStatus {
    pub topic: String,
    pub partition: i32,
    /// The highest offset whose object is durable; `None`: nothing archived.
    pub archived_through: Option<i64>,
    /// Start of a claim whose data object is not there yet (an upload in flight, or its writer died
    /// and the next owner re-writes it).
    pub pending_claim: Option<i64>,
    /// The group's committed offset (the next offset to archive, as the group last said).
    pub committed: Option<i64>,
    pub log_start: i64,
    pub log_end: i64,
    /// Records in the log not archived yet.
    pub unarchived: i64,
    /// When the newest object was claimed (ms since the epoch), when claims say it.
    pub newest_object_ms: Option<i64>,
    pub flags: Vec<StatusFlag>,
}

pub fn partition_status(
    tp: &TopicPartition,
    tail: &Tail,
    last_claim: Option<&Claim>,
    committed: Option<i64>,
    log: LogOffsets,
    topic: &TopicIdentity,
) -> PartitionStatus {
    let (archived_through, pending_claim, newest_object_ms) = match tail {
        Tail::Empty => (None, None, None),
        Tail::Complete { next } => (Some(next - 1), None, last_claim.map(|c| c.time_ms)),
        Tail::Unfulfilled(claim) => {
            ((claim.chain_start > 0).then(|| claim.chain_start - 1), Some(claim.chain_start), None)
        }
    };
    let archive_next = archived_through.map(|a| a + 1);
    let mut flags = Vec::new();
    match check_incarnation(last_claim, topic) {
        Err(IncarnationMismatch::Other { .. }) => flags.push(StatusFlag::TopicRecreated),
        Err(IncarnationMismatch::Unverifiable { .. }) => flags.push(StatusFlag::IncarnationUnverifiable),
        Ok(()) => {}
    }
    if let (Some(c), next) = (committed, archive_next.unwrap_or(0)) {
        if c > next {
            flags.push(StatusFlag::CommitAheadOfArchive);
        }
    }
    if let Some(next) = archive_next {
        if next > log.log_end {
            flags.push(StatusFlag::ArchiveAheadOfLog);
        } else if next < log.log_start {
            flags.push(StatusFlag::RetentionGap);
        }
    }
    let from = archive_next.unwrap_or(log.log_start).max(log.log_start);
    PartitionStatus {
        topic: tp.topic().to_string(),
        partition: tp.partition(),
        archived_through,
        pending_claim,
        committed,
        log_start: log.log_start,
        log_end: log.log_end,
        unarchived: (log.log_end - from).max(0),
        newest_object_ms,
        flags,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp() -> TopicPartition {
        TopicPartition::new("t", 0).unwrap()
    }

    fn log(log_start: i64, log_end: i64) -> LogOffsets {
        LogOffsets { log_start, log_end }
    }

    fn claim(start: i64, end: i64) -> Claim {
        Claim { writer: "w".into(), time_ms: 1234, ..Claim::for_test(start, start, end) }
    }

    #[test]
    fn a_healthy_partition() {
        let s = partition_status(
            &tp(),
            &Tail::Complete { next: 100 },
            Some(&claim(50, 99)),
            Some(100),
            log(0, 150),
            &TopicIdentity::NoIds,
        );
        assert_eq!((s.archived_through, s.unarchived, s.newest_object_ms), (Some(99), 50, Some(1234)));
        assert!(s.flags.is_empty());
        let s = partition_status(&tp(), &Tail::Empty, None, None, log(20, 30), &TopicIdentity::NoIds);
        assert_eq!((s.archived_through, s.unarchived), (None, 10));
        assert!(s.flags.is_empty());
    }

    #[test]
    fn disagreements_are_flagged() {
        let complete = Tail::Complete { next: 100 };
        assert_eq!(
            partition_status(&tp(), &complete, None, Some(500), log(0, 900), &TopicIdentity::NoIds).flags,
            vec![StatusFlag::CommitAheadOfArchive]
        );
        assert_eq!(
            partition_status(&tp(), &complete, None, None, log(0, 40), &TopicIdentity::NoIds).flags,
            vec![StatusFlag::ArchiveAheadOfLog]
        );
        let s = partition_status(&tp(), &complete, None, None, log(300, 400), &TopicIdentity::NoIds);
        assert_eq!((s.flags.clone(), s.unarchived), (vec![StatusFlag::RetentionGap], 100));
        assert_eq!(
            partition_status(&tp(), &Tail::Empty, None, Some(5), log(0, 10), &TopicIdentity::NoIds).flags,
            vec![StatusFlag::CommitAheadOfArchive]
        );
    }

    #[test]
    fn a_pending_claim() {
        let s = partition_status(
            &tp(),
            &Tail::Unfulfilled(claim(100, 199)),
            None,
            Some(100),
            log(0, 300),
            &TopicIdentity::NoIds,
        );
        assert_eq!((s.archived_through, s.pending_claim, s.unarchived), (Some(99), Some(100), 200));
        assert!(s.flags.is_empty());
    }

    #[test]
    fn an_archive_of_another_incarnation_is_flagged() {
        let old = Claim { topic_id: Some("old-id".into()), ..claim(0, 299) };
        let complete = Tail::Complete { next: 300 };
        let s = partition_status(&tp(), &complete, Some(&old), None, log(0, 1500), &TopicIdentity::Id("new-id".into()));
        assert_eq!(s.flags, vec![StatusFlag::TopicRecreated]);
        let s = partition_status(&tp(), &complete, Some(&old), None, log(0, 1500), &TopicIdentity::Id("old-id".into()));
        assert!(s.flags.is_empty());
        let s = partition_status(&tp(), &complete, Some(&old), None, log(0, 1500), &TopicIdentity::NoIds);
        assert_eq!(s.flags, vec![StatusFlag::IncarnationUnverifiable]);
    }
}

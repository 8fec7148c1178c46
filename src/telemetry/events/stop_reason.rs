//! Why a partition stopped until an operator acts.

/// Why a partition stopped (the `reason` label of `ksa_partition_stopped`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The archive holds offsets past the log's end (the topic deleted and re-created, or truncated).
    ArchiveAheadOfLog,
    /// The archive belongs to another incarnation of the topic (another topic ID).
    OtherIncarnation,
    /// A claim the chain cannot be followed through.
    UnreadableClaim,
    /// A seek kept failing.
    SeekFailed,
}

impl StopReason {
    pub(super) const ALL: [StopReason; 4] =
        [Self::ArchiveAheadOfLog, Self::OtherIncarnation, Self::UnreadableClaim, Self::SeekFailed];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::ArchiveAheadOfLog => "archive_ahead_of_log",
            Self::OtherIncarnation => "other_incarnation",
            Self::UnreadableClaim => "unreadable_claim",
            Self::SeekFailed => "seek_failed",
        }
    }
}

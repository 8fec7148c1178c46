//! Recovery planning: where a partition's archive ends, computed from listings alone.
//!
//! The planner is a state machine that asks for listing pages and is fed them, so it never touches the
//! network. It rests on one property of the archive: objects of a partition do not overlap and their
//! keys sort by start offset, so listing from any key at or before the last object's start returns
//! the last object, whose end is the archive's end. The Kafka commit says where to list from: its
//! metadata names the start offset of the object it was made for (one request then settles it); a
//! commit without metadata (reset, or a broker that drops metadata) only gives the committed offset,
//! and the planner probes backwards from it in doubling steps (O(log distance) requests) until a
//! listing is not empty. Whenever a listing goes on past one page, the planner does not page through
//! the folder: it searches for the last key by start offset with `StartAfter` (galloping ahead, then
//! bisecting; the log-end offset, when known, bounds it at once), O(log n) requests — 11 for a
//! million objects with the log end, 19 without. The commit is never trusted for the position itself:
//! that always comes from the keys.
//!
//! The same search finds a partition's last claim (see `claim`), whose keys also sort by start
//! offset; [`assess_tail`] and [`plan_resume`] then turn the last claim and the data objects after it
//! into where consumption resumes, including re-writing a claimed range whose data object is missing.

pub mod claims;
pub mod standing;
pub mod tail;

mod resume;
mod search;

use serde::Serialize;

pub use self::resume::{
    assess_tail, check_incarnation, plan_resume, IncarnationMismatch, ResumePlan, Tail, TopicIdentity,
};
pub use self::search::{Overlap, Step, TailListing, TailSearch};

const HINT_METADATA_TAG: &str = "ksa1:";

/// Tells a topic's identity when its assignment could not (the brokers did not answer in time, or
/// answered with an error for the topic). Blocking: the recoverer calls it off the loop, again and
/// again until it answers.
pub trait TopicIdLookup: Send + Sync {
    fn lookup(&self, topic: &str) -> Result<TopicIdentity, String>;
}

/// A partition's log offsets, as Kafka reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LogOffsets {
    pub log_start: i64,
    pub log_end: i64,
}

/// One partition's offsets in Kafka.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionOffsets {
    pub log: LogOffsets,
    /// The group's committed offset and its metadata (when a group was named and it committed).
    pub committed: Option<(i64, String)>,
    /// The topic's identity (its KIP-516 ID, or that the brokers have none).
    pub topic: TopicIdentity,
}

/// What the archiver finds committed in Kafka: where to start listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitHint {
    /// The committed offset: the archive should hold everything below it.
    pub next_offset: i64,
    /// From the commit metadata: chain position (claim start, at or below the data object's first
    /// offset) of the file whose end is `next_offset - 1`.
    pub chain_start: Option<i64>,
}

impl CommitHint {
    /// The commit metadata string for a file at chain position `chain_start`.
    pub fn metadata_for(chain_start: i64) -> String {
        format!("{HINT_METADATA_TAG}{chain_start}")
    }

    /// Reads a committed offset and its metadata back; `None` when no offset is committed.
    pub fn parse(next_offset: i64, metadata: &str) -> Option<Self> {
        if next_offset <= 0 {
            return None;
        }
        let chain_start = metadata
            .strip_prefix(HINT_METADATA_TAG)
            .and_then(|s| s.parse::<i64>().ok())
            .filter(|s| (0..next_offset).contains(s));
        Some(Self { next_offset, chain_start })
    }
}

//! Where a partition resumes, from its archive's tail: after it, at the log start with a retention gap,
//! re-writing an unfulfilled claim, or not at all when the archive belongs to another incarnation of
//! the topic.

use super::super::archive::claim::Claim;
use super::super::archive::partition::OffsetRange;

/// How a partition's archive ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tail {
    /// Nothing archived yet.
    Empty,
    /// Everything below `next` is archived (or was claimed and written).
    Complete { next: i64 },
    /// The last claim's data object is missing (its writer died or stalled between claim and upload):
    /// exactly that claim's range must be written before anything else.
    Unfulfilled(Claim),
}

/// The tail of an archive with claims, from its last claim and the data objects of the partition that
/// start at or after the claim's start. A claim is fulfilled by a data object inside its range; data
/// objects beyond the last claim (written without claims) move the position past them.
pub fn assess_tail(last: &Claim, data_from_start: &[OffsetRange]) -> Tail {
    let covers = last.covers();
    let fulfilled = data_from_start.iter().any(|r| r.start() >= covers.start() && r.end() <= covers.end());
    let data_end = data_from_start.iter().map(|r| r.end()).max();
    match data_end {
        Some(end) if end > covers.end() => Tail::Complete { next: end + 1 },
        _ if fulfilled => Tail::Complete { next: covers.next() },
        _ => Tail::Unfulfilled(last.clone()),
    }
}

/// Where a partition resumes, decided from its tail and its log start offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResumePlan {
    /// The offset to consume from; `None`: nothing archived, use the configured start (earliest/latest).
    pub consume_from: Option<i64>,
    /// The chain position (claim start) of the next file.
    pub chain_next: i64,
    /// The first file re-writes this claim's range (its claim exists; only its data is written).
    pub rewrite: Option<Claim>,
    /// Offsets deleted by retention before they were archived.
    pub retention_gap: Option<OffsetRange>,
    /// The start (ms) of the time bucket of the last claim's data object (lake layout): the partition's
    /// next files go into no earlier bucket. Set by the caller, who has the claim.
    pub bucket_floor_ms: Option<i64>,
}

/// Where a partition resumes: after its archive's tail, or at the log start when retention deleted
/// offsets before they were archived (a retention gap, reported loudly, never skipped silently).
pub fn plan_resume(tail: &Tail, log_start: Option<i64>) -> ResumePlan {
    let low = log_start.unwrap_or(0);
    // The archive continues at `next`; `lost_from` is where a retention gap would start.
    let resume = |next: i64, lost_from: i64| {
        let retention_gap = (next < low).then(|| OffsetRange::new(lost_from.min(next), low - 1).expect("ordered"));
        ResumePlan {
            consume_from: Some(next.max(low)),
            chain_next: next,
            rewrite: None,
            retention_gap,
            bucket_floor_ms: None,
        }
    };
    match tail {
        Tail::Empty => {
            ResumePlan { consume_from: None, chain_next: 0, rewrite: None, retention_gap: None, bucket_floor_ms: None }
        }
        Tail::Complete { next } => resume(*next, *next),
        Tail::Unfulfilled(claim) if low <= claim.end => {
            let from = claim.first.max(low);
            let retention_gap = (from > claim.first).then(|| OffsetRange::new(claim.first, from - 1).expect("ordered"));
            ResumePlan {
                consume_from: Some(from),
                chain_next: claim.chain_start,
                rewrite: Some(claim.clone()),
                retention_gap,
                bucket_floor_ms: None,
            }
        }
        // Retention deleted the whole claimed range before it was written: it is lost.
        Tail::Unfulfilled(claim) => resume(claim.end + 1, claim.first),
    }
}

/// What the brokers say of a topic's identity (KIP-516): the ID of the topic's incarnation, or that they
/// have no topic IDs at all (brokers before Kafka 2.8, or Kafka-compatible ones without them). A broker
/// that did not answer, or answered with an error for the topic, has said neither: the caller asks again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopicIdentity {
    Id(String),
    NoIds,
}

impl TopicIdentity {
    /// The ID, as claims record it.
    pub fn id(&self) -> Option<&str> {
        match self {
            TopicIdentity::Id(id) => Some(id),
            TopicIdentity::NoIds => None,
        }
    }
}

/// Why a partition's archive cannot be continued by the topic as it is now. New records must never
/// continue, fill or skip against another incarnation's chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IncarnationMismatch {
    /// The archive's last claim names another topic ID than the topic has now: the topic was deleted
    /// and re-created (its offsets restarted at 0).
    Other { archived: String, current: String },
    /// The archive's last claim names a topic ID, but the brokers have none: which incarnation the
    /// topic is cannot be checked (another cluster, or brokers without topic IDs).
    Unverifiable { archived: String },
}

/// Checks that the partition's archive (its last claim) belongs to the topic as it is now. Claims that
/// record no topic ID (written before IDs were recorded, or from brokers without them) pass: there is
/// nothing to compare, and the next claim records the ID if the brokers have one.
pub fn check_incarnation(last_claim: Option<&Claim>, current: &TopicIdentity) -> Result<(), IncarnationMismatch> {
    match (last_claim.and_then(|c| c.topic_id.as_deref()), current) {
        (Some(archived), TopicIdentity::Id(current)) if archived != current => {
            Err(IncarnationMismatch::Other { archived: archived.to_string(), current: current.to_string() })
        }
        (Some(archived), TopicIdentity::NoIds) => {
            Err(IncarnationMismatch::Unverifiable { archived: archived.to_string() })
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(start: i64, first: i64, end: i64) -> Claim {
        Claim::for_test(start, first, end)
    }

    fn r(s: i64, e: i64) -> OffsetRange {
        OffsetRange::new(s, e).unwrap()
    }

    #[test]
    fn a_claim_is_fulfilled_by_a_data_object_inside_it() {
        let c = claim(100, 102, 199);
        assert_eq!(assess_tail(&c, &[r(102, 199)]), Tail::Complete { next: 200 });
        // Compaction removed records before a re-write: a smaller object inside the claim still counts.
        assert_eq!(assess_tail(&c, &[r(105, 190)]), Tail::Complete { next: 200 });
        assert_eq!(assess_tail(&c, &[]), Tail::Unfulfilled(c.clone()));
        // An object that is not inside the claim (another writer's, overlapping) does not fulfil it.
        assert_eq!(assess_tail(&c, &[r(99, 150)]), Tail::Unfulfilled(c.clone()));
        // Data beyond the last claim (written without claims) moves the position past it.
        assert_eq!(assess_tail(&c, &[r(102, 199), r(200, 260)]), Tail::Complete { next: 261 });
        assert_eq!(assess_tail(&c, &[r(150, 260)]), Tail::Complete { next: 261 });
    }

    #[test]
    fn start_plans() {
        let plan = |tail: &Tail, low| plan_resume(tail, low);
        assert_eq!(
            plan(&Tail::Empty, Some(40)),
            ResumePlan { consume_from: None, chain_next: 0, rewrite: None, retention_gap: None, bucket_floor_ms: None }
        );
        assert_eq!(
            plan(&Tail::Complete { next: 200 }, Some(40)),
            ResumePlan {
                consume_from: Some(200),
                chain_next: 200,
                rewrite: None,
                retention_gap: None,
                bucket_floor_ms: None
            }
        );
        // The log starts right where the archive ends: no gap.
        assert_eq!(
            plan(&Tail::Complete { next: 200 }, Some(200)),
            ResumePlan {
                consume_from: Some(200),
                chain_next: 200,
                rewrite: None,
                retention_gap: None,
                bucket_floor_ms: None
            }
        );
        assert_eq!(
            plan(&Tail::Complete { next: 200 }, Some(250)),
            ResumePlan {
                consume_from: Some(250),
                chain_next: 200,
                rewrite: None,
                retention_gap: Some(r(200, 249)),
                bucket_floor_ms: None
            }
        );
        let c = claim(100, 102, 199);
        let tail = Tail::Unfulfilled(c.clone());
        assert_eq!(
            plan(&tail, None),
            ResumePlan {
                consume_from: Some(102),
                chain_next: 100,
                rewrite: Some(c.clone()),
                retention_gap: None,
                bucket_floor_ms: None
            }
        );
        // Retention took the start of the claimed range: re-write what is left of it.
        assert_eq!(
            plan(&tail, Some(150)),
            ResumePlan {
                consume_from: Some(150),
                chain_next: 100,
                rewrite: Some(c.clone()),
                retention_gap: Some(r(102, 149)),
                bucket_floor_ms: None
            }
        );
        // ... or all of it: the claimed range is lost, and so is what retention took after it.
        assert_eq!(
            plan(&tail, Some(300)),
            ResumePlan {
                consume_from: Some(300),
                chain_next: 200,
                rewrite: None,
                retention_gap: Some(r(102, 299)),
                bucket_floor_ms: None
            }
        );
    }

    #[test]
    fn another_incarnation_of_the_topic_is_refused() {
        let with_id = |id: Option<&str>| Claim { topic_id: id.map(String::from), ..claim(0, 0, 9) };
        let id = |s: &str| TopicIdentity::Id(s.into());
        assert_eq!(check_incarnation(Some(&with_id(Some("A"))), &id("A")), Ok(()));
        assert_eq!(
            check_incarnation(Some(&with_id(Some("A"))), &id("B")),
            Err(IncarnationMismatch::Other { archived: "A".into(), current: "B".into() })
        );
        // An archive with an ID, brokers without: the topic's incarnation cannot be checked, so its
        // records must not continue the chain (and claims without an ID never follow one with it).
        assert_eq!(
            check_incarnation(Some(&with_id(Some("A"))), &TopicIdentity::NoIds),
            Err(IncarnationMismatch::Unverifiable { archived: "A".into() })
        );
        // Nothing to compare: an empty archive, a claim without an ID.
        assert_eq!(check_incarnation(None, &id("B")), Ok(()));
        assert_eq!(check_incarnation(None, &TopicIdentity::NoIds), Ok(()));
        assert_eq!(check_incarnation(Some(&with_id(None)), &id("B")), Ok(()));
        assert_eq!(check_incarnation(Some(&with_id(None)), &TopicIdentity::NoIds), Ok(()));
    }
}

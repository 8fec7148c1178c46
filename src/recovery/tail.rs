//! Where a partition's archive ends, found over the network: the claims chain's tail (the last claim,
//! and whether its data object exists), or, without claims, the last data object. Listing starts where
//! the Kafka commit hint says. Used by the pipeline's recoverer, `status` and the markers; the decisions
//! are the pure planner's (`search`, `resume`).

use thiserror::Error;

use crate::archive::claim::{Claim, ClaimError, ClaimKey};
use crate::archive::completeness::PartitionProgress;
use crate::archive::keys::classify;
use crate::archive::keys::ListRequest;
use crate::archive::object_key::Prefix;
use crate::archive::partition::{OffsetRange, TopicPartition};
use crate::archive::time_bucket::Bucket;
use crate::recovery::standing::{partition_status, PartitionStatus};
use crate::recovery::{assess_tail, CommitHint, Overlap, PartitionOffsets, Step, Tail, TailListing, TailSearch};
use crate::retry::{with_retries, Patience, Retrying, Watch};
use crate::store::{list_between, ObjectStore, StoreError};

#[derive(Debug, Error)]
pub enum TailError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The last claim cannot be read: the chain cannot be followed.
    #[error(transparent)]
    BadClaim(#[from] ClaimError),
}

/// Where the search for a partition's tail may start and end: the Kafka commit (where to list from)
/// and the log-end offset (no key starts at or past it); both only speed the search up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TailHints {
    pub commit: Option<CommitHint>,
    pub log_end: Option<i64>,
}

#[derive(Debug)]
pub struct FoundTail {
    pub tail: Tail,
    /// The last claim, when the partition has claims.
    pub last_claim: Option<Claim>,
    pub list_requests: u32,
    pub keys_seen: u64,
    /// Keys in the partition's folders that are not ours.
    pub ignored_keys: Vec<String>,
    /// Overlapping data objects seen (archives without claims).
    pub overlaps: Vec<Overlap>,
}

impl FoundTail {
    /// A partition the archive holds nothing of.
    pub fn empty() -> Self {
        Self {
            tail: Tail::Empty,
            last_claim: None,
            list_requests: 0,
            keys_seen: 0,
            ignored_keys: vec![],
            overlaps: vec![],
        }
    }
}

pub async fn find_tail(
    store: &dyn ObjectStore,
    prefix: &Prefix,
    tp: &TopicPartition,
    hints: TailHints,
    claims: bool,
    patience: Patience,
    watch: Watch<'_>,
) -> Result<FoundTail, TailError> {
    let attempts = patience.attempts();
    let mut found = FoundTail::empty();
    if claims {
        let listed =
            run_plan(store, TailSearch::claims(prefix, tp, hints.commit, hints.log_end), attempts, watch).await?;
        found.list_requests += listed.list_requests;
        found.keys_seen += listed.objects_seen;
        found.ignored_keys.extend(listed.ignored_keys);
        if let Some(start) = listed.last_claim {
            let key = ClaimKey::new(prefix.clone(), tp.clone(), start).to_string();
            let body = with_retries(attempts, "reading a claim", watch, || store.get(&key)).await?;
            let claim = Claim::from_json(&key, &body)?;
            // The claim's data object is in its bucket's folder (lake layout) or the partition's.
            let bucket = claim.object_key(prefix).and_then(|key| key.bucket);
            let (data, requests) = data_from(store, prefix, (tp, bucket), start, attempts, watch).await?;
            found.list_requests += requests;
            found.keys_seen += data.len() as u64;
            found.tail = assess_tail(&claim, &data);
            found.last_claim = Some(claim);
            return Ok(found);
        }
    }
    let listed = run_plan(store, TailSearch::data(prefix, tp, hints.commit, hints.log_end), attempts, watch).await?;
    found.list_requests += listed.list_requests;
    found.keys_seen += listed.objects_seen;
    found.ignored_keys.extend(listed.ignored_keys);
    found.overlaps = listed.overlaps;
    found.tail = listed.next_offset.map_or(Tail::Empty, |next| Tail::Complete { next });
    Ok(found)
}

/// What one look at a topic's folders found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicSurvey {
    /// The archive holds no key of the topic: no claim, no data object, nothing else in its folders.
    pub empty: bool,
    pub list_requests: u32,
}

/// Looks whether the archive holds anything of `topic`: one key of its claims folder (with claims),
/// then one of its data folder, so one or two LISTs however many partitions it has. When it holds
/// nothing, each of its partitions has an empty tail, as a search of the partition's own folders made
/// after this look would find; a partition given that tail still claims its first file with
/// `If-None-Match`, as after any recovery.
pub async fn survey_topic(
    store: &dyn ObjectStore,
    prefix: &Prefix,
    topic: &str,
    claims: bool,
    patience: Patience,
    watch: Watch<'_>,
) -> Result<TopicSurvey, StoreError> {
    let claims_folder = claims.then(|| prefix.claims_topic_folder(topic));
    let mut survey = TopicSurvey { empty: true, list_requests: 0 };
    for folder in claims_folder.into_iter().chain([prefix.topic_folder(topic)]) {
        let req = ListRequest { prefix: folder, start_after: None };
        let page = with_retries(patience.attempts(), "listing the archive", watch, || store.list(&req, 1)).await?;
        survey.list_requests += 1;
        if !page.keys.is_empty() {
            survey.empty = false;
            break;
        }
    }
    Ok(survey)
}

async fn run_plan(
    store: &dyn ObjectStore,
    (mut plan, mut req): (TailSearch, ListRequest),
    attempts: u32,
    watch: Watch<'_>,
) -> Result<TailListing, StoreError> {
    loop {
        let page = with_retries(attempts, "listing the archive", watch, || store.list(&req, 1000)).await?;
        match plan.feed(page) {
            Step::List(next) => req = next,
            Step::Done(r) => return Ok(r),
        }
    }
}

/// The data objects of `tp` in its folder of `bucket` (or its only folder) that start at `start` or
/// later, and the list requests it took.
async fn data_from(
    store: &dyn ObjectStore,
    prefix: &Prefix,
    (tp, bucket): (&TopicPartition, Option<Bucket>),
    start: i64,
    attempts: u32,
    watch: Watch<'_>,
) -> Result<(Vec<OffsetRange>, u32), StoreError> {
    let req = ListRequest {
        prefix: prefix.data_folder(tp, bucket.as_ref()),
        start_after: Some(prefix.start_after_in(tp, bucket.as_ref(), start)),
    };
    let (keys, requests) = list_between(&Retrying::new(store, Patience::Attempts(attempts), watch), req, None).await?;
    let ranges = keys.iter().filter_map(|k| classify(prefix, k).data()).filter(|k| &k.tp == tp).map(|k| k.range);
    Ok((ranges.collect(), requests as u32))
}

/// Tries of each store request before `inspect` gives up.
const INSPECT_ATTEMPTS: u32 = 8;

/// Reading a partition's archive for `inspect` failed.
#[derive(Debug, thiserror::Error)]
#[error("reading the archive of {tp}: {source}")]
pub struct InspectError {
    pub tp: TopicPartition,
    pub source: TailError,
}

/// One partition, as the archive and the log show it.
pub struct Inspected {
    pub row: PartitionStatus,
    pub progress: PartitionProgress,
    pub list_requests: u32,
}

/// Finds one partition's archive tail (from the commit hint, as recovery does) and sets it against the
/// partition's log.
pub async fn inspect(
    store: &dyn ObjectStore,
    prefix: &Prefix,
    tp: TopicPartition,
    PartitionOffsets { log, committed, topic }: PartitionOffsets,
) -> Result<Inspected, InspectError> {
    let hint = committed.as_ref().and_then(|c| CommitHint::parse(c.0, &c.1));
    let hints = TailHints { commit: hint, log_end: Some(log.log_end) };
    let found = find_tail(store, prefix, &tp, hints, true, Patience::Attempts(INSPECT_ATTEMPTS), None)
        .await
        .map_err(|source| InspectError { tp: tp.clone(), source })?;
    let row =
        partition_status(&tp, &found.tail, found.last_claim.as_ref(), committed.as_ref().map(|c| c.0), log, &topic);
    let progress = PartitionProgress {
        last_bucket: found.last_claim.as_ref().and_then(|c| c.object_key(prefix)?.bucket),
        caught_up: row.pending_claim.is_none() && row.unarchived == 0,
        time_source: found.last_claim.as_ref().and_then(|c| c.time_source),
    };
    Ok(Inspected { row, progress, list_requests: found.list_requests })
}

//! Where a partition's archive ends, found over the network: the claims chain's tail (the last claim,
//! and whether its data object exists), or, without claims, the last data object. Listing starts where
//! the Kafka commit hint says. Used by the pipeline's recoverer and `status`; the decisions
//! are the pure planner's (`search`, `resume`).

use thiserror::Error;
use tracing::warn;

use crate::archive::keys::classify;
use crate::archive::claim::{Claim, ClaimError, ClaimKey};
use crate::archive::object_key::Prefix;
use crate::archive::partition::{OffsetRange, TopicPartition};
use crate::archive::time_bucket::Bucket;
use crate::recovery::{assess_tail, CommitHint, ListRequest, Overlap, Step, Tail, TailListing, TailSearch};
use crate::retry::Backoff;
use crate::store::{ObjectStore, StoreError};
use crate::telemetry::Metrics;
use prometheus::{IntCounter, IntGauge};

/// How often a failing request is tried: for as long as it takes (the archiver's recoveries: a store
/// brownout must not crash-loop a fleet), or a few times (a command that a user waits for).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Patience {
    Forever,
    Attempts(u32),
}

impl Patience {
    fn attempts(self) -> u32 {
        match self {
            Patience::Forever => u32::MAX,
            Patience::Attempts(n) => n,
        }
    }
}

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

pub async fn find_tail(
    store: &dyn ObjectStore,
    prefix: &Prefix,
    tp: &TopicPartition,
    hints: TailHints,
    claims: bool,
    patience: Patience,
    metrics: Option<&Metrics>,
) -> Result<FoundTail, TailError> {
    let watch = metrics.map(|s| (&s.list_retries, &s.store_up));
    let attempts = patience.attempts();
    let mut found = FoundTail {
        tail: Tail::Empty,
        last_claim: None,
        list_requests: 0,
        keys_seen: 0,
        ignored_keys: vec![],
        overlaps: vec![],
    };
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
    let mut req = ListRequest {
        prefix: prefix.data_folder(tp, bucket.as_ref()),
        start_after: Some(prefix.start_after_in(tp, bucket.as_ref(), start)),
    };
    let mut ranges = Vec::new();
    let mut requests = 0;
    loop {
        let page = with_retries(attempts, "listing the archive", watch, || store.list(&req, 1000)).await?;
        requests += 1;
        ranges.extend(
            page.keys.iter().filter_map(|k| classify(prefix, k).data()).filter(|k| &k.tp == tp).map(|k| k.range),
        );
        match (page.truncated, page.keys.last()) {
            (true, Some(last)) => req.start_after = Some(last.clone()),
            _ => return Ok((ranges, requests)),
        }
    }
}

/// Metrics a retried request reports to: its retry counter, and whether the store answers.
pub type Watch<'a> = Option<(&'a IntCounter, &'a IntGauge)>;

/// Runs `op` until it succeeds, fails permanently, or failed transiently `attempts` times.
pub async fn with_retries<T, F, Fut>(attempts: u32, what: &str, watch: Watch<'_>, mut op: F) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, StoreError>>,
{
    let backoff = Backoff::default();
    let mut attempt: u32 = 0;
    loop {
        let result = op().await;
        if let Some((_, up)) = watch {
            up.set(i64::from(!result.as_ref().is_err_and(StoreError::is_transient)));
        }
        match result {
            Err(e) if e.is_transient() && attempt.saturating_add(1) < attempts => {
                if let Some((retries, _)) = watch {
                    retries.inc();
                }
                warn!("{what}: request failed (attempt {}): {e}; retrying", attempt + 1);
                tokio::time::sleep(backoff.delay(attempt, fastrand::f64())).await;
                attempt = attempt.saturating_add(1);
            }
            other => return other,
        }
    }
}

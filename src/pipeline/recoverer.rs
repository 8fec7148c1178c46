//! Recovering one partition's position from the archive: find the tail (the claims chain, or the data
//! objects where there are no claims), check that it belongs to the topic as it is now (its topic ID,
//! asked again for as long as the brokers do not tell it), then plan where to resume (`recovery`).
//! Owned, so the recoveries of an assignment run concurrently off the pipeline.

use std::collections::{BTreeMap, HashMap};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::future::{BoxFuture, FutureExt, Shared};

use super::PipelineError;
use crate::archive::object_key::Prefix;
use crate::archive::partition::TopicPartition;
use crate::recovery::tail::{find_tail, survey_topic, FoundTail, TailError, TailHints};
use crate::recovery::{
    check_incarnation, plan_resume, CommitHint, IncarnationMismatch, ResumePlan, TopicIdLookup, TopicIdentity,
};
use crate::retry::{back_off, Backoff, Patience};
use crate::source::{AssignedPartition, ResumeAt};
use crate::store::{ObjectStore, StoreError};
use crate::telemetry::events::{RecoveryFinished, TopicSurveyed};
use crate::telemetry::{Event, Metrics, StopReason};

/// Where a recovered partition goes on, and the identity of the topic it goes on with.
pub(super) struct Resumed {
    pub(super) plan: ResumePlan,
    pub(super) topic: TopicIdentity,
}

/// An assignment's look at one topic's folders, shared by the recoveries of its partitions: true when
/// the archive holds nothing of the topic.
pub(super) type Survey = Shared<BoxFuture<'static, bool>>;

/// An assignment looks at a topic's folders first when it brings at least this many of its partitions:
/// one or two LISTs then save two per partition when the topic is new to the archive, and cost one or
/// two more in all when it is not.
const SURVEY_FROM_PARTITIONS: usize = 2;

/// Recoveries that list the store at once. Each makes its few requests one after another, so a
/// thousand started together and queued for the store's request slots would all end together, near
/// the end; in turns, they end one after another, and their partitions start (late ones, once the
/// assign callback has returned) while the rest recover, their uploads finding free request slots
/// (64 by default) beside the recoveries' 32. A recovery whose requests fail leaves the turns (see
/// `in_turn`), and one revoked gives its turn up.
pub(super) const RECOVERIES_AT_ONCE: usize = 32;

/// How often a recovery waiting for its turn, or for a failing store, checks that it is still wanted.
const VOID_CHECK: std::time::Duration = std::time::Duration::from_millis(200);

/// What one recovery ended in: `None` when the partition cannot be archived (reported).
pub(super) type Recovery = Result<Option<Resumed>, PipelineError>;

/// A recovery that ended (run off the pipeline's loop).
pub(super) enum Recovered {
    /// A newly assigned partition; the consumer waits for its position on `reply`.
    Assigned {
        partition: AssignedPartition,
        recovery: Box<Recovery>,
        reply: std_mpsc::Sender<Vec<(TopicPartition, ResumeAt)>>,
    },
    /// A partition whose uploader gave up its chain; the consumer is moved once it is recovered.
    Restarted { tp: TopicPartition, from_epoch: u64, epoch: u64, recovery: Box<Recovery> },
}

/// The partitions being recovered, with the epoch each recovery is for: a revoke (or a newer
/// assignment) since makes the result void, and ends a recovery waiting on a topic's ID.
#[derive(Debug, Clone, Default)]
pub(super) struct Recovering(Arc<Mutex<HashMap<TopicPartition, u64>>>);

impl Recovering {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<TopicPartition, u64>> {
        self.0.lock().expect("recovering")
    }

    pub(super) fn start(&self, tp: &TopicPartition, epoch: u64) {
        self.map().insert(tp.clone(), epoch);
    }

    pub(super) fn cancel(&self, tp: &TopicPartition) {
        self.map().remove(tp);
    }

    /// Whether `tp` is still being recovered for `epoch`.
    pub(super) fn wanted(&self, tp: &TopicPartition, epoch: u64) -> bool {
        self.map().get(tp) == Some(&epoch)
    }

    /// Whether any recovery of `tp` is under way.
    pub(super) fn any(&self, tp: &TopicPartition) -> bool {
        self.map().contains_key(tp)
    }

    /// Ends the recovery of `tp` for `epoch`; false when it was void (revoked or re-assigned since).
    pub(super) fn end(&self, tp: &TopicPartition, epoch: u64) -> bool {
        let mut map = self.map();
        let current = map.get(tp) == Some(&epoch);
        if current {
            map.remove(tp);
        }
        current
    }
}

#[derive(Clone)]
pub(super) struct Recoverer {
    pub(super) store: Arc<dyn ObjectStore>,
    pub(super) prefix: Prefix,
    pub(super) claims: bool,
    pub(super) metrics: Arc<Metrics>,
    pub(super) topic_ids: Arc<dyn TopicIdLookup>,
    pub(super) recovering: Recovering,
    /// One permit per recovery listing the store (`RECOVERIES_AT_ONCE`).
    pub(super) turns: Arc<tokio::sync::Semaphore>,
}

impl Recoverer {
    /// One look at its folders for each topic that `partitions` bring several partitions of.
    pub(super) fn surveys(&self, partitions: &[AssignedPartition]) -> HashMap<String, Survey> {
        let mut per_topic: BTreeMap<&str, usize> = BTreeMap::new();
        for p in partitions {
            *per_topic.entry(p.tp.topic()).or_default() += 1;
        }
        let topics = per_topic.into_iter().filter(|(_, n)| *n >= SURVEY_FROM_PARTITIONS);
        topics
            .map(|(topic, n)| {
                let (recoverer, owned) = (self.clone(), topic.to_string());
                (topic.to_string(), async move { recoverer.survey(&owned, n).await }.boxed().shared())
            })
            .collect()
    }

    /// Whether the archive holds nothing of `topic`, asked for as long as the store fails transiently (the
    /// topic's partitions wait meanwhile, as they would for their own listings); false when the store
    /// refused to say (a permanent error: each partition then lists its own folders, and reports it).
    async fn survey(&self, topic: &str, partitions: usize) -> bool {
        let started = Instant::now();
        let watch = Some((&self.metrics.list_retries, &self.metrics.store_up));
        let look = |patience| survey_topic(self.store.as_ref(), &self.prefix, topic, self.claims, patience, watch);
        let survey = self.in_turn(look, StoreError::is_transient).await.map_err(|e| e.to_string());
        let empty = survey.as_ref().is_ok_and(|s| s.empty);
        self.metrics.emit(Event::TopicSurveyed(TopicSurveyed {
            topic,
            partitions,
            survey,
            elapsed: started.elapsed(),
        }));
        empty
    }

    /// Recovers one partition's position. `topic` is the topic's identity when the assignment could tell
    /// it; otherwise it is asked for until the brokers tell it (the partition waits meanwhile: an unknown
    /// ID is never taken for a match). `survey`, when the assignment looked at the topic's folders, says
    /// whether they are empty (then so are the partition's). `None`: the partition cannot be archived
    /// (reported): its chain cannot be followed, or it belongs to another incarnation of the topic.
    pub(super) async fn recover(
        &self,
        tp: &TopicPartition,
        epoch: u64,
        hint: Option<CommitHint>,
        (log_start, log_end): (Option<i64>, Option<i64>),
        topic: Option<TopicIdentity>,
        survey: Option<Survey>,
    ) -> Recovery {
        let started = Instant::now();
        let _in_progress = InProgress::start(&self.metrics.recoveries_in_progress);
        let found = tokio::select! {
            found = self.tail(tp, TailHints { commit: hint, log_end }, survey) => match found? {
                Some(found) => found,
                None => return Ok(None),
            },
            // Revoked or assigned again meanwhile: void, and its turn at the store goes to another.
            () = self.until_void(tp, epoch) => return Ok(None),
        };
        let topic = match topic {
            Some(topic) => topic,
            None => match self.identity_of(tp, epoch).await {
                Some(topic) => topic,
                None => return Ok(None), // Revoked meanwhile: void.
            },
        };
        if let Err(mismatch) = check_incarnation(found.last_claim.as_ref(), &topic) {
            let why = other_incarnation(tp, mismatch);
            self.metrics.emit(Event::PartitionStopped { tp, reason: StopReason::OtherIncarnation, why: &why });
            return Ok(None);
        }
        for key in &found.ignored_keys {
            self.metrics.emit(Event::ForeignKey { tp, key });
        }
        for o in &found.overlaps {
            self.metrics.emit(Event::Overlap { tp, earlier: o.earlier, later: o.later });
        }
        let mut plan = plan_resume(&found.tail, log_start);
        plan.bucket_floor_ms =
            found.last_claim.as_ref().and_then(|c| c.object_key(&self.prefix)?.bucket).map(|b| b.start_ms());
        if let (Some(missing), Some(resume_at)) = (plan.retention_gap, plan.consume_from) {
            self.metrics.emit(Event::RetentionGap { tp, missing, resume_at });
        }
        if let Some(claim) = &plan.rewrite {
            self.metrics.emit(Event::RewritingClaim { tp, claim });
        }
        self.metrics.emit(Event::RecoveryFinished(RecoveryFinished {
            tp,
            plan: &plan,
            list_requests: found.list_requests,
            keys_seen: found.keys_seen,
            hinted: hint.is_some(),
            elapsed: started.elapsed(),
        }));
        Ok(Some(Resumed { plan, topic }))
    }

    /// Returns once the recovery of `tp` for `epoch` is void (revoked, or assigned again).
    async fn until_void(&self, tp: &TopicPartition, epoch: u64) {
        while self.recovering.wanted(tp, epoch) {
            tokio::time::sleep(VOID_CHECK).await;
        }
    }

    /// The partition's tail: empty when the assignment's look at the topic found nothing, else searched
    /// for in a turn at the store, and retried for as long as it takes if the store fails (meanwhile
    /// /readyz says why, and the consumer stays in the group); `None` when the chain cannot be followed
    /// (reported).
    async fn tail(
        &self,
        tp: &TopicPartition,
        hints: TailHints,
        survey: Option<Survey>,
    ) -> Result<Option<FoundTail>, PipelineError> {
        if let Some(survey) = survey {
            if survey.await {
                return Ok(Some(FoundTail::empty()));
            }
        }
        let watch = Some((&self.metrics.list_retries, &self.metrics.store_up));
        let search = |patience| find_tail(self.store.as_ref(), &self.prefix, tp, hints, self.claims, patience, watch);
        let transient = |e: &TailError| matches!(e, TailError::Store(e) if e.is_transient());
        match self.in_turn(search, transient).await {
            Ok(found) => Ok(Some(found)),
            Err(TailError::Store(e)) => Err(e.into()),
            Err(TailError::BadClaim(e)) => {
                let why = format!(
                    "{e}. This partition is stopped: the claims chain cannot be followed. Inspect the claim \
                     (`verify`), then restart"
                );
                self.metrics.emit(Event::PartitionStopped { tp, reason: StopReason::UnreadableClaim, why: &why });
                Ok(None)
            }
        }
    }

    /// Runs `op` (requests to the store, each tried as often as the patience it is given says) once in a
    /// turn at the store; if the store failed transiently, again outside the turns, for as long as it
    /// takes: a failing store (or a throttled folder) holds no turn up from the recoveries it answers.
    async fn in_turn<T, E, Fut>(&self, op: impl Fn(Patience) -> Fut, transient: impl Fn(&E) -> bool) -> Result<T, E>
    where
        Fut: std::future::Future<Output = Result<T, E>>,
        E: std::fmt::Display,
    {
        let first = {
            let _turn = self.turns.acquire().await.expect("the recoveries' semaphore is never closed");
            op(Patience::Attempts(1)).await
        };
        match first {
            Err(e) if transient(&e) => {
                let watch = Some((&self.metrics.list_retries, &self.metrics.store_up));
                back_off("recovery, leaving its turn at the store", &e, 0, watch).await;
                op(Patience::Forever).await
            }
            other => other,
        }
    }

    /// The topic's identity, asked for until the brokers tell it (the partition is not ready meanwhile),
    /// or until the partition is revoked (`None`).
    async fn identity_of(&self, tp: &TopicPartition, epoch: u64) -> Option<TopicIdentity> {
        let backoff = Backoff::default();
        self.metrics.emit(Event::TopicIdWait { waiting: true });
        let mut attempt = 0;
        let identity = loop {
            if !self.recovering.wanted(tp, epoch) {
                break None;
            }
            let (lookup, topic) = (self.topic_ids.clone(), tp.topic().to_string());
            let why = match tokio::task::spawn_blocking(move || lookup.lookup(&topic)).await {
                Ok(Ok(identity)) => break Some(identity),
                Ok(Err(why)) => why,
                Err(e) => format!("the lookup failed: {e}"),
            };
            self.metrics.emit(Event::TopicIdUnknown { tp, why: &why });
            tokio::time::sleep(backoff.delay(attempt, fastrand::f64())).await;
            attempt += 1;
        };
        self.metrics.emit(Event::TopicIdWait { waiting: false });
        identity
    }
}

/// Why a partition whose archive belongs to another incarnation of its topic is stopped, and what to do.
fn other_incarnation(tp: &TopicPartition, mismatch: IncarnationMismatch) -> String {
    match mismatch {
        IncarnationMismatch::Other { archived, current } => format!(
            "the archive of {tp} holds topic ID {archived} but the topic now has ID {current}: it was deleted and \
             re-created, and its offsets started again at 0. This partition is stopped so that the new topic's \
             records never continue, fill or skip against the old archive; archive the new topic under another \
             --dest prefix (or move the old archive aside) and restart"
        ),
        IncarnationMismatch::Unverifiable { archived } => format!(
            "the archive of {tp} holds topic ID {archived}, but these brokers have no topic IDs, so whether the topic \
             is the one archived cannot be checked. This partition is stopped so that another incarnation's records \
             never continue the archive; check that --brokers is the cluster the archive came from (or archive \
             under another --dest prefix) and restart"
        ),
    }
}

/// Counts a recovery in progress (`/readyz` is not ready while any is) until dropped.
struct InProgress<'a>(&'a prometheus::IntGauge);

impl<'a> InProgress<'a> {
    fn start(gauge: &'a prometheus::IntGauge) -> Self {
        gauge.inc();
        Self(gauge)
    }
}

impl Drop for InProgress<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}

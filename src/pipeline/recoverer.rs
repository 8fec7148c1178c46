//! Recovering one partition's position from the archive: find the tail (the claims chain, or the data
//! objects where there are no claims), then plan where to resume (`core::recovery`). Owned, so the
//! recoveries of an assignment run concurrently off the pipeline.

use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::time::Instant;

use super::PipelineError;
use crate::core::object_key::Prefix;
use crate::core::partition::TopicPartition;
use crate::core::recovery::{check_incarnation, plan_resume, CommitHint, ResumePlan};
use crate::source::{AssignedPartition, ResumeAt};
use crate::store::ObjectStore;
use crate::tail::{find_tail, Patience, TailError, TailHints};
use crate::telemetry::events::RecoveryFinished;
use crate::telemetry::{Event, Metrics};

/// A recovery that ended (run off the pipeline's loop).
pub(super) enum Recovered {
    /// Newly assigned partitions; the consumer waits for their positions on `reply`.
    Assigned {
        partitions: Vec<AssignedPartition>,
        plans: Vec<Result<Option<ResumePlan>, PipelineError>>,
        reply: std_mpsc::SyncSender<Vec<(TopicPartition, ResumeAt)>>,
    },
    /// A partition whose uploader gave up its chain; the consumer is moved once it is recovered.
    Restarted {
        tp: TopicPartition,
        topic_id: Option<String>,
        from_epoch: u64,
        epoch: u64,
        plan: Box<Result<Option<ResumePlan>, PipelineError>>,
    },
}

pub(super) struct Recoverer {
    pub(super) store: Arc<dyn ObjectStore>,
    pub(super) prefix: Prefix,
    pub(super) claims: bool,
    pub(super) metrics: Arc<Metrics>,
}

impl Recoverer {
    /// Recovers one partition's position. `None`: the partition cannot be archived (reported): its
    /// chain cannot be followed, or it belongs to another incarnation of the topic than `topic_id`.
    pub(super) async fn recover(
        &self,
        tp: &TopicPartition,
        hint: Option<CommitHint>,
        (log_start, log_end): (Option<i64>, Option<i64>),
        topic_id: Option<&str>,
    ) -> Result<Option<ResumePlan>, PipelineError> {
        let started = Instant::now();
        let hints = TailHints { commit: hint, log_end };
        self.metrics.recoveries_in_progress.inc();
        // Retried for as long as it takes: meanwhile /readyz says why, and the consumer stays in the group.
        let found = find_tail(
            self.store.as_ref(),
            &self.prefix,
            tp,
            hints,
            self.claims,
            Patience::Forever,
            Some(&self.metrics),
        )
        .await;
        self.metrics.recoveries_in_progress.dec();
        let found = match found {
            Ok(found) => found,
            Err(TailError::Store(e)) => return Err(e.into()),
            Err(TailError::BadClaim(e)) => {
                let why = format!(
                    "{e}. This partition is stopped: the claims chain cannot be followed. Inspect the claim \
                     (`verify`), then restart"
                );
                self.metrics.emit(Event::PartitionStopped { tp, why: &why });
                return Ok(None);
            }
        };
        if let Err(other) = check_incarnation(found.last_claim.as_ref(), topic_id) {
            let why = format!(
                "the archive of {tp} holds topic ID {} but the topic now has ID {}: it was deleted and re-created, \
                 and its offsets started again at 0. This partition is stopped so that the new topic's records never \
                 continue, fill or skip against the old archive; archive the new topic under another --dest prefix \
                 (or move the old archive aside) and restart",
                other.archived, other.current
            );
            self.metrics.emit(Event::PartitionStopped { tp, why: &why });
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
        Ok(Some(plan))
    }
}

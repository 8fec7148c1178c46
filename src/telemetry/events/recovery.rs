//! Recovery's events: a partition's position recovered, a topic's folders looked at.

use std::time::Duration;

use tracing::{info, warn};

use super::super::metrics::Metrics;
use crate::archive::partition::TopicPartition;
use crate::recovery::tail::TopicSurvey;
use crate::recovery::ResumePlan;

/// A partition's position was recovered from the archive.
#[derive(Debug)]
pub struct RecoveryFinished<'a> {
    pub tp: &'a TopicPartition,
    pub plan: &'a ResumePlan,
    pub list_requests: u32,
    pub keys_seen: u64,
    pub hinted: bool,
    pub elapsed: Duration,
}

/// What an assignment's look at a topic's folders found (`Err`: why it could not look; its
/// partitions then list their own folders).
#[derive(Debug)]
pub struct TopicSurveyed<'a> {
    pub topic: &'a str,
    pub partitions: usize,
    pub survey: Result<TopicSurvey, String>,
    pub elapsed: Duration,
}

impl Metrics {
    pub(super) fn recovery_finished(&self, e: RecoveryFinished<'_>) {
        self.recoveries.inc();
        self.recovery_list_requests.inc_by(u64::from(e.list_requests));
        self.recovery_objects_seen.inc_by(e.keys_seen);
        self.recovery_seconds.observe(e.elapsed.as_secs_f64());
        self.archived_through(e.tp, e.plan.chain_next - 1, None);
        info!(
            tp = %e.tp,
            consume_from = ?e.plan.consume_from,
            chain_next = e.plan.chain_next,
            list_requests = e.list_requests,
            keys_seen = e.keys_seen,
            hinted = e.hinted,
            ms = e.elapsed.as_millis() as u64,
            "recovered position from the archive"
        );
    }

    pub(super) fn topic_surveyed(&self, e: TopicSurveyed<'_>) {
        let (topic, partitions, ms) = (e.topic, e.partitions, e.elapsed.as_millis() as u64);
        match e.survey {
            Ok(s) => {
                self.recovery_list_requests.inc_by(u64::from(s.list_requests));
                match s.empty {
                    true => info!(
                        topic,
                        partitions,
                        list_requests = s.list_requests,
                        ms,
                        "the archive holds nothing of this topic yet: its partitions recover without listing their own \
                         folders"
                    ),
                    false => info!(
                        topic,
                        partitions,
                        list_requests = s.list_requests,
                        ms,
                        "the archive holds this topic: recovering each partition from its folders"
                    ),
                }
            }
            Err(why) => {
                warn!(topic, partitions, "could not look at the topic's folders ({why}); each partition lists its own")
            }
        }
    }
}

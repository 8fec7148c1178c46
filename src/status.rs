//! `status`: where every partition stands — archived-through offset (from the archive, listing as
//! recovery does: a couple of requests per partition from the commit hint), the group's committed
//! offset and the log's offsets (from Kafka), what is not archived yet, the newest object's time, and
//! flags where they disagree in a way that matters.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use futures::stream::{self, StreamExt};
use serde::Serialize;
use thiserror::Error;

use crate::core::object_key::Prefix;
use crate::core::partition::TopicPartition;
use crate::core::recovery::CommitHint;
use crate::core::status::{partition_status, PartitionStatus};
use crate::source::offsets::{partition_offsets, OffsetsError, PartitionOffsets};
use crate::store::ObjectStore;
use crate::tail::{find_tail, Patience, TailError, TailHints};

/// Tries of each store request before `status` reports the error.
const STATUS_ATTEMPTS: u32 = 8;

#[derive(Debug, Error)]
pub enum StatusError {
    #[error(transparent)]
    Kafka(#[from] OffsetsError),
    #[error("reading the archive of {tp}: {source}")]
    Archive { tp: TopicPartition, source: TailError },
    #[error("reading Kafka's offsets failed: {0}")]
    Join(#[from] tokio::task::JoinError),
}

#[derive(Debug, Clone)]
pub struct StatusOptions {
    pub prefix: Prefix,
    pub topics: Vec<String>,
    pub brokers: String,
    pub props: Vec<(String, String)>,
    pub group: String,
}

#[derive(Debug, Serialize)]
pub struct StatusReport {
    pub archive: String,
    pub group: String,
    pub list_requests: u64,
    pub partitions: Vec<PartitionStatus>,
}

impl StatusReport {
    /// One table per topic, a row per partition.
    pub fn table(&self) -> String {
        let mut out = format!("archive {}  group {}\n", self.archive, self.group);
        let opt = |v: Option<i64>| v.map_or("-".to_string(), |v| v.to_string());
        let mut by_topic: BTreeMap<&str, Vec<&PartitionStatus>> = BTreeMap::new();
        for p in &self.partitions {
            by_topic.entry(&p.topic).or_default().push(p);
        }
        for (topic, parts) in by_topic {
            let mut rows = vec![[
                "PARTITION",
                "ARCHIVED-THROUGH",
                "COMMITTED",
                "LOG-START",
                "LOG-END",
                "UNARCHIVED",
                "NEWEST-OBJECT",
                "FLAGS",
            ]
            .map(String::from)
            .to_vec()];
            for p in parts {
                let mut flags: Vec<String> = p.flags.iter().map(|f| f.as_str().to_string()).collect();
                if let Some(start) = p.pending_claim {
                    flags.push(format!("claim {start} in flight"));
                }
                rows.push(vec![
                    p.partition.to_string(),
                    opt(p.archived_through),
                    opt(p.committed),
                    p.log_start.to_string(),
                    p.log_end.to_string(),
                    p.unarchived.to_string(),
                    p.newest_object_ms.map_or("-".into(), |ms| {
                        humantime::format_rfc3339_seconds(
                            std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms as u64),
                        )
                        .to_string()
                    }),
                    if flags.is_empty() { "-".into() } else { flags.join(", ") },
                ]);
            }
            let _ = write!(out, "\ntopic {topic}\n{}", crate::table::render(&rows));
        }
        let flagged = self.partitions.iter().filter(|p| !p.flags.is_empty()).count();
        let _ = write!(
            out,
            "\n{} partitions, {flagged} flagged; {} list requests",
            self.partitions.len(),
            self.list_requests
        );
        out
    }
}

pub async fn status(store: &dyn ObjectStore, opts: &StatusOptions) -> Result<StatusReport, StatusError> {
    let (brokers, props, group, topics) =
        (opts.brokers.clone(), opts.props.clone(), opts.group.clone(), opts.topics.clone());
    let offsets =
        tokio::task::spawn_blocking(move || partition_offsets(&brokers, &props, Some(&group), &topics)).await??;
    let results: Vec<Result<(PartitionStatus, u32), StatusError>> = stream::iter(offsets)
        .map(|(tp, PartitionOffsets { log, committed, topic_id })| async move {
            let hint = committed.as_ref().and_then(|c| CommitHint::parse(c.0, &c.1));
            let hints = TailHints { commit: hint, log_end: Some(log.log_end) };
            let found = find_tail(store, &opts.prefix, &tp, hints, true, Patience::Attempts(STATUS_ATTEMPTS), None)
                .await
                .map_err(|source| StatusError::Archive { tp: tp.clone(), source })?;
            let row = partition_status(
                &tp,
                &found.tail,
                found.last_claim.as_ref(),
                committed.as_ref().map(|c| c.0),
                log,
                topic_id.as_deref(),
            );
            Ok((row, found.list_requests))
        })
        .buffered(16)
        .collect()
        .await;
    let mut partitions = Vec::new();
    let mut list_requests = 0;
    for r in results {
        let (row, requests) = r?;
        partitions.push(row);
        list_requests += u64::from(requests);
    }
    Ok(StatusReport { archive: store.describe(), group: opts.group.clone(), list_requests, partitions })
}

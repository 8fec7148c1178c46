//! `status`: where every partition stands — archived-through offset (from the archive, listing as
//! recovery does: a couple of requests per partition from the commit hint), the group's committed
//! offset and the log's offsets (from Kafka), what is not archived yet, the newest object's time, and
//! flags where they disagree in a way that matters.

pub mod cli;
pub mod tables;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use futures::stream::{self, StreamExt};
use serde::Serialize;
use thiserror::Error;
use tracing::warn;

use crate::archive::completeness::{final_through, topic_final_through, Lateness, PartitionProgress};
use crate::archive::group_offsets::{GroupOffsetsSnapshot, SnapshotError};
use crate::archive::object_key::Prefix;
use crate::archive::time_bucket::{BucketWidth, TimeSource};
use crate::clock::rfc3339;
use crate::commands::restore::translate::snapshots_at;
use crate::recovery::standing::PartitionStatus;
use crate::recovery::tail::{inspect, InspectError, Inspected};
use crate::source::offsets::{read_log, OffsetsError};
use crate::store::{ObjectStore, StoreError};
use tables::TableStatus;

#[derive(Debug, Error)]
pub enum StatusError {
    #[error(transparent)]
    Kafka(#[from] OffsetsError),
    #[error(transparent)]
    Archive(#[from] InspectError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
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
    pub topics: Vec<TopicStatus>,
    pub partitions: Vec<PartitionStatus>,
    /// With a catalog (`--iceberg-catalog`), where each topic's table stands.
    pub tables: Vec<TableStatus>,
}

/// A topic's time buckets: which are complete (see `archive::completeness`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TopicStatus {
    pub topic: String,
    /// `day` or `hour` when its last objects are in time-bucket folders.
    pub time_buckets: Option<&'static str>,
    /// Every bucket that ends at or before this time (ms since the epoch) is complete: no object will be
    /// added to its folders. `None`: none is known to be yet.
    pub complete_through_ms: Option<i64>,
    /// The same, RFC 3339.
    pub complete_through: Option<String>,
    /// How late the brokers let the topic's records be stamped (ms); `None`: unbounded.
    pub lateness_bound_ms: Option<i64>,
    /// The latest snapshot of its consumer groups' offsets in the archive (`run --archive-group-offsets`).
    pub group_offsets: Option<GroupOffsetsStatus>,
}

/// A snapshot of consumer groups' committed offsets: where, when, and which groups.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GroupOffsetsStatus {
    pub key: String,
    /// When its offsets were read, RFC 3339.
    pub read: String,
    pub groups: Vec<String>,
}

/// Per topic, from its partitions' progress.
fn topic_statuses(
    rows: &[(PartitionStatus, PartitionProgress)],
    lateness: &BTreeMap<String, Lateness>,
    log_read_ms: i64,
) -> Vec<TopicStatus> {
    let mut by_topic: BTreeMap<&str, Vec<&PartitionProgress>> = BTreeMap::new();
    for (row, progress) in rows {
        by_topic.entry(row.topic.as_str()).or_default().push(progress);
    }
    by_topic
        .into_iter()
        .map(|(topic, parts)| {
            let width = parts.iter().filter_map(|p| p.last_bucket).map(|b| b.width()).max_by_key(|w| w.millis());
            let bound = lateness.get(topic).copied().unwrap_or(Lateness::Unbounded);
            // A partition without claims yet is bucketed as the others say they are.
            let by_arrival = parts.iter().any(|p| p.time_source == Some(TimeSource::Arrival));
            let default = by_arrival.then_some(TimeSource::Arrival);
            let through = width.and_then(|width| {
                topic_final_through(
                    parts.iter().map(|p| final_through(&p.bucketed_by_default(default), width, bound, log_read_ms)),
                )
            });
            TopicStatus {
                topic: topic.to_string(),
                time_buckets: width.map(|w| match w {
                    BucketWidth::Day => "day",
                    BucketWidth::Hour => "hour",
                }),
                complete_through_ms: through,
                complete_through: through.map(rfc3339),
                lateness_bound_ms: match bound {
                    Lateness::Bounded(ms) => Some(ms),
                    Lateness::Unbounded => None,
                },
                group_offsets: None,
            }
        })
        .collect()
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
                    p.newest_object_ms.map_or("-".into(), rfc3339),
                    if flags.is_empty() { "-".into() } else { flags.join(", ") },
                ]);
            }
            let _ = write!(out, "\ntopic {topic}\n{}", crate::commands::grid::render(&rows));
            if let Some(t) = self.topics.iter().find(|t| t.topic == topic && t.time_buckets.is_some()) {
                let through = t.complete_through.as_deref().unwrap_or("no bucket yet");
                let _ = writeln!(out, "time buckets complete through {through}");
            }
            self.tables.iter().filter(|t| t.topic == topic).for_each(|t| t.line(&mut out));
            if let Some(g) = self.topics.iter().find(|t| t.topic == topic).and_then(|t| t.group_offsets.as_ref()) {
                let _ = writeln!(out, "group offsets kept {} ({}): {}", g.read, g.groups.join(", "), g.key);
            }
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
    // Read before the log ends: a record appended after them arrived after this time.
    let log_read_ms = crate::clock::wall_clock_ms();
    let (lateness, offsets) = read_log(&opts.brokers, &opts.props, &opts.group, &opts.topics).await?;
    let results: Vec<Result<Inspected, InspectError>> = stream::iter(offsets)
        .map(|(tp, offsets)| inspect(store, &opts.prefix, tp, offsets))
        .buffered(16)
        .collect()
        .await;
    let mut rows = Vec::new();
    let mut list_requests = 0;
    for r in results {
        let Inspected { row, progress, list_requests: requests } = r?;
        rows.push((row, progress));
        list_requests += u64::from(requests);
    }
    let mut topics = topic_statuses(&rows, &lateness, log_read_ms);
    for topic in &mut topics {
        // Not worth failing the whole status for: said, and left out.
        topic.group_offsets = group_offsets(store, &opts.prefix, &topic.topic)
            .await
            .inspect_err(|e| warn!(topic = topic.topic, "the latest snapshot of group offsets cannot be read: {e}"))
            .ok()
            .flatten();
    }
    let partitions = rows.into_iter().map(|(row, _)| row).collect();
    let (archive, group) = (store.describe(), opts.group.clone());
    Ok(StatusReport { archive, group, list_requests, topics, partitions, tables: Vec::new() })
}

/// The latest snapshot of the topic's consumer groups' offsets, if the archive holds one.
async fn group_offsets(
    store: &dyn ObjectStore,
    prefix: &Prefix,
    topic: &str,
) -> Result<Option<GroupOffsetsStatus>, StatusError> {
    let mut keys = snapshots_at(store, prefix, topic, None, true).await?;
    if keys.is_empty() {
        keys = snapshots_at(store, prefix, topic, None, false).await?;
    }
    let Some(key) = keys.into_iter().next() else { return Ok(None) };
    let snapshot = GroupOffsetsSnapshot::from_json(&key, &store.get(&key).await?)?;
    let groups = snapshot.groups.into_keys().collect();
    Ok(Some(GroupOffsetsStatus { key, read: rfc3339(snapshot.read_ms), groups }))
}

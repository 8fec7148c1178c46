//! `_SUCCESS` markers: once a time bucket of an archived topic is complete (`core::completeness`: no
//! object will ever be added to its folders), one small JSON object is put, if absent, into the bucket's
//! folder, so a scheduled job can wait for it. Every instance looks now and then; whichever sees a
//! bucket complete first writes its marker, the others' puts meet a 412. Partitions owned by other
//! instances count through what the archive shows.
//!
//! Markers are written in bucket order, one for every bucket from the topic's first on (empty ones
//! too: "this hour is complete, and had no records"), so the buckets with a marker are always a prefix
//! of the topic's buckets: after a restart, the first bucket without one is found with a few HEADs.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::stream::{self, StreamExt};
use thiserror::Error;
use tracing::{info, warn};

use crate::core::completeness::{bucket_of_key, final_through, marker_key, topic_final_through, Lateness, Marker};
use crate::core::object_key::Prefix;
use crate::core::recovery::ListRequest;
use crate::core::spool::SpoolData;
use crate::core::time_bucket::{Bucket, BucketWidth, TimeSource};
use crate::pipeline::{wall_clock_ms, AssignedTopics};
use crate::status::{inspect, read_log, Inspected, StatusError};
use crate::store::{ObjectStore, PutOutcome, StoreError};
use crate::telemetry::Metrics;

#[derive(Debug, Error)]
enum MarkerError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Status(#[from] StatusError),
}

pub struct MarkerSettings {
    pub prefix: Prefix,
    /// The topics named in the subscription; those a regex matches are learnt from the assignments.
    pub topics: Vec<String>,
    pub assigned: AssignedTopics,
    pub width: BucketWidth,
    /// This archiver's time source: what bucketed a partition whose claims do not say (it has none yet).
    pub source: TimeSource,
    pub brokers: String,
    pub kafka_props: Vec<(String, String)>,
    /// The archivers' group: its commits are the hints that make finding each partition's tail cheap.
    pub group: String,
    pub writer_id: String,
    pub interval: Duration,
}

/// What is known of one topic between looks.
#[derive(Default)]
struct TopicMarkers {
    /// The first bucket without a marker, once found.
    next: Option<Bucket>,
    /// Per partition: up to when its buckets are final, and its highest archived offset then (kept, so
    /// a partition already past the next bucket is not looked at again).
    partitions: HashMap<i32, (i64, Option<i64>)>,
}

/// Looks every `interval` for complete buckets and marks them, until the task is aborted.
pub async fn run(store: Arc<dyn ObjectStore>, settings: MarkerSettings, metrics: Arc<Metrics>) {
    let mut topics: HashMap<String, TopicMarkers> = HashMap::new();
    loop {
        tokio::time::sleep(settings.interval).await;
        let mut names = settings.topics.clone();
        names.extend(settings.assigned.snapshot());
        names.sort();
        names.dedup();
        for topic in &names {
            let state = topics.entry(topic.clone()).or_default();
            match mark_topic(store.as_ref(), &settings, topic, state).await {
                Ok(written) => metrics.markers_written.inc_by(written),
                Err(e) => warn!("looking for complete time buckets of {topic} failed (tried again later): {e}"),
            }
        }
    }
}

/// Writes the markers of the topic's buckets that became complete; returns how many it created.
async fn mark_topic(
    store: &dyn ObjectStore,
    s: &MarkerSettings,
    topic: &str,
    state: &mut TopicMarkers,
) -> Result<u64, MarkerError> {
    let next = match state.next {
        Some(next) => next,
        None => match first_unmarked(store, s, topic).await? {
            Some(next) => *state.next.insert(next),
            None => return Ok(0), // Nothing archived in time buckets yet.
        },
    };
    let log_read_ms = wall_clock_ms();
    if next.end_ms() > log_read_ms {
        return Ok(0); // Not over yet.
    }
    let through = look(store, s, topic, state, next, log_read_ms).await?;
    let mut bucket = next;
    let mut written = 0;
    while through.is_some_and(|t| bucket.end_ms() <= t) {
        written += u64::from(put_marker(store, s, topic, &bucket, state).await? == PutOutcome::Created);
        bucket = bucket.next();
        state.next = Some(bucket);
    }
    Ok(written)
}

/// Up to when the topic's buckets are complete: every partition not already known to be final past
/// `next` is looked at (its tail in the archive, its log end).
async fn look(
    store: &dyn ObjectStore,
    s: &MarkerSettings,
    topic: &str,
    state: &mut TopicMarkers,
    next: Bucket,
    log_read_ms: i64,
) -> Result<Option<i64>, MarkerError> {
    let (lateness, offsets) = read_log(&s.brokers, &s.kafka_props, &s.group, &[topic.to_string()]).await?;
    let bound = lateness.get(topic).copied().unwrap_or(Lateness::Unbounded);
    let partitions = offsets.len();
    let stale: Vec<_> = offsets
        .into_iter()
        .filter(|(tp, _)| state.partitions.get(&tp.partition()).is_none_or(|(t, _)| *t < next.end_ms()))
        .collect();
    let inspected: Vec<Result<Inspected, _>> =
        stream::iter(stale).map(|(tp, offsets)| inspect(store, &s.prefix, tp, offsets)).buffered(16).collect().await;
    for i in inspected {
        let Inspected { row, progress, .. } = i?;
        let progress = progress.bucketed_by_default(Some(s.source));
        if let Some(t) = final_through(&progress, s.width, bound, log_read_ms) {
            state.partitions.insert(row.partition, (t, row.archived_through));
        }
    }
    if state.partitions.len() < partitions {
        return Ok(None); // Some partition has no final bucket yet.
    }
    Ok(topic_final_through(state.partitions.values().map(|(t, _)| Some(*t))))
}

async fn put_marker(
    store: &dyn ObjectStore,
    s: &MarkerSettings,
    topic: &str,
    bucket: &Bucket,
    state: &TopicMarkers,
) -> Result<PutOutcome, StoreError> {
    let marker = Marker {
        topic: topic.to_string(),
        bucket: bucket.to_string(),
        start_ms: bucket.start_ms(),
        end_ms: bucket.end_ms(),
        partitions: state.partitions.len(),
        archived_through: state
            .partitions
            .iter()
            .filter_map(|(p, (_, a))| Some((*p, (*a)?)))
            .collect::<BTreeMap<_, _>>(),
        writer: s.writer_id.clone(),
        time_ms: wall_clock_ms(),
    };
    let body = serde_json::to_vec(&marker).expect("a marker serialises");
    let key = marker_key(&s.prefix, topic, bucket);
    let len = body.len() as u64;
    let outcome = store.put_if_absent(&key, &SpoolData::Memory(Bytes::from(body)), len).await?;
    if outcome == PutOutcome::Created {
        info!(key, "time bucket complete: marker written");
    }
    Ok(outcome)
}

/// The topic's first bucket without a marker: from its first bucket (the first key listed), galloping
/// forward over the markers (a prefix of the buckets), then bisecting. `None`: no bucket yet.
async fn first_unmarked(
    store: &dyn ObjectStore,
    s: &MarkerSettings,
    topic: &str,
) -> Result<Option<Bucket>, StoreError> {
    let req = ListRequest { prefix: s.prefix.topic_folder(topic), start_after: None };
    let page = store.list(&req, 1000).await?;
    let Some(first) = page.keys.iter().find_map(|k| bucket_of_key(&s.prefix, topic, k)) else { return Ok(None) };
    let first = Bucket::containing(s.width, first.start_ms());
    let marked = |n: i64| async move { store.head(&marker_key(&s.prefix, topic, &first.nth_after(n))).await };
    if marked(0).await?.is_none() {
        return Ok(Some(first));
    }
    // Marked: `lo`; not marked: `hi`.
    let (mut lo, mut hi) = (0i64, 1i64);
    while marked(hi).await?.is_some() {
        lo = hi;
        hi *= 2;
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if marked(mid).await?.is_some() {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(Some(first.nth_after(hi)))
}

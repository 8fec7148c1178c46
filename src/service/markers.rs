//! `_SUCCESS` markers: once a time bucket of an archived topic is complete (`archive::completeness`: no
//! object will ever be added to its folders), one small JSON object is put, if absent, into the bucket's
//! folder, so a scheduled job can wait for it. Every instance looks now and then; whichever sees a
//! bucket complete first writes its marker, the others' puts meet a 412. Partitions owned by other
//! instances count through what the archive shows.
//!
//! Markers are written in bucket order, one for every bucket from the topic's first on (empty ones
//! too: "this hour is complete, and had no records"), so the buckets with a marker are always a prefix
//! of the topic's buckets: after a restart, the first bucket without one is found with a few HEADs.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::stream::{self, StreamExt};
use thiserror::Error;
use tracing::info;

use crate::archive::claim::covering_claim;
use crate::archive::claim::ClaimKey;
use crate::archive::completeness::{
    bucket_of_key, final_through, folder_timestamps, marker_key, topic_final_through, Lateness, Marker,
};
use crate::archive::keys::classify;
use crate::archive::keys::ListRequest;
use crate::archive::object_key::{ObjectKey, Prefix};
use crate::archive::partition::TopicPartition;
use crate::archive::time_bucket::{Bucket, BucketWidth, Bucketing};
use crate::clock::wall_clock_ms;
use crate::encode::spool::SpoolData;
use crate::pipeline::{AssignedTopics, TopicProfiles};
use crate::recovery::claims::claimed_timestamps;
use crate::recovery::tail::{inspect, InspectError, Inspected};
use crate::source::offsets::{read_log, OffsetsError};
use crate::store::{list_all, list_between, ObjectStore, PutOutcome, StoreError};
use crate::telemetry::{Event, Metrics};

/// How many offsets before an object the listing for its claim starts (and by what it grows).
const CLAIMS_LOOK_BACK: i64 = 1024;

#[derive(Debug, Error)]
enum MarkerError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Kafka(#[from] OffsetsError),
    #[error(transparent)]
    Archive(#[from] InspectError),
}

pub struct MarkerOptions {
    pub prefix: Prefix,
    /// The topics named in the subscription; those a regex matches are learnt from the assignments.
    pub topics: Vec<String>,
    pub assigned: AssignedTopics,
    /// Each topic's time buckets (topics without are not looked at); their time source is what bucketed
    /// a partition whose claims do not say (it has none yet).
    pub profiles: Arc<TopicProfiles>,
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
pub async fn run(store: Arc<dyn ObjectStore>, settings: MarkerOptions, metrics: Arc<Metrics>) {
    let mut topics: HashMap<String, TopicMarkers> = HashMap::new();
    loop {
        tokio::time::sleep(settings.interval).await;
        let mut names = settings.topics.clone();
        names.extend(settings.assigned.snapshot());
        names.sort();
        names.dedup();
        for topic in &names {
            let Some(bucketing) = settings.profiles.for_topic(topic).bucketing else { continue };
            let state = topics.entry(topic.clone()).or_default();
            let outcome =
                mark_topic(store.as_ref(), &settings, topic, bucketing, state).await.map_err(|e| e.to_string());
            metrics.emit(Event::MarkersLooked { topic, outcome: outcome.as_ref().copied().map_err(String::as_str) });
        }
    }
}

/// Writes the markers of the topic's buckets that became complete; returns how many it created.
async fn mark_topic(
    store: &dyn ObjectStore,
    s: &MarkerOptions,
    topic: &str,
    bucketing: Bucketing,
    state: &mut TopicMarkers,
) -> Result<u64, MarkerError> {
    let next = match state.next {
        Some(next) => next,
        None => match first_unmarked(store, s, topic, bucketing.width).await? {
            Some(next) => *state.next.insert(next),
            None => return Ok(0), // Nothing archived in time buckets yet.
        },
    };
    let log_read_ms = wall_clock_ms();
    if next.end_ms() > log_read_ms {
        return Ok(0); // Not over yet.
    }
    let through = look(store, s, topic, bucketing, state, next, log_read_ms).await?;
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
    s: &MarkerOptions,
    topic: &str,
    bucketing: Bucketing,
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
        let progress = progress.bucketed_by_default(Some(bucketing.source));
        if let Some(t) = final_through(&progress, bucketing.width, bound, log_read_ms) {
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
    s: &MarkerOptions,
    topic: &str,
    bucket: &Bucket,
    state: &TopicMarkers,
) -> Result<PutOutcome, StoreError> {
    let (objects, timestamps) = folder_summary(store, &s.prefix, topic, bucket).await?;
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
        objects: Some(objects),
        timestamps,
        writer: s.writer_id.clone(),
        time_ms: wall_clock_ms(),
    };
    let body = serde_json::to_vec(&marker).expect("a marker serialises");
    let key = marker_key(&s.prefix, topic, bucket);
    let len = body.len() as u64;
    let outcome = store.put_if_absent(&key, &SpoolData::memory(Bytes::from(body)), len).await?;
    if outcome == PutOutcome::Created {
        info!(key, "time bucket complete: marker written");
    }
    Ok(outcome)
}

/// What a complete folder's marker says of its objects: how many, and the span of their records'
/// timestamps, read from their claims once here so that a restore by time reads one marker instead of a
/// claim per object. Complete, the folder gets no more objects, and each of its claims has its object.
async fn folder_summary(
    store: &dyn ObjectStore,
    prefix: &Prefix,
    topic: &str,
    bucket: &Bucket,
) -> Result<(u64, Option<(i64, i64)>), StoreError> {
    let mut by_partition: BTreeMap<i32, Vec<ObjectKey>> = BTreeMap::new();
    for raw in list_all(store, &prefix.bucket_folder(topic, bucket)).await? {
        if let Some(key) = classify(prefix, &raw).data().filter(|k| k.bucket == Some(*bucket)) {
            by_partition.entry(key.tp.partition()).or_default().push(key);
        }
    }
    let objects = by_partition.values().map(|k| k.len() as u64).sum();
    let listed: Vec<Result<Vec<ClaimLookup>, StoreError>> = stream::iter(by_partition.into_values())
        .map(|keys| async move {
            let (first, last) = (&keys[0], &keys[keys.len() - 1]);
            let starts = claim_starts(store, prefix, &first.tp, first.range.start(), last.range.start()).await?;
            Ok(keys.iter().map(|k| (k.clone(), covering_claim(&starts, k.range.start()))).collect())
        })
        .buffer_unordered(16)
        .collect()
        .await;
    let mut lookups = Vec::new();
    for partition in listed {
        lookups.extend(partition?);
    }
    let times: Vec<Result<Option<(i64, i64)>, StoreError>> = stream::iter(lookups)
        .map(|(k, start)| async move {
            let Some(start) = start else { return Ok(None) };
            claimed_timestamps(store, prefix, &k, start).await
        })
        .buffer_unordered(16)
        .collect()
        .await;
    Ok((objects, folder_timestamps(times.into_iter().collect::<Result<Vec<_>, _>>()?)))
}

/// An object and the chain start of the claim covering it, if any.
type ClaimLookup = (ObjectKey, Option<i64>);

/// The chain starts of the partition's claims from the one covering offset `first` through those
/// starting at or before `last`. The covering claim starts at `first` unless records before it were
/// never archived (a gap, control records): the listing starts a little earlier, then further back.
async fn claim_starts(
    store: &dyn ObjectStore,
    prefix: &Prefix,
    tp: &TopicPartition,
    first: i64,
    last: i64,
) -> Result<BTreeSet<i64>, StoreError> {
    let through = ClaimKey::new(prefix.clone(), tp.clone(), last).to_string();
    let mut back = CLAIMS_LOOK_BACK;
    loop {
        let from = first.saturating_sub(back);
        let req = ListRequest {
            prefix: prefix.claims_folder(tp),
            start_after: Some(ClaimKey::start_after(prefix, tp, from)),
        };
        let (keys, _) = list_between(store, req, Some(&through)).await?;
        let starts: BTreeSet<i64> =
            keys.iter().filter_map(|k| classify(prefix, k).claim()).map(|c| c.chain_start).collect();
        if from == 0 || starts.first().is_some_and(|s| *s <= first) {
            return Ok(starts);
        }
        back = back.saturating_mul(CLAIMS_LOOK_BACK);
    }
}

/// The topic's first bucket without a marker: from its first bucket (the first key listed), galloping
/// forward over the markers (a prefix of the buckets), then bisecting. `None`: no bucket yet.
async fn first_unmarked(
    store: &dyn ObjectStore,
    s: &MarkerOptions,
    topic: &str,
    width: BucketWidth,
) -> Result<Option<Bucket>, StoreError> {
    let req = ListRequest { prefix: s.prefix.topic_folder(topic), start_after: None };
    let page = store.list(&req, 1000).await?;
    let Some(first) = page.keys.iter().find_map(|k| bucket_of_key(&s.prefix, topic, k)) else { return Ok(None) };
    let first = Bucket::containing(width, first.start_ms());
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::archive::claim::Claim;
    use crate::archive::object_key::FileKind;
    use crate::archive::partition::OffsetRange;
    use crate::store::LocalStore;

    pub(crate) const HOUR: i64 = 3_600_000;

    pub(crate) fn hour(h: i64) -> Bucket {
        Bucket::containing(BucketWidth::Hour, h * HOUR)
    }

    pub(crate) async fn put(store: &dyn ObjectStore, key: &str, body: Vec<u8>) {
        let len = body.len() as u64;
        store.put_if_absent(key, &SpoolData::memory(Bytes::from(body)), len).await.unwrap();
    }

    /// Archives [first, end] of partition `p` of topic `t` into `bucket`'s folder under prefix `a`,
    /// claimed from `chain_start`.
    pub(crate) async fn archive(
        store: &dyn ObjectStore,
        bucket: Bucket,
        p: i32,
        (chain_start, first, end): (i64, i64, i64),
        ts: Option<(i64, i64)>,
    ) {
        let prefix = Prefix::new("a");
        let tp = TopicPartition::new("t", p).unwrap();
        let range = OffsetRange::new(first, end).unwrap();
        let key = ObjectKey::new(prefix.clone(), tp.clone(), range, FileKind::Parquet).in_bucket(Some(bucket));
        put(store, &key.to_string(), b"data".to_vec()).await;
        let claim = Claim { timestamps: ts, ..Claim::for_test(chain_start, first, end) };
        put(store, &ClaimKey::new(prefix, tp, chain_start).to_string(), claim.to_json()).await;
    }

    #[tokio::test]
    async fn a_markers_summary_spans_its_folders_records_as_their_claims_say() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new(dir.path()).unwrap();
        archive(&store, hour(0), 0, (0, 0, 9), Some((10, 20))).await;
        archive(&store, hour(1), 0, (10, 10, 19), Some((HOUR - 5, HOUR + 7))).await;
        archive(&store, hour(1), 0, (20, 20, 29), Some((HOUR + 8, HOUR + 9))).await;
        archive(&store, hour(2), 0, (30, 30, 39), Some((2 * HOUR, 2 * HOUR))).await;
        // Partition 1's first object in hour 1 follows 5,000 offsets never archived (control records,
        // retention): its claim starts far before its first offset.
        archive(&store, hour(0), 1, (0, 0, 9), Some((1, 2))).await;
        archive(&store, hour(1), 1, (10, 5_000, 5_009), Some((HOUR + 1, HOUR + 20))).await;
        archive(&store, hour(3), 1, (5_010, 5_010, 5_019), None).await;
        let summary = |b: Bucket| {
            let store = &store;
            async move { folder_summary(store, &Prefix::new("a"), "t", &b).await.unwrap() }
        };
        assert_eq!(summary(hour(1)).await, (3, Some((HOUR - 5, HOUR + 20))));
        assert_eq!(summary(hour(0)).await, (2, Some((1, 20))));
        assert_eq!(summary(hour(2)).await, (1, Some((2 * HOUR, 2 * HOUR))));
        assert_eq!(summary(hour(3)).await, (1, None), "a claim that does not say makes the span unknown");
        assert_eq!(summary(hour(4)).await, (0, None), "an empty folder");
    }
}

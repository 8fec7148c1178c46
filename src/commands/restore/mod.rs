//! `restore`: an archived range back into a Kafka topic (or to stdout as JSON lines), per partition in
//! offset order, each offset once, with keys, values, headers and timestamps. Into Kafka, the producer
//! is idempotent and every record carries its source in a header; a re-run first reads the target
//! back and skips what it holds, so an interrupted restore resumes without duplicates. A complete run
//! leaves a summary of what the target holds in the target cluster (`summary`), so the next run reads
//! back only what came after it.

pub mod cli;
pub mod plan;
pub mod progress;

mod by_time;
mod kafka;
mod read_back;
mod summary;
pub mod translate;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::stream::{self, StreamExt};
use rdkafka::error::KafkaError;
use thiserror::Error;
use tokio::task::JoinSet;

use crate::archive::keys::{classify, ArchiveKey};
use crate::archive::object_key::{ObjectKey, Prefix};
use crate::archive::partition::{is_selected, TopicPartition};
use crate::archive::record::Record;
use crate::commands::restore::plan::{OffsetOnce, Partitioning, RestoreProgress, Selection};
use crate::encode::{decode, json_line, EncodeError};
use crate::retry::{Patience, Retrying};
use crate::store::{list_all, ObjectStore, StoreError};

/// Source partitions restored into Kafka at once, each by a task of its own (fetching, decoding and
/// producing its records in offset order).
const PARTITIONS_AT_ONCE: usize = 2;
/// Objects of a partition fetched and decoded ahead of the one being written.
const OBJECTS_AHEAD: usize = 2;

/// Tries of each store request before `restore` gives up.
const READ_ATTEMPTS: u32 = 8;

#[derive(Debug, Error)]
pub enum RestoreError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("object {key} cannot be decoded: {source}. Run `verify --deep` on the archive")]
    Decode { key: String, source: EncodeError },
    #[error(
        "object {key} holds {values} typed values without their bytes (archived with --value-format json, \
             without --keep-raw-value): restore them with --reencode-json, as JSON written from their columns \
             (same fields and values; key order, spacing, number and time formats may differ from what was produced)"
    )]
    NeedsReencode { key: String, values: u64 },
    #[error("Kafka {what} failed: {source}. Check --brokers and the --kafka settings; a re-run resumes where this one stopped")]
    Kafka { what: &'static str, source: KafkaError },
    #[error("target topic {topic:?} does not exist on {brokers}: create it first (restore does not create topics)")]
    NoTarget { topic: String, brokers: String },
    #[error("target topic {topic:?} has {partitions} partitions but the archive has partition {needed}: use --partitioning key, or a target with at least {} partitions", needed + 1)]
    TargetTooSmall { topic: String, partitions: i32, needed: i32 },
    #[error("writing to stdout failed: {0}")]
    Stdout(std::io::Error),
    #[error(
        "reading target topic {topic:?} back (to skip what an earlier run wrote) made no progress for {waited:?}: \
         check that every partition has a leader and the brokers answer, then run again (nothing was written)"
    )]
    ReadBackStalled { topic: String, waited: Duration },
    #[error("the archive holds no objects of topic {0:?} (for the selected partitions and offsets)")]
    Nothing(String),
    #[error(
        "the archive holds no snapshot of consumer group offsets for topic {topic:?}{} under {folder}: they are \
         taken by `run --archive-group-offsets GROUP_REGEX`",
        at_ms.map(|ms| format!(" taken at or before {ms} ms")).unwrap_or_default()
    )]
    NoSnapshot { topic: String, folder: String, at_ms: Option<i64> },
    #[error(
        "the snapshots of consumer group offsets for topic {topic:?} are of another incarnation of it (topic ID \
         {theirs}; the archive holds {archived}): the topic was deleted and created again since. Choose one taken \
         before that with --at"
    )]
    SnapshotOfAnotherIncarnation { topic: String, theirs: String, archived: String },
    #[error("{0}: it was not written by this archiver, or was damaged since; choose another with --at")]
    Snapshot(crate::archive::group_offsets::SnapshotError),
    #[error(
        "consumer group {group:?} is {state} on {brokers} ({members} members): its offsets can only be set while \
         nobody consumes in it. Stop its consumers, then run again (nothing was set for it)"
    )]
    GroupActive { group: String, state: String, members: usize, brokers: String },
}

#[derive(Debug, Clone)]
pub enum RestoreTarget {
    Stdout,
    Kafka { brokers: String, props: Vec<(String, String)>, topic: String, partitioning: Partitioning },
}

#[derive(Debug, Clone)]
pub struct RestoreOptions {
    pub prefix: Prefix,
    pub topic: String,
    /// Only these partitions (all when empty).
    pub partitions: Vec<i32>,
    pub selection: Selection,
    pub target: RestoreTarget,
    /// At most this many records per second (spares the target cluster during an incident).
    pub max_rate: Option<f64>,
    /// Typed values without their bytes may be restored as JSON re-encoded from their columns.
    pub reencode_json: bool,
}

/// Counters the progress display reads while the restore runs.
#[derive(Debug, Default)]
pub struct RestoreProgressCounters {
    /// Offsets the selected objects span (an upper bound of the records to restore).
    pub expected: AtomicU64,
    /// Records written (delivered to Kafka, or printed).
    pub written: AtomicU64,
    /// Key and value bytes written.
    pub bytes: AtomicU64,
    /// Records the target already held (an earlier, interrupted run wrote them).
    pub already_there: AtomicU64,
    /// Records skipped: outside the time selection, or repeated by overlapping objects.
    pub skipped: AtomicU64,
    /// Objects not read at all: their claims, or their folder's marker, say their records are outside
    /// the time selection.
    pub objects_skipped: AtomicU64,
    /// Time-bucket folders whose marker says their records are outside the time selection.
    pub folders_skipped: AtomicU64,
    /// Records of the target read back to learn what an earlier run wrote.
    pub read_back: AtomicU64,
}

impl RestoreProgressCounters {
    fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }

    /// Offsets dealt with so far (written, already there, skipped), and how many the selected objects
    /// span (at least as many).
    pub fn offsets(&self) -> (u64, u64) {
        let done = Self::get(&self.written) + Self::get(&self.already_there) + Self::get(&self.skipped);
        (done, Self::get(&self.expected).max(done))
    }

    /// What was written and skipped so far.
    pub fn summary(&self) -> String {
        format!(
            "restored {} records ({:.1} MB), {} already there, {} skipped, {} objects skipped by time \
             ({} time-bucket folders by their markers), {} records of the target read back",
            Self::get(&self.written),
            Self::get(&self.bytes) as f64 / 1e6,
            Self::get(&self.already_there),
            Self::get(&self.skipped),
            Self::get(&self.objects_skipped),
            Self::get(&self.folders_skipped),
            Self::get(&self.read_back),
        )
    }

    /// One line: the summary, offsets, rate, ETA.
    pub fn line(&self, elapsed: Duration) -> String {
        let (done, expected) = self.offsets();
        let rate = Self::get(&self.written) as f64 / elapsed.as_secs_f64().max(0.001);
        let eta = if rate > 0.0 { format!("{:.0}s", (expected - done) as f64 / rate) } else { "-".into() };
        format!("{}; {done}/~{expected} offsets; {rate:.0} records/s; ETA {eta}", self.summary())
    }
}

/// The selected objects of `topic`, per partition, in key (offset) order, and the `_SUCCESS` markers of
/// its complete time buckets.
async fn objects(store: &dyn ObjectStore, opts: &RestoreOptions) -> Result<(ByPartition, Vec<String>), StoreError> {
    let mut by_partition: ByPartition = BTreeMap::new();
    let mut markers = Vec::new();
    for raw in list_all(store, &opts.prefix.topic_folder(&opts.topic)).await? {
        let key = match classify(&opts.prefix, &raw) {
            ArchiveKey::Data(key) => key,
            ArchiveKey::Marker { .. } => {
                markers.push(raw);
                continue;
            }
            ArchiveKey::Claim(_) | ArchiveKey::Table | ArchiveKey::GroupOffsets(_) | ArchiveKey::Foreign => continue,
        };
        let wanted_partition = is_selected(&opts.partitions, key.tp.partition());
        if key.tp.topic() == opts.topic && wanted_partition && opts.selection.wants_object(key.range) {
            by_partition.entry(key.tp.partition()).or_default().push(key);
        }
    }
    for keys in by_partition.values_mut() {
        keys.sort_by_key(|k| (k.range.start(), k.range.end()));
    }
    Ok((by_partition, markers))
}

/// Selected objects per source partition.
type ByPartition = BTreeMap<i32, Vec<ObjectKey>>;

/// Leaves out the objects whose every selected offset the target holds a record of (nothing of them to
/// write, so nothing to fetch); how many records they hold.
fn skip_held_objects(held: &RestoreProgress, opts: &RestoreOptions, by_partition: &mut ByPartition) -> u64 {
    let mut skipped = 0;
    for (p, keys) in by_partition.iter_mut() {
        let source = TopicPartition::new(opts.topic.as_str(), *p).expect("parsed from a key");
        keys.retain(|k| match opts.selection.offsets_of(k.range) {
            Some((first, last)) if held.covers(&source, first, last) => {
                skipped += (last - first + 1) as u64;
                false
            }
            _ => true,
        });
    }
    skipped
}

/// Paces records to `--max-rate` across all partitions.
struct Pacer {
    rate: Option<f64>,
    sent: AtomicU64,
    started: Instant,
}

impl Pacer {
    async fn pace(&self) {
        let Some(rate) = self.rate else { return };
        let sent = self.sent.fetch_add(1, Ordering::Relaxed) + 1;
        let due = Duration::from_secs_f64(sent as f64 / rate);
        if let Some(wait) = due.checked_sub(self.started.elapsed()) {
            tokio::time::sleep(wait).await;
        }
    }
}

/// Where one partition's records go.
enum PartitionSink<'a> {
    Stdout { out: &'a mut std::io::BufWriter<std::io::Stdout>, line: Vec<u8> },
    Kafka { target: Arc<kafka::KafkaTarget>, deliveries: kafka::Deliveries },
}

impl PartitionSink<'_> {
    async fn write(
        &mut self,
        source: &TopicPartition,
        r: &Record,
        counters: &RestoreProgressCounters,
    ) -> Result<(), RestoreError> {
        match self {
            PartitionSink::Stdout { out, line } => {
                line.clear();
                json_line(r, Some((source.topic(), source.partition())), line)
                    .map_err(|source| RestoreError::Decode { key: "stdout".into(), source })?;
                out.write_all(line).map_err(RestoreError::Stdout)?;
                RestoreProgressCounters::add(&counters.written, 1);
                RestoreProgressCounters::add(&counters.bytes, r.payload_size());
                Ok(())
            }
            PartitionSink::Kafka { target, deliveries } => deliveries.send(target, source, r, counters).await,
        }
    }

    /// Awaits what is still on its way; what was delivered.
    async fn finish(self, counters: &RestoreProgressCounters) -> Result<kafka::Delivered, RestoreError> {
        match self {
            PartitionSink::Stdout { .. } => Ok(kafka::Delivered::default()),
            PartitionSink::Kafka { deliveries, .. } => deliveries.finish(counters).await,
        }
    }
}

/// One source partition's selected objects, fetched and decoded a few ahead, each offset once, in order;
/// what it delivered.
async fn restore_partition(
    store: Arc<dyn ObjectStore>,
    opts: Arc<RestoreOptions>,
    source: TopicPartition,
    keys: Vec<ObjectKey>,
    pacer: Arc<Pacer>,
    counters: Arc<RestoreProgressCounters>,
    mut sink: PartitionSink<'_>,
) -> Result<kafka::Delivered, RestoreError> {
    let mut once = OffsetOnce::default();
    let reencode_json = opts.reencode_json;
    let mut decoded = stream::iter(keys)
        .map(|key| {
            let store = store.clone();
            async move {
                let name = key.to_string();
                let bytes = store.get(&name).await?;
                let decoded = tokio::task::spawn_blocking(move || decode(key.kind, bytes))
                    .await
                    .expect("decoding does not panic")
                    .map_err(|source| RestoreError::Decode { key: name.clone(), source })?;
                if decoded.reencoded > 0 && !reencode_json {
                    return Err(RestoreError::NeedsReencode { key: name, values: decoded.reencoded });
                }
                Ok(decoded.records)
            }
        })
        .buffered(OBJECTS_AHEAD);
    let selection = &opts.selection;
    while let Some(records) = decoded.next().await {
        for r in records? {
            if !once.first_time(r.offset) || !selection.wants(&r) {
                if selection.from_offset.is_none_or(|f| r.offset >= f)
                    && selection.to_offset.is_none_or(|t| r.offset <= t)
                {
                    RestoreProgressCounters::add(&counters.skipped, 1);
                }
                continue;
            }
            pacer.pace().await;
            sink.write(&source, &r, &counters).await?;
        }
    }
    sink.finish(&counters).await
}

pub async fn restore(
    store: Arc<dyn ObjectStore>,
    opts: &RestoreOptions,
    counters: &Arc<RestoreProgressCounters>,
) -> Result<(), RestoreError> {
    let store: Arc<dyn ObjectStore> = Arc::new(Retrying::new(store, Patience::Attempts(READ_ATTEMPTS), None));
    let (mut by_partition, markers) = objects(store.as_ref(), opts).await?;
    if opts.selection.by_time() {
        let by_markers = by_time::skip_by_markers(store.as_ref(), opts, &markers, &mut by_partition).await?;
        let by_claims = by_time::skip_by_claims(store.as_ref(), opts, &by_markers.read, &mut by_partition).await?;
        counters.folders_skipped.store(by_markers.folders, Ordering::Relaxed);
        counters.objects_skipped.store(by_markers.objects + by_claims, Ordering::Relaxed);
    }
    if by_partition.is_empty() {
        return Err(RestoreError::Nothing(opts.topic.clone()));
    }
    let expected: u64 = by_partition.values().flatten().map(|k| opts.selection.offsets_in(k.range)).sum();
    counters.expected.store(expected, Ordering::Relaxed);
    let pacer = Arc::new(Pacer { rate: opts.max_rate, sent: AtomicU64::new(0), started: Instant::now() });
    let opts = Arc::new(opts.clone());
    let source = |p: i32| TopicPartition::new(opts.topic.as_str(), p).expect("parsed from a key");
    match &opts.target {
        RestoreTarget::Stdout => {
            let mut out = std::io::BufWriter::new(std::io::stdout());
            for (p, keys) in by_partition {
                let sink = PartitionSink::Stdout { out: &mut out, line: Vec::new() };
                restore_partition(store.clone(), opts.clone(), source(p), keys, pacer.clone(), counters.clone(), sink)
                    .await?;
            }
            out.flush().map_err(RestoreError::Stdout)
        }
        RestoreTarget::Kafka { brokers, props, topic, partitioning } => {
            let source_partitions: Vec<i32> = by_partition.keys().copied().collect();
            let target = Arc::new(tokio::task::block_in_place(|| {
                kafka::KafkaTarget::open(brokers, props, topic, *partitioning, &source_partitions)
            })?);
            counters.read_back.store(target.start.read, Ordering::Relaxed);
            let held_before = skip_held_objects(&target.start.progress, &opts, &mut by_partition);
            RestoreProgressCounters::add(&counters.already_there, held_before);
            let mut delivered = kafka::Delivered::default();
            // Dropping the set (on an error) stops the partitions still running.
            let mut running = JoinSet::new();
            let mut pending = by_partition.into_iter();
            loop {
                while running.len() < PARTITIONS_AT_ONCE {
                    let Some((p, keys)) = pending.next() else { break };
                    let sink = PartitionSink::Kafka { target: target.clone(), deliveries: Default::default() };
                    let (store, opts, pacer, counters) = (store.clone(), opts.clone(), pacer.clone(), counters.clone());
                    running.spawn(restore_partition(store, opts, source(p), keys, pacer, counters, sink));
                }
                match running.join_next().await {
                    None => break,
                    Some(Ok(done)) => delivered.merge(done?),
                    Some(Err(e)) => std::panic::resume_unwind(e.into_panic()),
                }
            }
            target.flush().await?;
            tokio::task::block_in_place(|| target.leave_summary(brokers, props, &delivered));
            Ok(())
        }
    }
}

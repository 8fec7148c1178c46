//! `restore`: an archived range back into a Kafka topic (or to stdout as JSON lines), per partition in
//! offset order, each offset once, with keys, values, headers and timestamps. Into Kafka, the producer
//! is idempotent and every record carries its source in a header; a re-run first reads the target
//! back and skips what it holds, so an interrupted restore resumes without duplicates.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::stream::{self, StreamExt};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header as KafkaHeader, Headers, Message};
use rdkafka::producer::{DeliveryFuture, FutureProducer, Producer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use thiserror::Error;
use tracing::info;

use crate::core::claim::{Claim, ClaimKey};
use crate::core::encode::{decode, json_line, EncodeError};
use crate::core::object_key::{ObjectKey, Prefix};
use crate::core::partition::TopicPartition;
use crate::core::restore::{
    covering_claim, parse_source_header, source_header_value, target_partition, OffsetOnce, Partitioning,
    RestoreProgress, Selection, SOURCE_HEADER,
};
use crate::source::convert::{kafka_headers, to_future_record};
use crate::store::{list_all, ObjectStore, StoreError};

/// How long the target must stay silent before reading it back is considered complete.
const READ_BACK_IDLE: Duration = Duration::from_secs(3);
/// How long a target partition may lack a leader (a topic created moments ago) before restore gives up.
const LEADER_PATIENCE: Duration = Duration::from_secs(30);
/// Deliveries awaited at most at once before sending more.
const MAX_IN_FLIGHT: usize = 20_000;

#[derive(Debug, Error)]
pub enum RestoreError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("object {key} cannot be decoded: {source}. Run `verify --deep` on the archive")]
    Decode { key: String, source: EncodeError },
    #[error("Kafka {what} failed: {source}. Check --brokers and the --kafka settings; a re-run resumes where this one stopped")]
    Kafka { what: &'static str, source: KafkaError },
    #[error("target topic {topic:?} does not exist on {brokers}: create it first (restore does not create topics)")]
    NoTarget { topic: String, brokers: String },
    #[error("target topic {topic:?} has {partitions} partitions but the archive has partition {needed}: use --partitioning key, or a target with at least {} partitions", needed + 1)]
    TargetTooSmall { topic: String, partitions: i32, needed: i32 },
    #[error("writing to stdout failed: {0}")]
    Stdout(std::io::Error),
    #[error("the archive holds no objects of topic {0:?} (for the selected partitions and offsets)")]
    Nothing(String),
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
    /// Objects not read at all: their claims say their records are outside the time selection.
    pub objects_skipped: AtomicU64,
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
            "restored {} records ({:.1} MB), {} already there, {} skipped, {} objects skipped by time",
            Self::get(&self.written),
            Self::get(&self.bytes) as f64 / 1e6,
            Self::get(&self.already_there),
            Self::get(&self.skipped),
            Self::get(&self.objects_skipped),
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

/// The selected objects of `topic`, per partition, in key (offset) order.
async fn objects(store: &dyn ObjectStore, opts: &RestoreOptions) -> Result<BTreeMap<i32, Vec<ObjectKey>>, StoreError> {
    let mut by_partition: BTreeMap<i32, Vec<ObjectKey>> = BTreeMap::new();
    for raw in list_all(store, &opts.prefix.topic_folder(&opts.topic)).await? {
        let Ok(key) = ObjectKey::parse(&opts.prefix, &raw) else { continue };
        let wanted_partition = opts.partitions.is_empty() || opts.partitions.contains(&key.tp.partition());
        if key.tp.topic() == opts.topic && wanted_partition && opts.selection.wants_object(key.range) {
            by_partition.entry(key.tp.partition()).or_default().push(key);
        }
    }
    for keys in by_partition.values_mut() {
        keys.sort_by_key(|k| (k.range.start(), k.range.end()));
    }
    Ok(by_partition)
}

/// With a time selection: drops the objects whose claims say their records' timestamps are all outside
/// it (one small GET per object instead of reading it); returns how many were dropped. Objects without
/// a claim that describes them exactly, or without timestamps in it, are kept.
async fn skip_by_time(
    store: &dyn ObjectStore,
    opts: &RestoreOptions,
    by_partition: &mut BTreeMap<i32, Vec<ObjectKey>>,
) -> Result<u64, StoreError> {
    let mut starts: BTreeMap<i32, BTreeSet<i64>> = BTreeMap::new();
    for raw in list_all(store, &opts.prefix.claims_topic_folder(&opts.topic)).await? {
        if let Ok(c) = ClaimKey::parse(&opts.prefix, &raw) {
            starts.entry(c.tp.partition()).or_default().insert(c.chain_start);
        }
    }
    let lookups: Vec<(ObjectKey, Option<i64>)> = by_partition
        .values()
        .flatten()
        .map(|k| (k.clone(), starts.get(&k.tp.partition()).and_then(|s| covering_claim(s, k.range.start()))))
        .collect();
    let outside: Vec<Option<ObjectKey>> = stream::iter(lookups)
        .map(|(object, claim_start)| async move {
            let Some(start) = claim_start else { return Ok(None) };
            let key = ClaimKey::new(opts.prefix.clone(), object.tp.clone(), start).to_string();
            let claim = match store.get(&key).await {
                Ok(body) => Claim::from_json(&key, &body).ok(),
                Err(StoreError::NotFound(_)) => None,
                Err(e) => return Err(e),
            };
            let describes = claim.filter(|c| c.data() == object.range);
            let skip = describes.and_then(|c| c.timestamps).is_some_and(|range| !opts.selection.wants_times(range));
            Ok(skip.then_some(object))
        })
        .buffer_unordered(16)
        .collect::<Vec<Result<Option<ObjectKey>, StoreError>>>()
        .await
        .into_iter()
        .collect::<Result<_, _>>()?;
    let outside: BTreeSet<String> = outside.into_iter().flatten().map(|k| k.to_string()).collect();
    for keys in by_partition.values_mut() {
        keys.retain(|k| !outside.contains(&k.to_string()));
    }
    by_partition.retain(|_, keys| !keys.is_empty());
    Ok(outside.len() as u64)
}

/// Where records go.
enum Sink {
    Stdout { out: std::io::BufWriter<std::io::Stdout>, line: Vec<u8> },
    Kafka(Box<KafkaSink>),
}

struct KafkaSink {
    producer: FutureProducer,
    topic: String,
    partitioning: Partitioning,
    partitions: i32,
    /// What the target held when the restore started.
    progress: RestoreProgress,
    in_flight: VecDeque<(DeliveryFuture, u64)>,
}

fn kafka_err(what: &'static str) -> impl Fn(KafkaError) -> RestoreError {
    move |source| RestoreError::Kafka { what, source }
}

impl KafkaSink {
    /// Connects, checks the target, and reads it back to learn what an earlier run already restored.
    fn open(
        brokers: &str,
        props: &[(String, String)],
        topic: &str,
        partitioning: Partitioning,
        source_partitions: &[i32],
    ) -> Result<Self, RestoreError> {
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", brokers)
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .set("linger.ms", "10")
            .set("message.timeout.ms", "300000");
        for (k, v) in props {
            config.set(k, v);
        }
        let producer: FutureProducer = config.create().map_err(kafka_err("creating the producer"))?;
        let metadata = producer
            .client()
            .fetch_metadata(Some(topic), Duration::from_secs(15))
            .map_err(kafka_err("reading the target topic's metadata"))?;
        let partitions =
            metadata.topics().first().filter(|t| t.error().is_none()).map_or(0, |t| t.partitions().len() as i32);
        if partitions == 0 {
            return Err(RestoreError::NoTarget { topic: topic.to_string(), brokers: brokers.to_string() });
        }
        if let Some(needed) = source_partitions.iter().copied().filter(|p| *p >= partitions).max() {
            if partitioning == Partitioning::Same {
                return Err(RestoreError::TargetTooSmall { topic: topic.to_string(), partitions, needed });
            }
        }
        let progress = read_back(brokers, props, topic, partitions)?;
        Ok(Self { producer, topic: topic.to_string(), partitioning, partitions, progress, in_flight: VecDeque::new() })
    }

    async fn send(
        &mut self,
        source: &TopicPartition,
        r: &crate::core::record::Record,
        counters: &RestoreProgressCounters,
    ) -> Result<(), RestoreError> {
        let partition = target_partition(self.partitioning, source.partition(), r.key.as_deref(), self.partitions);
        if self.progress.is_done(source, r.offset, partition) {
            RestoreProgressCounters::add(&counters.already_there, 1);
            return Ok(());
        }
        let origin = source_header_value(source, r.offset);
        let headers = kafka_headers(r).insert(KafkaHeader { key: SOURCE_HEADER, value: Some(origin.as_bytes()) });
        let topic = self.topic.clone();
        let mut record = to_future_record(&topic, partition, r, headers);
        let size = r.payload_size();
        loop {
            match self.producer.send_result(record) {
                Ok(delivery) => {
                    self.in_flight.push_back((delivery, size));
                    break;
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    record = back;
                    if !self.settle_one(counters).await? {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                }
                Err((source, _)) => return Err(RestoreError::Kafka { what: "producing", source }),
            }
        }
        while self.in_flight.len() > MAX_IN_FLIGHT {
            self.settle_one(counters).await?;
        }
        Ok(())
    }

    /// Awaits the oldest delivery; `false` when none is in flight.
    async fn settle_one(&mut self, counters: &RestoreProgressCounters) -> Result<bool, RestoreError> {
        let Some((delivery, size)) = self.in_flight.pop_front() else { return Ok(false) };
        match delivery.await {
            Ok(Ok(_)) => {
                RestoreProgressCounters::add(&counters.written, 1);
                RestoreProgressCounters::add(&counters.bytes, size);
                Ok(true)
            }
            Ok(Err((source, _))) => Err(RestoreError::Kafka { what: "delivering a record", source }),
            Err(_) => Err(RestoreError::Kafka { what: "delivering a record", source: KafkaError::Canceled }),
        }
    }

    async fn finish(mut self, counters: &RestoreProgressCounters) -> Result<(), RestoreError> {
        while self.settle_one(counters).await? {}
        tokio::task::block_in_place(|| self.producer.flush(Duration::from_secs(60)))
            .map_err(kafka_err("flushing the producer"))
    }
}

/// Reads every target partition back and collects what earlier restores delivered (their headers).
/// Ends when the target stays silent for `READ_BACK_IDLE` (broker watermarks are not trusted for this:
/// some brokers report them wrong). Skipped when every partition is empty.
fn read_back(
    brokers: &str,
    props: &[(String, String)],
    topic: &str,
    partitions: i32,
) -> Result<RestoreProgress, RestoreError> {
    let mut progress = RestoreProgress::default();
    let mut consumer_config = ClientConfig::new();
    consumer_config.set("bootstrap.servers", brokers);
    for (k, v) in props {
        consumer_config.set(k, v);
    }
    consumer_config.set("group.id", "kafka-s3-archiver-restore-read-back").set("enable.auto.commit", "false");
    let consumer: BaseConsumer = consumer_config.create().map_err(kafka_err("creating the read-back consumer"))?;
    let mut tpl = TopicPartitionList::new();
    let mut any = false;
    for p in 0..partitions {
        let (low, high) = until_led(LEADER_PATIENCE, Duration::from_millis(200), || {
            consumer.fetch_watermarks(topic, p, Duration::from_secs(15))
        })
        .map_err(kafka_err("reading the target's offsets"))?;
        any |= high > low;
        tpl.add_partition_offset(topic, p, Offset::Beginning).map_err(kafka_err("assigning the target"))?;
    }
    if !any {
        return Ok(progress);
    }
    consumer.assign(&tpl).map_err(kafka_err("assigning the target"))?;
    let mut last = Instant::now();
    let mut read = 0u64;
    while last.elapsed() < READ_BACK_IDLE {
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(msg)) => {
                last = Instant::now();
                read += 1;
                let origin =
                    msg.headers().and_then(|hs| hs.iter().find(|h| h.key == SOURCE_HEADER).and_then(|h| h.value));
                if let Some((source, offset)) = origin.and_then(parse_source_header) {
                    progress.delivered(&source, offset, msg.partition());
                }
            }
            Some(Err(e)) => return Err(RestoreError::Kafka { what: "reading the target back", source: e }),
            None => {}
        }
    }
    info!(topic, records = read, "read the target back to skip what an earlier restore wrote");
    Ok(progress)
}

/// Whether `e` says a partition has no leader yet (a topic created moments ago, or a leader moving).
fn leaderless(e: &KafkaError) -> bool {
    matches!(
        e.rdkafka_error_code(),
        Some(
            RDKafkaErrorCode::NotLeaderForPartition
                | RDKafkaErrorCode::LeaderNotAvailable
                | RDKafkaErrorCode::UnknownTopicOrPartition
        )
    )
}

/// Runs `op` until it succeeds, fails otherwise than for a missing leader, or `patience` has passed.
fn until_led<T>(
    patience: Duration,
    pause: Duration,
    mut op: impl FnMut() -> Result<T, KafkaError>,
) -> Result<T, KafkaError> {
    let started = Instant::now();
    loop {
        match op() {
            Err(e) if leaderless(&e) && started.elapsed() < patience => std::thread::sleep(pause),
            other => return other,
        }
    }
}

pub async fn restore(
    store: Arc<dyn ObjectStore>,
    opts: &RestoreOptions,
    counters: &RestoreProgressCounters,
) -> Result<(), RestoreError> {
    let mut by_partition = objects(store.as_ref(), opts).await?;
    if opts.selection.by_time() {
        let skipped = skip_by_time(store.as_ref(), opts, &mut by_partition).await?;
        counters.objects_skipped.store(skipped, Ordering::Relaxed);
    }
    if by_partition.is_empty() {
        return Err(RestoreError::Nothing(opts.topic.clone()));
    }
    let expected: u64 = by_partition.values().flatten().map(|k| opts.selection.offsets_in(k.range)).sum();
    counters.expected.store(expected, Ordering::Relaxed);
    let mut sink = match &opts.target {
        RestoreTarget::Stdout => Sink::Stdout { out: std::io::BufWriter::new(std::io::stdout()), line: Vec::new() },
        RestoreTarget::Kafka { brokers, props, topic, partitioning } => {
            let source_partitions: Vec<i32> = by_partition.keys().copied().collect();
            Sink::Kafka(Box::new(tokio::task::block_in_place(|| {
                KafkaSink::open(brokers, props, topic, *partitioning, &source_partitions)
            })?))
        }
    };
    let started = Instant::now();
    let mut sent = 0f64;
    for (partition, keys) in &by_partition {
        let source = TopicPartition::new(opts.topic.as_str(), *partition).expect("parsed from a key");
        let mut once = OffsetOnce::default();
        // Objects are fetched and decoded a few ahead of the one being written.
        let mut decoded = stream::iter(keys.iter().cloned())
            .map(|key| {
                let store = store.clone();
                async move {
                    let name = key.to_string();
                    let bytes = store.get(&name).await?;
                    tokio::task::spawn_blocking(move || decode(key.kind, bytes))
                        .await
                        .expect("decoding does not panic")
                        .map_err(|source| RestoreError::Decode { key: name, source })
                }
            })
            .buffered(4);
        while let Some(records) = decoded.next().await {
            for r in records? {
                if !once.first_time(r.offset) || !opts.selection.wants(&r) {
                    if opts.selection.from_offset.is_none_or(|f| r.offset >= f)
                        && opts.selection.to_offset.is_none_or(|t| r.offset <= t)
                    {
                        RestoreProgressCounters::add(&counters.skipped, 1);
                    }
                    continue;
                }
                if let Some(rate) = opts.max_rate {
                    sent += 1.0;
                    let due = Duration::from_secs_f64(sent / rate);
                    if let Some(wait) = due.checked_sub(started.elapsed()) {
                        tokio::time::sleep(wait).await;
                    }
                }
                match &mut sink {
                    Sink::Stdout { out, line } => {
                        line.clear();
                        json_line(&r, Some((&opts.topic, *partition)), line)
                            .map_err(|source| RestoreError::Decode { key: "stdout".into(), source })?;
                        out.write_all(line).map_err(RestoreError::Stdout)?;
                        RestoreProgressCounters::add(&counters.written, 1);
                        RestoreProgressCounters::add(&counters.bytes, r.payload_size());
                    }
                    Sink::Kafka(kafka) => kafka.send(&source, &r, counters).await?,
                }
            }
        }
    }
    match sink {
        Sink::Stdout { mut out, .. } => out.flush().map_err(RestoreError::Stdout),
        Sink::Kafka(kafka) => kafka.finish(counters).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metadata_error(code: RDKafkaErrorCode) -> KafkaError {
        KafkaError::MetadataFetch(code)
    }

    #[test]
    fn a_missing_leader_is_waited_for_other_errors_are_not() {
        let mut calls = 0;
        let answer = until_led(Duration::from_secs(5), Duration::ZERO, || {
            calls += 1;
            if calls < 4 {
                Err(metadata_error(RDKafkaErrorCode::NotLeaderForPartition))
            } else {
                Ok((0, 10))
            }
        });
        assert_eq!((answer.unwrap(), calls), ((0, 10), 4));

        let mut calls = 0;
        let answer: Result<(), _> = until_led(Duration::from_secs(5), Duration::ZERO, || {
            calls += 1;
            Err(metadata_error(RDKafkaErrorCode::TopicAuthorizationFailed))
        });
        assert!(answer.is_err());
        assert_eq!(calls, 1, "an authorization error is not retried");

        let answer: Result<(), _> = until_led(Duration::from_millis(30), Duration::from_millis(5), || {
            Err(metadata_error(RDKafkaErrorCode::LeaderNotAvailable))
        });
        assert!(answer.is_err(), "gives up after its patience");
    }
}

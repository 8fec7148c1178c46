//! Restoring into Kafka: the target topic (checked, and read back to skip what an earlier run wrote:
//! from where the last complete run's summary ends, else whole), each source partition's deliveries,
//! and the summary a complete run leaves for the next (`summary`).

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header as KafkaHeader, Message};
use rdkafka::producer::{DeliveryFuture, FutureProducer, Producer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use tracing::{info, warn};

use super::{summary, RestoreError, RestoreProgressCounters};
use crate::archive::partition::TopicPartition;
use crate::archive::record::Record;
use crate::commands::restore::plan::{
    parse_source_header, source_header_value, target_partition, Partitioning, RestoreProgress, SOURCE_HEADER,
};
use crate::source::convert::{kafka_headers, to_future_record};
use crate::source::topic_id::topic_ids;

/// How long reading the target back may go without a record or reaching a partition's end before
/// restore gives up (a partition without a leader, a broker that stopped answering).
const READ_BACK_PATIENCE: Duration = Duration::from_secs(120);
/// How long a target partition may lack a leader (a topic created moments ago) before restore gives up.
const LEADER_PATIENCE: Duration = Duration::from_secs(30);
/// Deliveries one source partition awaits at most at once before sending more.
const MAX_IN_FLIGHT_PER_PARTITION: usize = 5_000;
/// The group whose committed offsets in the target cluster hold the summaries of complete restores.
const READ_BACK_GROUP: &str = "kafka-s3-archiver-restore-read-back";
/// How long the brokers may take to answer a request about the target.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// The target topic, shared by the partitions restored at once.
pub(super) struct KafkaTarget {
    producer: FutureProducer,
    topic: String,
    partitioning: Partitioning,
    partitions: i32,
    /// What the target held when the restore started.
    progress: RestoreProgress,
    /// The target topic's ID (`-` when the brokers have none), as summaries record it; none when the
    /// brokers did not say (no summary is read or left then).
    topic_id: Option<String>,
    /// Records of the target read back at the start.
    pub(super) read_back: u64,
}

/// One source partition's records on their way: deliveries awaited in order, and those delivered.
#[derive(Default)]
pub(super) struct Deliveries {
    in_flight: VecDeque<(DeliveryFuture, u64, i64)>,
    source: Option<TopicPartition>,
    delivered: RestoreProgress,
}

fn kafka_err(what: &'static str) -> impl Fn(KafkaError) -> RestoreError {
    move |source| RestoreError::Kafka { what, source }
}

impl KafkaTarget {
    /// Connects, checks the target, and reads it back to learn what an earlier run already restored.
    pub(super) fn open(
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
        let topic_id = match topic_ids(producer.client(), &[topic.to_string()], REQUEST_TIMEOUT) {
            Ok(ids) => ids.get(topic).map(|id| id.id().unwrap_or("-").to_string()),
            Err(e) => {
                info!(topic, error = %e, "the target topic's ID is not known: the whole target is read back");
                None
            }
        };
        let (progress, read_back) =
            read_back(&consumer_config(brokers, props), topic, partitions, topic_id.as_deref())?;
        Ok(Self { producer, topic: topic.to_string(), partitioning, partitions, progress, topic_id, read_back })
    }

    /// What the target held when the restore started.
    pub(super) fn progress(&self) -> &RestoreProgress {
        &self.progress
    }

    /// Leaves the summary of what the target holds once every record of this run is delivered (`held`:
    /// what it held at the start and what this run delivered), for the next run to read back only what
    /// comes after. A summary that cannot be left costs the next run a whole read-back, nothing else.
    pub(super) fn leave_summary(&self, brokers: &str, props: &[(String, String)], held: &RestoreProgress) {
        let Some(topic_id) = self.topic_id.as_deref() else { return };
        // A summary trusts each delivery acknowledged: only one every replica in sync has is durable.
        if props.iter().any(|(k, v)| k == "acks" && v != "all" && v != "-1") {
            info!(
                topic = self.topic,
                "no summary left for a next run (acks is not all): it reads the target back whole"
            );
            return;
        }
        let left = commit_summary(&consumer_config(brokers, props), &self.topic, self.partitions, topic_id, held);
        match left {
            Ok(true) => info!(topic = self.topic, "left a summary of what the target holds for the next run"),
            Ok(false) => info!(
                topic = self.topic,
                "what the target holds is too large to summarize in its partitions: a next run reads it all back"
            ),
            Err(e) => warn!(topic = self.topic, error = %e, "could not leave a summary: a next run reads it all back"),
        }
    }

    /// Waits until every record sent is delivered.
    pub(super) async fn flush(&self) -> Result<(), RestoreError> {
        tokio::task::block_in_place(|| self.producer.flush(Duration::from_secs(60)))
            .map_err(kafka_err("flushing the producer"))
    }
}

impl Deliveries {
    /// Sends `r` from `source` unless the target holds it already.
    pub(super) async fn send(
        &mut self,
        target: &KafkaTarget,
        source: &TopicPartition,
        r: &Record,
        counters: &RestoreProgressCounters,
    ) -> Result<(), RestoreError> {
        let partition = target_partition(target.partitioning, source.partition(), r.key.as_deref(), target.partitions);
        if target.progress.is_done(source, r.offset) {
            RestoreProgressCounters::add(&counters.already_there, 1);
            return Ok(());
        }
        self.source.get_or_insert_with(|| source.clone());
        let origin = source_header_value(source, r.offset);
        let headers = kafka_headers(r).insert(KafkaHeader { key: SOURCE_HEADER, value: Some(origin.as_bytes()) });
        let mut record = to_future_record(&target.topic, partition, r, headers);
        let size = r.payload_size();
        loop {
            match target.producer.send_result(record) {
                Ok(delivery) => {
                    self.in_flight.push_back((delivery, size, r.offset));
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
        while self.in_flight.len() > MAX_IN_FLIGHT_PER_PARTITION {
            self.settle_one(counters).await?;
        }
        Ok(())
    }

    /// Awaits the oldest delivery; `false` when none is in flight.
    async fn settle_one(&mut self, counters: &RestoreProgressCounters) -> Result<bool, RestoreError> {
        let Some((delivery, size, offset)) = self.in_flight.pop_front() else { return Ok(false) };
        match delivery.await {
            Ok(Ok(_)) => {
                let source = self.source.as_ref().expect("set by the first send");
                self.delivered.delivered(source, offset);
                RestoreProgressCounters::add(&counters.written, 1);
                RestoreProgressCounters::add(&counters.bytes, size);
                Ok(true)
            }
            Ok(Err((source, _))) => Err(RestoreError::Kafka { what: "delivering a record", source }),
            Err(_) => Err(RestoreError::Kafka { what: "delivering a record", source: KafkaError::Canceled }),
        }
    }

    /// Awaits every delivery still in flight; what was delivered.
    pub(super) async fn finish(mut self, counters: &RestoreProgressCounters) -> Result<RestoreProgress, RestoreError> {
        while self.settle_one(counters).await? {}
        Ok(self.delivered)
    }
}

/// The settings of a consumer of the target in the read-back group (never a member: it assigns).
fn consumer_config(brokers: &str, props: &[(String, String)]) -> ClientConfig {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", brokers);
    for (k, v) in props {
        config.set(k, v);
    }
    config
        .set("group.id", READ_BACK_GROUP)
        .set("enable.auto.commit", "false")
        // The end of a partition is told, also when its last offsets hold no record to deliver
        // (transaction markers); uncommitted records are read too (restores write none).
        .set("enable.partition.eof", "true")
        .set("isolation.level", "read_uncommitted")
        // A summary's end that retention has deleted since: from the first record there is.
        .set("auto.offset.reset", "earliest");
    config
}

/// Reads the target back, up to where each partition ended when the restore started, and collects the
/// source offsets earlier restores delivered (their headers): from where the last complete run's
/// summary ends (`topic_id` given: the summary must be of that topic), else from the beginning. Records
/// produced to the target after the start are not this restore's (a live topic keeps being written
/// to). Returns what the target holds and how many records were read.
fn read_back(
    config: &ClientConfig,
    topic: &str,
    partitions: i32,
    topic_id: Option<&str>,
) -> Result<(RestoreProgress, u64), RestoreError> {
    let consumer: BaseConsumer = config.create().map_err(kafka_err("creating the read-back consumer"))?;
    let mut marks = Vec::new();
    for p in 0..partitions {
        marks.push(
            until_led(LEADER_PATIENCE, Duration::from_millis(200), || {
                consumer.fetch_watermarks(topic, p, REQUEST_TIMEOUT)
            })
            .map_err(kafka_err("reading the target's offsets"))?,
        );
    }
    if marks.iter().all(|(low, high)| high <= low) {
        return Ok((RestoreProgress::default(), 0));
    }
    let (mut progress, starts) = match topic_id.map(|id| from_summary(&consumer, topic, &marks, id)) {
        Some(Ok((progress, ends))) => {
            info!(topic, "read back only what the target received after the last complete restore's summary");
            (progress, ends.into_iter().map(Offset::Offset).collect())
        }
        Some(Err(why)) => {
            info!(topic, why, "no summary of a complete restore to start from: reading the whole target back");
            (RestoreProgress::default(), vec![Offset::Beginning; marks.len()])
        }
        None => (RestoreProgress::default(), vec![Offset::Beginning; marks.len()]),
    };
    let mut ends = BTreeMap::new();
    let mut tpl = TopicPartitionList::new();
    for ((p, (low, high)), start) in (0..).zip(marks).zip(starts) {
        let from = match start {
            Offset::Offset(end) => end.max(low),
            _ => low,
        };
        if high > from {
            ends.insert(p, high);
            tpl.add_partition_offset(topic, p, start).map_err(kafka_err("assigning the target"))?;
        }
    }
    let read = read_until(&consumer, topic, &tpl, ends, &mut progress)?;
    info!(topic, records = read, "read the target back to skip what an earlier restore wrote");
    if progress.holes() > 0 {
        warn!(
            topic,
            holes = progress.holes(),
            "an earlier restore failed and left holes in what it wrote (messages that timed out or were refused): \
             they are written now, after what it wrote, so each record is in the target once, but these are not in \
             their original order"
        );
    }
    Ok((progress, read))
}

/// Reads the partitions of `tpl` from their offsets up to their `ends`, adding the source offsets their
/// records name to `progress`; how many records were read.
fn read_until(
    consumer: &BaseConsumer,
    topic: &str,
    tpl: &TopicPartitionList,
    mut ends: BTreeMap<i32, i64>,
    progress: &mut RestoreProgress,
) -> Result<u64, RestoreError> {
    if ends.is_empty() {
        return Ok(0);
    }
    consumer.assign(tpl).map_err(kafka_err("assigning the target"))?;
    let mut last_progress = Instant::now();
    let mut read = 0u64;
    while !ends.is_empty() {
        let done = match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(msg)) => {
                read += 1;
                let headers = msg.headers().map(crate::source::headers::read).unwrap_or_default();
                let origin =
                    headers.iter().find(|h| h.key == SOURCE_HEADER.as_bytes()).and_then(|h| h.value.as_deref());
                if let Some((source, offset)) = origin.and_then(parse_source_header) {
                    progress.delivered(&source, offset);
                }
                Some(msg.partition()).filter(|p| ends.get(p).is_some_and(|end| msg.offset() + 1 >= *end))
            }
            // At the partition's end now, so past where it ended at the start.
            Some(Err(KafkaError::PartitionEOF(p))) => Some(p),
            Some(Err(e)) => return Err(RestoreError::Kafka { what: "reading the target back", source: e }),
            None if last_progress.elapsed() > READ_BACK_PATIENCE => {
                return Err(RestoreError::ReadBackStalled { topic: topic.to_string(), waited: READ_BACK_PATIENCE })
            }
            None => continue,
        };
        last_progress = Instant::now();
        if let Some(p) = done.filter(|p| ends.remove(p).is_some()) {
            let mut finished = TopicPartitionList::new();
            finished.add_partition(topic, p);
            // Nothing more of it is needed: records produced to it since are not ours to skip.
            let _ = consumer.pause(&finished);
        }
    }
    Ok(read)
}

/// The last complete restore's summary of what the target holds, and where each partition ended then;
/// else why there is none to use.
fn from_summary(
    consumer: &BaseConsumer,
    topic: &str,
    marks: &[(i64, i64)],
    topic_id: &str,
) -> Result<(RestoreProgress, Vec<i64>), String> {
    let mut tpl = TopicPartitionList::new();
    for p in 0..marks.len() as i32 {
        tpl.add_partition(topic, p);
    }
    let committed = consumer.committed_offsets(tpl, REQUEST_TIMEOUT).map_err(|e| format!("asking for it: {e}"))?;
    let (mut chunks, mut ends) = (Vec::new(), Vec::new());
    for (p, (_, high)) in (0..).zip(marks) {
        let elem = committed.find_partition(topic, p).ok_or_else(|| format!("partition {p} was not answered"))?;
        let Offset::Offset(end) = elem.offset() else { return Err(format!("partition {p} holds none")) };
        if end > *high {
            return Err(format!(
                "partition {p} ends at {high}, before the summary's {end} (created again or truncated)"
            ));
        }
        chunks.push(elem.metadata().to_string());
        ends.push(end);
    }
    let progress = summary::decode(&chunks.iter().map(String::as_str).collect::<Vec<_>>(), topic_id)?;
    Ok((progress, ends))
}

/// Commits the summary of `held` (what the target holds, all of it delivered) with each partition's end
/// now; false when it does not fit the partitions' metadata.
fn commit_summary(
    config: &ClientConfig,
    topic: &str,
    partitions: i32,
    topic_id: &str,
    held: &RestoreProgress,
) -> Result<bool, KafkaError> {
    let consumer: BaseConsumer = config.create()?;
    let nonce = format!("{:016x}", fastrand::u64(..));
    let Some(chunks) = summary::encode(held, topic_id, &nonce, partitions as usize) else { return Ok(false) };
    let mut tpl = TopicPartitionList::new();
    for (p, chunk) in (0..).zip(chunks) {
        // Every record this run delivered is below its partition's end now (acknowledged by all replicas).
        let (_, high) = consumer.fetch_watermarks(topic, p, REQUEST_TIMEOUT)?;
        let mut elem = tpl.add_partition(topic, p);
        elem.set_offset(Offset::Offset(high))?;
        elem.set_metadata(chunk);
    }
    consumer.commit(&tpl, CommitMode::Sync)?;
    Ok(true)
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

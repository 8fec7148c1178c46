//! Restoring into Kafka: the target topic (checked, and read back to skip what an earlier run wrote)
//! and each source partition's deliveries.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header as KafkaHeader, Message};
use rdkafka::producer::{DeliveryFuture, FutureProducer, Producer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use tracing::{info, warn};

use super::{RestoreError, RestoreProgressCounters};
use crate::archive::partition::TopicPartition;
use crate::archive::record::Record;
use crate::commands::restore::plan::{
    parse_source_header, source_header_value, target_partition, Partitioning, RestoreProgress, SOURCE_HEADER,
};
use crate::source::convert::{kafka_headers, to_future_record};

/// How long reading the target back may go without a record or reaching a partition's end before
/// restore gives up (a partition without a leader, a broker that stopped answering).
const READ_BACK_PATIENCE: Duration = Duration::from_secs(120);
/// How long a target partition may lack a leader (a topic created moments ago) before restore gives up.
const LEADER_PATIENCE: Duration = Duration::from_secs(30);
/// Deliveries one source partition awaits at most at once before sending more.
const MAX_IN_FLIGHT_PER_PARTITION: usize = 5_000;

/// The target topic, shared by the partitions restored at once.
pub(super) struct KafkaTarget {
    producer: FutureProducer,
    topic: String,
    partitioning: Partitioning,
    partitions: i32,
    /// What the target held when the restore started.
    progress: RestoreProgress,
}

/// One source partition's records on their way: deliveries awaited in order.
#[derive(Default)]
pub(super) struct Deliveries {
    in_flight: VecDeque<(DeliveryFuture, u64)>,
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
        let progress = read_back(brokers, props, topic, partitions)?;
        Ok(Self { producer, topic: topic.to_string(), partitioning, partitions, progress })
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
        let origin = source_header_value(source, r.offset);
        let headers = kafka_headers(r).insert(KafkaHeader { key: SOURCE_HEADER, value: Some(origin.as_bytes()) });
        let mut record = to_future_record(&target.topic, partition, r, headers);
        let size = r.payload_size();
        loop {
            match target.producer.send_result(record) {
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
        while self.in_flight.len() > MAX_IN_FLIGHT_PER_PARTITION {
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

    /// Awaits every delivery still in flight.
    pub(super) async fn finish(mut self, counters: &RestoreProgressCounters) -> Result<(), RestoreError> {
        while self.settle_one(counters).await? {}
        Ok(())
    }
}

/// Reads every target partition back, up to where it ended when the restore started, and collects the
/// source offsets earlier restores delivered (their headers). Records produced to the target after
/// that are not this restore's (a live topic keeps being written to). Skipped when every partition is
/// empty.
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
    consumer_config
        .set("group.id", "kafka-s3-archiver-restore-read-back")
        .set("enable.auto.commit", "false")
        // The end of a partition is told, also when its last offsets hold no record to deliver
        // (transaction markers); uncommitted records are read too (restores write none).
        .set("enable.partition.eof", "true")
        .set("isolation.level", "read_uncommitted");
    let consumer: BaseConsumer = consumer_config.create().map_err(kafka_err("creating the read-back consumer"))?;
    let mut ends = BTreeMap::new();
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        let (low, high) = until_led(LEADER_PATIENCE, Duration::from_millis(200), || {
            consumer.fetch_watermarks(topic, p, Duration::from_secs(15))
        })
        .map_err(kafka_err("reading the target's offsets"))?;
        if high > low {
            ends.insert(p, high);
            tpl.add_partition_offset(topic, p, Offset::Beginning).map_err(kafka_err("assigning the target"))?;
        }
    }
    if ends.is_empty() {
        return Ok(progress);
    }
    consumer.assign(&tpl).map_err(kafka_err("assigning the target"))?;
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

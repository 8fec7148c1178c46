//! Restoring into Kafka: the target topic (checked, and read back to skip what an earlier run wrote:
//! from where the last complete run's summary ends, else whole, `read_back`), each source partition's
//! deliveries, and the summary a complete run leaves for the next (`summary`).

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Header as KafkaHeader;
use rdkafka::producer::{DeliveryFuture, FutureProducer, Producer};
use tracing::{info, warn};

use super::read_back::{commit_summary, consumer_config, read_back, ReadBack, REQUEST_TIMEOUT};
use super::{RestoreError, RestoreProgressCounters};
use crate::archive::partition::TopicPartition;
use crate::archive::record::Record;
use crate::commands::restore::plan::{
    source_header_value, target_partition, Partitioning, RestoreProgress, SOURCE_HEADER,
};
use crate::source::convert::{kafka_headers, to_future_record};
use crate::source::offsets::partition_count;
use crate::source::topic_id::topic_ids;

/// Deliveries one source partition awaits at most at once before sending more.
const MAX_IN_FLIGHT_PER_PARTITION: usize = 5_000;

/// The target topic, shared by the partitions restored at once.
pub(super) struct KafkaTarget {
    producer: FutureProducer,
    topic: String,
    partitioning: Partitioning,
    partitions: i32,
    /// The target topic's ID (`-` when the brokers have none), as summaries record it; none when the
    /// brokers did not say (no summary is read or left then).
    topic_id: Option<String>,
    /// What the target held when the restore started, and where each partition ended then.
    pub(super) start: ReadBack,
}

/// What a run delivered: the source offsets, and how many records went to each target partition.
#[derive(Debug, Default)]
pub(super) struct Delivered {
    pub(super) progress: RestoreProgress,
    pub(super) per_partition: BTreeMap<i32, u64>,
}

impl Delivered {
    pub(super) fn merge(&mut self, other: Delivered) {
        self.progress.merge(&other.progress);
        for (p, n) in other.per_partition {
            *self.per_partition.entry(p).or_default() += n;
        }
    }
}

/// One source partition's records on their way: deliveries awaited in order, and those delivered.
#[derive(Default)]
pub(super) struct Deliveries {
    in_flight: VecDeque<(DeliveryFuture, u64, i64)>,
    source: Option<TopicPartition>,
    delivered: Delivered,
}

pub(super) fn kafka_err(what: &'static str) -> impl Fn(KafkaError) -> RestoreError {
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
        let partitions =
            partition_count(producer.client(), topic).map_err(kafka_err("reading the target topic's metadata"))?;
        if partitions == 0 {
            return Err(RestoreError::NoTarget { topic: topic.to_string(), brokers: brokers.to_string() });
        }
        if let Some(needed) = source_partitions.iter().copied().filter(|p| *p >= partitions).max() {
            if partitioning == Partitioning::Same {
                return Err(RestoreError::TargetTooSmall { topic: topic.to_string(), partitions, needed });
            }
        }
        let topic_id = target_topic_id(&producer, topic);
        let start = read_back(&consumer_config(brokers, props), topic, partitions, topic_id.as_deref())?;
        Ok(Self { producer, topic: topic.to_string(), partitioning, partitions, topic_id, start })
    }

    /// Leaves the summary of what the target holds once every record of this run is delivered, for the
    /// next run to read back only what comes after. A summary that cannot be left costs the next run a
    /// whole read-back, nothing else.
    pub(super) fn leave_summary(&self, brokers: &str, props: &[(String, String)], delivered: &Delivered) {
        let Some(topic_id) = self.topic_id.as_deref() else { return };
        // A summary trusts each delivery acknowledged: only one every replica in sync has is durable.
        let acks = ["acks", "request.required.acks"];
        if props.iter().any(|(k, v)| acks.contains(&k.as_str()) && v != "all" && v != "-1") {
            info!(
                topic = self.topic,
                "no summary left for a next run (acks is not all): it reads the target back whole"
            );
            return;
        }
        if target_topic_id(&self.producer, &self.topic).as_deref() != Some(topic_id) {
            warn!(topic = self.topic, "the target topic's ID could not be confirmed (or it changed): no summary left");
            return;
        }
        let mut held = self.start.progress.clone();
        held.merge(&delivered.progress);
        let config = consumer_config(brokers, props);
        match commit_summary(&config, &self.topic, topic_id, &held, &self.start.highs, &delivered.per_partition) {
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

/// The target topic's ID as summaries record it (`-` when the brokers have none); none when the brokers
/// did not say.
fn target_topic_id(producer: &FutureProducer, topic: &str) -> Option<String> {
    match topic_ids(producer.client(), &[topic.to_string()], REQUEST_TIMEOUT) {
        Ok(ids) => ids.get(topic).map(|id| id.id().unwrap_or("-").to_string()),
        Err(e) => {
            info!(topic, error = %e, "the target topic's ID is not known: no summary of an earlier restore is used");
            None
        }
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
        if target.start.progress.is_done(source, r.offset) {
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
            Ok(Ok(delivery)) => {
                let source = self.source.as_ref().expect("set by the first send");
                self.delivered.progress.delivered(source, offset);
                *self.delivered.per_partition.entry(delivery.partition).or_default() += 1;
                RestoreProgressCounters::add(&counters.written, 1);
                RestoreProgressCounters::add(&counters.bytes, size);
                Ok(true)
            }
            Ok(Err((source, _))) => Err(RestoreError::Kafka { what: "delivering a record", source }),
            Err(_) => Err(RestoreError::Kafka { what: "delivering a record", source: KafkaError::Canceled }),
        }
    }

    /// Awaits every delivery still in flight; what was delivered.
    pub(super) async fn finish(mut self, counters: &RestoreProgressCounters) -> Result<Delivered, RestoreError> {
        while self.settle_one(counters).await? {}
        Ok(self.delivered)
    }
}

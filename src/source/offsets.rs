//! What Kafka says of a topic's partitions — log start and end, and a group's committed offset — for
//! `verify --brokers` and `status`. A short-lived consumer that joins no group.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::topic_partition_list::TopicPartitionList;
use thiserror::Error;

use super::topic_id::topic_ids;
use crate::core::audit::LogOffsets;
use crate::core::partition::TopicPartition;

/// How long one metadata, watermark or committed-offsets request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

#[derive(Debug, Error)]
pub enum OffsetsError {
    #[error("cannot create a Kafka client: {0}. Check --brokers and the --kafka settings")]
    Create(KafkaError),
    #[error(
        "cannot read offsets from the Kafka brokers {brokers} within {REQUEST_TIMEOUT:?} ({source}). Check \
         --brokers, the network, and the TLS/SASL settings (--kafka)"
    )]
    Unreachable { brokers: String, source: KafkaError },
    #[error("topic {topic:?} does not exist on {brokers}: correct --topic")]
    UnknownTopic { topic: String, brokers: String },
}

/// One partition's offsets in Kafka.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionOffsets {
    pub log: LogOffsets,
    /// The group's committed offset and its metadata (when a group was named and it committed).
    pub committed: Option<(i64, String)>,
    /// The topic's ID (KIP-516), when the broker tells it.
    pub topic_id: Option<String>,
}

/// The offsets of every partition of `topics`, and the committed offsets of `group` when named. Blocks.
pub fn partition_offsets(
    brokers: &str,
    props: &[(String, String)],
    group: Option<&str>,
    topics: &[String],
) -> Result<BTreeMap<TopicPartition, PartitionOffsets>, OffsetsError> {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", brokers).set("enable.auto.commit", "false");
    if let Some(group) = group {
        config.set("group.id", group);
    }
    for (k, v) in props {
        config.set(k, v);
    }
    let consumer: BaseConsumer = config.create().map_err(OffsetsError::Create)?;
    let unreachable = |source| OffsetsError::Unreachable { brokers: brokers.to_string(), source };
    let unknown = |topic: &String| OffsetsError::UnknownTopic { topic: topic.clone(), brokers: brokers.to_string() };
    // Best effort: without IDs (an older broker), re-created topics are not recognised by their ID.
    let topic_ids = topic_ids(consumer.client(), topics, REQUEST_TIMEOUT).unwrap_or_default();
    let mut out = BTreeMap::new();
    for topic in topics {
        let metadata = consumer.fetch_metadata(Some(topic), REQUEST_TIMEOUT).map_err(unreachable)?;
        let partitions =
            metadata.topics().first().filter(|t| t.error().is_none()).map(|t| t.partitions().len()).unwrap_or(0);
        if partitions == 0 {
            return Err(unknown(topic));
        }
        let mut tpl = TopicPartitionList::new();
        for p in 0..partitions as i32 {
            tpl.add_partition(topic, p);
        }
        let committed = match group {
            Some(_) => Some(consumer.committed_offsets(tpl, REQUEST_TIMEOUT).map_err(unreachable)?),
            None => None,
        };
        for p in 0..partitions as i32 {
            let (log_start, log_end) = consumer.fetch_watermarks(topic, p, REQUEST_TIMEOUT).map_err(unreachable)?;
            let tp = TopicPartition::new(topic.as_str(), p).map_err(|_| unknown(topic))?;
            let committed = committed
                .as_ref()
                .and_then(|c| c.find_partition(topic, p))
                .and_then(|e| e.offset().to_raw().filter(|o| *o >= 0).map(|o| (o, e.metadata().to_string())));
            let log = LogOffsets { log_start, log_end };
            out.insert(tp, PartitionOffsets { log, committed, topic_id: topic_ids.get(topic).cloned() });
        }
    }
    Ok(out)
}

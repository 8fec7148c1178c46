//! What Kafka says of a topic's partitions — log start and end, and a group's committed offset — for
//! `verify --brokers` and `status`. A short-lived consumer that joins no group.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::client::{Client, ClientContext};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::topic_partition_list::TopicPartitionList;
use thiserror::Error;

use super::topic_config::topic_lateness;
use super::topic_id::topic_ids;
use crate::archive::completeness::Lateness;
use crate::archive::partition::TopicPartition;
use crate::recovery::{LogOffsets, PartitionOffsets, TopicIdentity};

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
    #[error(
        "the brokers {brokers} did not tell topic {topic:?}'s ID ({why}): without it, an archive of an earlier \
         incarnation of the topic cannot be told apart. Try again in a moment"
    )]
    TopicId { topic: String, brokers: String, why: String },
    #[error("reading Kafka's offsets failed: {0}")]
    Join(#[from] tokio::task::JoinError),
}

/// How many partitions `topic` has (0: it does not exist, or the brokers answered with an error for it).
pub fn partition_count<C: ClientContext>(client: &Client<C>, topic: &str) -> Result<i32, KafkaError> {
    let metadata = client.fetch_metadata(Some(topic), REQUEST_TIMEOUT)?;
    Ok(metadata.topics().first().filter(|t| t.error().is_none()).map_or(0, |t| t.partitions().len() as i32))
}

/// The offsets the consumer's group has committed on the partitions of `tpl` (none where it has none):
/// topic, partition, offset. Blocks.
pub fn committed_offsets(
    consumer: &BaseConsumer,
    tpl: TopicPartitionList,
) -> Result<Vec<(String, i32, i64)>, KafkaError> {
    let committed = consumer.committed_offsets(tpl, REQUEST_TIMEOUT)?;
    Ok(committed
        .elements()
        .iter()
        .filter_map(|e| e.offset().to_raw().filter(|o| *o >= 0).map(|o| (e.topic().to_string(), e.partition(), o)))
        .collect())
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
    let identities = identities(&consumer, brokers, topics)?;
    let mut out = BTreeMap::new();
    for topic in topics {
        let partitions = partition_count(consumer.client(), topic).map_err(unreachable)?;
        if partitions == 0 {
            return Err(unknown(topic));
        }
        let mut tpl = TopicPartitionList::new();
        for p in 0..partitions {
            tpl.add_partition(topic, p);
        }
        let committed = match group {
            Some(_) => Some(consumer.committed_offsets(tpl, REQUEST_TIMEOUT).map_err(unreachable)?),
            None => None,
        };
        for p in 0..partitions {
            let (log_start, log_end) = consumer.fetch_watermarks(topic, p, REQUEST_TIMEOUT).map_err(unreachable)?;
            let tp = TopicPartition::new(topic.as_str(), p).map_err(|_| unknown(topic))?;
            let committed = committed
                .as_ref()
                .and_then(|c| c.find_partition(topic, p))
                .and_then(|e| e.offset().to_raw().filter(|o| *o >= 0).map(|o| (o, e.metadata().to_string())));
            let log = LogOffsets { log_start, log_end };
            out.insert(tp, PartitionOffsets { log, committed, topic: identities[topic].clone() });
        }
    }
    Ok(out)
}

/// How often the topics' IDs are asked for before giving up (an answer with an error for a topic is
/// usual right after it was created or re-created).
const TOPIC_ID_ATTEMPTS: u32 = 3;

/// Every topic's identity, asked for a few times: an unknown ID is never taken as "no ID".
fn identities(
    consumer: &BaseConsumer,
    brokers: &str,
    topics: &[String],
) -> Result<BTreeMap<String, TopicIdentity>, OffsetsError> {
    let mut failed = None;
    for attempt in 0..TOPIC_ID_ATTEMPTS {
        if attempt > 0 {
            std::thread::sleep(Duration::from_secs(1));
        }
        failed = match topic_ids(consumer.client(), topics, REQUEST_TIMEOUT) {
            Ok(ids) => match topics.iter().find(|t| !ids.contains_key(*t)) {
                None => return Ok(ids),
                Some(missing) => Some((missing.clone(), "the brokers answered with an error for it".to_string())),
            },
            Err(e) => Some((topics.join(", "), e.to_string())),
        };
    }
    let (topic, why) = failed.unwrap_or_default();
    Err(OffsetsError::TopicId { topic, brokers: brokers.to_string(), why })
}

/// The topics' partitions' log and committed offsets, and each topic's lateness bound, read together.
pub async fn read_log(
    brokers: &str,
    props: &[(String, String)],
    group: &str,
    topics: &[String],
) -> Result<(BTreeMap<String, Lateness>, BTreeMap<TopicPartition, PartitionOffsets>), OffsetsError> {
    let (b, p, g, t) = (brokers.to_string(), props.to_vec(), group.to_string(), topics.to_vec());
    let offsets = tokio::task::spawn_blocking(move || partition_offsets(&b, &p, Some(&g), &t));
    let (lateness, offsets) = tokio::join!(topic_lateness(brokers, props, topics), offsets);
    Ok((lateness?, offsets??))
}

//! What Kafka says of a topic's partitions — log start and end, and a group's committed offset — for
//! `verify --brokers` and `status`. A short-lived consumer that joins no group.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use rdkafka::client::{Client, ClientContext};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::{KafkaError, KafkaResult};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use thiserror::Error;
use tracing::warn;

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
        let tps = (0..partitions).map(|p| TopicPartition::new(topic.as_str(), p)).collect::<Result<Vec<_>, _>>();
        let tps = tps.map_err(|_| unknown(topic))?;
        let logs = log_offsets(&consumer, &tps, REQUEST_TIMEOUT);
        for (p, tp) in (0..partitions).zip(tps) {
            let log = match logs.get(&tp) {
                Some(&log) => log,
                // Asked for again, for the brokers' own error (the first one ends the command).
                None => consumer
                    .fetch_watermarks(topic, p, REQUEST_TIMEOUT)
                    .map(|(log_start, log_end)| LogOffsets { log_start, log_end })
                    .map_err(unreachable)?,
            };
            let committed = committed
                .as_ref()
                .and_then(|c| c.find_partition(topic, p))
                .and_then(|e| e.offset().to_raw().filter(|o| *o >= 0).map(|o| (o, e.metadata().to_string())));
            out.insert(tp, PartitionOffsets { log, committed, topic: identities[topic].clone() });
        }
    }
    Ok(out)
}

/// The log start and end offsets of each of `tps`: two `ListOffsets` requests to each partition
/// leader (the earliest and the latest offsets, at the consumer's isolation level), as
/// `fetch_watermarks` asks them for one partition. When that fails (librdkafka fails the whole call if
/// one leader does not answer), each partition is asked for on its own, so only the partitions of a
/// leader that does not answer go without. Partitions the brokers answered with an error for are left
/// out.
pub(super) fn log_offsets<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    tps: &[TopicPartition],
    timeout: Duration,
) -> HashMap<TopicPartition, LogOffsets> {
    all_log_offsets(consumer, tps, timeout).unwrap_or_else(|e| {
        warn!("reading the log offsets of {} partitions at once failed ({e}); asking for each", tps.len());
        // All of them within one more `timeout`: a leader that does not answer must not hold the caller
        // (an assign callback, say) a timeout per partition.
        let deadline = Instant::now() + timeout;
        let each = tps.iter().map_while(|tp| {
            let left = deadline.checked_duration_since(Instant::now()).filter(|left| !left.is_zero())?;
            Some((tp, consumer.fetch_watermarks(tp.topic(), tp.partition(), left).ok()))
        });
        let answered =
            each.filter_map(|(tp, w)| w.map(|(log_start, log_end)| (tp.clone(), LogOffsets { log_start, log_end })));
        answered.collect()
    })
}

fn all_log_offsets<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    tps: &[TopicPartition],
    timeout: Duration,
) -> KafkaResult<HashMap<TopicPartition, LogOffsets>> {
    // `Offset::Beginning` and `Offset::End` are the timestamps that ask for the earliest and latest.
    let ask = |at: Offset| -> KafkaResult<HashMap<TopicPartition, i64>> {
        let mut tpl = TopicPartitionList::new();
        for tp in tps {
            tpl.add_partition_offset(tp.topic(), tp.partition(), at)?;
        }
        let answer = consumer.offsets_for_times(tpl, timeout)?;
        let answered = answer.elements().into_iter().filter(|e| e.error().is_ok());
        let offsets = answered.filter_map(|e| {
            let offset = e.offset().to_raw().filter(|o| *o >= 0)?;
            Some((TopicPartition::new(e.topic(), e.partition()).ok()?, offset))
        });
        Ok(offsets.collect())
    };
    let (starts, ends) = (ask(Offset::Beginning)?, ask(Offset::End)?);
    let both = starts.into_iter().filter_map(|(tp, log_start)| {
        let log_end = *ends.get(&tp)?;
        Some((tp, LogOffsets { log_start, log_end }))
    });
    Ok(both.collect())
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

#[cfg(test)]
mod tests {
    use rdkafka::mocking::MockCluster;
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

    use super::*;

    #[test]
    fn log_offsets_of_many_partitions_are_each_partitions_watermarks() {
        let cluster = MockCluster::new(2).unwrap();
        cluster.create_topic("t", 5, 1).unwrap();
        let producer: BaseProducer =
            ClientConfig::new().set("bootstrap.servers", cluster.bootstrap_servers()).create().unwrap();
        for p in 0..4 {
            for _ in 0..(p * 3 + 1) {
                producer.send(BaseRecord::<(), [u8]>::to("t").partition(p).payload(b"v")).unwrap();
            }
        }
        producer.flush(Duration::from_secs(10)).unwrap();
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", cluster.bootstrap_servers())
            .set("isolation.level", "read_committed")
            .create()
            .unwrap();
        let tps: Vec<TopicPartition> = (0..5).map(|p| TopicPartition::new("t", p).unwrap()).collect();
        let logs = log_offsets(&consumer, &tps, REQUEST_TIMEOUT);
        for tp in &tps {
            let (log_start, log_end) = consumer.fetch_watermarks("t", tp.partition(), REQUEST_TIMEOUT).unwrap();
            assert_eq!(logs[tp], LogOffsets { log_start, log_end }, "{tp}");
        }
        assert_eq!(logs[&tps[3]], LogOffsets { log_start: 0, log_end: 10 });
        assert_eq!(logs[&tps[4]], LogOffsets { log_start: 0, log_end: 0 }, "an empty partition");
        // The leader of partitions 0 and 1 does not answer: the others' offsets still come, within two
        // timeouts (the batched call's, then all of the fallback's).
        cluster.partition_leader("t", 0, Some(2)).unwrap();
        cluster.partition_leader("t", 1, Some(2)).unwrap();
        cluster.partition_leader("t", 3, Some(1)).unwrap();
        cluster.broker_down(2).unwrap();
        let asked = Instant::now();
        let logs = log_offsets(&consumer, &tps, Duration::from_secs(2));
        assert!(asked.elapsed() < Duration::from_secs(6), "{:?}", asked.elapsed());
        assert_eq!(logs.get(&tps[3]), Some(&LogOffsets { log_start: 0, log_end: 10 }), "{logs:?}");
        assert!(!logs.contains_key(&tps[0]) && !logs.contains_key(&tps[1]), "{logs:?}");
        cluster.broker_up(2).unwrap();
        let missing = [TopicPartition::new("t", 9).unwrap()];
        assert!(log_offsets(&consumer, &missing, Duration::from_secs(2)).is_empty());
    }
}

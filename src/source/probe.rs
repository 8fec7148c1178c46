//! Whether a range of a partition still holds any record a `read_committed` consumer would see. A
//! claimed range being re-written ends at its last record; when Kafka has removed that record since
//! (compaction superseded it, a transaction marker follows it) and nothing newer arrives, the re-write
//! would wait forever. A short-lived consumer outside the group reads from the range's next offset:
//! a first record past the range, or the log's end, proves nothing of the range is left.

use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::Message;

use crate::archive::partition::{OffsetRange, TopicPartition};

/// How long one probe may read before it gives up (and is asked again later).
const PROBE_WAIT: Duration = Duration::from_secs(10);

/// Settings of the user's `--kafka` that a probe takes over: how to reach and talk to the brokers,
/// not how to behave in a group.
const CONNECTION_PREFIXES: [&str; 9] =
    ["security.", "sasl.", "ssl.", "socket.", "broker.", "api.version", "reconnect.", "client.dns", "metadata."];

/// What a probe found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeProbe {
    /// A record of the range is still there (the consumer will deliver it).
    HasRecords,
    /// Nothing of the range is left; the log starts at `log_start` (past the range's start when
    /// retention deleted some of it).
    Empty { log_start: i64 },
    /// Could not tell (the broker did not answer in time, or the log does not reach past the range).
    Unknown,
}

/// The configuration of probe consumers: the brokers and the connection settings among `kafka_props`.
pub fn probe_config(brokers: &str, kafka_props: &[(String, String)]) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", brokers)
        .set("group.id", "kafka-s3-archiver-probe")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("enable.partition.eof", "true")
        .set("auto.offset.reset", "error")
        .set("isolation.level", "read_committed");
    for (k, v) in connection_settings(kafka_props) {
        config.set(k, v);
    }
    config
}

/// The settings among the user's `--kafka` that say how to reach and talk to the brokers (TLS, SASL,
/// sockets), for the archiver's other clients: not how its consumer behaves in its group.
pub fn connection_settings(kafka_props: &[(String, String)]) -> Vec<(String, String)> {
    kafka_props.iter().filter(|(k, _)| CONNECTION_PREFIXES.iter().any(|p| k.starts_with(p))).cloned().collect()
}

/// Reads `tp` from `range.start()`: a first record inside `range` means records are left; a first record
/// past it, the end of the log (beyond the range), or a log start beyond it means none are.
pub fn probe_range(config: &ClientConfig, tp: &TopicPartition, range: OffsetRange) -> Result<RangeProbe, KafkaError> {
    let consumer: BaseConsumer = config.create()?;
    let (low, high) = consumer.fetch_watermarks(tp.topic(), tp.partition(), PROBE_WAIT)?;
    if high <= range.end() {
        return Ok(RangeProbe::Unknown);
    }
    if low > range.end() {
        return Ok(RangeProbe::Empty { log_start: low });
    }
    let mut at = TopicPartitionList::new();
    at.add_partition_offset(tp.topic(), tp.partition(), Offset::Offset(range.start().max(low)))?;
    consumer.assign(&at)?;
    let deadline = Instant::now() + PROBE_WAIT;
    while Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(msg)) if msg.offset() <= range.end() => return Ok(RangeProbe::HasRecords),
            Some(Ok(_)) | Some(Err(KafkaError::PartitionEOF(_))) => return Ok(RangeProbe::Empty { log_start: low }),
            Some(Err(e)) => return Err(e),
            None => {}
        }
    }
    Ok(RangeProbe::Unknown)
}

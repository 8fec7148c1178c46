//! The dead-letter topic's producer (`--dlq-topic`). Each record goes with its original key, value and
//! headers, plus Kafka Connect's error headers: `__connect.errors.topic`, `.partition`, `.offset`,
//! `.stage` and `.exception.message` (the reason), so tools made for Connect's dead-letter queues read
//! them as they are.

use std::time::Duration;

use async_trait::async_trait;
use futures::future::try_join_all;
use rdkafka::config::ClientConfig;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};

use super::DeadLetterSink;
use crate::archive::partition::TopicPartition;
use crate::encode::DeadLetter;

/// How long one dead letter may take to be acknowledged before the batch is retried.
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(30);

/// One producer for every topic's dead-letter topic.
pub struct KafkaDeadLetters {
    producer: FutureProducer,
}

impl KafkaDeadLetters {
    /// A producer with the connection settings `props` (see `probe::connection_settings`).
    pub fn new(brokers: &str, props: &[(String, String)]) -> Result<Self, rdkafka::error::KafkaError> {
        let mut config = ClientConfig::new();
        for (k, v) in props {
            config.set(k, v);
        }
        let producer = config
            .set("bootstrap.servers", brokers)
            .set("enable.idempotence", "true")
            .set("message.timeout.ms", DELIVERY_TIMEOUT.as_millis().to_string())
            .create()?;
        Ok(Self { producer })
    }
}

fn headers(source: &TopicPartition, letter: &DeadLetter) -> OwnedHeaders {
    let mut out = crate::source::headers::owned(&letter.record.headers);
    let partition = source.partition().to_string();
    let offset = letter.record.offset.to_string();
    let connect = [
        ("__connect.errors.topic", source.topic()),
        ("__connect.errors.partition", partition.as_str()),
        ("__connect.errors.offset", offset.as_str()),
        ("__connect.errors.stage", "VALUE_CONVERTER"),
        ("__connect.errors.exception.message", letter.error.as_str()),
    ];
    for (key, value) in connect {
        out = out.insert(Header { key, value: Some(value) });
    }
    out
}

#[async_trait]
impl DeadLetterSink for KafkaDeadLetters {
    async fn send(&self, to: &str, source: &TopicPartition, letters: &[DeadLetter]) -> Result<(), String> {
        let deliveries = letters.iter().map(|letter| {
            let mut record = FutureRecord::<[u8], [u8]>::to(to).headers(headers(source, letter));
            if let Some(key) = &letter.record.key {
                record = record.key(key.as_slice());
            }
            if let Some(value) = &letter.record.value {
                record = record.payload(value.as_slice());
            }
            if let Some(ts) = letter.record.timestamp_ms {
                record = record.timestamp(ts);
            }
            self.producer.send(record, DELIVERY_TIMEOUT)
        });
        try_join_all(deliveries).await.map(drop).map_err(|(e, _)| {
            format!("producing to dead-letter topic {to:?} failed: {e} (check that it exists and the brokers)")
        })
    }
}

//! A plain rdkafka producer writing the bench's records (keys, values, headers) into a new topic with
//! the settings `restore` uses (idempotent, acks=all, linger 10 ms): the rate `restore` is held to. And
//! the bench's records written as a user's application writes them, by `produce.py`.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::Duration;

use kafka_s3_archiver::archive::record::Record;
use kafka_s3_archiver::source::convert::kafka_headers;
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

use crate::{create_topic, env, Bench, Row, Started};

/// The plain producer's line in the results table.
pub const PLAIN_PRODUCER: &str = "plain rdkafka producer, same settings as restore";

pub async fn plain_producer(bench: &Bench, records: &BTreeMap<i32, Vec<Record>>) -> Row {
    let topic = format!("{}-plain-producer", bench.topic);
    create_topic(&bench.brokers, &topic, bench.partitions).await;
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &bench.brokers)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "10")
        .create()
        .unwrap();
    let started = Started::now();
    tokio::task::block_in_place(|| {
        // Interleaved over partitions, as records arrive from a topic.
        let longest = records.values().map(Vec::len).max().unwrap_or(0);
        for i in 0..longest {
            for (partition, recs) in records {
                let Some(r) = recs.get(i) else { continue };
                let mut record: BaseRecord<'_, [u8], [u8]> =
                    BaseRecord::to(&topic).partition(*partition).headers(kafka_headers(r));
                record.key = r.key.as_deref();
                record.payload = r.value.as_deref();
                record.timestamp = r.timestamp_ms;
                while let Err((e, back)) = producer.send(record) {
                    assert!(
                        matches!(e, KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull)),
                        "plain producer: {e}"
                    );
                    producer.poll(Duration::from_millis(5));
                    record = back;
                }
            }
            producer.poll(Duration::ZERO);
        }
        producer.flush(Duration::from_secs(300)).expect("plain producer flush");
    });
    let row = Row::since(&started, PLAIN_PRODUCER.into(), bench.values);
    println!("plain producer ({}): {:.1}s", bench.values.name(), row.seconds);
    row
}

/// What `produce.py` wrote: each partition's last offset, the key and value bytes.
pub struct Produced {
    pub last: BTreeMap<i32, i64>,
    pub payload_bytes: u64,
}

/// Writes `records` values of `values` ("compressible" or "random") to `topic` as a user's
/// application does (`produce.py`: Python confluent-kafka's default batching, 0-3 headers).
pub fn python_producer(brokers: &str, topic: &str, records: usize, value_size: usize, values: &str) -> Produced {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/throughput/produce.py");
    let out = Command::new(env("KSA_TEST_PRODUCER_PYTHON"))
        .args([script, brokers, topic, &records.to_string(), &value_size.to_string(), values])
        .stderr(Stdio::inherit())
        .output()
        .expect("run produce.py");
    assert!(out.status.success(), "produce.py failed ({})", out.status);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let summary: serde_json::Value =
        serde_json::from_str(stdout.lines().last().unwrap_or_default()).expect("produce.py's summary");
    let last = summary["last"].as_object().expect("last offsets");
    Produced {
        last: last.iter().map(|(p, o)| (p.parse().expect("a partition"), o.as_i64().expect("an offset"))).collect(),
        payload_bytes: summary["payload_bytes"].as_u64().expect("payload bytes"),
    }
}

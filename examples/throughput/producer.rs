//! A plain rdkafka producer writing the bench's records (keys, values, headers) into a new topic with
//! the settings `restore` uses (idempotent, acks=all, linger 10 ms): the rate `restore` is held to.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kafka_s3_archiver::archive::record::Record;
use kafka_s3_archiver::source::convert::kafka_headers;
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

use crate::measure::cpu_seconds;
use crate::{create_topic, Bench, Row};

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
    let cpu_before = cpu_seconds("self");
    let t0 = Instant::now();
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
    let row = Row {
        contender: "plain rdkafka producer, same settings as restore".into(),
        values: bench.values,
        seconds: t0.elapsed().as_secs_f64(),
        cpu_seconds: cpu_seconds("self") - cpu_before,
        peak_rss_kib: None,
    };
    println!("plain producer ({}): {:.1}s", bench.values.name(), row.seconds);
    row
}

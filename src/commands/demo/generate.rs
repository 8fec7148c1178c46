//! Generated records with known content, produced to Kafka: for `demo`, the integration tests and the
//! benchmark. Each mixes keyed and unkeyed records, text, binary and null values, and headers.

use std::collections::BTreeMap;
use std::ops::Range;

use bytes::Bytes;
use futures::StreamExt;
use rdkafka::config::ClientConfig;
use rdkafka::error::KafkaError;
use rdkafka::producer::FutureProducer;

use crate::archive::claim::{Claim, ClaimKey};
use crate::archive::object_key::{FileKind, ObjectKey, Prefix};
use crate::archive::partition::{OffsetRange, TopicPartition};
use crate::archive::record::{Header, Record, TimestampKind};
use crate::encode::spool::SpoolData;
use crate::source::convert::{kafka_headers, to_future_record};
use crate::store::{ObjectStore, PutOutcome, StoreError};

/// Timestamps of generated records start here (2026-01-01T00:00:00Z) and grow by 1 ms per index.
const BASE_TIMESTAMP_MS: i64 = 1_767_225_600_000;

/// Record number `i`, with a value of about `value_size` bytes. Its offset is set once produced.
pub fn generated(i: usize, value_size: usize) -> Record {
    let key = (!i.is_multiple_of(7)).then(|| format!("customer-{}", i % 101).into_bytes());
    let value = match i % 10 {
        0 => None,
        1 => Some((0..value_size.max(1)).map(|b| ((i * 31 + b) % 256) as u8).collect()),
        _ => {
            let mut v = format!(r#"{{"order":{i},"amount":{},"note":""#, (i * 17) % 1000).into_bytes();
            v.resize(value_size.saturating_sub(2).max(v.len()), b'x');
            v.extend_from_slice(b"\"}");
            Some(v)
        }
    };
    let mut headers = vec![Header { key: "seq".into(), value: Some(i.to_string().into_bytes()) }];
    if i.is_multiple_of(3) {
        headers.push(Header { key: "trace".into(), value: Some(vec![0, 159, 146, 150]) });
    }
    Record {
        offset: -1,
        timestamp_ms: Some(BASE_TIMESTAMP_MS + i as i64),
        timestamp_kind: TimestampKind::CreateTime,
        key,
        value,
        headers,
    }
}

/// Produces records `indexes` round-robin over `partitions` partitions of `topic`; returns them per
/// partition with the offsets the broker gave them, in offset order.
pub async fn produce(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    indexes: Range<usize>,
    value_size: usize,
) -> Result<BTreeMap<i32, Vec<Record>>, KafkaError> {
    produce_records(bootstrap, topic, partitions, indexes, |i| generated(i, value_size)).await
}

/// Like [`produce`], with record number `i` made by `make(i)`.
pub async fn produce_records(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    indexes: Range<usize>,
    make: impl Fn(usize) -> Record,
) -> Result<BTreeMap<i32, Vec<Record>>, KafkaError> {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "5")
        .set("message.timeout.ms", "60000")
        .create()?;
    let mut pending = Vec::with_capacity(indexes.len());
    for i in indexes {
        let rec = make(i);
        let mut fr = to_future_record(topic, (i % partitions as usize) as i32, &rec, kafka_headers(&rec));
        let delivery = loop {
            match producer.send_result(fr) {
                Ok(d) => break d,
                Err((KafkaError::MessageProduction(rdkafka::types::RDKafkaErrorCode::QueueFull), back)) => {
                    fr = back;
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
                Err((e, _)) => return Err(e),
            }
        };
        pending.push((rec, delivery));
    }
    let mut produced: BTreeMap<i32, Vec<Record>> = BTreeMap::new();
    for (mut rec, delivery) in pending {
        let delivered = delivery.await.map_err(|_| KafkaError::Canceled)?.map_err(|(e, _)| e)?;
        rec.offset = delivered.offset;
        produced.entry(delivered.partition).or_default().push(rec);
    }
    for records in produced.values_mut() {
        records.sort_by_key(|r| r.offset);
    }
    Ok(produced)
}

/// Adds `more` to `all`, per partition, keeping offset order.
pub fn merge(all: &mut BTreeMap<i32, Vec<Record>>, more: BTreeMap<i32, Vec<Record>>) {
    for (p, records) in more {
        let v = all.entry(p).or_default();
        v.extend(records);
        v.sort_by_key(|r| r.offset);
    }
}

/// Writes a synthetic archive straight to `store` (for recovery benches and tests): for each of
/// `objects`, a placeholder data object named as the archiver names it and its claim (no gap before
/// it: each partition's ranges must follow one another from its first), `at_once` PUTs in flight.
/// Returns how many PUTs it made.
pub async fn write_synthetic_archive(
    store: &dyn ObjectStore,
    prefix: &Prefix,
    objects: impl Iterator<Item = (TopicPartition, OffsetRange)>,
    at_once: usize,
) -> Result<u64, StoreError> {
    write_synthetic_objects(store, prefix, objects, at_once, (FileKind::Jsonl, Bytes::from_static(b"{}\n"))).await
}

/// Like [`write_synthetic_archive`], each data object of `kind` holding `body` (a table needs Parquet).
pub async fn write_synthetic_objects(
    store: &dyn ObjectStore,
    prefix: &Prefix,
    objects: impl Iterator<Item = (TopicPartition, OffsetRange)>,
    at_once: usize,
    (kind, body): (FileKind, Bytes),
) -> Result<u64, StoreError> {
    let puts = objects.flat_map(|(tp, range)| {
        let data = ObjectKey::new(prefix.clone(), tp.clone(), range, kind);
        let records = u64::try_from(range.end() - range.start() + 1).expect("a range");
        let claim = Claim {
            object: Some(data.relative()),
            ..Claim::plain(range.start(), range.start(), range.end(), records, "synthetic:1")
        };
        let claim_key = ClaimKey::new(prefix.clone(), tp, range.start()).to_string();
        [(data.to_string(), body.clone()), (claim_key, Bytes::from(claim.to_json()))]
    });
    let results: Vec<Result<PutOutcome, StoreError>> = futures::stream::iter(puts)
        .map(|(key, body)| async move {
            let len = body.len() as u64;
            store.put_if_absent(&key, &SpoolData::memory(body), len).await
        })
        .buffer_unordered(at_once)
        .collect()
        .await;
    let puts = results.len() as u64;
    results.into_iter().collect::<Result<Vec<_>, _>>()?;
    Ok(puts)
}

//! Per-topic profiles against Kafka and S3: one archiver, its config file giving two topics different
//! files. `orders` (a `[topic."NAME"]` table): Parquet, values typed by an Avro schema, misfits to its
//! own dead-letter topic, 250 records a file, no time buckets. `clicks` (a `[topic."^REGEX"]` table):
//! gzipped JSON lines, schemas inferred, 400 records a file, hourly folders with `_SUCCESS` markers.
//! Each topic is archived exactly once, its objects as its profile says; `status` tells the two apart.

mod common;

use std::collections::BTreeMap;
use std::io::Read;

use common::*;
use kafka_s3_archiver::archive::completeness::Marker;
use kafka_s3_archiver::archive::keys::classify;
use kafka_s3_archiver::archive::object_key::{FileKind, ObjectKey};
use kafka_s3_archiver::archive::record::Record;
use kafka_s3_archiver::commands::demo::generate::{generated, produce_records};
use kafka_s3_archiver::commands::status::{status, StatusOptions};
use kafka_s3_archiver::encode::decode;
use kafka_s3_archiver::store::{list_all, ObjectStore};

const PARTITIONS: i32 = 2;
const ORDERS: usize = 2_000;
const CLICKS: usize = 1_200;
/// 2026-01-01T10:00:00Z: clicks are stamped over the two hours after it, 6 s apart.
const START: i64 = 1_767_261_600_000;

const ORDER_SCHEMA: &str = r#"{"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "long"}, {"name": "customer", "type": "string"}]}"#;

/// Order `i`; every 50th is not JSON (a misfit).
fn order(i: usize) -> Record {
    let value = match i % 50 {
        7 => format!("order {i}: oops"),
        _ => format!(r#"{{"id":{i},"customer":"c-{}"}}"#, i % 13),
    };
    Record { value: Some(value.into_bytes()), ..generated(i, 10) }
}

fn click(i: usize) -> Record {
    let value = format!(r#"{{"page":"/p/{}","ms":{i}}}"#, i % 17).into_bytes();
    Record { value: Some(value), timestamp_ms: Some(START + i as i64 * 6_000), ..generated(i, 10) }
}

fn config_file(dir: &std::path::Path, orders: &str, clicks: &str, dlq: &str) -> String {
    let schema = dir.join("order.avsc");
    std::fs::write(&schema, ORDER_SCHEMA).unwrap();
    let text = format!(
        r#"
        roll-records = 5000
        marker-interval = "1s"

        [topic."{orders}"]
        value-format = "json"
        value-schema = "{schema}"
        keep-raw-value = true
        dlq-topic = "{dlq}"
        roll-records = 250

        [topic."^{clicks}$"]
        format = "jsonl"
        compression = "gzip"
        value-format = "json"
        value-schema = "infer"
        keep-raw-value = true
        roll-records = 400
        time-buckets = "hour"
        "#,
        schema = schema.display()
    );
    let path = dir.join("archiver.toml");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn two_topics_in_one_instance_are_written_by_their_own_profiles() {
    let dest = TestDest::s3().await;
    let (store, prefix) = (dest.store().await, dest.prefix());
    let (orders, clicks, dlq) = (unique("orders"), unique("clicks"), unique("orders-dlq"));
    create_topic(&orders, PARTITIONS).await;
    create_topic(&clicks, PARTITIONS).await;
    create_topic(&dlq, 1).await;
    let produced_orders = produce_records(&brokers(), &orders, PARTITIONS, 0..ORDERS, order).await.unwrap();
    let produced_clicks = produce_records(&brokers(), &clicks, PARTITIONS, 0..CLICKS, click).await.unwrap();

    let dir = tempfile::tempdir().unwrap();
    let group = unique("g");
    // The top level says 5,000 records a file (and the flags 100): each table's own roll wins.
    let mut args = archiver_args(&dest, &group, &orders, 100, dir.path());
    args.extend(["--topic".into(), clicks.clone(), "--config".into(), config_file(dir.path(), &orders, &clicks, &dlq)]);
    let mut archiver = ArchiverProcess::spawn("profiles", &args);
    wait_archived(store.as_ref(), &prefix, &orders, &last_offsets(&produced_orders), &mut [&mut archiver]).await;
    wait_archived(store.as_ref(), &prefix, &clicks, &last_offsets(&produced_clicks), &mut [&mut archiver]).await;
    // Every partition of clicks is in hour 11 now: hour 10 is complete and gets its marker.
    let started = std::time::Instant::now();
    while markers(store.as_ref(), &dest, &clicks).await.is_empty() {
        archiver.assert_running();
        assert!(started.elapsed().as_secs() < 60, "no marker for hour 10 within 60 s:\n{}", archiver.log_text());
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    assert!(archiver.terminate().success(), "{}", archiver.log_text());

    assert_exactly_once(&dest, &orders, &produced_orders).await;
    assert_exactly_once(&dest, &clicks, &produced_clicks).await;
    check_orders(&objects(store.as_ref(), &dest, &orders).await);
    check_clicks(&objects(store.as_ref(), &dest, &clicks).await);
    let markers = markers(store.as_ref(), &dest, &clicks).await;
    assert_eq!(markers.iter().map(|m| m.bucket.as_str()).collect::<Vec<_>>(), ["dt=2026-01-01/hour=10"]);
    assert!(list_all(store.as_ref(), &prefix.topic_folder(&orders)).await.unwrap().iter().all(|k| !k.contains("dt=")));

    let letters = read_from_kafka(&dlq, 1).remove(&0).unwrap_or_default();
    assert_eq!(letters.len(), ORDERS / 50, "the misfits of orders, in its dead-letter topic");
    let topics = vec![orders.clone(), clicks.clone()];
    let options = StatusOptions { prefix, topics, brokers: brokers(), props: vec![], group };
    let report = status(store.as_ref(), &options).await.unwrap();
    let buckets = |topic: &str| report.topics.iter().find(|t| t.topic == topic).map(|t| t.time_buckets);
    assert_eq!((buckets(&orders), buckets(&clicks)), (Some(None), Some(Some("hour"))), "{}", report.table());
}

/// Every data object of the topic with its bytes, in offset order per partition.
async fn objects(store: &dyn ObjectStore, dest: &TestDest, topic: &str) -> Vec<(ObjectKey, bytes::Bytes)> {
    let mut objects = Vec::new();
    for raw in list_all(store, &dest.prefix().topic_folder(topic)).await.unwrap() {
        if let Some(key) = classify(&dest.prefix(), &raw).data() {
            objects.push((key, store.get(&raw).await.unwrap()));
        }
    }
    objects.sort_by_key(|(k, _)| (k.tp.partition(), k.range.start()));
    objects
}

/// Parquet, at most 250 records each, the value a struct of the schema's typed columns.
fn check_orders(objects: &[(ObjectKey, bytes::Bytes)]) {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    assert!(objects.len() >= ORDERS / 250, "{} objects", objects.len());
    for (key, data) in objects {
        assert_eq!((key.kind, key.bucket), (FileKind::Parquet, None), "{key}");
        let reader = SerializedFileReader::new(data.clone()).unwrap();
        let rows = reader.metadata().file_metadata().num_rows();
        assert!(rows <= 250, "{key}: {rows} rows");
        let schema = reader.metadata().file_metadata().schema_descr_ptr();
        let columns: Vec<String> = schema.columns().iter().map(|c| c.path().string()).collect();
        for typed in ["value.id", "value.customer", "value_raw", "value_error"] {
            assert!(columns.iter().any(|c| c == typed), "{key}: no {typed} in {columns:?}");
        }
    }
}

/// Gzipped JSON lines in hour folders, at most 400 records each, every value an embedded object.
fn check_clicks(objects: &[(ObjectKey, bytes::Bytes)]) {
    assert!(objects.len() >= CLICKS / 400, "{} objects", objects.len());
    let mut by_hour: BTreeMap<String, usize> = BTreeMap::new();
    for (key, data) in objects {
        assert_eq!(key.kind, FileKind::JsonlGz, "{key}");
        let bucket = key.bucket.unwrap_or_else(|| panic!("{key}: not in an hour folder"));
        let records = decode(key.kind, data.clone()).unwrap().records;
        assert!(records.len() <= 400, "{key}: {} records", records.len());
        *by_hour.entry(bucket.to_string()).or_default() += records.len();
        let mut text = String::new();
        flate2::read::GzDecoder::new(&data[..]).read_to_string(&mut text).unwrap();
        let line: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert!(line["value"].is_object(), "{key}: {line}");
    }
    let hours: Vec<&str> = by_hour.keys().map(String::as_str).collect();
    assert_eq!(hours, ["dt=2026-01-01/hour=10", "dt=2026-01-01/hour=11"], "{by_hour:?}");
}

async fn markers(store: &dyn ObjectStore, dest: &TestDest, topic: &str) -> Vec<Marker> {
    let mut out = Vec::new();
    for key in list_all(store, &dest.prefix().topic_folder(topic)).await.unwrap() {
        if key.ends_with("/_SUCCESS") {
            out.push(serde_json::from_slice(&store.get(&key).await.unwrap()).unwrap());
        }
    }
    out
}

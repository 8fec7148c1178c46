//! Typed values (`--value-format json --value-schema FILE.avsc`) against Kafka and S3: JSON orders with
//! a nested struct, a list of structs, timestamps (epoch and RFC 3339), decimals (numbers and strings),
//! and 1% broken records (not JSON, a bad decimal, a required field missing). A SIGKILL and a restart
//! under a new group archive every offset exactly once; DuckDB sums `value.amount` to the producer's sum
//! over the good records; every broken record is in its object with its bytes in `value_raw` and the
//! reason in `value_error`, and in the dead-letter topic (`--dlq-topic`) with Kafka Connect's error
//! headers; `verify --deep` counts them; restore refuses re-encoded values unless asked.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::*;
use kafka_s3_archiver::archive::object_key::ObjectKey;
use kafka_s3_archiver::archive::record::Record;
use kafka_s3_archiver::commands::demo::generate::{generated, merge, produce_records};
use kafka_s3_archiver::commands::restore::plan::{Partitioning, Selection};
use kafka_s3_archiver::commands::restore::{
    restore, RestoreError, RestoreOptions, RestoreProgressCounters, RestoreTarget,
};
use kafka_s3_archiver::encode::decode;

const PARTITIONS: i32 = 3;
const RECORDS: usize = 100_000;

const SCHEMA: &str = r#"{
  "type": "record", "name": "Order", "namespace": "shop",
  "fields": [
    {"name": "id", "type": "long"},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "user", "type": {"type": "record", "name": "User", "fields": [
      {"name": "name", "type": "string"},
      {"name": "tier", "type": {"type": "enum", "name": "Tier", "symbols": ["GOLD", "SILVER"]}}]}},
    {"name": "items", "type": {"type": "array", "items": {"type": "record", "name": "Item", "fields": [
      {"name": "sku", "type": "string"}, {"name": "qty", "type": "int"}]}}},
    {"name": "note", "type": ["null", "string"], "default": null}
  ]}"#;

/// Order `i`'s amount in cents.
fn cents(i: usize) -> i64 {
    (i as i64 * 7919) % 100_000
}

/// Whether order `i` is broken (1%), and how.
fn broken(i: usize) -> Option<&'static str> {
    (i % 100 == 37).then(|| ["not JSON", "a bad decimal", "no id"][(i / 100) % 3])
}

fn order(i: usize) -> Record {
    let c = cents(i);
    let amount = if i.is_multiple_of(2) {
        format!("{}.{:02}", c / 100, c % 100)
    } else {
        format!("\"{}.{:02}\"", c / 100, c % 100)
    };
    let at = if i.is_multiple_of(2) { "1796032800000".to_string() } else { "\"2026-11-30T10:00:00Z\"".to_string() };
    let tier = if i.is_multiple_of(3) { "GOLD" } else { "SILVER" };
    let items: Vec<String> = (0..i % 4).map(|k| format!(r#"{{"sku":"s{k}","qty":{}}}"#, i % 5)).collect();
    let id = match broken(i) {
        Some("no id") => String::new(),
        _ => format!(r#""id":{i},"#),
    };
    let amount = if broken(i) == Some("a bad decimal") { "\"lots\"".to_string() } else { amount };
    let value = match broken(i) {
        Some("not JSON") => format!("order {i}: oops").into_bytes(),
        _ => format!(
            r#"{{{id}"amount":{amount},"at":{at},"user":{{"name":"user-{}","tier":"{tier}"}},"items":[{}],"extra":true}}"#,
            i % 50,
            items.join(",")
        )
        .into_bytes(),
    };
    Record { value: Some(value), ..generated(i, 10) }
}

#[tokio::test(flavor = "multi_thread")]
async fn typed_json_values_survive_a_kill_and_duckdb_sums_them() {
    let dest = TestDest::s3().await;
    let (store, prefix) = (dest.store().await, dest.prefix());
    let topic = unique("typed");
    create_topic(&topic, PARTITIONS).await;
    let dlq = unique("typed-dlq");
    create_topic(&dlq, 1).await;
    let schema_dir = tempfile::tempdir().unwrap();
    let schema = schema_dir.path().join("order.avsc");
    std::fs::write(&schema, SCHEMA).unwrap();
    let spool = tempfile::tempdir().unwrap();
    let args = |group: &str| {
        let mut args = archiver_args(&dest, group, &topic, 5_000, spool.path());
        args.extend(["--value-format".into(), "json".into(), "--value-schema".into(), schema.display().to_string()]);
        args.extend(["--dlq-topic".into(), dlq.clone()]);
        args
    };
    let mut produced = produce_records(&brokers(), &topic, PARTITIONS, 0..RECORDS / 2, order).await.expect("produce");
    let mut first = ArchiverProcess::spawn("typed-first", &args(&unique("g")));
    wait_objects(store.as_ref(), &prefix, &topic, 3, &mut first).await;
    first.kill_hard();
    merge(&mut produced, produce_records(&brokers(), &topic, PARTITIONS, RECORDS / 2..RECORDS, order).await.unwrap());
    let mut second = ArchiverProcess::spawn("typed-second", &args(&unique("g")));
    wait_archived(store.as_ref(), &prefix, &topic, &last_offsets(&produced), &mut [&mut second]).await;
    assert!(second.terminate().success(), "{}", second.log_text());
    assert!(second.log_text().contains("does not fit the value schema"), "misfits are logged per file");

    // Every offset once (verify reads every object), the misfits counted.
    let report = verify_deep(&dest, &topic).await;
    assert!(report.is_clean(), "{}", report.table());
    assert_eq!(report.partitions.iter().map(|p| p.records.unwrap()).sum::<u64>(), RECORDS as u64);
    assert_eq!(report.value_misfits, (RECORDS / 100) as u64, "{}", report.table());

    // Broken records come back as produced, byte for byte; good ones as JSON of the same order.
    let objects = fetch_objects(&dest, &topic).await;
    let mut archived: BTreeMap<i32, Vec<Record>> = BTreeMap::new();
    for (key, data) in &objects {
        archived.entry(key.tp.partition()).or_default().extend(decode(key.kind, data.clone()).unwrap().records);
    }
    for (p, records) in &produced {
        let got = &archived[p];
        assert_eq!(got.len(), records.len(), "partition {p}");
        for (want, got) in records.iter().zip(got) {
            assert_eq!(want.offset, got.offset);
            let index = index_of(want);
            if broken(index).is_some() {
                assert_eq!(got.value, want.value, "broken record {index} is kept byte for byte");
            } else {
                let json: serde_json::Value = serde_json::from_slice(got.value.as_ref().unwrap()).unwrap();
                assert_eq!(json["id"], index as u64, "{json}");
                assert_eq!(json["user"]["name"], format!("user-{}", index % 50));
            }
        }
    }

    check_duckdb(&objects, &produced);
    check_dead_letters(&dlq, &produced);

    // Restore gives back bytes only: without --reencode-json it refuses, and says why.
    let options = RestoreOptions {
        prefix: prefix.clone(),
        topic: topic.clone(),
        partitions: vec![0],
        selection: Selection { from_offset: None, to_offset: None, from_time_ms: None, to_time_ms: None },
        target: RestoreTarget::Stdout,
        max_rate: None,
        reencode_json: false,
    };
    let err = restore(store.clone(), &options, &Arc::new(RestoreProgressCounters::default())).await.unwrap_err();
    assert!(matches!(err, RestoreError::NeedsReencode { .. }), "{err}");
    assert!(err.to_string().contains("--reencode-json"), "{err}");
    // With it: broken records byte for byte, good ones as JSON with the same values.
    let target = unique("typed-restored");
    create_topic(&target, PARTITIONS).await;
    let kafka = RestoreTarget::Kafka {
        brokers: brokers(),
        props: vec![],
        topic: target.clone(),
        partitioning: Partitioning::Same,
    };
    let options = RestoreOptions { target: kafka, reencode_json: true, ..options };
    restore(store.clone(), &options, &Arc::new(RestoreProgressCounters::default())).await.expect("restore");
    let restored = read_from_kafka(&target, PARTITIONS).remove(&0).unwrap_or_default();
    assert_eq!(restored.len(), produced[&0].len());
    for (want, got) in produced[&0].iter().zip(&restored) {
        let i = index_of(want);
        if broken(i).is_some() {
            assert_eq!(got.value, want.value, "broken record {i}");
            continue;
        }
        let json: serde_json::Value = serde_json::from_slice(got.value.as_ref().unwrap()).unwrap();
        let amount = match &json["amount"] {
            serde_json::Value::String(s) => s.parse::<f64>().unwrap(),
            other => other.as_f64().unwrap(),
        };
        assert_eq!((json["id"].as_u64(), amount), (Some(i as u64), cents(i) as f64 / 100.0), "{json}");
        assert_eq!(json["items"].as_array().map(Vec::len), Some(i % 4), "{json}");
        assert_eq!(json["user"]["tier"], if i.is_multiple_of(3) { "GOLD" } else { "SILVER" });
    }
}

/// A produced record's index (its `seq` header).
fn index_of(r: &Record) -> usize {
    String::from_utf8_lossy(r.headers[0].value.as_ref().unwrap()).parse().unwrap()
}

/// Every broken record is in the dead-letter topic, with its key, value and headers and Kafka Connect's
/// error headers. The first archiver was killed: it may have sent a file's letters and died before
/// the upload, so its records (the first half) may come twice; the second half's exactly once.
fn check_dead_letters(dlq: &str, produced: &BTreeMap<i32, Vec<Record>>) {
    let letters = read_from_kafka(dlq, 1).remove(&0).unwrap_or_default();
    let header = |r: &Record, name: &str| {
        let h = r.headers.iter().find(|h| h.key == name.as_bytes()).unwrap_or_else(|| panic!("no {name} header"));
        String::from_utf8(h.value.clone().unwrap()).unwrap()
    };
    let mut seen: BTreeMap<(i32, i64), usize> = BTreeMap::new();
    for letter in &letters {
        let (p, offset) = (header(letter, "__connect.errors.partition"), header(letter, "__connect.errors.offset"));
        let (p, offset): (i32, i64) = (p.parse().unwrap(), offset.parse().unwrap());
        let original = produced[&p].iter().find(|r| r.offset == offset).expect("a produced record");
        assert_eq!((&letter.key, &letter.value), (&original.key, &original.value));
        assert_eq!(letter.headers[..original.headers.len()], original.headers[..], "original headers first");
        assert!(header(letter, "__connect.errors.exception.message").starts_with("value"));
        *seen.entry((p, offset)).or_default() += 1;
    }
    let index = index_of;
    for (p, records) in produced {
        for r in records.iter().filter(|r| broken(index(r)).is_some()) {
            let times = seen.get(&(*p, r.offset)).copied().unwrap_or(0);
            let allowed = if index(r) < RECORDS / 2 { 1..=2 } else { 1..=1 };
            assert!(allowed.contains(&times), "record {} is in the dead-letter topic {times} times", index(r));
        }
    }
    assert_eq!(seen.len(), RECORDS / 100, "only broken records are dead letters");
}

/// DuckDB reads the typed columns as they are: the decimal sum over good records, nested fields, list
/// lengths, the timestamp, and the misfits' reasons.
fn check_duckdb(objects: &[(ObjectKey, bytes::Bytes)], produced: &BTreeMap<i32, Vec<Record>>) {
    let row = duckdb_row(
        objects,
        "sum(value.amount), count(value), count(value_error), count(value_raw),
         count(*) FILTER (value.user.tier = 'GOLD'), sum(len(value.items)),
         epoch_ms(min(value.at)), epoch_ms(max(value.at)),
         count(*) FILTER (value_error LIKE 'value.amount: expected a decimal(12, 2)%'),
         count(*) FILTER (value_error = 'value.id: required, but null or missing')",
    );
    let good: Vec<usize> = produced.values().flatten().map(index_of).filter(|i| broken(*i).is_none()).collect();
    let sum: i64 = good.iter().map(|i| cents(*i)).sum();
    let gold = good.iter().filter(|i| *i % 3 == 0).count();
    let items: usize = good.iter().map(|i| i % 4).sum();
    let bad = RECORDS - good.len();
    let expected = format!(
        "{}.{:02}|{}|{bad}|{bad}|{gold}|{items}|1796032800000|1796032800000|{}|{}",
        sum / 100,
        sum % 100,
        good.len(),
        (0..RECORDS).filter(|i| broken(*i) == Some("a bad decimal")).count(),
        (0..RECORDS).filter(|i| broken(*i) == Some("no id")).count(),
    );
    assert_eq!(row, expected);
}

/// `--value-schema infer`: a field that appears mid-stream rolls the file (its schema is fixed by its
/// first batch) and is typed from the next file on; DuckDB reads it across files with union_by_name.
#[tokio::test(flavor = "multi_thread")]
async fn inferred_schemas_follow_a_field_that_appears_mid_stream() {
    const N: usize = 30_000;
    let dest = TestDest::s3().await;
    let (store, prefix) = (dest.store().await, dest.prefix());
    let topic = unique("typed-infer");
    create_topic(&topic, PARTITIONS).await;
    let with_coupon = |i: usize| i >= N / 2 && i.is_multiple_of(10);
    let record = |i: usize| {
        let coupon = if with_coupon(i) { format!(r#","coupon":"C{i}""#) } else { String::new() };
        let value = format!(r#"{{"id":{i},"price":{}.5,"tags":["t{}"]{coupon}}}"#, i % 100, i % 3);
        Record { value: Some(value.into_bytes()), ..generated(i, 10) }
    };
    let produced = produce_records(&brokers(), &topic, PARTITIONS, 0..N, record).await.expect("produce");
    let spool = tempfile::tempdir().unwrap();
    let mut args = set_flag(archiver_args(&dest, &unique("g"), &topic, 20_000, spool.path()), "--roll-age", "30s");
    args.extend(["--value-format".into(), "json".into(), "--value-schema".into(), "infer".into()]);
    let mut archiver = ArchiverProcess::spawn("typed-infer", &args);
    wait_archived(store.as_ref(), &prefix, &topic, &last_offsets(&produced), &mut [&mut archiver]).await;
    assert!(archiver.terminate().success(), "{}", archiver.log_text());
    assert!(archiver.log_text().contains("reason=\"schema\""), "files rolled when the field appeared");

    let report = verify_deep(&dest, &topic).await;
    assert!(report.is_clean(), "{}", report.table());
    assert_eq!(report.value_misfits, 0, "{}", report.table());
    let row = duckdb_row(
        &fetch_objects(&dest, &topic).await,
        "count(*), count(value.coupon), count(*) FILTER (value.coupon = 'C' || value.id::VARCHAR),
         sum(value.price), typeof(any_value(value.price)), typeof(any_value(value.tags))",
    );
    let coupons = (0..N).filter(|i| with_coupon(*i)).count();
    let price: f64 = (0..N).map(|i| (i % 100) as f64 + 0.5).sum();
    assert_eq!(row, format!("{N}|{coupons}|{coupons}|{price:.1}|DOUBLE|VARCHAR[]"));
}

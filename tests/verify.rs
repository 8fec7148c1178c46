//! `verify` as users run it (the binary), on an archive in LocalStack S3 where each kind of defect is
//! planted in turn: each must be named, with exit code 1; a clean archive (holes explained by claims
//! included) exits 0.

mod common;

use std::process::Command;
use std::sync::Arc;

use bytes::Bytes;
use common::TestDest;
use kafka_s3_archiver::archive::claim::{Claim, ClaimKey};
use kafka_s3_archiver::archive::object_key::{FileKind, ObjectKey, Prefix};
use kafka_s3_archiver::archive::partition::{OffsetRange, TopicPartition};
use kafka_s3_archiver::archive::record::{Record, TimestampKind};
use kafka_s3_archiver::encode::spool::{Spool, SpoolData, SpoolOptions, SpoolUsage};
use kafka_s3_archiver::encode::{Compression, FileEncoder, FileMeta, FileSpec, Format};
use kafka_s3_archiver::store::ObjectStore;

fn tp() -> TopicPartition {
    TopicPartition::new("events", 0).unwrap()
}

fn key(prefix: &Prefix, s: i64, e: i64) -> String {
    ObjectKey::new(prefix.clone(), tp(), OffsetRange::new(s, e).unwrap(), FileKind::Parquet).to_string()
}

/// A Parquet file holding `offsets`, as the archiver writes it.
fn parquet(offsets: std::ops::RangeInclusive<i64>, dir: &std::path::Path) -> Bytes {
    let spool = Spool::new(SpoolOptions {
        memory_threshold: 1 << 30,
        dir: dir.to_path_buf(),
        usage: Arc::new(SpoolUsage::default()),
    });
    let mut encoder =
        FileEncoder::new(FileSpec::new(Format::Parquet, Compression::Zstd).unwrap(), &Default::default(), spool)
            .unwrap();
    let mut n = 0;
    for offset in offsets.clone() {
        let record = Record {
            offset,
            timestamp_ms: Some(1_700_000_000_000 + offset),
            timestamp_kind: TimestampKind::CreateTime,
            key: Some(format!("k{offset}").into_bytes()),
            value: Some(vec![b'v'; 100]),
            headers: vec![],
        };
        assert!(encoder.append(&record, false).unwrap());
        n += 1;
    }
    let meta = FileMeta { tp: tp(), range: OffsetRange::new(*offsets.start(), *offsets.end()).unwrap(), records: n };
    encoder.finish(&meta).unwrap().spool.read_all().unwrap()
}

async fn put(store: &dyn ObjectStore, key: &str, body: Bytes) {
    let len = body.len() as u64;
    store.put_if_absent(key, &SpoolData::memory(body), len).await.unwrap();
}

async fn put_claim(store: &dyn ObjectStore, prefix: &Prefix, start: i64, first: i64, end: i64) {
    let claim = Claim {
        chain_start: start,
        first,
        end,
        records: (end - first + 1) as u64,
        retention_gap: false,
        retention_gap_from: None,
        no_records_from: None,
        writer: "test:1".into(),
        time_ms: 0,
        timestamps: None,
        topic_id: None,
        object: None,
        time_source: None,
        schema_ids: Vec::new(),
    };
    put(store, &ClaimKey::new(prefix.clone(), tp(), start).to_string(), claim.to_json().into()).await;
}

/// Runs `verify` on the archive; returns the exit code and what it printed.
fn verify(dest: &TestDest, extra: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kafka-s3-archiver"))
        .args(["verify", "--dest", &dest.url()])
        .args(dest.flags())
        .args(extra)
        .output()
        .expect("run verify");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code().expect("exit code"), text)
}

/// A stray file in the archive's folders is a warning (exit 0), not a problem, unless `--strict`.
#[tokio::test(flavor = "multi_thread")]
async fn a_stray_file_is_a_warning_unless_strict() {
    let dest = TestDest::s3().await;
    let store = dest.store().await;
    let prefix = dest.prefix();
    let tmp = tempfile::tempdir().unwrap();
    put_claim(store.as_ref(), &prefix, 0, 0, 9).await;
    put(store.as_ref(), &key(&prefix, 0, 9), parquet(0..=9, tmp.path())).await;
    put(store.as_ref(), &format!("{}notes.txt", prefix.partition_folder(&tp())), Bytes::from_static(b"hi")).await;
    let (code, text) = verify(&dest, &[]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("warning: not an archive object (ignored by the archiver)"), "{text}");
    let (code, text) = verify(&dest, &["--strict"]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("1 partitions, 1 problems"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn verify_names_each_planted_defect() {
    let dest = TestDest::s3().await;
    let store = dest.store().await;
    let prefix = dest.prefix();
    let tmp = tempfile::tempdir().unwrap();
    let s = store.as_ref();

    // A clean archive: three files under claims, then a hole (compaction) the claim for 30 explains.
    for (start, first, end) in [(0, 0, 9), (10, 10, 19), (20, 20, 29), (30, 35, 39)] {
        put_claim(s, &prefix, start, first, end).await;
        put(s, &key(&prefix, first, end), parquet(first..=end, tmp.path())).await;
    }
    let (code, text) = verify(&dest, &[]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("1 partitions, 0 problems"), "{text}");
    let (code, text) = verify(&dest, &["--deep"]);
    assert_eq!(code, 0, "{text}");
    assert!(text.lines().any(|l| l.starts_with("events") && l.contains(" 35 ")), "35 records counted: {text}");

    // A gap nothing explains: an object after 40..=49 without a claim.
    put(s, &key(&prefix, 50, 59), parquet(50..=59, tmp.path())).await;
    let (code, text) = verify(&dest, &[]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("GAP: offsets 40..=49"), "{text}");

    // An overlap.
    put(s, &key(&prefix, 25, 34), parquet(25..=34, tmp.path())).await;
    let (code, text) = verify(&dest, &[]);
    assert_eq!(code, 1);
    assert!(text.contains("OVERLAP"), "{text}");

    // A key that is not an archive object.
    put(s, &format!("{}notes.txt", prefix.partition_folder(&tp())), Bytes::from_static(b"hello")).await;
    let (_, text) = verify(&dest, &[]);
    assert!(
        text.contains("not an archive object (ignored by the archiver): archive/topic=events/partition=0/notes.txt"),
        "{text}"
    );

    // A claimed range whose data object is gone.
    s.delete(&key(&prefix, 10, 19)).await.unwrap();
    let (_, text) = verify(&dest, &[]);
    assert!(text.contains("MISSING DATA: claim events/0@10 holds offsets 10..=19"), "{text}");

    // A truncated object and one whose contents disagree with its name: only --deep reads them.
    let whole = parquet(0..=9, tmp.path());
    s.delete(&key(&prefix, 0, 9)).await.unwrap();
    put(s, &key(&prefix, 0, 9), whole.slice(..whole.len() / 2)).await;
    put(s, &key(&prefix, 60, 69), parquet(60..=68, tmp.path())).await;
    let (_, text) = verify(&dest, &[]);
    assert!(!text.contains("UNREADABLE") && !text.contains("MISLABELLED"), "{text}");
    let (code, text) = verify(&dest, &["--deep"]);
    assert_eq!(code, 1);
    assert!(text.contains(&format!("UNREADABLE {}", key(&prefix, 0, 9))), "{text}");
    assert!(
        text.contains(&format!("MISLABELLED {}: it holds offsets Some(60)..=Some(68)", key(&prefix, 60, 69))),
        "{text}"
    );

    // The same findings for machines.
    let (code, json) = verify(&dest, &["--deep", "--json"]);
    assert_eq!(code, 1);
    let report: serde_json::Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"));
    let kinds: Vec<&str> =
        report["partitions"][0]["problems"].as_array().unwrap().iter().map(|p| p["kind"].as_str().unwrap()).collect();
    for kind in ["gap", "overlap", "missing_data", "unreadable", "mislabelled"] {
        assert!(kinds.contains(&kind), "{kind} not in {kinds:?}");
    }
    assert_eq!(report["foreign_keys"].as_array().unwrap().len(), 1);

    // Only the partition asked for; an archive that cannot be read is an error (exit 2), not "clean".
    let (code, text) = verify(&dest, &["--topic", "other"]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("0 partitions"), "{text}");
    let missing = TestDest::S3 { bucket: "no-such-bucket-ksa".into() };
    let (code, text) = verify(&missing, &[]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("no-such-bucket-ksa"), "{text}");
}

//! `restore` as users run it (the binary), against tansu and LocalStack: an archived topic restored
//! into a new topic must read back byte for byte (keys, values, headers, timestamps, per-partition
//! order); a restore killed mid-way and run again must still write each record exactly once; key
//! re-partitioning and stdout output.

mod common;

use std::collections::BTreeMap;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::*;
use kafka_s3_archiver::core::partition::TopicPartition;
use kafka_s3_archiver::core::record::{Header, Record, TimestampKind};
use kafka_s3_archiver::core::restore::{murmur2, parse_source_header, SOURCE_HEADER};
use kafka_s3_archiver::generate::produce;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message, Timestamp};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

type Produced = BTreeMap<i32, Vec<Record>>;

/// A topic archived to a fresh S3 bucket by the archiver binary.
async fn archived_topic(partitions: i32, records: usize) -> (TestDest, String, Produced) {
    let topic = unique("src");
    create_topic(&topic, partitions).await;
    let produced = produce(&brokers(), &topic, partitions, 0..records, 60).await.unwrap();
    let dest = TestDest::s3().await;
    let spool = tempfile::tempdir().unwrap();
    let mut archiver =
        ArchiverProcess::spawn("restore-src", &archiver_args(&dest, &unique("g"), &topic, 400, spool.path()));
    let store = dest.store().await;
    wait_archived(store.as_ref(), &dest.prefix(), &topic, &last_offsets(&produced), &mut [&mut archiver]).await;
    assert!(archiver.terminate().success());
    (dest, topic, produced)
}

fn restore_cmd(dest: &TestDest, topic: &str, extra: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kafka-s3-archiver"));
    cmd.args(["restore", "--dest", &dest.url(), "--s3-endpoint", &s3_endpoint(), "--topic", topic]).args(extra);
    cmd
}

fn run(mut cmd: Command) -> Output {
    let out = cmd.output().expect("run restore");
    assert!(out.status.success(), "restore failed: {}", String::from_utf8_lossy(&out.stderr));
    out
}

/// One restored record: where it landed, where it came from, and the record as read.
struct Restored {
    partition: i32,
    source: (TopicPartition, i64),
    record: Record,
}

/// Reads `expected` records of `topic` from the beginning.
fn read_topic_back(topic: &str, partitions: i32, expected: usize) -> Vec<Restored> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers())
        .set("group.id", unique("read-back"))
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, Offset::Beginning).unwrap();
    }
    consumer.assign(&tpl).unwrap();
    let mut out = Vec::new();
    let started = Instant::now();
    // Read a little past the expected count, so that duplicates would show.
    let mut quiet_since: Option<Instant> = None;
    while quiet_since.is_none_or(|q| q.elapsed() < Duration::from_secs(2)) {
        assert!(started.elapsed() < Duration::from_secs(90), "read {} of {expected} records", out.len());
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => {
                let mut headers = Vec::new();
                let mut source = None;
                for h in m.headers().map(|hs| hs.iter().collect::<Vec<_>>()).unwrap_or_default() {
                    if h.key == SOURCE_HEADER {
                        source = parse_source_header(h.value.unwrap());
                    } else {
                        headers.push(Header { key: h.key.to_string(), value: h.value.map(<[u8]>::to_vec) });
                    }
                }
                let (timestamp_ms, timestamp_kind) = match m.timestamp() {
                    Timestamp::CreateTime(t) => (Some(t), TimestampKind::CreateTime),
                    other => panic!("restored records keep their create time, got {other:?}"),
                };
                let source = source.expect("every restored record names its source");
                let record = Record {
                    offset: source.1,
                    timestamp_ms,
                    timestamp_kind,
                    key: m.key().map(<[u8]>::to_vec),
                    value: m.payload().map(<[u8]>::to_vec),
                    headers,
                };
                out.push(Restored { partition: m.partition(), source, record });
            }
            Some(Err(e)) => panic!("reading back: {e}"),
            None if out.len() >= expected => {
                quiet_since.get_or_insert_with(Instant::now);
            }
            None => {}
        }
    }
    out
}

/// Every produced record exactly once, equal, and in source offset order within each target partition.
fn assert_restored_exactly(produced: &Produced, restored: &[Restored]) {
    let mut seen: BTreeMap<(i32, i64), &Record> = BTreeMap::new();
    for r in restored {
        assert!(
            seen.insert((r.source.0.partition(), r.source.1), &r.record).is_none(),
            "{:?} restored twice",
            r.source
        );
    }
    let expected: usize = produced.values().map(Vec::len).sum();
    assert_eq!(seen.len(), expected, "restored {} distinct records of {expected}", seen.len());
    for (p, records) in produced {
        for want in records {
            assert_eq!(seen.get(&(*p, want.offset)).copied(), Some(want), "record {p}/{}", want.offset);
        }
    }
    let mut last: BTreeMap<(i32, i32), i64> = BTreeMap::new();
    for r in restored {
        let prev = last.insert((r.partition, r.source.0.partition()), r.source.1);
        assert!(prev.is_none_or(|o| o < r.source.1), "out of order in target partition {}", r.partition);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restored_topic_reads_back_byte_for_byte() {
    let (dest, topic, produced) = archived_topic(3, 3000).await;
    let target = unique("dst");
    create_topic(&target, 3).await;
    let out = run(restore_cmd(&dest, &topic, &["--to-topic", &target, "--brokers", &brokers()]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stderr}");
    assert!(stderr.contains("restored 3000 records"), "{stderr}");
    let restored = read_topic_back(&target, 3, 3000);
    assert!(restored.iter().all(|r| r.partition == r.source.0.partition()), "partition p goes to partition p");
    assert_restored_exactly(&produced, &restored);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restore_killed_midway_and_run_again_is_exactly_once() {
    let (dest, topic, produced) = archived_topic(2, 3000).await;
    let target = unique("dst");
    create_topic(&target, 2).await;
    let args = ["--to-topic", target.as_str(), "--brokers", &brokers()].map(String::from);
    let mut slow: Vec<String> = args.to_vec();
    slow.extend(["--max-rate".into(), "1000".into()]);
    let mut first = restore_cmd(&dest, &topic, &slow.iter().map(String::as_str).collect::<Vec<_>>()).spawn().unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    first.kill().unwrap();
    first.wait().unwrap();
    let partial = read_topic_back(&target, 2, 1).len();
    assert!(partial > 0 && partial < 3000, "the first run should be cut short: {partial} records");
    let out = run(restore_cmd(&dest, &topic, &args.iter().map(String::as_str).collect::<Vec<_>>()));
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("after a SIGKILL at {partial} records, the re-run said: {stderr}");
    assert!(stderr.contains(&format!("{partial} already there")), "{stderr}");
    assert_restored_exactly(&produced, &read_topic_back(&target, 2, 3000));
}

#[tokio::test(flavor = "multi_thread")]
async fn key_partitioning_into_another_partition_count() {
    let (dest, topic, produced) = archived_topic(3, 1500).await;
    let target = unique("dst");
    create_topic(&target, 2).await;
    run(restore_cmd(&dest, &topic, &["--to-topic", &target, "--brokers", &brokers(), "--partitioning", "key"]));
    let restored = read_topic_back(&target, 2, 1500);
    assert_restored_exactly(&produced, &restored);
    for r in &restored {
        let expected = match &r.record.key {
            Some(k) => (murmur2(k) & 0x7fff_ffff) % 2,
            None => r.source.0.partition() % 2,
        };
        assert_eq!(r.partition, expected, "{:?}", r.source);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_offset_range_to_stdout_as_json_lines() {
    let (dest, topic, produced) = archived_topic(2, 600).await;
    let out = run(restore_cmd(
        &dest,
        &topic,
        &["--to-stdout", "--partition", "1", "--from-offset", "10", "--to-offset", "19"],
    ));
    let lines: Vec<serde_json::Value> =
        String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let offsets: Vec<i64> = lines.iter().map(|l| l["offset"].as_i64().unwrap()).collect();
    assert_eq!(offsets, (10..20).collect::<Vec<_>>());
    assert!(lines.iter().all(|l| l["topic"] == topic.as_str() && l["partition"] == 1));
    let want = &produced[&1][10];
    assert_eq!(lines[0]["timestamp"].as_i64(), want.timestamp_ms);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_time_window_reads_only_the_objects_that_can_match() {
    // 1500 records per partition in 400-record files; record i has timestamp base + i.
    let (dest, topic, produced) = archived_topic(2, 3000).await;
    let base = produced[&0][0].timestamp_ms.unwrap();
    let (from, to) = (base + 1000, base + 1199);
    let out = run(restore_cmd(
        &dest,
        &topic,
        &["--to-stdout", "--from-time", &from.to_string(), "--to-time", &to.to_string()],
    ));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<serde_json::Value> =
        String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let expected: usize =
        produced.values().flatten().filter(|r| (from..=to).contains(&r.timestamp_ms.unwrap())).count();
    assert_eq!(lines.len(), expected);
    assert!(lines.iter().all(|l| (from..=to).contains(&l["timestamp"].as_i64().unwrap())));
    // Only the one file per partition whose claim's timestamps meet the window was read.
    assert!(stderr.contains("6 objects skipped by time"), "{stderr}");
}

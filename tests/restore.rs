//! `restore` as users run it (the binary), against tansu and LocalStack: an archived topic restored
//! into a new topic must read back byte for byte (keys, values, headers, timestamps, per-partition
//! order); a restore killed mid-way and run again must still write each record exactly once; key
//! re-partitioning and stdout output.

mod common;

use std::collections::BTreeMap;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::*;
use kafka_s3_archiver::archive::partition::TopicPartition;
use kafka_s3_archiver::archive::record::{Record, TimestampKind};
use kafka_s3_archiver::commands::demo::generate::produce;
use kafka_s3_archiver::commands::restore::plan::{murmur2, parse_source_header, SOURCE_HEADER};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Message, Timestamp};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

type Produced = BTreeMap<i32, Vec<Record>>;

/// A topic archived to a fresh S3 bucket by the archiver binary.
async fn archived_topic(partitions: i32, records: usize) -> (TestDest, String, Produced) {
    archived_topic_on(TestDest::s3().await, partitions, records).await
}

async fn archived_topic_on(dest: TestDest, partitions: i32, records: usize) -> (TestDest, String, Produced) {
    let topic = unique("src");
    create_topic(&topic, partitions).await;
    let produced = produce(&brokers(), &topic, partitions, 0..records, 60).await.unwrap();
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
    cmd.args(["restore", "--dest", &dest.url(), "--topic", topic]).args(dest.flags()).args(extra);
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

/// Reads `expected` restored records of `topic` from the beginning; every record must be a restored one.
fn read_topic_back(topic: &str, partitions: i32, expected: usize) -> Vec<Restored> {
    let (restored, others) = read_topic_back_with_others(topic, partitions, expected);
    assert_eq!(others, 0, "every restored record names its source");
    restored
}

/// Reads `expected` restored records of `topic` from the beginning, and counts the other records
/// (written by other producers).
fn read_topic_back_with_others(topic: &str, partitions: i32, expected: usize) -> (Vec<Restored>, usize) {
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
    let mut others = 0;
    let started = Instant::now();
    // Read a little past the expected count, so that duplicates would show.
    let mut quiet_since: Option<Instant> = None;
    while quiet_since.is_none_or(|q| q.elapsed() < Duration::from_secs(2)) {
        assert!(started.elapsed() < Duration::from_secs(90), "read {} of {expected} records", out.len());
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => {
                let mut headers = Vec::new();
                let mut source = None;
                for h in m.headers().map(kafka_s3_archiver::source::headers::read).unwrap_or_default() {
                    if h.key == SOURCE_HEADER.as_bytes() {
                        source = parse_source_header(h.value.as_deref().unwrap());
                    } else {
                        headers.push(h);
                    }
                }
                let (timestamp_ms, timestamp_kind) = match m.timestamp() {
                    Timestamp::CreateTime(t) => (Some(t), TimestampKind::CreateTime),
                    other => panic!("restored records keep their create time, got {other:?}"),
                };
                let Some(source) = source else {
                    others += 1;
                    continue;
                };
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
    (out, others)
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
    restore_killed_midway_and_run_again(TestDest::s3().await).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn gcs_a_restore_killed_midway_and_run_again_is_exactly_once() {
    restore_killed_midway_and_run_again(TestDest::gcs().await).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn azure_a_restore_killed_midway_and_run_again_is_exactly_once() {
    restore_killed_midway_and_run_again(TestDest::azure().await).await;
}

async fn restore_killed_midway_and_run_again(dest: TestDest) {
    let (dest, topic, produced) = archived_topic_on(dest, 2, 3000).await;
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

/// A complete restore leaves a summary of what the target holds: a re-run reads back only what the target
/// received after it (here another producer's records), not the whole topic, and still writes each
/// archived record once; a re-run with nothing to do reads nothing back. The summary of a target since
/// deleted and created again is not used: everything is restored again.
#[tokio::test(flavor = "multi_thread")]
async fn a_re_run_reads_back_only_what_the_target_received_after_the_last_complete_run() {
    let (dest, topic, produced) = archived_topic(2, 3000).await;
    let target = unique("dst");
    create_topic(&target, 2).await;
    let brokers = brokers();
    let args = ["--to-topic", target.as_str(), "--brokers", brokers.as_str()];
    let restore = |extra: &[&str]| {
        let out = run(restore_cmd(&dest, &topic, &[&args[..], extra].concat()));
        let said = String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or_default().to_string();
        println!("{extra:?}: {said}");
        said
    };
    let first = restore(&["--to-offset", "749"]);
    assert!(
        first.contains("restored 1500 records") && first.contains(", 0 records of the target read back"),
        "{first}"
    );
    produce(&brokers, &target, 2, 0..10, 60).await.unwrap();
    let second = restore(&[]);
    assert!(second.contains("restored 1500 records") && second.contains("1500 already there"), "{second}");
    assert!(second.contains(", 10 records of the target read back"), "only the other producer's: {second}");
    let third = restore(&[]);
    assert!(third.contains("restored 0 records") && third.contains("3000 already there"), "{third}");
    assert!(third.contains(", 0 records of the target read back"), "{third}");
    let (restored, others) = read_topic_back_with_others(&target, 2, 3000);
    assert_eq!(others, 10);
    assert_restored_exactly(&produced, &restored);

    // The target deleted and created again, another producer's records in it: the old summary is not
    // used (another topic ID, or offsets the brokers dropped with the topic).
    delete_topic(&target).await;
    create_topic(&target, 2).await;
    produce(&brokers, &target, 2, 0..5, 60).await.unwrap();
    let again = restore(&[]);
    assert!(again.contains("restored 3000 records") && again.contains(" 0 already there"), "{again}");
    assert!(again.contains(", 5 records of the target read back"), "{again}");
    let (restored, others) = read_topic_back_with_others(&target, 2, 3000);
    assert_eq!(others, 5);
    assert_restored_exactly(&produced, &restored);
}

/// Two restores at once into one topic, each of other source partitions: each one's summary leaves out
/// what the other wrote meanwhile, so it ends that partition where the run started; a re-run then reads
/// the other's records back and writes nothing twice.
#[tokio::test(flavor = "multi_thread")]
async fn a_re_run_after_two_restores_at_once_writes_nothing_twice() {
    let (dest, topic, produced) = archived_topic(2, 3000).await;
    let target = unique("dst");
    create_topic(&target, 2).await;
    let brokers = brokers();
    let args = ["--to-topic", target.as_str(), "--brokers", brokers.as_str(), "--max-rate", "500"];
    let mut both: Vec<_> = ["0", "1"]
        .map(|p| restore_cmd(&dest, &topic, &[&args[..], &["--partition", p]].concat()).spawn().unwrap())
        .into();
    for child in &mut both {
        assert!(child.wait().unwrap().success());
    }
    let out = run(restore_cmd(&dest, &topic, &args[..4]));
    let said = String::from_utf8_lossy(&out.stderr);
    println!("the re-run: {}", said.lines().last().unwrap_or_default());
    assert!(said.contains("restored 0 records") && said.contains("3000 already there"), "{said}");
    // The two ran at once (3 s each): the last one's summary left the other's partition to be read back.
    assert!(!said.contains(", 0 records of the target read back"), "{said}");
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

/// A restore into a topic that another producer keeps writing to (the usual case after an incident):
/// reading the target back ends where the target ended when the restore started, every archived
/// record lands once, a second run restores nothing, and the other producer's records are untouched.
#[tokio::test(flavor = "multi_thread")]
async fn a_restore_into_a_live_topic_completes_with_each_archived_record_once() {
    use rdkafka::producer::{FutureProducer, FutureRecord};
    let (dest, topic, produced) = archived_topic(2, 8000).await;
    let target = unique("live");
    create_topic(&target, 2).await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (stop, target) = (stop.clone(), target.clone());
        let producer: FutureProducer = ClientConfig::new().set("bootstrap.servers", brokers()).create().unwrap();
        tokio::spawn(async move {
            let mut written = 0;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let payload = format!("live {written}");
                let record = FutureRecord::<(), str>::to(&target).partition(written % 2).payload(&payload);
                producer.send(record, Duration::from_secs(10)).await.expect("the live producer writes");
                written += 1;
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            written as usize
        })
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    let args: Vec<String> = ["--to-topic", target.as_str(), "--brokers", &brokers()].map(String::from).to_vec();
    let restore = |args: Vec<String>| {
        let (dest_url, topic) = (dest.url(), topic.clone());
        async move {
            let run = tokio::task::spawn_blocking(move || {
                let mut cmd = Command::new(env!("CARGO_BIN_EXE_kafka-s3-archiver"));
                cmd.args(["restore", "--dest", &dest_url, "--s3-endpoint", &s3_endpoint(), "--topic", &topic]);
                cmd.args(&args);
                run(cmd)
            });
            let out = tokio::time::timeout(Duration::from_secs(120), run).await.expect("restore finishes").unwrap();
            String::from_utf8_lossy(&out.stderr).into_owned()
        }
    };
    let first = restore(args.clone()).await;
    assert!(first.contains("restored 8000 records"), "{first}");
    let second = restore(args).await;
    println!("second run into the live topic: {second}");
    assert!(second.contains("restored 0 records") && second.contains("8000 already there"), "{second}");
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let live = writer.await.unwrap();
    let (restored, others) = read_topic_back_with_others(&target, 2, 8000);
    assert_restored_exactly(&produced, &restored);
    assert_eq!(others, live, "the other producer's records are all there, untouched");
}

/// A topic of 6,000 records on a mock cluster (whose broker a test can take down or make refuse a
/// request), archived to a directory, and an empty target topic `dst` beside it.
struct MockRestore {
    cluster: rdkafka::mocking::MockCluster<'static, rdkafka::producer::DefaultProducerContext>,
    bootstrap: String,
    dest: String,
    produced: Produced,
    _dir: tempfile::TempDir,
}

impl MockRestore {
    async fn new() -> Self {
        let cluster = rdkafka::mocking::MockCluster::new(1).unwrap();
        let bootstrap = cluster.bootstrap_servers();
        cluster.create_topic("src", 1, 1).unwrap();
        cluster.create_topic("dst", 1, 1).unwrap();
        let produced = produce(&bootstrap, "src", 1, 0..6000, 60).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        archive_mock_topic(&bootstrap, dir.path(), "src", &produced).await;
        let dest = format!("file://{}", dir.path().join("archive").display());
        Self { cluster, bootstrap, dest, produced, _dir: dir }
    }

    fn restore(&self, extra: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_kafka-s3-archiver"));
        cmd.args(["restore", "--dest", &self.dest, "--topic", "src", "--brokers", &self.bootstrap]);
        cmd.args(["--to-topic", "dst"]).args(extra);
        cmd
    }

    /// Starts a slow restore, does `cut` to it after 2 s, and returns what the failed run said.
    async fn cut_short(&self, cut: impl FnOnce(&Self), extra: &[&str]) -> String {
        let mut args = vec!["--max-rate", "1500"];
        args.extend(extra);
        let first = self.restore(&args).stderr(std::process::Stdio::piped()).spawn().unwrap();
        tokio::time::sleep(Duration::from_secs(2)).await;
        cut(self);
        let failed = tokio::task::spawn_blocking(move || first.wait_with_output()).await.unwrap().unwrap();
        let said = String::from_utf8_lossy(&failed.stderr).into_owned();
        assert!(!failed.status.success(), "the first run must fail: {said}");
        said
    }

    /// Reads `dst` whole: every archived offset exactly once.
    fn assert_each_once(&self) {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .set("group.id", "read-back")
            .set("enable.auto.commit", "false")
            .create()
            .unwrap();
        let (_, end) = consumer.fetch_watermarks("dst", 0, Duration::from_secs(10)).unwrap();
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset("dst", 0, Offset::Beginning).unwrap();
        consumer.assign(&tpl).unwrap();
        let mut sources: BTreeMap<i64, u32> = BTreeMap::new();
        let started = Instant::now();
        let mut next = 0;
        while next < end {
            assert!(started.elapsed() < Duration::from_secs(60), "read {next} of {end}");
            if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
                next = m.offset() + 1;
                let headers = m.headers().map(kafka_s3_archiver::source::headers::read).unwrap_or_default();
                let source =
                    headers.iter().find(|h| h.key == SOURCE_HEADER.as_bytes()).and_then(|h| h.value.as_deref());
                let (_, offset) = parse_source_header(source.expect("a restored record")).unwrap();
                *sources.entry(offset).or_default() += 1;
            }
        }
        let twice: Vec<i64> = sources.iter().filter(|(_, n)| **n > 1).map(|(o, _)| *o).collect();
        assert!(twice.is_empty(), "restored twice: {twice:?}");
        let missing: Vec<i64> =
            self.produced[&0].iter().map(|r| r.offset).filter(|o| !sources.contains_key(o)).collect();
        assert!(missing.is_empty(), "{} archived offsets not restored: {missing:?}", missing.len());
        assert_eq!(sources.len(), self.produced[&0].len(), "nothing else");
    }
}

/// The target's broker goes away for longer than `message.timeout.ms` while a restore runs: the run
/// fails with the messages that timed out, and a second run writes exactly the source offsets the
/// target does not hold.
#[tokio::test(flavor = "multi_thread")]
async fn a_restore_cut_off_by_a_broker_outage_resumes_exactly_once() {
    let m = MockRestore::new().await;
    let timeout = ["--kafka", "message.timeout.ms=1500"];
    let said = m.cut_short(|m| m.cluster.broker_down(1).unwrap(), &timeout).await;
    m.cluster.broker_up(1).unwrap();
    println!("first run, its broker away: {}", said.lines().last().unwrap_or_default());
    assert!(said.contains("MessageTimedOut"), "{said}");
    let second = run(m.restore(&timeout));
    println!("second run: {}", String::from_utf8_lossy(&second.stderr));
    m.assert_each_once();
}

/// One batch of a restore refused by the broker (a permanent error) while the batches after it are
/// written: the failed run leaves a hole in what it wrote, and the second run fills exactly the hole
/// (going by the highest offset restored, it would skip it).
#[tokio::test(flavor = "multi_thread")]
async fn a_hole_left_by_a_failed_restore_is_filled_exactly() {
    use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};
    let m = MockRestore::new().await;
    let refuse = |m: &MockRestore| {
        m.cluster.request_errors(RDKafkaApiKey::Produce, &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_INVALID_RECORD])
    };
    let said = m.cut_short(refuse, &[]).await;
    println!("first run, a batch refused: {}", said.lines().last().unwrap_or_default());
    let second = run(m.restore(&[]));
    let said = String::from_utf8_lossy(&second.stderr);
    println!("second run: {said}");
    assert!(said.contains("left holes") && said.contains("holes=1"), "{said}");
    m.assert_each_once();
}

/// A record restored, archived again and restored again carries a source header per restore: the last
/// one names where it came from this time. A re-run that reads the target back (no summary: `acks=1`,
/// without idempotence, leaves none) must skip by it, or it writes everything a second time.
#[tokio::test(flavor = "multi_thread")]
async fn a_restored_topic_archived_and_restored_again_re_runs_exactly_once() {
    let (dest, topic, _) = archived_topic(1, 300).await;
    let copy = unique("copy");
    create_topic(&copy, 1).await;
    run(restore_cmd(&dest, &topic, &["--to-topic", &copy, "--brokers", &brokers()]));
    let copy_dest = TestDest::s3().await;
    let spool = tempfile::tempdir().unwrap();
    let mut archiver =
        ArchiverProcess::spawn("restore-copy", &archiver_args(&copy_dest, &unique("g"), &copy, 100, spool.path()));
    let store = copy_dest.store().await;
    wait_archived(store.as_ref(), &copy_dest.prefix(), &copy, &BTreeMap::from([(0, 299)]), &mut [&mut archiver]).await;
    assert!(archiver.terminate().success());

    let target = unique("dst");
    create_topic(&target, 1).await;
    let kafka = brokers();
    // No summary (acks=1, without idempotence): the re-run reads the target back by its records' headers.
    let no_summary = ["--kafka", "acks=1", "--kafka", "enable.idempotence=false"];
    let args: Vec<&str> = ["--to-topic", target.as_str(), "--brokers", &kafka].into_iter().chain(no_summary).collect();
    run(restore_cmd(&copy_dest, &copy, &args));
    let again = run(restore_cmd(&copy_dest, &copy, &args));
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(stderr.contains("restored 0 records") && stderr.contains("300 already there"), "{stderr}");
}

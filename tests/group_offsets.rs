//! Consumer-group offsets for disaster recovery, as an operator runs it, on Apache Kafka and LocalStack:
//! `run --archive-group-offsets` keeps the matching groups' committed offsets in the archive, `status`
//! shows the latest snapshot, and `restore --translate-group-offsets` gives each group its position in
//! the restored topic, where a consumer of the group then reads exactly the records it had not
//! consumed: counted, nothing skipped, nothing twice; a dry run sets nothing, and a group with an active
//! member is left alone.

mod common;

use std::collections::BTreeMap;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::*;
use kafka_s3_archiver::archive::group_offsets::GroupOffsetsSnapshot;
use kafka_s3_archiver::archive::record::Record;
use kafka_s3_archiver::commands::demo::generate::produce;
use kafka_s3_archiver::commands::restore::plan::{parse_source_header, SOURCE_HEADER};
use kafka_s3_archiver::store::list_all;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

const PARTITIONS: i32 = 3;
const RECORDS: usize = 1_500;

fn bin(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kafka-s3-archiver")).args(args).output().expect("run the archiver binary")
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn group_client(group: &str) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", brokers())
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .create()
        .unwrap()
}

/// Commits `offsets` for `group`, as a consumer of it does after reading up to them.
fn commit(group: &str, topic: &str, offsets: &BTreeMap<i32, i64>) {
    let mut tpl = TopicPartitionList::new();
    for (p, o) in offsets {
        tpl.add_partition_offset(topic, *p, Offset::Offset(*o)).unwrap();
    }
    group_client(group).commit(&tpl, CommitMode::Sync).unwrap();
}

fn committed(group: &str, topic: &str) -> BTreeMap<i32, i64> {
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition(topic, p);
    }
    let found = group_client(group).committed_offsets(tpl, Duration::from_secs(10)).unwrap();
    found
        .elements()
        .iter()
        .filter_map(|e| e.offset().to_raw().filter(|o| *o >= 0).map(|o| (e.partition(), o)))
        .collect()
}

/// The source offsets a member of `group` reads from `topic` (each record's header), per source partition,
/// until it has `expected` and then nothing more comes for a while; the consumer stays a member.
fn consume_as(group: &str, topic: &str, expected: usize) -> (BaseConsumer, BTreeMap<i32, Vec<i64>>) {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers())
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        // A partition the translation did not set would start at its end: nothing read, and the test fails.
        .set("auto.offset.reset", "latest")
        .create()
        .unwrap();
    consumer.subscribe(&[topic]).unwrap();
    let (mut read, mut count) = (BTreeMap::<i32, Vec<i64>>::new(), 0);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut quiet_since = Instant::now();
    while Instant::now() < deadline && (count < expected || quiet_since.elapsed() < Duration::from_secs(3)) {
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(msg)) => {
                let header =
                    msg.headers().and_then(|h| h.iter().find(|h| h.key == SOURCE_HEADER)).and_then(|h| h.value);
                let (source, offset) = header.and_then(parse_source_header).expect("a restored record");
                read.entry(source.partition()).or_default().push(offset);
                count += 1;
                quiet_since = Instant::now();
            }
            Some(Err(e)) => panic!("consuming {topic} as {group}: {e}"),
            None => {}
        }
    }
    (consumer, read)
}

/// The groups of one application, their committed offsets on the source topic, and a group of another.
struct Groups {
    half: String,
    none: String,
    end: String,
    other: String,
    half_way: BTreeMap<i32, i64>,
}

impl Groups {
    /// Three groups of the app, half-way (three different positions), at 0 and at the end, and another
    /// one, with their offsets committed on `topic`.
    fn committed(app: &str, topic: &str, ends: &BTreeMap<i32, i64>) -> Self {
        let g = Groups {
            half: format!("{app}-half"),
            none: format!("{app}-none"),
            end: format!("{app}-end"),
            other: unique("other"),
            half_way: ends.iter().map(|(p, last)| (*p, [last / 2, last / 3, last + 1][*p as usize])).collect(),
        };
        commit(&g.half, topic, &g.half_way);
        commit(&g.none, topic, &ends.keys().map(|p| (*p, 0)).collect());
        commit(&g.end, topic, &ends.iter().map(|(p, last)| (*p, last + 1)).collect());
        commit(&g.other, topic, &g.half_way);
        g
    }
}

/// Archives `topic` with `--archive-group-offsets` for the app's groups; the snapshot taken.
async fn archive_keeping_offsets(
    dest: &TestDest,
    topic: &str,
    ends: &BTreeMap<i32, i64>,
    app: &str,
) -> GroupOffsetsSnapshot {
    let spool = tempfile::tempdir().unwrap();
    let mut args = archiver_args(dest, &unique("archivers"), topic, 400, spool.path());
    args.extend([
        "--archive-group-offsets".into(),
        format!("{app}-.*"),
        "--group-offsets-interval".into(),
        "1s".into(),
    ]);
    let mut archiver = ArchiverProcess::spawn("dr-archiver", &args);
    let store = dest.store().await;
    wait_archived(store.as_ref(), &dest.prefix(), topic, ends, &mut [&mut archiver]).await;
    let folder = format!("{}/_group-offsets/topic={topic}/", dest.prefix().as_str());
    let deadline = Instant::now() + Duration::from_secs(30);
    let snapshot = loop {
        archiver.assert_running();
        if let Some(key) = list_all(store.as_ref(), &folder).await.unwrap().last() {
            break GroupOffsetsSnapshot::from_json(key, &store.get(key).await.unwrap()).unwrap();
        }
        assert!(Instant::now() < deadline, "no snapshot of the groups' offsets under {folder}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert!(archiver.terminate().success());
    snapshot
}

#[tokio::test(flavor = "multi_thread")]
async fn groups_resume_in_a_restored_topic_at_the_next_record_they_had_not_consumed() {
    let topic = unique("dr-src");
    create_topic(&topic, PARTITIONS).await;
    let produced = produce(&brokers(), &topic, PARTITIONS, 0..RECORDS, 60).await.unwrap();
    // Retention took partition 0's first 100 records before they were archived: the target's offsets
    // are not the source's.
    delete_records_before(&topic, 0, 100).await;
    let ends = last_offsets(&produced);
    let app = unique("app");
    let g = Groups::committed(&app, &topic, &ends);
    let dest = TestDest::s3().await;
    let snapshot = archive_keeping_offsets(&dest, &topic, &ends, &app).await;
    let kept: Vec<&String> = snapshot.groups.keys().collect();
    assert_eq!(kept, [&g.end, &g.half, &g.none], "only the app's groups are kept");
    assert_eq!(snapshot.groups[&g.half], g.half_way);
    assert!(snapshot.topic_id.is_some(), "the topic's incarnation is recorded");
    let (url, endpoint, kafka) = (dest.url(), s3_endpoint(), brokers());
    let status = bin(&[
        "status",
        "--dest",
        &url,
        "--s3-endpoint",
        &endpoint,
        "--brokers",
        &kafka,
        "--group",
        "x",
        "--topic",
        &topic,
    ]);
    let listed = format!("({}, {}, {})", g.end, g.half, g.none);
    assert!(status.status.success() && text(&status).contains(&listed), "{}", text(&status));

    let target = unique("dr-target");
    create_topic(&target, PARTITIONS).await;
    let restore = |extra: &[&str]| {
        let mut args = vec!["restore", "--dest", &url, "--s3-endpoint", &endpoint, "--topic", &topic];
        args.extend(["--to-topic", &target, "--brokers", &kafka, "--translate-group-offsets"]);
        args.extend(extra);
        bin(&args)
    };
    let dry = restore(&["--dry-run"]);
    assert!(dry.status.success() && text(&dry).contains("dry run: nothing set"), "{}", text(&dry));
    assert!(committed(&g.half, &target).is_empty(), "a dry run sets nothing");
    let done = restore(&[]);
    assert!(done.status.success() && text(&done).contains("offsets set"), "{}", text(&done));

    // Each group reads exactly what it had not consumed of what was archived.
    let unconsumed = |from: &BTreeMap<i32, i64>| -> BTreeMap<i32, Vec<i64>> {
        let archived = |p: i32, o: i64| p != 0 || o >= 100;
        let offsets = |p: i32, records: &[Record]| -> Vec<i64> {
            records.iter().map(|r| r.offset).filter(|o| *o >= from[&p] && archived(p, *o)).collect()
        };
        produced.iter().map(|(p, records)| (*p, offsets(*p, records))).filter(|(_, o)| !o.is_empty()).collect()
    };
    for (group, from) in [(&g.half, &g.half_way), (&g.none, &snapshot.groups[&g.none])] {
        let expected = unconsumed(from);
        let (_member, read) = consume_as(group, &target, expected.values().map(Vec::len).sum());
        assert_eq!(read, expected, "{group} resumes at the next record it had not consumed, each once");
    }
    let (member, read) = consume_as(&g.end, &target, 0);
    assert!(read.is_empty(), "{} had consumed everything: {read:?}", g.end);
    let high = |p: i32| group_client(&g.other).fetch_watermarks(&target, p, Duration::from_secs(10)).unwrap().1;
    assert_eq!(committed(&g.end, &target), (0..PARTITIONS).map(|p| (p, high(p))).collect(), "set at the ends");

    // A group someone consumes in is not moved, nor is any other.
    let again = restore(&[]);
    assert!(!again.status.success() && text(&again).contains("Stop its consumers"), "{}", text(&again));
    drop(member);
}

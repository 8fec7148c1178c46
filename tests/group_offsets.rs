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

#[tokio::test(flavor = "multi_thread")]
async fn groups_resume_in_a_restored_topic_at_the_next_record_they_had_not_consumed() {
    let topic = unique("dr-src");
    create_topic(&topic, PARTITIONS).await;
    let produced = produce(&brokers(), &topic, PARTITIONS, 0..RECORDS, 60).await.unwrap();
    let ends = last_offsets(&produced);
    let app = unique("app");
    let (half, none, end, other) =
        (format!("{app}-half"), format!("{app}-none"), format!("{app}-end"), unique("other"));
    let half_way: BTreeMap<i32, i64> =
        ends.iter().map(|(p, last)| (*p, [last / 2, last / 3, last + 1][*p as usize])).collect();
    commit(&half, &topic, &half_way);
    commit(&none, &topic, &ends.keys().map(|p| (*p, 0)).collect());
    commit(&end, &topic, &ends.iter().map(|(p, last)| (*p, last + 1)).collect());
    commit(&other, &topic, &half_way);

    // Archive, keeping the offsets of the app's groups every second.
    let dest = TestDest::s3().await;
    let spool = tempfile::tempdir().unwrap();
    let mut args = archiver_args(&dest, &unique("archivers"), &topic, 400, spool.path());
    args.extend([
        "--archive-group-offsets".into(),
        format!("{app}-.*"),
        "--group-offsets-interval".into(),
        "1s".into(),
    ]);
    let mut archiver = ArchiverProcess::spawn("dr-archiver", &args);
    let store = dest.store().await;
    wait_archived(store.as_ref(), &dest.prefix(), &topic, &ends, &mut [&mut archiver]).await;
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
    assert_eq!(snapshot.groups.keys().collect::<Vec<_>>(), [&end, &half, &none], "only the app's groups are kept");
    assert_eq!(snapshot.groups[&half], half_way);
    let status = bin(&[
        "status",
        "--dest",
        &dest.url(),
        "--s3-endpoint",
        &s3_endpoint(),
        "--brokers",
        &brokers(),
        "--group",
        "x",
        "--topic",
        &topic,
    ]);
    assert!(
        status.status.success() && text(&status).contains(&format!("({end}, {half}, {none})")),
        "{}",
        text(&status)
    );

    // Into a fresh topic that already holds other records, so the offsets differ from the source's.
    let target = unique("dr-target");
    create_topic(&target, PARTITIONS).await;
    produce(&brokers(), &target, PARTITIONS, 0..7, 60).await.unwrap();
    let (url, endpoint, kafka) = (dest.url(), s3_endpoint(), brokers());
    let restore = |extra: &[&str]| {
        let mut args = vec!["restore", "--dest", &url, "--s3-endpoint", &endpoint, "--topic", &topic];
        args.extend(["--to-topic", &target, "--brokers", &kafka, "--translate-group-offsets"]);
        args.extend(extra);
        bin(&args)
    };
    let dry = restore(&["--dry-run"]);
    assert!(dry.status.success() && text(&dry).contains("dry run: nothing set"), "{}", text(&dry));
    assert!(committed(&half, &target).is_empty(), "a dry run sets nothing");
    let done = restore(&[]);
    assert!(done.status.success() && text(&done).contains("offsets set"), "{}", text(&done));

    // Each group reads exactly what it had not consumed.
    let unconsumed = |from: &BTreeMap<i32, i64>| -> BTreeMap<i32, Vec<i64>> {
        produced
            .iter()
            .map(|(p, records)| (*p, records.iter().map(|r| r.offset).filter(|o| *o >= from[p]).collect::<Vec<_>>()))
            .filter(|(_, offsets)| !offsets.is_empty())
            .collect()
    };
    for (group, from) in [(&half, &half_way), (&none, &snapshot.groups[&none])] {
        let expected = unconsumed(from);
        let (_member, read) = consume_as(group, &target, expected.values().map(Vec::len).sum());
        assert_eq!(read, expected, "{group} resumes at the next record it had not consumed, each once");
    }
    let (member, read) = consume_as(&end, &target, 0);
    assert!(read.is_empty(), "{end} had consumed everything: {read:?}");

    // A group someone consumes in is not moved.
    let again = restore(&[]);
    assert!(!again.status.success() && text(&again).contains("Stop its consumers"), "{}", text(&again));
    drop(member);
}

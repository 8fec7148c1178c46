//! Retention on Apache Kafka: offsets that retention deleted before they were archived are a
//! RETENTION GAP — flagged by `status` while the archive is behind the log start, logged with their
//! exact range when the archiver resumes, counted, recorded in the next claim and reported by `verify`
//! as a retention gap (never as a plain gap), with the log's offsets as Kafka gives them — and every
//! record that still existed is archived exactly once. At assignment, and mid-stream: while fetching is
//! paused (an S3 outage) retention deletes past the consumer's position.

mod common;

use common::s3_proxy::{Fault, Kind, S3Proxy};

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use kafka_s3_archiver::archive::claim::{Claim, ClaimKey};
use kafka_s3_archiver::archive::partition::TopicPartition;
use kafka_s3_archiver::archive::record::Record;
use kafka_s3_archiver::commands::demo::check::{compare, read_topic};
use kafka_s3_archiver::commands::demo::generate::{merge, produce};
use kafka_s3_archiver::commands::status::{status, StatusOptions};
use kafka_s3_archiver::commands::verify::audit::Problem;
use kafka_s3_archiver::encode::spool::SpoolData;
use kafka_s3_archiver::recovery::standing::StatusFlag;
use kafka_s3_archiver::recovery::LogOffsets;

#[tokio::test(flavor = "multi_thread")]
async fn a_retention_gap_at_assignment_is_recorded_reported_and_counted() {
    let topic = unique("retention");
    create_topic(&topic, 1).await;
    let dest = TestDest::s3().await;
    let store = dest.store().await;
    let prefix = dest.prefix();
    let group = unique("retention-group");
    let spool = tempfile::tempdir().unwrap();
    let args = archiver_args(&dest, &group, &topic, 100, spool.path());

    // Offsets 0..=299 archived, then the archiver stops.
    let mut produced = produce(&brokers(), &topic, 1, 0..300, 64).await.unwrap();
    let mut first = ArchiverProcess::spawn("retention-1", &args);
    wait_archived(store.as_ref(), &prefix, &topic, &BTreeMap::from([(0, 299)]), &mut [&mut first]).await;
    assert!(first.terminate().success(), "{}", first.log_text());

    // 300..=599 produced while it is down; retention deletes everything below 450.
    merge(&mut produced, produce(&brokers(), &topic, 1, 300..600, 64).await.unwrap());
    delete_records_before(&topic, 0, 450).await;
    let options = StatusOptions {
        prefix: prefix.clone(),
        topics: vec![topic.clone()],
        brokers: brokers(),
        props: vec![],
        group: group.clone(),
    };
    let before = status(store.as_ref(), &options).await.unwrap();
    println!("{}", before.table());
    let row = &before.partitions[0];
    assert_eq!((row.archived_through, row.log_start, row.log_end), (Some(299), 450, 600));
    assert_eq!((row.flags.clone(), row.unarchived), (vec![StatusFlag::RetentionGap], 150));

    // The archiver resumes at the log start and says so.
    let mut second = ArchiverProcess::spawn("retention-2", &args);
    wait_archived(store.as_ref(), &prefix, &topic, &BTreeMap::from([(0, 599)]), &mut [&mut second]).await;
    assert!(second.terminate().success(), "{}", second.log_text());
    let log = second.log_text();
    assert!(log.contains("RETENTION GAP: offsets 300..=449 were deleted by Kafka retention"), "{log}");
    assert!(log.contains("retention gaps 1, "), "the exit summary counts it:\n{log}");

    // The claim after the gap records it; verify reports exactly that retention gap and nothing else.
    let tp = TopicPartition::new(&topic, 0).unwrap();
    let key = ClaimKey::new(prefix.clone(), tp, 300).to_string();
    let claim = Claim::from_json(&key, &store.get(&key).await.unwrap()).unwrap();
    assert!(claim.retention_gap && claim.first == 450, "{claim:?}");
    let report = verify_with_brokers(&dest, &topic, true).await;
    println!("{}", report.table());
    let row = &report.partitions[0];
    assert_eq!(row.problems, vec![Problem::RetentionGap { from: 300, to: 449 }]);
    assert_eq!((row.log, row.not_yet_archived), (Some(LogOffsets { log_start: 450, log_end: 600 }), Some(0)));
    assert_eq!((row.first_offset, row.last_offset, row.records), (Some(0), Some(599), Some(450)));

    // Every record that still existed, exactly once.
    let survivors: BTreeMap<i32, Vec<Record>> = produced
        .into_iter()
        .map(|(p, records)| (p, records.into_iter().filter(|r| !(300..450).contains(&r.offset)).collect()))
        .collect();
    let contents = read_topic(store.as_ref(), &prefix, &topic).await.unwrap();
    let c = compare(&survivors, &contents);
    assert!(c.is_exact(), "{c:?}");
}

/// Records of about 4 KiB: far more than the archiver takes in while S3 is down (the record channel's
/// 4,096, the 64 KiB budget's few compressed files, about ten a second polled meanwhile, and a 1 MB
/// librdkafka prefetch queue: under 8,000).
const MID_STREAM_RECORDS: usize = 20_000;
/// Retention deletes below this while the archiver is stalled.
const DELETED_BELOW: i64 = 17_000;

#[tokio::test(flavor = "multi_thread")]
async fn a_retention_gap_mid_stream_is_recorded_and_the_partition_goes_on() {
    let topic = unique("retention-mid");
    create_topic(&topic, 1).await;
    let dest = TestDest::s3().await;
    let store = dest.store().await;
    let prefix = dest.prefix();
    let proxy = S3Proxy::start(&s3_endpoint()).await;
    let spool = tempfile::tempdir().unwrap();
    let mut args = through(archiver_args(&dest, &unique("retention-mid"), &topic, 500, spool.path()), &proxy.url);
    args = set_flag(args, "--max-buffer-bytes", "64KiB");
    args.extend(["--kafka".into(), "queued.max.messages.kbytes=1024".into()]);
    let mut archiver = ArchiverProcess::spawn("retention-mid", &args);
    wait_log(&mut archiver, "recovered position from the archive").await;

    // S3 answers every upload 503 from now on: nothing is archived, the budget fills, the pipeline
    // holds records back and the consumer falls behind the log.
    proxy.set_rule(|req| match req.kind {
        Kind::PutClaim | Kind::PutData | Kind::Multipart => Fault::Status(503, "SlowDown"),
        _ => Fault::Pass,
    });
    let produced = produce(&brokers(), &topic, 1, 0..MID_STREAM_RECORDS, 4096).await.unwrap();
    wait_log(&mut archiver, "request failed").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    // Retention deletes past the consumer's position; then S3 recovers.
    delete_records_before(&topic, 0, DELETED_BELOW).await;
    proxy.set_rule(|_| Fault::Pass);
    let last = BTreeMap::from([(0, MID_STREAM_RECORDS as i64 - 1)]);
    wait_archived(store.as_ref(), &prefix, &topic, &last, &mut [&mut archiver]).await;
    assert!(archiver.terminate().success(), "{}", archiver.log_text());
    assert!(archiver.log_text().contains("retention gaps 1, "), "{}", archiver.log_text());

    // The gap lies between two objects, explained by the claim after it; the rest, exactly once.
    let report = verify_deep(&dest, &topic).await;
    println!("{}", report.table());
    let [Problem::RetentionGap { from, to }] = report.partitions[0].problems.as_slice() else {
        panic!("expected exactly one retention gap:\n{}", report.table());
    };
    assert_eq!(*to, DELETED_BELOW - 1);
    assert!(*from > 0 && *from < DELETED_BELOW, "the consumer was paused before {DELETED_BELOW}: {from}");
    let survivors: BTreeMap<i32, Vec<Record>> = produced
        .into_iter()
        .map(|(p, records)| {
            (p, records.into_iter().filter(|r| r.offset < *from || r.offset >= DELETED_BELOW).collect())
        })
        .collect();
    let c = compare(&survivors, &read_topic(store.as_ref(), &prefix, &topic).await.unwrap());
    assert!(c.is_exact(), "{c:?}");
}

/// A writer claimed 300..=399 and died before uploading it; retention then deleted everything below
/// `deleted_below`; a new archiver re-writes what is left. Returns what `verify` reports.
async fn claimed_range_after_retention(deleted_below: i64) -> Vec<Problem> {
    let topic = unique("retention-claimed");
    create_topic(&topic, 1).await;
    let dest = TestDest::file();
    let store = dest.store().await;
    let prefix = dest.prefix();
    let spool = tempfile::tempdir().unwrap();
    let args = archiver_args(&dest, &unique("retention-claimed"), &topic, 100, spool.path());
    let mut produced = produce(&brokers(), &topic, 1, 0..300, 64).await.unwrap();
    let mut first = ArchiverProcess::spawn("retention-claimed-1", &args);
    wait_archived(store.as_ref(), &prefix, &topic, &last_offsets(&produced), &mut [&mut first]).await;
    assert!(first.terminate().success(), "{}", first.log_text());

    merge(&mut produced, produce(&brokers(), &topic, 1, 300..600, 64).await.unwrap());
    let dead = Claim {
        chain_start: 300,
        first: 300,
        end: 399,
        records: 100,
        retention_gap: false,
        retention_gap_from: None,
        no_records_from: None,
        writer: "dead-host:1".into(),
        time_ms: 0,
        timestamps: None,
        topic_id: None,
        object: None,
        time_source: None,
        schema_ids: Vec::new(),
    };
    let key = ClaimKey::new(prefix.clone(), TopicPartition::new(&topic, 0).unwrap(), 300).to_string();
    let body = SpoolData::memory(dead.to_json());
    store.put_if_absent(&key, &body, dead.to_json().len() as u64).await.unwrap();
    delete_records_before(&topic, 0, deleted_below).await;

    let mut second = ArchiverProcess::spawn("retention-claimed-2", &args);
    wait_archived(store.as_ref(), &prefix, &topic, &BTreeMap::from([(0, 599)]), &mut [&mut second]).await;
    assert!(second.terminate().success(), "{}", second.log_text());
    assert!(second.log_text().contains(&format!("RETENTION GAP: offsets 300..={}", deleted_below - 1)));
    let report = verify_deep(&dest, &topic).await;
    println!("{}", report.table());
    // Whatever survived is archived exactly once.
    let survivors: BTreeMap<i32, Vec<Record>> = produced
        .into_iter()
        .map(|(p, records)| (p, records.into_iter().filter(|r| !(300..deleted_below).contains(&r.offset)).collect()))
        .collect();
    let c = compare(&survivors, &read_topic(store.as_ref(), &prefix, &topic).await.unwrap());
    assert!(c.is_exact(), "{c:?}");
    report.partitions[0].problems.clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn retention_inside_a_claimed_range_being_re_written_is_a_retention_gap() {
    assert_eq!(claimed_range_after_retention(350).await, vec![Problem::RetentionGap { from: 300, to: 349 }]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_claimed_range_retention_took_whole_is_a_retention_gap_not_missing_data() {
    assert_eq!(claimed_range_after_retention(450).await, vec![Problem::RetentionGap { from: 300, to: 449 }]);
}

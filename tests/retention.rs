//! Retention on Apache Kafka: offsets that retention deleted before they were archived are a
//! RETENTION GAP — flagged by `status` while the archive is behind the log start, logged with their
//! exact range when the archiver resumes, counted, recorded in the next claim and reported by `verify`
//! as a retention gap (never as a plain gap), with the log's offsets as Kafka gives them — and every
//! record that still existed is archived exactly once.

mod common;

use std::collections::BTreeMap;

use common::*;
use kafka_s3_archiver::check::{compare, read_topic};
use kafka_s3_archiver::core::audit::{LogOffsets, Problem};
use kafka_s3_archiver::core::claim::{Claim, ClaimKey};
use kafka_s3_archiver::core::partition::TopicPartition;
use kafka_s3_archiver::core::record::Record;
use kafka_s3_archiver::core::status::StatusFlag;
use kafka_s3_archiver::generate::{merge, produce};
use kafka_s3_archiver::status::{status, StatusOptions};
use kafka_s3_archiver::verify::{verify, VerifyOptions};

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
    let options = VerifyOptions {
        prefix: prefix.clone(),
        topics: vec![topic.clone()],
        partitions: vec![],
        deep: true,
        brokers: Some((brokers(), vec![])),
        concurrency: 8,
    };
    let report = verify(store.as_ref(), &options).await.unwrap();
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

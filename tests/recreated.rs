//! A topic deleted and re-created on Apache Kafka starts its offsets again at 0 and gets a new topic ID
//! (KIP-516). The reproduction from the field: archive 600 records of a 2-partition topic, delete and
//! re-create it, produce 3,000 records, start the archiver again — it resumed each partition at offset
//! 300 of the NEW topic, appended to the old chain and never archived new offsets 0..=299, silently.
//! Claims now record the topic ID: the archiver stops those partitions with an error that says what to
//! do and writes nothing; `status` and `verify --brokers` flag them.

mod common;

use std::time::{Duration, Instant};

use common::*;
use kafka_s3_archiver::commands::demo::generate::produce;
use kafka_s3_archiver::commands::status::{status, StatusOptions};
use kafka_s3_archiver::commands::verify::audit::Problem;
use kafka_s3_archiver::recovery::standing::StatusFlag;
use kafka_s3_archiver::store::list_all;

const STOPPED: &str = "it was deleted and re-created, and its offsets started again at 0";

#[tokio::test(flavor = "multi_thread")]
async fn a_re_created_topic_never_continues_the_old_archive() {
    let topic = unique("recreated");
    create_topic(&topic, 2).await;
    let produced = produce(&brokers(), &topic, 2, 0..600, 64).await.unwrap();
    let dest = TestDest::s3().await;
    let store = dest.store().await;
    let prefix = dest.prefix();
    let group = unique("recreated");
    let spool = tempfile::tempdir().unwrap();
    let args = archiver_args(&dest, &group, &topic, 100, spool.path());
    let mut first = ArchiverProcess::spawn("recreated-1", &args);
    wait_archived(store.as_ref(), &prefix, &topic, &last_offsets(&produced), &mut [&mut first]).await;
    assert!(first.terminate().success(), "{}", first.log_text());
    let archived = list_all(store.as_ref(), prefix.as_str()).await.unwrap();

    delete_topic(&topic).await;
    create_topic(&topic, 2).await;
    produce(&brokers(), &topic, 2, 0..3_000, 64).await.unwrap();

    let mut second = ArchiverProcess::spawn("recreated-2", &args);
    let started = Instant::now();
    while second.log_text().matches(STOPPED).count() < 2 {
        second.assert_running();
        assert!(started.elapsed() < Duration::from_secs(60), "partitions not stopped:\n{}", second.log_text());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Given time to do wrong, it writes nothing: not a claim, not an object.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(second.terminate().success(), "{}", second.log_text());
    assert!(second.log_text().contains("partitions stopped 2"), "{}", second.log_text());
    assert_eq!(list_all(store.as_ref(), prefix.as_str()).await.unwrap(), archived);

    let options =
        StatusOptions { prefix: prefix.clone(), topics: vec![topic.clone()], brokers: brokers(), props: vec![], group };
    let report = status(store.as_ref(), &options).await.unwrap();
    println!("{}", report.table());
    assert!(report.partitions.iter().all(|p| p.flags.contains(&StatusFlag::TopicRecreated)), "{}", report.table());

    let report = verify_with_brokers(&dest, &topic, false).await;
    println!("{}", report.table());
    for p in &report.partitions {
        assert!(matches!(p.problems.as_slice(), [Problem::OtherIncarnation { .. }]), "{}", report.table());
    }
}

//! `status` against librdkafka's mock cluster (exact watermarks and commit metadata) and an archive
//! written by an in-process archiver: archived-through, committed, log offsets and what is not archived
//! yet agree with what happened; objects removed behind the group's commit are flagged. Also the binary's table.

mod common;

use common::archive_mock_topic;
use kafka_s3_archiver::archive::partition::TopicPartition;
use kafka_s3_archiver::commands::demo::generate::produce;
use kafka_s3_archiver::commands::status::{status, StatusOptions};
use kafka_s3_archiver::recovery::standing::StatusFlag;
use kafka_s3_archiver::store::list_all;
use rdkafka::mocking::MockCluster;

#[tokio::test(flavor = "multi_thread")]
async fn status_shows_where_each_partition_stands() {
    let cluster = MockCluster::new(1).unwrap();
    let bootstrap = cluster.bootstrap_servers();
    cluster.create_topic("orders", 3, 1).unwrap();
    let produced = produce(&bootstrap, "orders", 3, 0..900, 40).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (config, store) = archive_mock_topic(&bootstrap, dir.path(), "orders", &produced).await;
    let prefix = config.store.dest.prefix().clone();
    // 50 more records on partition 0, not archived; partition 2's last object (and its claim) removed,
    // so the group's commit is past the archive.
    produce(&bootstrap, "orders", 1, 900..950, 40).await.unwrap();
    let p2 = TopicPartition::new("orders", 2).unwrap();
    for folder in [prefix.partition_folder(&p2), prefix.claims_folder(&p2)] {
        let last = list_all(store.as_ref(), &folder).await.unwrap().pop().unwrap();
        store.delete(&last).await.unwrap();
    }

    let options = StatusOptions {
        prefix,
        topics: vec!["orders".into()],
        brokers: bootstrap.clone(),
        props: vec![],
        group: "g".into(),
    };
    let report = status(store.as_ref(), &options).await.unwrap();
    println!("{}", report.table());
    let rows = &report.partitions;
    assert_eq!(rows.len(), 3);
    assert_eq!(
        (rows[0].archived_through, rows[0].committed, rows[0].log_end, rows[0].unarchived),
        (Some(299), Some(300), 350, 50)
    );
    assert_eq!((rows[1].archived_through, rows[1].committed, rows[1].unarchived), (Some(299), Some(300), 0));
    assert!(rows[0].flags.is_empty() && rows[1].flags.is_empty());
    assert_eq!((rows[2].archived_through, rows[2].committed), (Some(199), Some(300)));
    assert_eq!(rows[2].flags, vec![StatusFlag::CommitAheadOfArchive]);
    assert!(rows.iter().all(|r| r.newest_object_ms.is_some()));
    // With commit metadata, two list requests per partition (the last claim, its data object), a few
    // more (probing back in doubling steps) where the commit points past the archive's end.
    assert!(report.list_requests <= 16, "{} list requests", report.list_requests);

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kafka-s3-archiver"))
        .args([
            "status",
            "--dest",
            &config.store.dest.to_string(),
            "--brokers",
            &bootstrap,
            "--group",
            "g",
            "--topic",
            "orders",
        ])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    println!("{table}");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(table.contains("COMMIT AHEAD OF ARCHIVE") && table.contains("3 partitions, 1 flagged"), "{table}");
}

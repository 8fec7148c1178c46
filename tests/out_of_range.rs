//! An archive AHEAD of the partition's log (the topic was deleted and re-created) must stop that
//! partition, never silently skip the new records; other partitions go on. Uses librdkafka's mock
//! cluster so the broker's out-of-range answer is exact.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::mock_settings;
use kafka_s3_archiver::archive::object_key::{FileKind, ObjectKey, Prefix};
use kafka_s3_archiver::archive::partition::{OffsetRange, TopicPartition};
use kafka_s3_archiver::commands::demo::check::archived_ends;
use kafka_s3_archiver::commands::demo::generate::produce;
use kafka_s3_archiver::config::{ArchiverConfig, Settings};
use kafka_s3_archiver::encode::spool::SpoolData;
use kafka_s3_archiver::service::archiver::Archiver;
use kafka_s3_archiver::store::{self, Role};
use kafka_s3_archiver::store::{list_all, ObjectStore};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::DefaultProducerContext;

/// The topic and its store, as the tests below start them.
type AheadOfTheLog =
    (MockCluster<'static, DefaultProducerContext>, tempfile::TempDir, ArchiverConfig, Arc<dyn ObjectStore>);

/// A mock cluster whose topic `recreated` has `partitions` partitions holding `records` records
/// round-robin, and an archive of an earlier incarnation whose partition 0 reaches offset 999 (its key
/// is returned too).
async fn archive_ahead_of_the_log(partitions: i32, records: usize) -> (AheadOfTheLog, String) {
    let cluster = MockCluster::new(1).unwrap();
    let bootstrap = cluster.bootstrap_servers();
    cluster.create_topic("recreated", partitions, 1).unwrap();
    produce(&bootstrap, "recreated", partitions, 0..records, 50).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = Settings { topics: Some(vec!["recreated".into()]), ..mock_settings(&bootstrap, dir.path()) }
        .resolve(None)
        .unwrap();
    let store: Arc<dyn ObjectStore> =
        store::open(&config.store.dest, &config.store.settings, Role::Archive).await.unwrap();
    let tp = TopicPartition::new("recreated", 0).unwrap();
    let old = ObjectKey::new(Prefix::default(), tp, OffsetRange::new(0, 999).unwrap(), FileKind::Parquet).to_string();
    store.put_if_absent(&old, &SpoolData::memory(Bytes::from_static(b"old")), 3).await.unwrap();
    ((cluster, dir, config, store), old)
}

#[tokio::test(flavor = "multi_thread")]
async fn an_archive_ahead_of_the_log_stops_only_that_partition() {
    // The old topic's archive of partition 0 reaches offset 999; the new partition holds 20 records.
    let ((_cluster, _dir, config, store), old) = archive_ahead_of_the_log(2, 40).await;

    let archiver = Archiver::start(&config, store.clone()).unwrap();
    let metrics = archiver.metrics();
    let started = Instant::now();
    loop {
        let ends = archived_ends(store.as_ref(), &Prefix::default(), "recreated").await.unwrap();
        if ends.get(&1) == Some(&19) && metrics.partitions_stopped.get() == 1 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "ends {ends:?}, stopped {}",
            metrics.partitions_stopped.get()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    archiver.shutdown().await.unwrap();
    let p0 =
        list_all(store.as_ref(), &Prefix::default().partition_folder(&TopicPartition::new("recreated", 0).unwrap()))
            .await
            .unwrap();
    assert_eq!(p0, vec![old], "nothing may be archived for the stopped partition");
}

/// The same, while the brokers do not answer for the partition's log offsets at first (librdkafka's
/// mock cluster refuses the first ListOffsets requests): they are asked again, off the polling thread,
/// each failure counted, until the partition is stopped. (Before, one failed read left the partition
/// assigned, not stopped, and delivering nothing until the next rebalance.)
#[tokio::test(flavor = "multi_thread")]
async fn an_out_of_range_whose_log_offsets_cannot_be_read_at_first_is_retried() {
    use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};
    let ((cluster, _dir, config, store), _) = archive_ahead_of_the_log(1, 20).await;
    cluster.request_errors(
        RDKafkaApiKey::ListOffsets,
        &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED; 12],
    );

    let archiver = Archiver::start(&config, store.clone()).unwrap();
    let metrics = archiver.metrics();
    let started = Instant::now();
    while metrics.partitions_stopped.get() == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "not stopped; {} failed reads of the log offsets",
            metrics.out_of_range_lookup_failures.get()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(metrics.out_of_range_lookup_failures.get() > 0, "the log offsets were read at the first try");
    archiver.shutdown().await.unwrap();
}

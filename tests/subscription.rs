//! `--topic-regex` archives every matching topic (and only those). Uses librdkafka's mock cluster.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{archive_mock_topic, mock_settings};
use kafka_s3_archiver::commands::demo::check::{compare, read_topic};
use kafka_s3_archiver::commands::demo::generate::produce;
use kafka_s3_archiver::config::Settings;
use kafka_s3_archiver::service::archiver::Archiver;
use kafka_s3_archiver::store::{self, Role};
use kafka_s3_archiver::store::{list_all, ObjectStore};
use rdkafka::mocking::MockCluster;

#[tokio::test(flavor = "multi_thread")]
async fn a_regex_subscription_archives_every_matching_topic() {
    let cluster = MockCluster::new(1).unwrap();
    let bootstrap = cluster.bootstrap_servers();
    for topic in ["orders-eu", "orders-us", "payments"] {
        cluster.create_topic(topic, 2, 1).unwrap();
    }
    let eu = produce(&bootstrap, "orders-eu", 2, 0..300, 40).await.unwrap();
    let us = produce(&bootstrap, "orders-us", 2, 300..500, 40).await.unwrap();
    produce(&bootstrap, "payments", 2, 0..100, 40).await.unwrap();

    let dir = tempfile::tempdir().unwrap();
    let config = Settings { topic_regex: Some("orders-.*".into()), ..mock_settings(&bootstrap, dir.path()) }
        .resolve(None)
        .unwrap();
    let store: Arc<dyn ObjectStore> =
        store::open(&config.store.dest, &config.store.settings, Role::Archive).await.unwrap();
    let archiver = Archiver::start(&config, store.clone()).unwrap();
    let prefix = config.store.dest.prefix().clone();
    let started = Instant::now();
    loop {
        let a = compare(&eu, &read_topic(store.as_ref(), &prefix, "orders-eu").await.unwrap());
        let b = compare(&us, &read_topic(store.as_ref(), &prefix, "orders-us").await.unwrap());
        if a.is_exact() && b.is_exact() {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "{a:?} {b:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    archiver.shutdown().await.unwrap();
    assert!(list_all(store.as_ref(), &prefix.topic_folder("payments")).await.unwrap().is_empty());
}

/// A restart in the same group finds each partition's position with ONE listing request: the commit's
/// metadata names the last object's start offset, and the listing starts there.
#[tokio::test(flavor = "multi_thread")]
async fn a_restart_in_the_same_group_lists_once_per_partition() {
    let cluster = MockCluster::new(1).unwrap();
    let bootstrap = cluster.bootstrap_servers();
    cluster.create_topic("hinted", 3, 1).unwrap();
    let produced = produce(&bootstrap, "hinted", 3, 0..3_000, 40).await.unwrap();

    let dir = tempfile::tempdir().unwrap();
    let (config, store) = archive_mock_topic(&bootstrap, dir.path(), "hinted", &produced).await;

    let again = Archiver::start(&config, store.clone()).unwrap();
    let metrics = again.metrics();
    let started = Instant::now();
    while metrics.recoveries.get() < 3 {
        assert!(started.elapsed() < Duration::from_secs(60));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    again.shutdown().await.unwrap();
    // 30 objects and claims per partition: a full listing would also take one request each, so compare
    // with what listings from the hint return: the last claim, then its data object, per partition; and
    // one look at the topic's claims folder (the assignment brings three of its partitions), which
    // finds claims and so leaves each partition to its own listings.
    assert_eq!(metrics.recovery_list_requests.get(), 3 * 2 + 1);
    assert_eq!(metrics.recovery_objects_seen.get(), 6);
}

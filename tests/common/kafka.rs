//! Topics on the test broker: made, read, trimmed and deleted; archives of a mock cluster's topic.

use kafka_s3_archiver::store::{self, ObjectStore, Role};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{env, unique};

pub fn brokers() -> String {
    env("KSA_TEST_BROKERS")
}

pub async fn create_topic(topic: &str, partitions: i32) {
    create_topic_with(topic, partitions, &[]).await;
}

/// Creates a topic with topic-level settings (`cleanup.policy`, `segment.ms`…).
pub async fn create_topic_with(topic: &str, partitions: i32, configs: &[(&str, &str)]) {
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", brokers()).create().expect("admin client");
    let mut new_topic = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    for (k, v) in configs {
        new_topic = new_topic.set(k, v);
    }
    let results = admin.create_topics(&[new_topic], &AdminOptions::new()).await.expect("create_topics");
    for r in results {
        r.unwrap_or_else(|(t, e)| panic!("creating topic {t} failed: {e}"));
    }
    let consumer: BaseConsumer = ClientConfig::new().set("bootstrap.servers", brokers()).create().expect("consumer");
    let started = Instant::now();
    loop {
        let md = consumer.fetch_metadata(Some(topic), Duration::from_secs(5)).expect("metadata");
        if md.topics().first().is_some_and(|t| t.partitions().len() == partitions as usize) {
            return;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "topic {topic} did not show {partitions} partitions");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Settings for an in-process archiver on librdkafka's mock cluster, archiving into `dir/archive`.
pub fn mock_settings(bootstrap: &str, dir: &Path) -> kafka_s3_archiver::config::Settings {
    kafka_s3_archiver::config::Settings {
        brokers: Some(bootstrap.to_string()),
        group: Some("g".into()),
        dest: Some(format!("file://{}", dir.join("archive").display())),
        roll_age: Some("300ms".parse().unwrap()),
        spool_dir: Some(dir.join("spool")),
        kafka_flags: Some(vec!["session.timeout.ms=6000".into(), "heartbeat.interval.ms=500".into()]),
        ..Default::default()
    }
}

pub fn last_offsets(produced: &BTreeMap<i32, Vec<kafka_s3_archiver::archive::record::Record>>) -> BTreeMap<i32, i64> {
    produced.iter().filter_map(|(p, r)| r.last().map(|r| (*p, r.offset))).collect()
}

/// Deletes `topic` and waits until the brokers no longer know it (so it can be created again).
pub async fn delete_topic(topic: &str) {
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", brokers()).create().expect("admin client");
    for r in admin.delete_topics(&[topic], &AdminOptions::new()).await.expect("delete_topics") {
        r.unwrap_or_else(|(t, e)| panic!("deleting topic {t} failed: {e}"));
    }
    let consumer: BaseConsumer = ClientConfig::new().set("bootstrap.servers", brokers()).create().expect("consumer");
    let started = Instant::now();
    loop {
        let md = consumer.fetch_metadata(None, Duration::from_secs(5)).expect("metadata");
        if !md.topics().iter().any(|t| t.name() == topic) {
            return;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "topic {topic} was not deleted within 30 s");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Deletes the records of `topic`/`partition` below `offset`, as retention would (Kafka's DeleteRecords).
pub async fn delete_records_before(topic: &str, partition: i32, offset: i64) {
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", brokers()).create().expect("admin client");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, partition, Offset::Offset(offset)).expect("offset");
    let result = admin.delete_records(&tpl, &AdminOptions::new()).await.expect("delete_records");
    for e in result.elements() {
        assert!(e.error().is_ok(), "deleting records of {topic}/{partition} failed: {:?}", e.error());
        assert_eq!(e.offset(), Offset::Offset(offset), "the log start after deleting");
    }
}

/// Every record a `read_committed` consumer reads from the start of each partition to its log end now.
pub fn read_from_kafka(topic: &str, partitions: i32) -> BTreeMap<i32, Vec<kafka_s3_archiver::archive::record::Record>> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers())
        .set("group.id", unique("read-back"))
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    let mut ends = BTreeMap::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, Offset::Beginning).expect("offset");
        let (_, high) = consumer.fetch_watermarks(topic, p, Duration::from_secs(10)).expect("watermarks");
        ends.insert(p, high);
    }
    consumer.assign(&tpl).expect("assign");
    let mut read: BTreeMap<i32, Vec<kafka_s3_archiver::archive::record::Record>> = BTreeMap::new();
    let started = Instant::now();
    loop {
        let positions = consumer.position().expect("position");
        let done = ends.iter().all(|(p, end)| {
            let position = positions.find_partition(topic, *p).and_then(|e| e.offset().to_raw());
            *end == 0 || position.is_some_and(|o| o >= *end)
        });
        if done {
            return read;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "reading {topic} back did not reach {ends:?}");
        if let Some(Ok(msg)) = consumer.poll(Duration::from_millis(100)) {
            use rdkafka::Message;
            read.entry(msg.partition()).or_default().push(kafka_s3_archiver::source::convert::to_record(&msg));
        }
    }
}

/// Archives `topic` of a mock cluster with an in-process archiver (100-record files) until the archive
/// holds exactly `produced`, then stops it gracefully; returns its config and store.
pub async fn archive_mock_topic(
    bootstrap: &str,
    dir: &Path,
    topic: &str,
    produced: &BTreeMap<i32, Vec<kafka_s3_archiver::archive::record::Record>>,
) -> (kafka_s3_archiver::config::ArchiverConfig, Arc<dyn ObjectStore>) {
    let settings = kafka_s3_archiver::config::Settings { roll_records: Some(100), ..mock_settings(bootstrap, dir) };
    archive_until(settings, topic, produced, true).await
}

/// Like [`archive_mock_topic`], by an archiver of `settings` (its topic set here), until every produced
/// offset is archived once (typed values do not read back as their bytes through `read_topic`).
pub async fn archive_mock_topic_as(
    settings: kafka_s3_archiver::config::Settings,
    topic: &str,
    produced: &BTreeMap<i32, Vec<kafka_s3_archiver::archive::record::Record>>,
) -> (kafka_s3_archiver::config::ArchiverConfig, Arc<dyn ObjectStore>) {
    archive_until(settings, topic, produced, false).await
}

/// Archives until the archive holds exactly what was produced (`exact`), or every offset of it once.
async fn archive_until(
    settings: kafka_s3_archiver::config::Settings,
    topic: &str,
    produced: &BTreeMap<i32, Vec<kafka_s3_archiver::archive::record::Record>>,
    exact: bool,
) -> (kafka_s3_archiver::config::ArchiverConfig, Arc<dyn ObjectStore>) {
    let config = kafka_s3_archiver::config::Settings { topics: Some(vec![topic.to_string()]), ..settings }
        .resolve(None)
        .unwrap();
    let store = store::open(&config.store.dest, &config.store.settings, Role::Archive).await.unwrap();
    let prefix = config.store.dest.prefix().clone();
    let archiver = kafka_s3_archiver::service::archiver::Archiver::start(&config, store.clone()).unwrap();
    let started = Instant::now();
    loop {
        let contents =
            kafka_s3_archiver::commands::demo::check::read_topic(store.as_ref(), &prefix, topic).await.unwrap();
        let compared = kafka_s3_archiver::commands::demo::check::compare(produced, &contents);
        if exact && compared.is_exact() || !exact && (compared.missing, compared.duplicates) == (0, 0) {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "{topic} not archived within 60 s: {compared:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    archiver.shutdown().await.unwrap();
    (config, store)
}

/// A shopping cart as JSON: records from 200 on have a `coupon` field the earlier ones lack (a column
/// added mid-stream).
pub fn cart(i: usize) -> kafka_s3_archiver::archive::record::Record {
    let value = match i < CARTS_WITHOUT_COUPON {
        true => format!(r#"{{"cart":{i},"amount":{}}}"#, i % 50),
        false => format!(r#"{{"cart":{i},"amount":{},"coupon":"c{i}"}}"#, i % 50),
    };
    kafka_s3_archiver::archive::record::Record {
        value: Some(value.into_bytes()),
        ..kafka_s3_archiver::commands::demo::generate::generated(i, 0)
    }
}

/// The carts before the first with a coupon.
pub const CARTS_WITHOUT_COUPON: usize = 200;

/// An in-process archiver of these settings, and its store.
pub async fn start_archiver(
    settings: kafka_s3_archiver::config::Settings,
) -> (kafka_s3_archiver::service::archiver::Archiver, std::sync::Arc<dyn kafka_s3_archiver::store::ObjectStore>) {
    let config = settings.resolve(None).unwrap();
    let store = kafka_s3_archiver::store::open(
        &config.store.dest,
        &config.store.settings,
        kafka_s3_archiver::store::Role::Archive,
    )
    .await
    .unwrap();
    (kafka_s3_archiver::service::archiver::Archiver::start(&config, store.clone()).unwrap(), store)
}

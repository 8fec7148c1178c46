//! Helpers for the integration tests: the services started by `localstack/test.sh`, topics, stores,
//! and archiver processes.
#![allow(dead_code)] // each test binary uses a different subset

pub mod s3_proxy;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_s3_archiver::archive::destination::Destination;
use kafka_s3_archiver::archive::object_key::Prefix;
use kafka_s3_archiver::commands::demo::check::archived_ends;
use kafka_s3_archiver::store::{self, list_all, ObjectStore, Role, S3Settings, S3Store, StoreSettings};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

pub fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: run the tests with ./localstack/test.sh, which starts Apache Kafka and LocalStack S3 and sets it")
    })
}

pub fn brokers() -> String {
    env("KSA_TEST_BROKERS")
}

pub fn s3_endpoint() -> String {
    env("KSA_TEST_S3_ENDPOINT")
}

/// A name no other test (or earlier run against the same services) uses.
pub fn unique(name: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    format!("{name}-{}-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed), nanos % 100_000)
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

pub fn s3_settings(part_size: u64) -> S3Settings {
    S3Settings::new(Some(s3_endpoint()), Some("us-east-1".into()))
        .uploads(part_size, 3)
        .attempt_timeout(Duration::from_secs(30))
}

/// A store on a new bucket.
pub async fn s3_store_with(bucket: &str, part_size: u64) -> S3Store {
    let store = S3Store::connect(bucket, s3_settings(part_size)).await;
    store.client().create_bucket().bucket(bucket).send().await.expect("create bucket");
    store
}

/// An archive destination for a test: a fresh bucket or a fresh directory.
pub enum TestDest {
    S3 { bucket: String },
    File { dir: tempfile::TempDir },
}

impl TestDest {
    pub async fn s3() -> Self {
        let bucket = unique("ksa").to_lowercase();
        s3_store_with(&bucket, 8 << 20).await;
        TestDest::S3 { bucket }
    }

    pub fn file() -> Self {
        TestDest::File { dir: tempfile::tempdir().expect("tempdir") }
    }

    pub fn url(&self) -> String {
        match self {
            TestDest::S3 { bucket } => format!("s3://{bucket}/archive"),
            TestDest::File { dir } => format!("file://{}", dir.path().display()),
        }
    }

    pub fn prefix(&self) -> Prefix {
        match self {
            TestDest::S3 { .. } => Prefix::new("archive"),
            TestDest::File { .. } => Prefix::default(),
        }
    }

    pub async fn store(&self) -> Arc<dyn ObjectStore> {
        let settings = StoreSettings { s3: s3_settings(8 << 20), ..StoreSettings::reading(None, None) };
        let dest: Destination = self.url().parse().expect("a test destination");
        store::open(&dest, &settings, Role::Inspect).await.expect("the test store")
    }
}

/// An archiver running as its own process, as users run it.
pub struct ArchiverProcess {
    child: Child,
    pub log: PathBuf,
    name: String,
}

/// The usual flags of a test archiver: fast group joins, small files, quick age rolls.
pub fn archiver_args(dest: &TestDest, group: &str, topic: &str, roll_records: u64, spool: &Path) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "run".into(),
        "--brokers".into(),
        brokers(),
        "--group".into(),
        group.into(),
        "--topic".into(),
        topic.into(),
        "--dest".into(),
        dest.url(),
        "--roll-records".into(),
        roll_records.to_string(),
        "--roll-age".into(),
        "1s".into(),
        "--revoke-timeout".into(),
        "10s".into(),
        "--spool-dir".into(),
        spool.display().to_string(),
        "--kafka".into(),
        "session.timeout.ms=3000".into(),
        "--kafka".into(),
        "heartbeat.interval.ms=500".into(),
    ];
    if matches!(dest, TestDest::S3 { .. }) {
        args.extend(["--s3-endpoint".into(), s3_endpoint()]);
    }
    args
}

impl ArchiverProcess {
    pub fn spawn(name: &str, args: &[String]) -> Self {
        let log = std::env::temp_dir().join(format!("{}.log", unique(name)));
        let file = std::fs::File::create(&log).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_kafka-s3-archiver"))
            .args(args)
            .env("RUST_LOG", "info,librdkafka=warn")
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("log file"))
            .stderr(file)
            .spawn()
            .expect("spawn archiver");
        Self { child, log, name: name.to_string() }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGKILL: no flush, no commit.
    pub fn kill_hard(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, then waits for a graceful exit.
    pub fn terminate(&mut self) -> ExitStatus {
        let status = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status().expect("kill");
        assert!(status.success(), "could not signal {}", self.name);
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            if started.elapsed() > Duration::from_secs(60) {
                let _ = self.child.kill();
                panic!("{} did not exit within 60 s of SIGTERM; log:\n{}", self.name, self.log_text());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for the process to exit on its own within `within`.
    pub async fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            assert!(
                started.elapsed() < within,
                "{} still running after {within:?}; log:\n{}",
                self.name,
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn assert_running(&mut self) {
        if let Some(status) = self.child.try_wait().expect("wait") {
            panic!("{} exited early with {status}; log:\n{}", self.name, self.log_text());
        }
    }
}

impl Drop for ArchiverProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until every partition's archive reaches the given last offsets.
pub async fn wait_archived(
    store: &dyn ObjectStore,
    prefix: &Prefix,
    topic: &str,
    last: &BTreeMap<i32, i64>,
    procs: &mut [&mut ArchiverProcess],
) {
    let started = Instant::now();
    loop {
        let ends = archived_ends(store, prefix, topic).await.expect("listing");
        if last.iter().all(|(p, o)| ends.get(p).is_some_and(|e| e >= o)) {
            return;
        }
        for p in procs.iter_mut() {
            p.assert_running();
        }
        if started.elapsed() > Duration::from_secs(120) {
            let logs: Vec<String> = procs.iter().map(|p| p.log_text()).collect();
            panic!("archive did not reach {last:?} (has {ends:?}) within 120 s; logs:\n{}", logs.join("\n-----\n"));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Waits until the topic folder holds at least `n` objects.
pub async fn wait_objects(
    store: &dyn ObjectStore,
    prefix: &Prefix,
    topic: &str,
    n: usize,
    proc_: &mut ArchiverProcess,
) {
    let started = Instant::now();
    while list_all(store, &prefix.topic_folder(topic)).await.expect("listing").len() < n {
        proc_.assert_running();
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "fewer than {n} objects after 90 s; log:\n{}",
            proc_.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the process's log contains `text`.
pub async fn wait_log(proc_: &mut ArchiverProcess, text: &str) {
    let started = Instant::now();
    while !proc_.log_text().contains(text) {
        proc_.assert_running();
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{text:?} not logged within 60 s; log:\n{}",
            proc_.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
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

/// The same archiver flags with S3 reached through `endpoint` (a fault-injecting proxy).
pub fn through(mut args: Vec<String>, endpoint: &str) -> Vec<String> {
    let at = args.iter().position(|a| a == "--s3-endpoint").expect("an S3 destination");
    args[at + 1] = endpoint.to_string();
    args
}

/// Sends a signal (STOP, CONT, KILL...) to a process.
pub fn signal(pid: u32, name: &str) {
    let status = Command::new("kill").args([&format!("-{name}"), &pid.to_string()]).status().expect("kill");
    assert!(status.success(), "kill -{name} {pid} failed");
}

/// `verify --deep` in-process, and the independent comparison with what was produced: both must be
/// clean, and every object must have exactly one claim.
pub async fn assert_exactly_once(
    dest: &TestDest,
    topic: &str,
    produced: &BTreeMap<i32, Vec<kafka_s3_archiver::archive::record::Record>>,
) {
    let store = dest.store().await;
    let contents = kafka_s3_archiver::commands::demo::check::read_topic(store.as_ref(), &dest.prefix(), topic)
        .await
        .expect("read archive");
    let c = kafka_s3_archiver::commands::demo::check::compare(produced, &contents);
    assert!(c.is_exact(), "archive differs from what was produced: {c:?}");
    assert!(contents.ignored_keys.is_empty(), "unexpected keys: {:?}", contents.ignored_keys);
    let report = verify_deep(dest, topic).await;
    assert!(report.is_clean(), "{}", report.table());
    assert!(report.partitions.iter().all(|p| p.claims == p.objects), "{}", report.table());
}

pub async fn verify_deep(dest: &TestDest, topic: &str) -> kafka_s3_archiver::commands::verify::VerifyReport {
    run_verify(dest, topic, true, None).await
}

/// `verify` of `topic` compared with the test broker's logs (`--brokers`), reading objects when `deep`.
pub async fn verify_with_brokers(
    dest: &TestDest,
    topic: &str,
    deep: bool,
) -> kafka_s3_archiver::commands::verify::VerifyReport {
    run_verify(dest, topic, deep, Some((brokers(), vec![]))).await
}

async fn run_verify(
    dest: &TestDest,
    topic: &str,
    deep: bool,
    brokers: Option<(String, Vec<(String, String)>)>,
) -> kafka_s3_archiver::commands::verify::VerifyReport {
    let store = dest.store().await;
    let options = kafka_s3_archiver::commands::verify::VerifyOptions {
        prefix: dest.prefix(),
        topics: vec![topic.to_string()],
        partitions: vec![],
        deep,
        brokers,
        concurrency: 8,
        strict: false,
    };
    kafka_s3_archiver::commands::verify::verify(store.as_ref(), &options).await.expect("verify")
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

/// Sets `--name value` in archiver flags, replacing the value when the flag is there already.
pub fn set_flag(mut args: Vec<String>, name: &str, value: &str) -> Vec<String> {
    match args.iter().position(|a| a == name) {
        Some(at) => args[at + 1] = value.to_string(),
        None => args.extend([name.to_string(), value.to_string()]),
    }
    args
}

/// Archives `topic` of a mock cluster with an in-process archiver (100-record files) until the archive
/// holds exactly `produced`, then stops it gracefully; returns its config and store.
pub async fn archive_mock_topic(
    bootstrap: &str,
    dir: &Path,
    topic: &str,
    produced: &BTreeMap<i32, Vec<kafka_s3_archiver::archive::record::Record>>,
) -> (kafka_s3_archiver::config::ArchiverConfig, Arc<dyn ObjectStore>) {
    let config = kafka_s3_archiver::config::Settings {
        topics: Some(vec![topic.to_string()]),
        roll_records: Some(100),
        ..mock_settings(bootstrap, dir)
    }
    .resolve(None)
    .unwrap();
    let store = store::open(&config.store.dest, &config.store.settings, Role::Archive).await.unwrap();
    let prefix = config.store.dest.prefix().clone();
    let archiver = kafka_s3_archiver::service::archiver::Archiver::start(&config, store.clone()).unwrap();
    let started = Instant::now();
    loop {
        let contents =
            kafka_s3_archiver::commands::demo::check::read_topic(store.as_ref(), &prefix, topic).await.unwrap();
        if kafka_s3_archiver::commands::demo::check::compare(produced, &contents).is_exact() {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "{topic} not archived within 60 s");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    archiver.shutdown().await.unwrap();
    (config, store)
}

/// A plain HTTP/1.0 GET; returns the status code and the body.
pub fn http_get(addr: &str, path: &str) -> (u16, String) {
    let mut stream = std::net::TcpStream::connect(addr).expect("connect to the metrics endpoint");
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, body.to_string())
}

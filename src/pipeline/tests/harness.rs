//! The pipeline under test: a synthetic source and a local store that can be slowed down or made to fail.

use std::sync::atomic::AtomicU32;
use std::sync::mpsc as std_mpsc;
use std::sync::Mutex;

use async_trait::async_trait;
use bytes::Bytes;

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::super::*;
use crate::archive::claim::{Claim, ClaimKey};
use crate::archive::keys::{ListPage, ListRequest};
use crate::archive::object_key::FileKind;
use crate::archive::object_key::{ObjectKey, Prefix};
use crate::archive::partition::OffsetRange;
use crate::archive::record::{Record, TimestampKind};
use crate::encode::roll::RollPolicy;
use crate::encode::spool::SpoolUsage;
use crate::encode::spool::{SpoolData, SpoolOptions};
use crate::encode::{Compression, FileSpec, Format};
use crate::source::{AssignedPartition, Commit, Control, Fetched, ResumeAt, SourceCommand, SourceLink};
use crate::store::{list_all, LocalStore};
use crate::store::{ObjectStore, PutOutcome, StoreError};
use crate::telemetry::Metrics;
use crate::values::ValueFormat;

/// A local store that logs put starts and ends, and can be slowed down or made to fail.
pub(super) struct TestStore {
    pub(super) inner: LocalStore,
    pub(super) log: Mutex<Vec<String>>,
    pub(super) put_delay: Mutex<Duration>,
    pub(super) transient_failures: AtomicU32,
    /// While set, every list request fails transiently (an S3 brownout).
    pub(super) lists_fail: std::sync::atomic::AtomicBool,
    /// List requests under this prefix fail transiently (a partition's folder that S3 throttles).
    pub(super) failing_prefix: Mutex<Option<String>>,
    /// How long each list request takes.
    pub(super) list_delay: Mutex<Duration>,
    /// List requests under way, and the most there were at once.
    pub(super) lists: (AtomicU32, AtomicU32),
}

#[async_trait]
impl ObjectStore for TestStore {
    fn describe(&self) -> String {
        self.inner.describe()
    }

    async fn put_if_absent(&self, key: &str, data: &SpoolData, len: u64) -> Result<PutOutcome, StoreError> {
        self.log.lock().unwrap().push(format!("start {key}"));
        let delay = *self.put_delay.lock().unwrap();
        tokio::time::sleep(delay).await;
        if self.transient_failures.load(Ordering::SeqCst) > 0 {
            self.transient_failures.fetch_sub(1, Ordering::SeqCst);
            return Err(StoreError::Transient("injected 503 SlowDown".into()));
        }
        let out = self.inner.put_if_absent(key, data, len).await;
        self.log.lock().unwrap().push(format!("done {key}"));
        out
    }

    async fn list(&self, req: &ListRequest, max_keys: usize) -> Result<ListPage, StoreError> {
        if self.lists_fail.load(Ordering::SeqCst) {
            return Err(StoreError::Transient("injected 503 SlowDown".into()));
        }
        if self.failing_prefix.lock().unwrap().as_ref().is_some_and(|p| req.prefix.starts_with(p.as_str())) {
            return Err(StoreError::Transient("injected 503 SlowDown".into()));
        }
        let under_way = UnderWay::start(&self.lists);
        let delay = *self.list_delay.lock().unwrap();
        tokio::time::sleep(delay).await;
        let page = self.inner.list(req, max_keys).await;
        drop(under_way);
        page
    }

    async fn get(&self, key: &str) -> Result<Bytes, StoreError> {
        self.inner.get(key).await
    }

    async fn head(&self, key: &str) -> Result<Option<u64>, StoreError> {
        self.inner.head(key).await
    }

    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        self.inner.delete(key).await
    }
}

/// Counts a request under way (and the most at once) until dropped, also when its future is.
struct UnderWay<'a>(&'a AtomicU32);

impl<'a> UnderWay<'a> {
    fn start((now, most): &'a (AtomicU32, AtomicU32)) -> Self {
        let under_way = now.fetch_add(1, Ordering::SeqCst) + 1;
        most.fetch_max(under_way, Ordering::SeqCst);
        Self(now)
    }
}

impl Drop for UnderWay<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

pub(super) struct Harness {
    pub(super) _dir: tempfile::TempDir,
    pub(super) store: Arc<TestStore>,
    pub(super) control: mpsc::UnboundedSender<Control>,
    pub(super) records: mpsc::Sender<Vec<Fetched>>,
    pub(super) commands: std_mpsc::Receiver<SourceCommand>,
    pub(super) link: SourceLink,
    pub(super) epochs: Mutex<HashMap<i32, u64>>,
    pub(super) metrics: Arc<Metrics>,
    pub(super) task: JoinHandle<Result<(), PipelineError>>,
    /// What the brokers tell of the topic's identity when recovery asks (assignments tell none).
    pub(super) topic_ids: Arc<TestTopicIds>,
}

/// The topic's identity, as brokers without topic IDs tell it unless a test says otherwise; a test can
/// have it fail a number of times first.
#[derive(Default)]
pub(super) struct TestTopicIds {
    pub(super) id: Mutex<Option<String>>,
    pub(super) failures: AtomicU32,
    pub(super) asked: AtomicU32,
}

impl TopicIdLookup for TestTopicIds {
    fn lookup(&self, _topic: &str) -> Result<crate::recovery::TopicIdentity, String> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        if self.failures.load(Ordering::SeqCst) > 0 {
            self.failures.fetch_sub(1, Ordering::SeqCst);
            return Err("injected: describing the topic timed out".into());
        }
        Ok(match self.id.lock().unwrap().clone() {
            Some(id) => crate::recovery::TopicIdentity::Id(id),
            None => crate::recovery::TopicIdentity::NoIds,
        })
    }
}

/// The dead-letter topic of [`harness_typed`].
pub(super) const DEAD_LETTERS: &str = "t-dlq";

pub(super) fn tp(p: i32) -> TopicPartition {
    TopicPartition::new("t", p).unwrap()
}

pub(super) fn rec(offset: i64, size: usize) -> Record {
    Record {
        offset,
        timestamp_ms: Some(offset),
        timestamp_kind: TimestampKind::CreateTime,
        key: None,
        value: Some(vec![b'v'; size]),
        headers: vec![],
    }
}

pub(super) fn harness(roll: RollPolicy, max_buffer_bytes: u64, revoke_timeout: Duration) -> Harness {
    harness_with(roll, max_buffer_bytes, revoke_timeout, None)
}

/// A harness writing time-bucketed folders (`bucketing`), or not.
pub(super) fn harness_with(
    roll: RollPolicy,
    max_buffer_bytes: u64,
    revoke_timeout: Duration,
    bucketing: Option<crate::archive::time_bucket::Bucketing>,
) -> Harness {
    let profiles = TopicProfiles::uniform(TopicProfile { bucketing, ..plain(roll) });
    harness_full(profiles, max_buffer_bytes, revoke_timeout, None, None)
}

/// JSON lines of raw values, uncompressed.
pub(super) fn plain(roll: RollPolicy) -> TopicProfile {
    TopicProfile {
        spec: FileSpec::new(Format::Jsonl, Compression::None).unwrap(),
        roll,
        bucketing: None,
        values: Default::default(),
        keys: Default::default(),
        dlq_topic: None,
        table: false,
    }
}

/// Parquet with values typed by `declared` (`None`: a schema inferred per file).
pub(super) fn typed(roll: RollPolicy, declared: Option<crate::values::ValueSchema>) -> TopicProfile {
    let json = crate::values::JsonValues { declared, keep_raw: false };
    let spec = FileSpec::new(Format::Parquet, Compression::Zstd).unwrap();
    TopicProfile { spec, values: ValueFormat::Json(Arc::new(json)), ..plain(roll) }
}

/// A harness writing each topic's files by `profiles`.
pub(super) fn harness_profiles(profiles: TopicProfiles) -> Harness {
    harness_full(profiles, 1 << 30, Duration::from_secs(10), None, None)
}

/// A harness writing each topic's files by `profiles`, within a memory budget of `max_buffer_bytes`.
pub(super) fn harness_budget(profiles: TopicProfiles, max_buffer_bytes: u64) -> Harness {
    harness_full(profiles, max_buffer_bytes, Duration::from_secs(10), None, None)
}

/// A harness whose topic's values are Avro with schemas from `registry`.
pub(super) fn harness_registry(registry: crate::pipeline::schemas::Registry) -> Harness {
    let avro =
        crate::values::AvroValues { schemas: registry.cache.clone(), keep_raw: false, successors: Default::default() };
    let spec = FileSpec::new(Format::Parquet, Compression::Zstd).unwrap();
    let profile = TopicProfile { spec, values: ValueFormat::Avro(Arc::new(avro)), ..plain(policy(100)) };
    harness_full(TopicProfiles::uniform(profile), 1 << 30, Duration::from_secs(10), None, Some(registry))
}

fn harness_full(
    profiles: TopicProfiles,
    max_buffer_bytes: u64,
    revoke_timeout: Duration,
    dead_letters: Option<Arc<dyn DeadLetterSink>>,
    registry: Option<crate::pipeline::schemas::Registry>,
) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(TestStore {
        inner: LocalStore::new(dir.path().join("archive")).unwrap(),
        log: Mutex::default(),
        put_delay: Mutex::new(Duration::ZERO),
        transient_failures: AtomicU32::new(0),
        lists_fail: Default::default(),
        failing_prefix: Mutex::default(),
        list_delay: Mutex::default(),
        lists: Default::default(),
    });
    let settings = PipelineOptions {
        prefix: Prefix::default(),
        profiles: Arc::new(profiles),
        spool: SpoolOptions {
            memory_threshold: 1 << 20,
            dir: dir.path().join("spool"),
            usage: Arc::new(SpoolUsage::default()),
        },
        max_buffer_bytes,
        max_spool_bytes: 1 << 30,
        revoke_timeout,
        start_from: StartFrom::Earliest,
        claims: true,
        writer_id: "test:1".into(),
    };
    std::fs::create_dir_all(dir.path().join("spool")).unwrap();
    let (control, control_rx) = mpsc::unbounded_channel();
    let (records, records_rx) = mpsc::channel(64);
    let (link, commands) = SourceLink::new();
    let metrics = Arc::new(Metrics::default());
    let topic_ids = Arc::new(TestTopicIds::default());
    let mut pipeline = Pipeline::new(settings, store.clone(), link.clone(), metrics.clone(), topic_ids.clone());
    if let Some(sink) = dead_letters {
        pipeline = pipeline.with_dead_letters(sink);
    }
    if let Some(registry) = registry {
        pipeline = pipeline.with_registry(registry);
    }
    let task = tokio::spawn(pipeline.run(control_rx, records_rx));
    Harness { _dir: dir, store, control, records, commands, link, epochs: Mutex::default(), metrics, task, topic_ids }
}

/// A harness writing Parquet with value schemas inferred per file.
pub(super) fn harness_inferred(roll: RollPolicy) -> Harness {
    harness_profiles(TopicProfiles::uniform(typed(roll, None)))
}

/// A harness writing Parquet with values typed by `{"a": long}`, whose misfits go to `sink`
/// (to [`DEAD_LETTERS`]).
pub(super) fn harness_typed(roll: RollPolicy, sink: Arc<dyn DeadLetterSink>) -> Harness {
    let schema = r#"{"type":"record","name":"V","fields":[{"name":"a","type":"long"}]}"#;
    let declared = crate::values::ValueSchema::from_avro(schema).unwrap();
    let profile = TopicProfile { dlq_topic: Some(DEAD_LETTERS.into()), ..typed(roll, Some(declared)) };
    harness_full(TopicProfiles::uniform(profile), 1 << 30, Duration::from_secs(10), Some(sink), None)
}

pub(super) fn policy(records: u64) -> RollPolicy {
    RollPolicy { max_records: records, max_bytes: 1 << 30, max_age: Duration::from_secs(3600), schedule: None }
}

impl Harness {
    pub(super) async fn assign(&self, p: i32, log_start: Option<i64>) -> ResumeAt {
        let rx = self.start_assign(p, log_start);
        let mut positions = tokio::task::spawn_blocking(move || rx.recv().unwrap()).await.unwrap();
        positions.pop().unwrap().1
    }

    /// Assigns partition `p` without waiting for the answer, which comes on the receiver.
    pub(super) fn start_assign(
        &self,
        p: i32,
        log_start: Option<i64>,
    ) -> std_mpsc::Receiver<Vec<(TopicPartition, ResumeAt)>> {
        self.start_assign_with(&[(p, None)], log_start)
    }

    /// Assigns partitions in one assignment, each with the topic identity the assignment could tell
    /// (`None`: recovery asks), without waiting for the answers.
    pub(super) fn start_assign_with(
        &self,
        partitions: &[(i32, Option<crate::recovery::TopicIdentity>)],
        log_start: Option<i64>,
    ) -> std_mpsc::Receiver<Vec<(TopicPartition, ResumeAt)>> {
        let (reply, rx) = std_mpsc::channel();
        let partitions = partitions
            .iter()
            .map(|(p, topic)| {
                let epoch = self.link.next_epoch();
                self.epochs.lock().unwrap().insert(*p, epoch);
                AssignedPartition { tp: tp(*p), epoch, hint: None, log_start, log_end: None, topic: topic.clone() }
            })
            .collect();
        self.control.send(Control::Assigned { partitions, reply }).unwrap();
        rx
    }

    pub(super) async fn revoke(&self, p: i32, lost: bool) {
        let (reply, rx) = std_mpsc::sync_channel(1);
        self.control.send(Control::Revoked { partitions: vec![tp(p)], lost, reply }).unwrap();
        tokio::task::spawn_blocking(move || rx.recv().unwrap()).await.unwrap();
    }

    /// Sends records of the partition's current assignment.
    pub(super) async fn send(&self, p: i32, offsets: std::ops::Range<i64>, size: usize) {
        let epoch = self.epochs.lock().unwrap().get(&p).copied().unwrap_or(0);
        self.send_epoch(p, epoch, offsets, size).await;
    }

    /// Sends records (offset, timestamp) of the partition's current assignment.
    pub(super) async fn send_timed(&self, p: i32, records: &[(i64, i64)]) {
        let epoch = self.epochs.lock().unwrap().get(&p).copied().unwrap_or(0);
        for &(offset, ts) in records {
            let record = Record { timestamp_ms: Some(ts), ..rec(offset, 10) };
            self.records.send(vec![Fetched { tp: tp(p), epoch, record, retention_gap: None }]).await.unwrap();
        }
    }

    pub(super) async fn send_epoch(&self, p: i32, epoch: u64, offsets: std::ops::Range<i64>, size: usize) {
        for o in offsets {
            let fetched = Fetched { tp: tp(p), epoch, record: rec(o, size), retention_gap: None };
            self.records.send(vec![fetched]).await.unwrap();
        }
    }

    pub(super) async fn next_command(&self) -> SourceCommand {
        for _ in 0..200 {
            if let Ok(c) = self.commands.try_recv() {
                return c;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("no command for the source within 5 s");
    }

    pub(super) async fn next_commit(&self) -> Commit {
        match self.next_command().await {
            SourceCommand::Commit(c) => c,
            other => panic!("expected a commit, got {other:?}"),
        }
    }

    /// Waits for the pipeline to re-position partition `p`, and applies it as the consumer would.
    pub(super) async fn next_seek(&self, p: i32) -> ResumeAt {
        loop {
            if let SourceCommand::Seek { tp: seek_tp, epoch, position, .. } = self.next_command().await {
                assert_eq!(seek_tp, tp(p));
                self.epochs.lock().unwrap().insert(p, epoch);
                return position;
            }
        }
    }

    /// Waits until the pipeline has taken every record sent so far.
    pub(super) async fn drained(&self) {
        while self.records.capacity() < self.records.max_capacity() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// The data objects' keys.
    pub(super) async fn keys(&self) -> Vec<String> {
        list_all(&self.store.inner, "topic=").await.unwrap()
    }

    pub(super) async fn claims(&self, p: i32) -> Vec<Claim> {
        let mut out = Vec::new();
        for key in list_all(&self.store.inner, &Prefix::default().claims_folder(&tp(p))).await.unwrap() {
            out.push(Claim::from_json(&key, &self.store.get(&key).await.unwrap()).unwrap());
        }
        out
    }

    /// Plants a claim as another writer (of an older version: no data key recorded) would have made it.
    pub(super) async fn plant_claim(&self, p: i32, start: i64, first: i64, end: i64) {
        self.plant(p, Claim { writer: "other:2".into(), ..Claim::for_test(start, first, end) }).await;
    }

    pub(super) async fn plant(&self, p: i32, claim: Claim) {
        let key = ClaimKey::new(Prefix::default(), tp(p), claim.chain_start).to_string();
        let body = SpoolData::memory(claim.to_json());
        let len = claim.to_json().len() as u64;
        assert_eq!(self.store.inner.put_if_absent(&key, &body, len).await.unwrap(), PutOutcome::Created);
    }

    /// What `verify --deep` finds in partition `p`'s archive.
    pub(super) async fn problems(&self, p: i32) -> Vec<crate::commands::verify::audit::Problem> {
        let options = crate::commands::verify::VerifyOptions {
            prefix: Prefix::default(),
            topics: vec!["t".into()],
            partitions: vec![p],
            deep: true,
            brokers: None,
            concurrency: 4,
            strict: true,
        };
        let report = crate::commands::verify::verify(&self.store.inner, &options).await.unwrap();
        report.partitions.into_iter().flat_map(|r| r.problems).collect()
    }

    /// Plants a data object as another writer uploaded it.
    pub(super) async fn plant_object(&self, p: i32, s: i64, e: i64) {
        let records: Vec<Record> = (s..=e).map(|o| rec(o, 10)).collect();
        let spec = FileSpec::new(Format::Jsonl, Compression::None).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let spool = crate::encode::spool::Spool::new(SpoolOptions {
            memory_threshold: 1 << 20,
            dir: dir.path().into(),
            usage: Arc::default(),
        });
        let mut encoder = crate::encode::FileEncoder::new(spec, &Default::default(), spool).unwrap();
        for r in &records {
            encoder.append(r, true).unwrap();
        }
        let range = OffsetRange::new(s, e).unwrap();
        let meta = crate::encode::FileMeta { tp: tp(p), range, records: records.len() as u64 };
        let data = encoder.finish(&meta).unwrap().spool.read_all().unwrap();
        let len = data.len() as u64;
        self.store.inner.put_if_absent(&key(p, s, e), &SpoolData::memory(data), len).await.unwrap();
    }

    pub(super) async fn wait_keys(&self, n: usize) -> Vec<String> {
        for _ in 0..100 {
            let keys = self.keys().await;
            if keys.len() >= n {
                return keys;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("fewer than {n} objects: {:?}", self.keys().await);
    }
}

/// Waits up to 5 s for `done` to hold. An upload's counters move just after its object lands, so a
/// test that saw the object must wait for them rather than read them at once.
pub(super) async fn eventually(what: &str, done: impl Fn() -> bool) {
    for _ in 0..100 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{what}: not within 5 s");
}

pub(super) fn key(p: i32, s: i64, e: i64) -> String {
    ObjectKey::new(Prefix::default(), tp(p), OffsetRange::new(s, e).unwrap(), FileKind::Jsonl).to_string()
}

pub(super) fn claim_ranges(claims: &[Claim]) -> Vec<(i64, i64, i64)> {
    claims.iter().map(|c| (c.chain_start, c.first, c.end)).collect()
}

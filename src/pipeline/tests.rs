//! Pipeline tests with a synthetic source and a local store that can be slowed down or made to fail.

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

use super::*;
use crate::core::claim::{Claim, ClaimKey};
use crate::core::encode::{Compression, Format};
use crate::core::object_key::FileKind;
use crate::core::object_key::{ObjectKey, Prefix};
use crate::core::partition::OffsetRange;
use crate::core::record::{Record, TimestampKind};
use crate::core::recovery::{ListPage, ListRequest};
use crate::core::roll::RollPolicy;
use crate::core::spool::SpoolUsage;
use crate::core::spool::{SpoolConfig, SpoolData};
use crate::source::{AssignedPartition, Commit, Control, Fetched, ResumeAt, SourceCommand, SourceLink};
use crate::store::{list_all, LocalStore};
use crate::store::{ObjectStore, PutOutcome, StoreError};
use crate::telemetry::Metrics;

/// A local store that logs put starts and ends, and can be slowed down or made to fail.
struct TestStore {
    inner: LocalStore,
    log: Mutex<Vec<String>>,
    put_delay: Mutex<Duration>,
    transient_failures: AtomicU32,
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
        self.inner.list(req, max_keys).await
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

struct Harness {
    _dir: tempfile::TempDir,
    store: Arc<TestStore>,
    control: mpsc::UnboundedSender<Control>,
    records: mpsc::Sender<Fetched>,
    commands: std_mpsc::Receiver<SourceCommand>,
    link: SourceLink,
    epochs: Mutex<HashMap<i32, u64>>,
    metrics: Arc<Metrics>,
    task: JoinHandle<Result<(), PipelineError>>,
}

fn tp(p: i32) -> TopicPartition {
    TopicPartition::new("t", p).unwrap()
}

fn rec(offset: i64, size: usize) -> Record {
    Record {
        offset,
        timestamp_ms: Some(offset),
        timestamp_kind: TimestampKind::CreateTime,
        key: None,
        value: Some(vec![b'v'; size]),
        headers: vec![],
    }
}

fn harness(roll: RollPolicy, max_buffer_bytes: u64, revoke_timeout: Duration) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(TestStore {
        inner: LocalStore::new(dir.path().join("archive")).unwrap(),
        log: Mutex::default(),
        put_delay: Mutex::new(Duration::ZERO),
        transient_failures: AtomicU32::new(0),
    });
    let settings = PipelineSettings {
        prefix: Prefix::default(),
        spec: FileSpec::new(Format::Jsonl, Compression::None).unwrap(),
        roll,
        spool: SpoolConfig {
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
    let task =
        tokio::spawn(Pipeline::new(settings, store.clone(), link.clone(), metrics.clone()).run(control_rx, records_rx));
    Harness { _dir: dir, store, control, records, commands, link, epochs: Mutex::default(), metrics, task }
}

fn policy(records: u64) -> RollPolicy {
    RollPolicy { max_records: records, max_bytes: 1 << 30, max_age: Duration::from_secs(3600) }
}

impl Harness {
    async fn assign(&self, p: i32, log_start: Option<i64>) -> ResumeAt {
        let (reply, rx) = std_mpsc::sync_channel(1);
        let epoch = self.link.next_epoch();
        self.epochs.lock().unwrap().insert(p, epoch);
        let partitions = vec![AssignedPartition { tp: tp(p), epoch, hint: None, log_start, topic_id: None }];
        self.control.send(Control::Assigned { partitions, reply }).unwrap();
        let mut positions = tokio::task::spawn_blocking(move || rx.recv().unwrap()).await.unwrap();
        positions.pop().unwrap().1
    }

    async fn revoke(&self, p: i32, lost: bool) {
        let (reply, rx) = std_mpsc::sync_channel(1);
        self.control.send(Control::Revoked { partitions: vec![tp(p)], lost, reply }).unwrap();
        tokio::task::spawn_blocking(move || rx.recv().unwrap()).await.unwrap();
    }

    /// Sends records of the partition's current assignment.
    async fn send(&self, p: i32, offsets: std::ops::Range<i64>, size: usize) {
        let epoch = self.epochs.lock().unwrap().get(&p).copied().unwrap_or(0);
        self.send_epoch(p, epoch, offsets, size).await;
    }

    async fn send_epoch(&self, p: i32, epoch: u64, offsets: std::ops::Range<i64>, size: usize) {
        for o in offsets {
            self.records.send(Fetched { tp: tp(p), epoch, record: rec(o, size), retention_gap: None }).await.unwrap();
        }
    }

    async fn next_command(&self) -> SourceCommand {
        for _ in 0..200 {
            if let Ok(c) = self.commands.try_recv() {
                return c;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("no command for the source within 5 s");
    }

    async fn next_commit(&self) -> Commit {
        match self.next_command().await {
            SourceCommand::Commit(c) => c,
            other => panic!("expected a commit, got {other:?}"),
        }
    }

    /// Waits for the pipeline to re-position partition `p`, and applies it as the consumer would.
    async fn next_seek(&self, p: i32) -> ResumeAt {
        loop {
            if let SourceCommand::Seek { tp: seek_tp, epoch, position, .. } = self.next_command().await {
                assert_eq!(seek_tp, tp(p));
                self.epochs.lock().unwrap().insert(p, epoch);
                return position;
            }
        }
    }

    /// Waits until the pipeline has taken every record sent so far.
    async fn drained(&self) {
        while self.records.capacity() < self.records.max_capacity() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// The data objects' keys.
    async fn keys(&self) -> Vec<String> {
        list_all(self.store.as_ref(), "topic=").await.unwrap()
    }

    async fn claims(&self, p: i32) -> Vec<Claim> {
        let mut out = Vec::new();
        for key in list_all(self.store.as_ref(), &Prefix::default().claims_folder(&tp(p))).await.unwrap() {
            out.push(Claim::from_json(&key, &self.store.get(&key).await.unwrap()).unwrap());
        }
        out
    }

    /// Plants a claim as another writer would have made it.
    async fn plant_claim(&self, p: i32, start: i64, first: i64, end: i64) {
        let claim = Claim {
            chain_start: start,
            first,
            end,
            records: 1,
            retention_gap: false,
            retention_gap_from: None,
            writer: "other:2".into(),
            time_ms: 0,
            timestamps: None,
            topic_id: None,
        };
        let key = ClaimKey::new(Prefix::default(), tp(p), start).to_string();
        let body = SpoolData::Memory(claim.to_json().into());
        let len = claim.to_json().len() as u64;
        assert_eq!(self.store.inner.put_if_absent(&key, &body, len).await.unwrap(), PutOutcome::Created);
    }

    async fn wait_keys(&self, n: usize) -> Vec<String> {
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

fn key(p: i32, s: i64, e: i64) -> String {
    ObjectKey::new(Prefix::default(), tp(p), OffsetRange::new(s, e).unwrap(), FileKind::Jsonl).to_string()
}

#[tokio::test]
async fn uploads_of_one_partition_complete_in_order() {
    let h = harness(policy(3), 1 << 30, Duration::from_secs(10));
    *h.store.put_delay.lock().unwrap() = Duration::from_millis(150);
    h.assign(0, Some(0)).await;
    h.send(0, 0..9, 10).await;
    // Each commit is queued once its upload returned, so after three the log is complete.
    let mut commits = Vec::new();
    for _ in 0..3 {
        commits.push(h.next_commit().await.next_offset);
    }
    assert_eq!(commits, vec![3, 6, 9]);
    // Each file: its claim, then its data; the next claim only once the data is durable.
    let log = h.store.log.lock().unwrap().clone();
    let expected: Vec<String> = [(0, 2), (3, 5), (6, 8)]
        .iter()
        .flat_map(|(s, e)| {
            let claim = ClaimKey::new(Prefix::default(), tp(0), *s).to_string();
            let data = key(0, *s, *e);
            [format!("start {claim}"), format!("done {claim}"), format!("start {data}"), format!("done {data}")]
        })
        .collect();
    assert_eq!(log, expected);
    h.task.abort();
}

fn claim_ranges(claims: &[Claim]) -> Vec<(i64, i64, i64)> {
    claims.iter().map(|c| (c.chain_start, c.first, c.end)).collect()
}

#[tokio::test]
async fn a_lost_claim_drops_the_files_and_repositions_the_consumer() {
    let h = harness(policy(10), 1 << 30, Duration::from_secs(10));
    assert_eq!(h.assign(0, Some(0)).await, ResumeAt::Earliest);
    // Meanwhile another instance (this one is the zombie) archived 0..=4 under its claim.
    h.plant_claim(0, 0, 0, 4).await;
    let other = SpoolData::Memory(Bytes::from_static(b"theirs"));
    h.store.inner.put_if_absent(&key(0, 0, 4), &other, 6).await.unwrap();
    h.send(0, 0..10, 10).await;
    // Our file 0..=9 loses the claim for 0: dropped, recovered again, consumer moved after 4.
    assert_eq!(h.next_seek(0).await, ResumeAt::Offset(5));
    assert_eq!(h.metrics.claims_lost.get(), 1);
    h.send(0, 5..10, 10).await;
    h.drained().await;
    h.revoke(0, false).await;
    assert_eq!(h.keys().await, vec![key(0, 0, 4), key(0, 5, 9)]);
    assert_eq!(claim_ranges(&h.claims(0).await), vec![(0, 0, 4), (5, 5, 9)]);
    h.task.abort();
}

#[tokio::test]
async fn a_claim_without_its_data_object_is_rewritten_exactly() {
    let h = harness(policy(3), 1 << 30, Duration::from_secs(10));
    // A writer claimed 0..=6 and died before its upload.
    h.plant_claim(0, 0, 0, 6).await;
    assert_eq!(h.assign(0, Some(0)).await, ResumeAt::Offset(0));
    h.send(0, 0..12, 10).await;
    // The first file holds exactly the claimed range, whatever the roll policy says.
    assert_eq!(h.wait_keys(2).await, vec![key(0, 0, 6), key(0, 7, 9)]);
    assert_eq!(h.metrics.claims_rewritten.get(), 1);
    h.revoke(0, false).await;
    assert_eq!(h.keys().await, vec![key(0, 0, 6), key(0, 7, 9), key(0, 10, 11)]);
    assert_eq!(claim_ranges(&h.claims(0).await), vec![(0, 0, 6), (7, 7, 9), (10, 10, 11)]);
    // The dead writer's upload landing late changes nothing.
    let late = SpoolData::Memory(Bytes::from_static(b"late"));
    assert_eq!(h.store.inner.put_if_absent(&key(0, 0, 6), &late, 4).await.unwrap(), PutOutcome::AlreadyExists);
    h.task.abort();
}

#[tokio::test]
async fn a_partial_rewrite_is_dropped_on_revoke() {
    let h = harness(policy(3), 1 << 30, Duration::from_secs(10));
    h.plant_claim(0, 0, 0, 6).await;
    h.assign(0, Some(0)).await;
    h.send(0, 0..4, 10).await;
    h.drained().await;
    h.revoke(0, false).await;
    // Uploading 0..=3 would make the claim look fulfilled and hide 4..=6 from the next owner.
    assert!(h.keys().await.is_empty());
    assert_eq!(h.assign(0, Some(0)).await, ResumeAt::Offset(0));
    h.task.abort();
}

#[tokio::test]
async fn a_retention_gap_found_mid_stream_ends_the_file_there() {
    let h = harness(policy(100), 1 << 30, Duration::from_secs(10));
    h.assign(0, Some(0)).await;
    h.send(0, 0..5, 10).await;
    // Retention deleted 5..=19 while fetching was paused: the next record comes with the gap.
    let epoch = h.epochs.lock().unwrap()[&0];
    let gap = Some(OffsetRange::new(5, 19).unwrap());
    h.records.send(Fetched { tp: tp(0), epoch, record: rec(20, 10), retention_gap: gap }).await.unwrap();
    h.send(0, 21..23, 10).await;
    h.drained().await;
    h.revoke(0, false).await;
    // The gap lies between two objects, where verify can see it, and the claim after it says why.
    assert_eq!(h.keys().await, vec![key(0, 0, 4), key(0, 20, 22)]);
    let claims = h.claims(0).await;
    assert_eq!(claim_ranges(&claims), vec![(0, 0, 4), (5, 20, 22)]);
    assert_eq!(claims.iter().map(|c| c.retention_gap).collect::<Vec<_>>(), vec![false, true]);
    assert_eq!(h.metrics.retention_gaps.get(), 1);
    h.task.abort();
}

#[tokio::test]
async fn claims_chain_over_holes_and_record_retention_gaps() {
    let h = harness(policy(3), 1 << 30, Duration::from_secs(10));
    h.assign(0, Some(0)).await;
    // Offsets 3 and 4 do not exist (compaction, transaction markers).
    h.send(0, 0..3, 10).await;
    h.send(0, 5..8, 10).await;
    h.wait_keys(2).await;
    h.revoke(0, false).await;
    // Retention deleted 8..=19 before it was archived.
    assert_eq!(h.assign(0, Some(20)).await, ResumeAt::Offset(20));
    h.send(0, 20..23, 10).await;
    h.wait_keys(3).await;
    let claims = h.claims(0).await;
    assert_eq!(claim_ranges(&claims), vec![(0, 0, 2), (3, 5, 7), (8, 20, 22)]);
    assert_eq!(claims.iter().map(|c| c.retention_gap).collect::<Vec<_>>(), vec![false, false, true]);
    h.task.abort();
}

#[tokio::test]
async fn a_lost_assignment_stops_claiming() {
    let h = harness(policy(3), 1 << 30, Duration::from_secs(10));
    h.assign(0, Some(0)).await;
    h.link.assignment_lost.store(true, Ordering::SeqCst);
    h.send(0, 0..3, 10).await;
    assert_eq!(h.next_seek(0).await, ResumeAt::Earliest);
    assert!(h.keys().await.is_empty());
    assert!(h.claims(0).await.is_empty());
    h.task.abort();
}

#[tokio::test]
async fn a_revoke_flushes_the_open_file_before_it_answers() {
    let h = harness(policy(1000), 1 << 30, Duration::from_secs(10));
    h.assign(0, Some(0)).await;
    h.send(0, 0..5, 10).await;
    h.drained().await;
    h.revoke(0, false).await;
    assert_eq!(h.keys().await, vec![key(0, 0, 4)]);
    let SourceCommand::Commit(c) = h.commands.try_recv().expect("the commit is queued before the revoke answers")
    else {
        panic!("expected a commit")
    };
    assert_eq!((c.next_offset, c.chain_start), (5, 0));
    // Records of a partition no longer assigned are ignored.
    h.send(0, 5..8, 10).await;
    h.assign(1, Some(0)).await;
    h.revoke(1, false).await;
    assert_eq!(h.keys().await, vec![key(0, 0, 4)]);
    h.task.abort();
}

#[tokio::test]
async fn nothing_of_a_revoked_partition_is_uploaded_after_the_answer() {
    let h = harness(policy(1000), 1 << 30, Duration::from_millis(300));
    h.assign(0, Some(0)).await;
    h.send(0, 0..5, 10).await;
    h.drained().await;
    *h.store.put_delay.lock().unwrap() = Duration::from_secs(3);
    let started = Instant::now();
    h.revoke(0, false).await;
    assert!(started.elapsed() < Duration::from_secs(2), "the revoke waited for the stuck upload");
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(h.keys().await.is_empty(), "an upload landed after the revoke answered");
    assert_eq!(h.metrics.files_dropped.get(), 1);

    // A lost partition's buffer is dropped at once.
    *h.store.put_delay.lock().unwrap() = Duration::ZERO;
    h.assign(0, Some(0)).await;
    h.send(0, 0..5, 10).await;
    h.drained().await;
    h.revoke(0, true).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(h.keys().await.is_empty());
    h.task.abort();
}

#[tokio::test]
async fn recovery_resumes_after_the_archive_and_skips_replayed_offsets() {
    let h = harness(policy(1000), 1 << 30, Duration::from_secs(10));
    assert_eq!(h.assign(0, Some(0)).await, ResumeAt::Earliest);
    h.send(0, 0..5, 10).await;
    h.drained().await;
    h.revoke(0, false).await;
    assert_eq!(h.assign(0, Some(0)).await, ResumeAt::Offset(5));
    h.send(0, 3..8, 10).await;
    h.drained().await;
    h.revoke(0, false).await;
    assert_eq!(h.keys().await, vec![key(0, 0, 4), key(0, 5, 7)]);
    assert_eq!(h.metrics.duplicates_skipped.get(), 2);
    // Retention deleted 8..=19 before it was archived: resume at the log start and count the gap.
    assert_eq!(h.assign(0, Some(20)).await, ResumeAt::Offset(20));
    assert_eq!(h.metrics.retention_gaps.get(), 1);
    h.task.abort();
}

#[tokio::test]
async fn records_of_an_earlier_assignment_are_ignored() {
    let h = harness(policy(1000), 1 << 30, Duration::from_secs(10));
    h.assign(0, Some(0)).await;
    h.revoke(0, true).await;
    h.assign(0, Some(0)).await;
    // Still queued from the first assignment, which was lost before they were taken.
    h.send_epoch(0, 1, 50..60, 10).await;
    h.send(0, 0..5, 10).await;
    h.drained().await;
    h.revoke(0, false).await;
    assert_eq!(h.keys().await, vec![key(0, 0, 4)]);
    h.task.abort();
}

#[tokio::test]
async fn a_record_larger_than_the_roll_size_gets_its_own_file() {
    let roll = RollPolicy { max_records: 1000, max_bytes: 2000, max_age: Duration::from_secs(3600) };
    let h = harness(roll, 1 << 30, Duration::from_secs(10));
    h.assign(0, Some(0)).await;
    h.send(0, 0..2, 10).await;
    h.send(0, 2..3, 5000).await;
    h.send(0, 3..4, 10).await;
    h.drained().await;
    h.revoke(0, false).await;
    assert_eq!(h.keys().await, vec![key(0, 0, 1), key(0, 2, 2), key(0, 3, 3)]);
    h.task.abort();
}

#[tokio::test]
async fn transient_store_errors_are_retried_until_the_upload_lands() {
    let h = harness(policy(2), 1 << 30, Duration::from_secs(10));
    h.store.transient_failures.store(3, Ordering::SeqCst);
    h.assign(0, Some(0)).await;
    h.send(0, 0..2, 10).await;
    assert_eq!(h.wait_keys(1).await, vec![key(0, 0, 1)]);
    assert_eq!(h.metrics.upload_retries.get(), 3);
    h.task.abort();
}

#[tokio::test]
async fn an_idle_partition_rolls_by_age_without_new_records() {
    let roll = RollPolicy { max_records: 1000, max_bytes: 1 << 30, max_age: Duration::from_millis(300) };
    let h = harness(roll, 1 << 30, Duration::from_secs(10));
    h.assign(0, Some(0)).await;
    h.send(0, 0..2, 10).await;
    assert_eq!(h.wait_keys(1).await, vec![key(0, 0, 1)]);
    h.task.abort();
}

#[tokio::test]
async fn the_memory_budget_rolls_the_largest_open_file_early() {
    let h = harness(policy(1_000_000), 64 << 10, Duration::from_secs(10));
    h.assign(0, Some(0)).await;
    h.assign(1, Some(0)).await;
    h.send(1, 0..10, 1000).await;
    h.send(0, 0..60, 1000).await;
    let keys = h.wait_keys(1).await;
    assert_eq!(keys.len(), 1);
    assert!(keys[0].starts_with("topic=t/partition=0/"), "{keys:?}");
    h.task.abort();
}

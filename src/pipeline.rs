//! The pipeline: per assigned partition, an open file that records are encoded into and that rolls by
//! the roll policy, and an uploader task that uploads the partition's sealed files one at a time, in
//! order, then hands the commit back to the consumer. Different partitions upload concurrently.

use std::collections::HashMap;
use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use thiserror::Error;
use tokio::sync::{mpsc, Notify};
use tokio::task::JoinHandle;
use tracing::{error, info, warn};

use crate::config::StartFrom;
use crate::core::backoff::Backoff;
use crate::core::encode::{EncodeError, FileEncoder, FileMeta, FileSpec};
use crate::core::object_key::{ObjectKey, Prefix};
use crate::core::partition::{OffsetRange, TopicPartition};
use crate::core::recovery::{decide_start, RecoveryPlan, StartDecision, Step};
use crate::core::roll::{pick_largest_over_budget, OpenFileStats, RollPolicy, RollReason};
use crate::core::spool::{SealedSpool, Spool, SpoolConfig};
use crate::kafka::{AssignedPartition, Commit, Control, Fetched, StartPosition};
use crate::stats::Stats;
use crate::store::{ObjectStore, PutOutcome, StoreError};

/// How often age deadlines are checked.
const TICK: Duration = Duration::from_millis(200);
/// Listing retries during recovery before the error is treated as fatal.
const RECOVERY_ATTEMPTS: u32 = 8;

#[derive(Debug, Error)]
pub enum PipelineError {
    #[error("archive store failed: {0}")]
    Store(#[from] StoreError),
    #[error("encoding a file of {tp} failed: {source}")]
    Encode { tp: TopicPartition, source: EncodeError },
}

#[derive(Debug, Clone)]
pub struct PipelineSettings {
    pub prefix: Prefix,
    pub spec: FileSpec,
    pub roll: RollPolicy,
    pub spool: SpoolConfig,
    pub max_buffer_bytes: u64,
    pub max_spool_bytes: u64,
    pub revoke_timeout: Duration,
    pub start_from: StartFrom,
}

struct OpenFile {
    encoder: FileEncoder,
    first: i64,
    last: i64,
    records: u64,
    opened_at: Instant,
    /// The encoder's buffered memory when last measured (part of the pipeline's running total).
    buffered: u64,
}

struct SealedFile {
    key: ObjectKey,
    records: u64,
    spool: SealedSpool,
    reason: RollReason,
}

struct PartitionWriter {
    /// The assignment this writer belongs to; records of other assignments are ignored.
    epoch: u64,
    /// The lowest offset still acceptable: records below it were already taken (a seek replayed them).
    next_expected: Option<i64>,
    open: Option<OpenFile>,
    uploads: mpsc::UnboundedSender<SealedFile>,
    uploader: JoinHandle<()>,
}

pub struct Pipeline {
    settings: PipelineSettings,
    store: Arc<dyn ObjectStore>,
    commits: std_mpsc::Sender<Commit>,
    stats: Arc<Stats>,
    partitions: HashMap<TopicPartition, PartitionWriter>,
    /// Sum of the open encoders' buffered memory (spool memory is counted by the spool usage).
    buffered_total: u64,
    freed: Arc<Notify>,
    fatal_tx: mpsc::UnboundedSender<StoreError>,
    fatal_rx: mpsc::UnboundedReceiver<StoreError>,
}

impl Pipeline {
    pub fn new(
        settings: PipelineSettings,
        store: Arc<dyn ObjectStore>,
        commits: std_mpsc::Sender<Commit>,
        stats: Arc<Stats>,
    ) -> Self {
        let (fatal_tx, fatal_rx) = mpsc::unbounded_channel();
        Self {
            settings,
            store,
            commits,
            stats,
            partitions: HashMap::new(),
            buffered_total: 0,
            freed: Arc::new(Notify::new()),
            fatal_tx,
            fatal_rx,
        }
    }

    fn memory_used(&self) -> u64 {
        self.settings.spool.usage.memory() + self.buffered_total
    }

    fn over_budget(&self) -> bool {
        self.memory_used() > self.settings.max_buffer_bytes
            || self.settings.spool.usage.disk() > self.settings.max_spool_bytes
    }

    /// Runs until the source closes its channels (then flushes what is left) or a fatal error. Control
    /// events are handled even while the budget holds records back.
    pub async fn run(
        mut self,
        mut control: mpsc::UnboundedReceiver<Control>,
        mut records: mpsc::Receiver<Fetched>,
    ) -> Result<(), PipelineError> {
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let over_budget = self.over_budget();
            let freed = self.freed.clone();
            tokio::select! {
                biased;
                Some(err) = self.fatal_rx.recv() => return Err(err.into()),
                Some(ev) = control.recv() => self.handle(ev).await?,
                fetched = records.recv(), if !over_budget => match fetched {
                    Some(fetched) => self.append(fetched)?,
                    None => break,
                },
                _ = freed.notified(), if over_budget => {}
                _ = tick.tick() => self.roll_due(Instant::now())?,
            }
        }
        let all: Vec<TopicPartition> = self.partitions.keys().cloned().collect();
        self.revoke(&all, false).await?;
        match self.fatal_rx.try_recv() {
            Ok(err) => Err(err.into()),
            Err(_) => Ok(()),
        }
    }

    async fn handle(&mut self, ev: Control) -> Result<(), PipelineError> {
        match ev {
            Control::Assigned { partitions, reply } => {
                let positions = self.assign(partitions).await?;
                let _ = reply.send(positions);
                Ok(())
            }
            Control::Revoked { partitions, lost, reply } => {
                self.revoke(&partitions, lost).await?;
                let _ = reply.send(());
                Ok(())
            }
            Control::RetentionGap { tp, missing } => {
                Stats::add(&self.stats.retention_gaps, 1);
                warn!(%tp, %missing, "retention gap recorded");
                Ok(())
            }
        }
    }

    fn append(&mut self, fetched: Fetched) -> Result<(), PipelineError> {
        let Fetched { tp, epoch, record } = fetched;
        let Some(writer) = self.partitions.get_mut(&tp).filter(|w| w.epoch == epoch) else { return Ok(()) };
        Stats::add(&self.stats.records_received, 1);
        if writer.next_expected.is_some_and(|next| record.offset < next) {
            Stats::add(&self.stats.duplicates_skipped, 1);
            return Ok(());
        }
        writer.next_expected = Some(record.offset + 1);
        if let Some(file) = &writer.open {
            let stats = OpenFileStats { records: file.records, bytes: file.encoder.encoded_size(), opened_at: file.opened_at };
            if let Some(reason) = self.settings.roll.before_append(&stats, record.payload_size()) {
                self.roll(&tp, reason)?;
            }
        }
        let writer = self.partitions.get_mut(&tp).expect("checked above");
        let encode_err = |source| PipelineError::Encode { tp: tp.clone(), source };
        if writer.open.is_none() {
            let encoder = FileEncoder::new(self.settings.spec, Spool::new(self.settings.spool.clone())).map_err(encode_err)?;
            writer.open =
                Some(OpenFile { encoder, first: record.offset, last: record.offset, records: 0, opened_at: Instant::now(), buffered: 0 });
        }
        let file = writer.open.as_mut().expect("opened above");
        file.encoder.append(&record).map_err(encode_err)?;
        file.last = record.offset;
        file.records += 1;
        let buffered = file.encoder.buffered_memory();
        self.buffered_total = self.buffered_total + buffered - file.buffered;
        file.buffered = buffered;
        let stats = OpenFileStats { records: file.records, bytes: file.encoder.encoded_size(), opened_at: file.opened_at };
        if let Some(reason) = self.settings.roll.after_append(&stats) {
            self.roll(&tp, reason)?;
        }
        if self.over_budget() {
            self.roll_largest()?;
        }
        Ok(())
    }

    /// The budget is exceeded: roll the largest open files until open files hold at most half of it.
    fn roll_largest(&mut self) -> Result<(), PipelineError> {
        let open: Vec<(TopicPartition, u64)> = self
            .partitions
            .iter()
            .filter_map(|(tp, w)| w.open.as_ref().map(|f| (tp.clone(), f.encoder.encoded_size())))
            .collect();
        let sizes: Vec<(usize, u64)> = open.iter().enumerate().map(|(i, (_, size))| (i, *size)).collect();
        let budget = self.settings.max_buffer_bytes.min(self.settings.max_spool_bytes) / 2;
        for idx in pick_largest_over_budget(&sizes, budget) {
            self.roll(&open[idx].0, RollReason::Budget)?;
        }
        Ok(())
    }

    fn roll_due(&mut self, now: Instant) -> Result<(), PipelineError> {
        let due: Vec<TopicPartition> = self
            .partitions
            .iter()
            .filter(|(_, w)| {
                w.open.as_ref().is_some_and(|f| {
                    let stats = OpenFileStats { records: f.records, bytes: 0, opened_at: f.opened_at };
                    self.settings.roll.due(&stats, now).is_some()
                })
            })
            .map(|(tp, _)| tp.clone())
            .collect();
        for tp in due {
            self.roll(&tp, RollReason::Age)?;
        }
        Ok(())
    }

    /// Seals the partition's open file and queues it for upload.
    fn roll(&mut self, tp: &TopicPartition, reason: RollReason) -> Result<(), PipelineError> {
        let Some(writer) = self.partitions.get_mut(tp) else { return Ok(()) };
        let Some(file) = writer.open.take() else { return Ok(()) };
        self.buffered_total -= file.buffered;
        let range = OffsetRange::new(file.first, file.last).expect("offsets grow within a file");
        let meta = FileMeta { tp: tp.clone(), range, records: file.records };
        let spool = file.encoder.finish(&meta).map_err(|source| PipelineError::Encode { tp: tp.clone(), source })?;
        let key = ObjectKey::new(self.settings.prefix.clone(), tp.clone(), range, self.settings.spec.kind());
        // The uploader only ends when this writer is removed, so the send cannot fail here.
        let _ = writer.uploads.send(SealedFile { key, records: file.records, spool, reason });
        Ok(())
    }

    async fn assign(&mut self, partitions: Vec<AssignedPartition>) -> Result<Vec<(TopicPartition, StartPosition)>, PipelineError> {
        let store = self.store.clone();
        let prefix = self.settings.prefix.clone();
        let start_from = self.settings.start_from;
        let stats = self.stats.clone();
        let recoveries = partitions.iter().map(|p| recover(store.as_ref(), &prefix, p, start_from, &stats));
        let results = futures::future::join_all(recoveries).await;
        let mut positions = Vec::new();
        for (p, result) in partitions.into_iter().zip(results) {
            let (position, next_expected) = result?;
            if let Some(old) = self.partitions.remove(&p.tp) {
                old.uploader.abort();
            }
            let (uploads, rx) = mpsc::unbounded_channel();
            let uploader = tokio::spawn(upload_loop(
                self.store.clone(),
                rx,
                self.commits.clone(),
                self.fatal_tx.clone(),
                self.freed.clone(),
                self.stats.clone(),
            ));
            self.partitions.insert(p.tp.clone(), PartitionWriter { epoch: p.epoch, next_expected, open: None, uploads, uploader });
            positions.push((p.tp, position));
        }
        Ok(positions)
    }

    /// Flushes (or drops, when `lost`) the partitions' open files and waits, within the revoke
    /// timeout, for their uploads; uploads still running then are aborted. When this returns, nothing
    /// of these partitions is uploaded any more.
    async fn revoke(&mut self, partitions: &[TopicPartition], lost: bool) -> Result<(), PipelineError> {
        let deadline = tokio::time::Instant::now() + self.settings.revoke_timeout;
        let mut waiting = Vec::new();
        for tp in partitions {
            if lost {
                if let Some(file) = self.partitions.get_mut(tp).and_then(|w| w.open.take()) {
                    self.buffered_total -= file.buffered;
                    Stats::add(&self.stats.files_dropped, 1);
                }
            } else {
                self.roll(tp, RollReason::Flush)?;
            }
            if let Some(writer) = self.partitions.remove(tp) {
                drop(writer.uploads);
                if lost {
                    writer.uploader.abort();
                }
                waiting.push((tp.clone(), writer.uploader));
            }
        }
        for (tp, mut task) in waiting {
            if tokio::time::timeout_at(deadline, &mut task).await.is_err() {
                task.abort();
                Stats::add(&self.stats.files_dropped, 1);
                warn!(%tp, "upload did not finish within the revoke timeout; dropped (the next owner re-reads it)");
            }
        }
        Ok(())
    }
}

/// Recovers one partition's position from the archive.
async fn recover(
    store: &dyn ObjectStore,
    prefix: &Prefix,
    p: &AssignedPartition,
    start_from: StartFrom,
    stats: &Stats,
) -> Result<(StartPosition, Option<i64>), PipelineError> {
    let started = Instant::now();
    let (mut plan, mut req) = RecoveryPlan::start(prefix, &p.tp, p.hint);
    let recovered = loop {
        let page = with_retries(RECOVERY_ATTEMPTS, "listing the archive", || store.list(&req, 1000)).await?;
        match plan.feed(page) {
            Step::List(next) => req = next,
            Step::Done(r) => break r,
        }
    };
    Stats::add(&stats.recoveries, 1);
    Stats::add(&stats.recovery_list_requests, u64::from(recovered.list_requests));
    Stats::add(&stats.recovery_objects_seen, recovered.objects_seen);
    for key in &recovered.ignored_keys {
        warn!(tp = %p.tp, key, "ignoring an object in the partition folder that is not an archive object");
    }
    for o in &recovered.overlaps {
        warn!(tp = %p.tp, earlier = %o.earlier, later = %o.later, "archive holds overlapping objects");
    }
    let (position, next_expected) = match recovered.next_offset {
        None => match start_from {
            StartFrom::Earliest => (StartPosition::Earliest, None),
            StartFrom::Latest => (StartPosition::Latest, None),
        },
        Some(next) => match p.log_start.map(|low| decide_start(next, low)) {
            Some(StartDecision::RetentionGap { missing, resume_at }) => {
                Stats::add(&stats.retention_gaps, 1);
                error!(
                    tp = %p.tp, %missing,
                    "RETENTION GAP: offsets {missing} were deleted by Kafka retention before they were archived; resuming at {resume_at}"
                );
                (StartPosition::Offset(resume_at), Some(resume_at))
            }
            Some(StartDecision::Resume(at)) => (StartPosition::Offset(at), Some(at)),
            None => (StartPosition::Offset(next), Some(next)),
        },
    };
    info!(
        tp = %p.tp,
        position = ?position,
        objects_seen = recovered.objects_seen,
        list_requests = recovered.list_requests,
        hinted = recovered.hinted,
        ms = started.elapsed().as_millis() as u64,
        "recovered position from the archive"
    );
    Ok((position, next_expected))
}

async fn with_retries<T, F, Fut>(attempts: u32, what: &str, mut op: F) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, StoreError>>,
{
    let backoff = Backoff::default();
    let mut attempt = 0;
    loop {
        match op().await {
            Err(e) if e.is_transient() && attempt + 1 < attempts => {
                warn!("{what} failed (attempt {}): {e}; retrying", attempt + 1);
                tokio::time::sleep(backoff.delay(attempt, fastrand::f64())).await;
                attempt += 1;
            }
            other => return other,
        }
    }
}

/// Uploads one partition's sealed files in order. Transient errors retry forever with backoff (the
/// files keep their budget, so fetching pauses); permanent ones end the process.
async fn upload_loop(
    store: Arc<dyn ObjectStore>,
    mut files: mpsc::UnboundedReceiver<SealedFile>,
    commits: std_mpsc::Sender<Commit>,
    fatal: mpsc::UnboundedSender<StoreError>,
    freed: Arc<Notify>,
    stats: Arc<Stats>,
) {
    let backoff = Backoff::default();
    while let Some(file) = files.recv().await {
        let key = file.key.to_string();
        let started = Instant::now();
        let mut attempt = 0;
        let outcome = loop {
            match store.put_if_absent(&key, file.spool.data(), file.spool.len()).await {
                Ok(outcome) => break outcome,
                Err(e) if e.is_transient() => {
                    Stats::add(&stats.upload_retries, 1);
                    warn!(key, attempt = attempt + 1, "upload failed: {e}; retrying");
                    tokio::time::sleep(backoff.delay(attempt, fastrand::f64())).await;
                    attempt += 1;
                }
                Err(e) => {
                    error!(key, "upload failed permanently: {e}");
                    let _ = fatal.send(e);
                    return;
                }
            }
        };
        match outcome {
            PutOutcome::Created => Stats::add(&stats.objects_uploaded, 1),
            PutOutcome::AlreadyExists => Stats::add(&stats.objects_already_present, 1),
        }
        Stats::add(&stats.records_archived, file.records);
        Stats::add(&stats.bytes_uploaded, file.spool.len());
        info!(
            key,
            records = file.records,
            bytes = file.spool.len(),
            ms = started.elapsed().as_millis() as u64,
            reason = file.reason.as_str(),
            outcome = ?outcome,
            "object uploaded"
        );
        let range = file.key.range;
        let _ = commits.send(Commit { tp: file.key.tp.clone(), next_offset: range.next(), object_start: range.start() });
        drop(file);
        freed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Mutex;

    use async_trait::async_trait;
    use bytes::Bytes;

    use super::*;
    use crate::core::encode::{Compression, Format};
    use crate::core::object_key::FileKind;
    use crate::core::record::{Record, TimestampKind};
    use crate::core::recovery::{ListPage, ListRequest};
    use crate::core::spool::{SpoolData, SpoolUsage};
    use crate::store::{list_all, LocalStore};

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
        commits: std_mpsc::Receiver<Commit>,
        epochs: Mutex<HashMap<i32, u64>>,
        stats: Arc<Stats>,
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
            spool: SpoolConfig { memory_threshold: 1 << 20, dir: dir.path().join("spool"), usage: Arc::new(SpoolUsage::default()) },
            max_buffer_bytes,
            max_spool_bytes: 1 << 30,
            revoke_timeout,
            start_from: StartFrom::Earliest,
        };
        std::fs::create_dir_all(dir.path().join("spool")).unwrap();
        let (control, control_rx) = mpsc::unbounded_channel();
        let (records, records_rx) = mpsc::channel(64);
        let (commit_tx, commits) = std_mpsc::channel();
        let stats = Arc::new(Stats::default());
        let task = tokio::spawn(Pipeline::new(settings, store.clone(), commit_tx, stats.clone()).run(control_rx, records_rx));
        Harness { _dir: dir, store, control, records, commits, epochs: Mutex::default(), stats, task }
    }

    fn policy(records: u64) -> RollPolicy {
        RollPolicy { max_records: records, max_bytes: 1 << 30, max_age: Duration::from_secs(3600) }
    }

    impl Harness {
        async fn assign(&self, p: i32, log_start: Option<i64>) -> StartPosition {
            let (reply, rx) = std_mpsc::sync_channel(1);
            let epoch = {
                let mut epochs = self.epochs.lock().unwrap();
                let e = epochs.entry(p).or_insert(0);
                *e += 1;
                *e
            };
            let partitions = vec![AssignedPartition { tp: tp(p), epoch, hint: None, log_start }];
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
                self.records.send(Fetched { tp: tp(p), epoch, record: rec(o, size) }).await.unwrap();
            }
        }

        async fn next_commit(&self) -> Commit {
            for _ in 0..200 {
                if let Ok(c) = self.commits.try_recv() {
                    return c;
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            panic!("no commit within 5 s");
        }

        /// Waits until the pipeline has taken every record sent so far.
        async fn drained(&self) {
            while self.records.capacity() < self.records.max_capacity() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }

        async fn keys(&self) -> Vec<String> {
            list_all(self.store.as_ref(), "").await.unwrap()
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
        let log = h.store.log.lock().unwrap().clone();
        let expected: Vec<String> = [(0, 2), (3, 5), (6, 8)]
            .iter()
            .flat_map(|(s, e)| [format!("start {}", key(0, *s, *e)), format!("done {}", key(0, *s, *e))])
            .collect();
        assert_eq!(log, expected);
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
        let c = h.commits.try_recv().expect("the commit is queued before the revoke answers");
        assert_eq!((c.next_offset, c.object_start), (5, 0));
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
        assert_eq!(Stats::get(&h.stats.files_dropped), 1);

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
        assert_eq!(h.assign(0, Some(0)).await, StartPosition::Earliest);
        h.send(0, 0..5, 10).await;
        h.drained().await;
        h.revoke(0, false).await;
        assert_eq!(h.assign(0, Some(0)).await, StartPosition::Offset(5));
        h.send(0, 3..8, 10).await;
        h.drained().await;
        h.revoke(0, false).await;
        assert_eq!(h.keys().await, vec![key(0, 0, 4), key(0, 5, 7)]);
        assert_eq!(Stats::get(&h.stats.duplicates_skipped), 2);
        // Retention deleted 8..=19 before it was archived: resume at the log start and count the gap.
        assert_eq!(h.assign(0, Some(20)).await, StartPosition::Offset(20));
        assert_eq!(Stats::get(&h.stats.retention_gaps), 1);
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
        assert_eq!(Stats::get(&h.stats.upload_retries), 3);
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
}

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
use crate::core::record::Record;
use crate::core::recovery::{decide_start, RecoveryPlan, StartDecision, Step};
use crate::core::roll::{pick_largest_over_budget, OpenFileStats, RollPolicy, RollReason};
use crate::core::spool::{SealedSpool, Spool, SpoolConfig};
use crate::kafka::{AssignedPartition, Commit, SourceEvent, StartPosition};
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

    /// Runs until the source closes its channel (then flushes what is left) or a fatal error.
    pub async fn run(mut self, mut events: mpsc::Receiver<SourceEvent>) -> Result<(), PipelineError> {
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let over_budget = self.over_budget();
            let freed = self.freed.clone();
            tokio::select! {
                biased;
                Some(err) = self.fatal_rx.recv() => return Err(err.into()),
                ev = events.recv(), if !over_budget => match ev {
                    Some(ev) => self.handle(ev).await?,
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

    async fn handle(&mut self, ev: SourceEvent) -> Result<(), PipelineError> {
        match ev {
            SourceEvent::Record(tp, record) => self.append(tp, record),
            SourceEvent::Assigned { partitions, reply } => {
                let positions = self.assign(partitions).await?;
                let _ = reply.send(positions);
                Ok(())
            }
            SourceEvent::Revoked { partitions, lost, reply } => {
                self.revoke(&partitions, lost).await?;
                let _ = reply.send(());
                Ok(())
            }
            SourceEvent::RetentionGap { tp, missing } => {
                Stats::add(&self.stats.retention_gaps, 1);
                warn!(%tp, %missing, "retention gap recorded");
                Ok(())
            }
        }
    }

    fn append(&mut self, tp: TopicPartition, record: Record) -> Result<(), PipelineError> {
        let Some(writer) = self.partitions.get_mut(&tp) else { return Ok(()) };
        Stats::add(&self.stats.records_received, 1);
        if writer.next_expected.is_some_and(|next| record.offset < next) {
            Stats::add(&self.stats.duplicates_skipped, 1);
            return Ok(());
        }
        writer.next_expected = Some(record.offset + 1);
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
            self.partitions.insert(p.tp.clone(), PartitionWriter { next_expected, open: None, uploads, uploader });
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
        hint = ?recovered.hint,
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

//! The pipeline: per assigned partition, an open file that records are encoded into and that rolls by
//! the roll policy, and an uploader task that uploads the partition's sealed files one at a time, in
//! order, then hands the commit back to the consumer. Different partitions upload concurrently.
//!
//! With claims (the default), each file is first claimed (see `core::claim`); an uploader that loses a
//! claim stops, and the pipeline recovers that partition again from the archive and re-positions the
//! consumer. Recovery may find a claim whose data object is missing: the partition's first file then
//! re-writes exactly that claim's range.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use thiserror::Error;
use tokio::sync::{mpsc, Notify};
use tokio::task::JoinHandle;
use tracing::{error, info, warn};

use crate::config::StartFrom;
use crate::core::claim::{Claim, ClaimKey};
use crate::core::encode::{EncodeError, FileEncoder, FileMeta, FileSpec};
use crate::core::object_key::{ObjectKey, Prefix};
use crate::core::partition::{OffsetRange, TopicPartition};
use crate::core::recovery::{plan_start, CommitHint, StartPlan};
use crate::core::roll::{pick_largest_over_budget, OpenFileStats, RollPolicy, RollReason};
use crate::core::spool::{SealedSpool, Spool, SpoolConfig, SpoolData};
use crate::kafka::{AssignedPartition, Commit, Control, Fetched, SourceCommand, SourceLink, StartPosition};
use crate::stats::Stats;
use crate::store::{ObjectStore, PutOutcome, StoreError};
use crate::tail::{find_tail, with_retries, TailError};

/// How often age deadlines are checked.
const TICK: Duration = Duration::from_millis(200);

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
    /// Claim each file's start offset before uploading it (see `core::claim`).
    pub claims: bool,
    /// Names this process in its claims (host:pid).
    pub writer_id: String,
}

struct OpenFile {
    encoder: FileEncoder,
    first: i64,
    last: i64,
    records: u64,
    opened_at: Instant,
    /// The encoder's buffered memory when last measured (part of the pipeline's running total).
    buffered: u64,
    /// Smallest and largest record timestamp so far.
    timestamps: Option<(i64, i64)>,
}

struct SealedFile {
    key: ObjectKey,
    records: u64,
    spool: SealedSpool,
    reason: RollReason,
    /// The file's chain position (its claim's start).
    chain_start: i64,
    /// The claim to create before uploading; `None` without claims, or when re-writing a claim.
    claim: Option<Claim>,
}

struct PartitionWriter {
    /// The assignment (or re-positioning) this writer belongs to; records of others are ignored.
    epoch: u64,
    /// The lowest offset still acceptable: records below it were already taken (a seek replayed them).
    next_expected: Option<i64>,
    /// The chain position (claim start) of the next file.
    chain_next: i64,
    /// The open file re-writes this claim's range and must end exactly at its end.
    rewrite: Option<Claim>,
    /// The next claim records that retention deleted offsets before its first one.
    retention_gap_pending: bool,
    open: Option<OpenFile>,
    uploads: mpsc::UnboundedSender<SealedFile>,
    uploader: JoinHandle<()>,
}

/// An uploader gave up on its partition's chain (lost a claim, or the assignment was lost): the
/// partition must be recovered again from `chain_start` on.
struct Restart {
    tp: TopicPartition,
    epoch: u64,
    chain_start: i64,
}

pub struct Pipeline {
    settings: PipelineSettings,
    store: Arc<dyn ObjectStore>,
    link: SourceLink,
    stats: Arc<Stats>,
    partitions: HashMap<TopicPartition, PartitionWriter>,
    /// Sum of the open encoders' buffered memory (spool memory is counted by the spool usage).
    buffered_total: u64,
    freed: Arc<Notify>,
    fatal_tx: mpsc::UnboundedSender<StoreError>,
    fatal_rx: mpsc::UnboundedReceiver<StoreError>,
    restart_tx: mpsc::UnboundedSender<Restart>,
    restart_rx: mpsc::UnboundedReceiver<Restart>,
}

impl Pipeline {
    pub fn new(settings: PipelineSettings, store: Arc<dyn ObjectStore>, link: SourceLink, stats: Arc<Stats>) -> Self {
        let (fatal_tx, fatal_rx) = mpsc::unbounded_channel();
        let (restart_tx, restart_rx) = mpsc::unbounded_channel();
        stats.buffer_budget_bytes.set(i64::try_from(settings.max_buffer_bytes).unwrap_or(i64::MAX));
        stats.store_up.set(1);
        Self {
            settings,
            store,
            link,
            stats,
            partitions: HashMap::new(),
            buffered_total: 0,
            freed: Arc::new(Notify::new()),
            fatal_tx,
            fatal_rx,
            restart_tx,
            restart_rx,
        }
    }

    fn memory_used(&self) -> u64 {
        self.settings.spool.usage.memory() + self.buffered_total
    }

    fn over_budget(&self) -> bool {
        self.memory_used() > self.settings.max_buffer_bytes
            || self.settings.spool.usage.disk() > self.settings.max_spool_bytes
    }

    /// Records are held back while over budget, except while a partition re-writes a claimed range:
    /// that file cannot roll early, so holding back could wait forever (re-writes are rare and bounded
    /// by the claim's size).
    fn holding_back(&self) -> bool {
        self.over_budget() && !self.partitions.values().any(|w| w.rewrite.is_some() && w.open.is_some())
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
            let holding_back = self.holding_back();
            let freed = self.freed.clone();
            tokio::select! {
                biased;
                Some(err) = self.fatal_rx.recv() => return Err(err.into()),
                Some(ev) = control.recv() => self.handle(ev).await?,
                Some(restart) = self.restart_rx.recv() => self.restart(restart).await?,
                fetched = records.recv(), if !holding_back => match fetched {
                    Some(fetched) => self.append(fetched)?,
                    None => break,
                },
                _ = freed.notified(), if holding_back => {}
                _ = tick.tick() => self.tick(Instant::now())?,
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
                if let Some(w) = self.partitions.get_mut(&tp) {
                    w.retention_gap_pending = true;
                }
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
        if let Some(end) = writer.rewrite.as_ref().map(|c| c.end).filter(|end| record.offset > *end) {
            // Past the end of the claimed range being re-written.
            if writer.open.is_some() {
                self.roll(&tp, RollReason::Rewrite)?;
            } else {
                warn!(%tp, end, "no records left of the claimed range being re-written (compacted or deleted); going on after it");
                writer.rewrite = None;
                writer.chain_next = end + 1;
            }
        }
        let writer = self.partitions.get_mut(&tp).expect("checked above");
        if let Some(file) = &writer.open {
            let stats =
                OpenFileStats { records: file.records, bytes: file.encoder.encoded_size(), opened_at: file.opened_at };
            if let Some(reason) = self.settings.roll.before_append(&stats, record.payload_size()) {
                self.roll(&tp, reason)?;
            }
        }
        let writer = self.partitions.get_mut(&tp).expect("checked above");
        let encode_err = |source| PipelineError::Encode { tp: tp.clone(), source };
        if writer.open.is_none() {
            let encoder =
                FileEncoder::new(self.settings.spec, Spool::new(self.settings.spool.clone())).map_err(encode_err)?;
            writer.open = Some(OpenFile {
                encoder,
                first: record.offset,
                last: record.offset,
                records: 0,
                opened_at: Instant::now(),
                buffered: 0,
                timestamps: None,
            });
        }
        let file = writer.open.as_mut().expect("opened above");
        file.encoder.append(&record).map_err(encode_err)?;
        file.last = record.offset;
        file.records += 1;
        if let Some(ts) = record.timestamp_ms {
            file.timestamps = Some(file.timestamps.map_or((ts, ts), |(lo, hi)| (lo.min(ts), hi.max(ts))));
        }
        let buffered = file.encoder.buffered_memory();
        self.buffered_total = self.buffered_total + buffered - file.buffered;
        file.buffered = buffered;
        let stats =
            OpenFileStats { records: file.records, bytes: file.encoder.encoded_size(), opened_at: file.opened_at };
        let reason = match &writer.rewrite {
            Some(claim) => (record.offset == claim.end).then_some(RollReason::Rewrite),
            None => self.settings.roll.after_append(&stats),
        };
        if let Some(reason) = reason {
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
            .filter(|(_, w)| w.rewrite.is_none())
            .filter_map(|(tp, w)| w.open.as_ref().map(|f| (tp.clone(), f.encoder.encoded_size())))
            .collect();
        let sizes: Vec<(usize, u64)> = open.iter().enumerate().map(|(i, (_, size))| (i, *size)).collect();
        let budget = self.settings.max_buffer_bytes.min(self.settings.max_spool_bytes) / 2;
        for idx in pick_largest_over_budget(&sizes, budget) {
            self.roll(&open[idx].0, RollReason::Budget)?;
        }
        Ok(())
    }

    /// Age rolls, and the gauges of what is buffered.
    fn tick(&mut self, now: Instant) -> Result<(), PipelineError> {
        self.stats.buffered_bytes.set(i64::try_from(self.memory_used()).unwrap_or(i64::MAX));
        self.stats.open_files.set(self.partitions.values().filter(|w| w.open.is_some()).count() as i64);
        self.stats.assigned_partitions.set(self.partitions.len() as i64);
        self.roll_due(now)
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

    /// Seals the partition's open file and queues it for upload. A file re-writing a claim only rolls
    /// at the claim's end (`RollReason::Rewrite`).
    fn roll(&mut self, tp: &TopicPartition, reason: RollReason) -> Result<(), PipelineError> {
        let Some(writer) = self.partitions.get_mut(tp) else { return Ok(()) };
        if writer.rewrite.is_some() != (reason == RollReason::Rewrite) {
            return Ok(());
        }
        let Some(file) = writer.open.take() else { return Ok(()) };
        self.buffered_total -= file.buffered;
        let range = OffsetRange::new(file.first, file.last).expect("offsets grow within a file");
        let meta = FileMeta { tp: tp.clone(), range, records: file.records };
        let spool = file.encoder.finish(&meta).map_err(|source| PipelineError::Encode { tp: tp.clone(), source })?;
        let key = ObjectKey::new(self.settings.prefix.clone(), tp.clone(), range, self.settings.spec.kind());
        let chain_start = writer.chain_next;
        let claim = match writer.rewrite.take() {
            Some(existing) => {
                writer.chain_next = existing.end + 1;
                None
            }
            None => {
                writer.chain_next = range.next();
                let retention_gap = std::mem::take(&mut writer.retention_gap_pending);
                self.settings.claims.then(|| Claim {
                    start: chain_start,
                    first: range.start(),
                    end: range.end(),
                    records: file.records,
                    retention_gap,
                    writer: self.settings.writer_id.clone(),
                    time_ms: unix_ms(),
                    timestamps: file.timestamps,
                })
            }
        };
        // The uploader only ends when this writer is removed or it gave up the chain (a restart is
        // then on its way), so a failed send loses nothing.
        let _ = writer.uploads.send(SealedFile { key, records: file.records, spool, reason, chain_start, claim });
        Ok(())
    }

    fn new_writer(&self, tp: &TopicPartition, epoch: u64, plan: &StartPlan) -> PartitionWriter {
        let (uploads, rx) = mpsc::unbounded_channel();
        let uploader = Uploader {
            store: self.store.clone(),
            prefix: self.settings.prefix.clone(),
            tp: tp.clone(),
            epoch,
            link: self.link.clone(),
            fatal: self.fatal_tx.clone(),
            restarts: self.restart_tx.clone(),
            freed: self.freed.clone(),
            stats: self.stats.clone(),
        };
        PartitionWriter {
            epoch,
            next_expected: plan.consume_from,
            chain_next: plan.chain_next,
            rewrite: plan.rewrite.clone(),
            retention_gap_pending: plan.retention_gap.is_some() && plan.rewrite.is_none(),
            open: None,
            uploads,
            uploader: tokio::spawn(uploader.run(rx)),
        }
    }

    fn position(&self, plan: &StartPlan) -> StartPosition {
        match (plan.consume_from, self.settings.start_from) {
            (Some(at), _) => StartPosition::Offset(at),
            (None, StartFrom::Earliest) => StartPosition::Earliest,
            (None, StartFrom::Latest) => StartPosition::Latest,
        }
    }

    async fn assign(
        &mut self,
        partitions: Vec<AssignedPartition>,
    ) -> Result<Vec<(TopicPartition, StartPosition)>, PipelineError> {
        let recoverer = self.recoverer();
        let recoveries = partitions.iter().map(|p| recoverer.recover(&p.tp, p.hint, p.log_start));
        let results = futures::future::join_all(recoveries).await;
        let mut positions = Vec::new();
        for (p, result) in partitions.into_iter().zip(results) {
            if let Some(old) = self.partitions.remove(&p.tp) {
                old.uploader.abort();
            }
            let position = match result? {
                Some(plan) => {
                    let writer = self.new_writer(&p.tp, p.epoch, &plan);
                    self.partitions.insert(p.tp.clone(), writer);
                    self.position(&plan)
                }
                None => StartPosition::Stop,
            };
            positions.push((p.tp, position));
        }
        Ok(positions)
    }

    /// An uploader gave up its partition's chain: drop what is buffered, recover from the archive again
    /// and move the consumer to the new position.
    async fn restart(&mut self, r: Restart) -> Result<(), PipelineError> {
        if self.partitions.get(&r.tp).is_none_or(|w| w.epoch != r.epoch) {
            return Ok(()); // Revoked or re-assigned since.
        }
        let old = self.partitions.remove(&r.tp).expect("checked above");
        old.uploader.abort();
        if let Some(file) = old.open {
            self.buffered_total -= file.buffered;
            Stats::add(&self.stats.files_dropped, 1);
        }
        self.freed.notify_one();
        let hint = CommitHint { next_offset: r.chain_start + 1, chain_start: Some(r.chain_start) };
        let epoch = self.link.next_epoch();
        let position = match self.recoverer().recover(&r.tp, Some(hint), None).await? {
            Some(plan) => {
                let writer = self.new_writer(&r.tp, epoch, &plan);
                self.partitions.insert(r.tp.clone(), writer);
                self.position(&plan)
            }
            None => StartPosition::Stop,
        };
        let _ = self.link.commands.send(SourceCommand::Seek { tp: r.tp, from_epoch: r.epoch, epoch, position });
        Ok(())
    }

    /// Flushes (or drops, when `lost`) the partitions' open files and waits, within the revoke
    /// timeout, for their uploads; uploads still running then are aborted. When this returns, nothing
    /// of these partitions is uploaded any more. A file re-writing a claim is dropped unless complete:
    /// a part of it would hide the rest of the claimed range from the next owner.
    async fn revoke(&mut self, partitions: &[TopicPartition], lost: bool) -> Result<(), PipelineError> {
        let deadline = tokio::time::Instant::now() + self.settings.revoke_timeout;
        let mut waiting = Vec::new();
        for tp in partitions {
            let rewriting = self.partitions.get(tp).is_some_and(|w| w.rewrite.is_some());
            if lost || rewriting {
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

    fn recoverer(&self) -> Recoverer {
        Recoverer {
            store: self.store.clone(),
            prefix: self.settings.prefix.clone(),
            claims: self.settings.claims,
            stats: self.stats.clone(),
        }
    }
}

/// What recovering a partition needs (owned, so recoveries run concurrently off the pipeline).
struct Recoverer {
    store: Arc<dyn ObjectStore>,
    prefix: Prefix,
    claims: bool,
    stats: Arc<Stats>,
}

impl Recoverer {
    /// Recovers one partition's position from the archive: from the claims chain when there are
    /// claims, else from the data objects. `None`: the partition cannot be archived (logged).
    async fn recover(
        &self,
        tp: &TopicPartition,
        hint: Option<CommitHint>,
        log_start: Option<i64>,
    ) -> Result<Option<StartPlan>, PipelineError> {
        let started = Instant::now();
        self.stats.recoveries_in_progress.inc();
        let found = find_tail(self.store.as_ref(), &self.prefix, tp, hint, self.claims, Some(&self.stats)).await;
        self.stats.recoveries_in_progress.dec();
        self.stats.recovery_seconds.observe(started.elapsed().as_secs_f64());
        let found = match found {
            Ok(found) => found,
            Err(TailError::Store(e)) => return Err(e.into()),
            Err(TailError::BadClaim(e)) => {
                Stats::add(&self.stats.partitions_stopped, 1);
                error!(%tp, "{e}. This partition is stopped: the claims chain cannot be followed. Inspect the claim (`verify`), then restart");
                return Ok(None);
            }
        };
        for key in &found.ignored_keys {
            warn!(%tp, key, "ignoring an object in the archive folder that is not ours");
        }
        for o in &found.overlaps {
            warn!(%tp, earlier = %o.earlier, later = %o.later, "archive holds overlapping objects");
        }
        let (tail, list_requests, keys_seen) = (found.tail, found.list_requests, found.keys_seen);
        let plan = plan_start(&tail, log_start);
        let partition = tp.partition().to_string();
        self.stats.archived_offset.with_label_values(&[tp.topic(), partition.as_str()]).set(plan.chain_next - 1);
        Stats::add(&self.stats.recoveries, 1);
        Stats::add(&self.stats.recovery_list_requests, u64::from(list_requests));
        Stats::add(&self.stats.recovery_objects_seen, keys_seen);
        if let Some(missing) = plan.retention_gap {
            Stats::add(&self.stats.retention_gaps, 1);
            error!(%tp, %missing, "RETENTION GAP: offsets {missing} were deleted by Kafka retention before they were archived; resuming at {:?}", plan.consume_from);
        }
        if let Some(claim) = &plan.rewrite {
            Stats::add(&self.stats.claims_rewritten, 1);
            warn!(%tp, range = %claim.data(), writer = claim.writer, "the last claim's data object is missing (its writer stopped between claim and upload); re-writing exactly that range");
        }
        info!(
            %tp,
            consume_from = ?plan.consume_from,
            chain_next = plan.chain_next,
            list_requests,
            keys_seen,
            hinted = hint.is_some(),
            ms = started.elapsed().as_millis() as u64,
            "recovered position from the archive"
        );
        Ok(Some(plan))
    }
}

fn unix_ms() -> i64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// What claiming a file's start ended in.
enum ClaimOutcome {
    /// Ours (created now, or by an earlier attempt whose answer was lost).
    Won,
    /// Another writer holds it for another range.
    Lost(Claim),
}

/// Uploads one partition's sealed files in order: claim (with claims), then data, then commit.
/// Transient errors retry forever with backoff (the files keep their budget, so fetching pauses);
/// permanent ones end the process. Losing a claim ends this uploader and asks for a restart.
struct Uploader {
    store: Arc<dyn ObjectStore>,
    prefix: Prefix,
    tp: TopicPartition,
    epoch: u64,
    link: SourceLink,
    fatal: mpsc::UnboundedSender<StoreError>,
    restarts: mpsc::UnboundedSender<Restart>,
    freed: Arc<Notify>,
    stats: Arc<Stats>,
}

impl Uploader {
    async fn run(self, mut files: mpsc::UnboundedReceiver<SealedFile>) {
        while let Some(file) = files.recv().await {
            let started = Instant::now();
            if let Some(claim) = &file.claim {
                if self.link.assignment_lost.load(Ordering::SeqCst) {
                    warn!(tp = %self.tp, "the consumer lost its assignment: not claiming; recovering again");
                    return self.give_up(file.chain_start);
                }
                let key = ClaimKey::new(self.prefix.clone(), self.tp.clone(), claim.start).to_string();
                match self.claim(&key, claim).await {
                    Ok(ClaimOutcome::Won) => Stats::add(&self.stats.claims_created, 1),
                    Ok(ClaimOutcome::Lost(other)) => {
                        Stats::add(&self.stats.claims_lost, 1);
                        warn!(
                            key, ours = %claim.data(), theirs = %other.data(), writer = other.writer,
                            "another writer claimed this start for another range; dropping our files and recovering again"
                        );
                        return self.give_up(file.chain_start);
                    }
                    Err(e) => {
                        error!(key, "claiming failed permanently: {e}");
                        let _ = self.fatal.send(e);
                        return;
                    }
                }
            }
            let key = file.key.to_string();
            let outcome = match self
                .retry_transient(&key, || self.store.put_if_absent(&key, file.spool.data(), file.spool.len()))
                .await
            {
                Ok(outcome) => outcome,
                Err(e) => {
                    error!(key, "upload failed permanently: {e}");
                    let _ = self.fatal.send(e);
                    return;
                }
            };
            match outcome {
                PutOutcome::Created => Stats::add(&self.stats.objects_uploaded, 1),
                PutOutcome::AlreadyExists => Stats::add(&self.stats.objects_already_present, 1),
            }
            Stats::add(&self.stats.records_archived, file.records);
            Stats::add(&self.stats.bytes_uploaded, file.spool.len());
            self.stats.upload_seconds.observe(started.elapsed().as_secs_f64());
            let partition = self.tp.partition().to_string();
            self.stats
                .archived_offset
                .with_label_values(&[self.tp.topic(), partition.as_str()])
                .set(file.key.range.end());
            info!(
                key,
                records = file.records,
                bytes = file.spool.len(),
                ms = started.elapsed().as_millis() as u64,
                reason = file.reason.as_str(),
                outcome = ?outcome,
                "object uploaded"
            );
            let commit =
                Commit { tp: self.tp.clone(), next_offset: file.key.range.next(), chain_start: file.chain_start };
            let _ = self.link.commands.send(SourceCommand::Commit(commit));
            drop(file);
            self.freed.notify_one();
        }
    }

    fn give_up(&self, chain_start: i64) {
        let _ = self.restarts.send(Restart { tp: self.tp.clone(), epoch: self.epoch, chain_start });
    }

    async fn claim(&self, key: &str, claim: &Claim) -> Result<ClaimOutcome, StoreError> {
        let json = bytes::Bytes::from(claim.to_json());
        let len = json.len() as u64;
        let body = SpoolData::Memory(json);
        match self.retry_transient(key, || self.store.put_if_absent(key, &body, len)).await? {
            PutOutcome::Created => Ok(ClaimOutcome::Won),
            PutOutcome::AlreadyExists => {
                let existing = self.retry_transient(key, || self.store.get(key)).await?;
                match Claim::from_json(key, &existing) {
                    Ok(other) if other.same_range(claim) => Ok(ClaimOutcome::Won),
                    Ok(other) => Ok(ClaimOutcome::Lost(other)),
                    Err(e) => Err(StoreError::Permanent {
                        what: e.to_string(),
                        fix: "a claim this archiver cannot read blocks this partition: inspect it with `verify`".into(),
                    }),
                }
            }
        }
    }

    /// Retries transient errors forever, counting them.
    async fn retry_transient<T, F, Fut>(&self, key: &str, op: F) -> Result<T, StoreError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, StoreError>>,
    {
        with_retries(u32::MAX, key, Some((&self.stats.upload_retries, &self.stats.store_up)), op).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU32;
    use std::sync::mpsc as std_mpsc;
    use std::sync::Mutex;

    use async_trait::async_trait;
    use bytes::Bytes;

    use super::*;
    use crate::core::encode::{Compression, Format};
    use crate::core::object_key::FileKind;
    use crate::core::record::{Record, TimestampKind};
    use crate::core::recovery::{ListPage, ListRequest};
    use crate::core::spool::SpoolUsage;
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
        commands: std_mpsc::Receiver<SourceCommand>,
        link: SourceLink,
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
        let stats = Arc::new(Stats::default());
        let task = tokio::spawn(
            Pipeline::new(settings, store.clone(), link.clone(), stats.clone()).run(control_rx, records_rx),
        );
        Harness { _dir: dir, store, control, records, commands, link, epochs: Mutex::default(), stats, task }
    }

    fn policy(records: u64) -> RollPolicy {
        RollPolicy { max_records: records, max_bytes: 1 << 30, max_age: Duration::from_secs(3600) }
    }

    impl Harness {
        async fn assign(&self, p: i32, log_start: Option<i64>) -> StartPosition {
            let (reply, rx) = std_mpsc::sync_channel(1);
            let epoch = self.link.next_epoch();
            self.epochs.lock().unwrap().insert(p, epoch);
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
        async fn next_seek(&self, p: i32) -> StartPosition {
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
                start,
                first,
                end,
                records: 1,
                retention_gap: false,
                writer: "other:2".into(),
                time_ms: 0,
                timestamps: None,
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
        claims.iter().map(|c| (c.start, c.first, c.end)).collect()
    }

    #[tokio::test]
    async fn a_lost_claim_drops_the_files_and_repositions_the_consumer() {
        let h = harness(policy(10), 1 << 30, Duration::from_secs(10));
        assert_eq!(h.assign(0, Some(0)).await, StartPosition::Earliest);
        // Meanwhile another instance (this one is the zombie) archived 0..=4 under its claim.
        h.plant_claim(0, 0, 0, 4).await;
        let other = SpoolData::Memory(Bytes::from_static(b"theirs"));
        h.store.inner.put_if_absent(&key(0, 0, 4), &other, 6).await.unwrap();
        h.send(0, 0..10, 10).await;
        // Our file 0..=9 loses the claim for 0: dropped, recovered again, consumer moved after 4.
        assert_eq!(h.next_seek(0).await, StartPosition::Offset(5));
        assert_eq!(Stats::get(&h.stats.claims_lost), 1);
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
        assert_eq!(h.assign(0, Some(0)).await, StartPosition::Offset(0));
        h.send(0, 0..12, 10).await;
        // The first file holds exactly the claimed range, whatever the roll policy says.
        assert_eq!(h.wait_keys(2).await, vec![key(0, 0, 6), key(0, 7, 9)]);
        assert_eq!(Stats::get(&h.stats.claims_rewritten), 1);
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
        assert_eq!(h.assign(0, Some(0)).await, StartPosition::Offset(0));
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
        assert_eq!(h.assign(0, Some(20)).await, StartPosition::Offset(20));
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
        assert_eq!(h.next_seek(0).await, StartPosition::Earliest);
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

//! One assigned partition's writer: records go into its open file, which rolls by the roll policy
//! (extending the claims chain) or, while the partition re-writes a claimed range whose data object is
//! missing, exactly at that claim's end. Sealed files go to the partition's uploader, in order.

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::budget::Budget;
use super::sealed::SealedFile;
use super::{PipelineOptions, TopicProfile};
use crate::archive::claim::Claim;
use crate::archive::object_key::{ObjectKey, Prefix};
use crate::archive::partition::{OffsetRange, TopicPartition};
use crate::archive::record::Record;
use crate::archive::time_bucket::Bucket;
use crate::encode::roll::{Now, OpenFileStats, RollReason};
use crate::encode::spool::Spool;
use crate::encode::{EncodeError, FileEncoder, FileMeta, FileSpec, Finished, LearnedColumns};
use crate::recovery::{ResumePlan, TopicIdentity};
use crate::telemetry::{Event, Metrics};
use crate::values::wire::SchemaId;

/// What the partition's files do to the claims chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Mode {
    /// Each file extends the chain: it is claimed, then uploaded; it rolls by the roll policy.
    Chain,
    /// The open file re-writes a claimed range (the claim exists, its data object does not): it ends
    /// exactly at the claim's end, and only then does the chain go on.
    Rewrite(Box<Rewrite>),
}

/// A claimed range being written again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Rewrite {
    claim: Claim,
    /// Retention deleted part of the range before it was read again. The file then holds only what
    /// follows the last such gap, and is named by what it holds, so the gap shows between objects
    /// (`verify` reports it from the claim's first offset). Otherwise the file is the object the claim
    /// names, under its key, whatever compaction removed since (even none of its records): a late
    /// upload of that key by the claim's first writer then meets a 412, never a second copy of the
    /// range, and the claim stays fulfilled.
    retention: bool,
}

struct OpenFile {
    encoder: FileEncoder,
    first: i64,
    last: i64,
    records: u64,
    opened: Now,
    /// The time bucket folder it goes into (lake layout).
    bucket: Option<Bucket>,
    /// The encoder's buffered memory when last measured (part of the budget's total).
    buffered: u64,
    /// Smallest and largest record timestamp so far.
    timestamps: Option<(i64, i64)>,
}

impl OpenFile {
    fn stats(&self) -> OpenFileStats {
        OpenFileStats { records: self.records, bytes: self.encoder.encoded_size(), opened: self.opened }
    }
}

/// Why a partition takes no records for now (its records are dropped, and read again from where it
/// parked once that passes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Parked {
    /// Over the buffer budget while another partition re-writes a claimed range (that file cannot roll
    /// early): until the budget has room.
    Budget,
    /// A value names this schema, not fetched yet (the registry does not answer): until it is fetched.
    Schema(SchemaId),
}

pub(super) struct PartitionWriter {
    tp: TopicPartition,
    /// The topic's identity: its ID is recorded in every claim (when the brokers have IDs).
    pub(super) topic: TopicIdentity,
    /// How the topic's files are written.
    profile: Arc<TopicProfile>,
    /// Identifies this writer and its uploader: the epoch it started with (its epoch moves on when it
    /// is unparked, its uploader's reports still name it).
    pub(super) id: u64,
    /// The assignment (or re-positioning) this writer belongs to; records of others are ignored.
    pub(super) epoch: u64,
    /// The lowest offset still acceptable: records below it were already taken (a seek replayed them).
    next_expected: Option<i64>,
    /// The chain position (claim start) of the next file.
    chain_next: i64,
    /// The start (ms) of the time bucket of the partition's last file: no later file goes into an
    /// earlier bucket (see `archive::time_bucket`).
    bucket_floor: Option<i64>,
    mode: Mode,
    /// The next claim records that retention deleted offsets before its first one, from this offset on.
    retention_gap_pending: Option<i64>,
    /// The next claim records that the claim at this chain position has no data object: re-read, its
    /// range held no records any more (compaction removed them).
    no_records_pending: Option<i64>,
    /// When the last record was taken (or the writer started): a re-write whose records stop coming is
    /// checked against Kafka (its range's tail may be gone).
    last_record_at: Instant,
    /// When the re-written range was last checked.
    range_checked_at: Option<Instant>,
    /// Takes no records from this offset on, and why; the consumer is moved back here when that passes.
    parked: Option<(i64, Parked)>,
    /// The schema IDs its last value and key named, once fetched (see `schemas::missing`).
    pub(super) fetched_ids: [Option<SchemaId>; 2],
    open: Option<OpenFile>,
    /// What the partition's Parquet files taught about their columns (compression, dictionaries).
    learned: LearnedColumns,
    uploads: mpsc::UnboundedSender<SealedFile>,
    uploader: JoinHandle<()>,
}

impl PartitionWriter {
    pub(super) fn new(
        tp: TopicPartition,
        topic: TopicIdentity,
        profile: Arc<TopicProfile>,
        epoch: u64,
        plan: &ResumePlan,
        (uploads, uploader): (mpsc::UnboundedSender<SealedFile>, JoinHandle<()>),
        now: Instant,
    ) -> Self {
        Self {
            tp,
            topic,
            profile,
            id: epoch,
            epoch,
            next_expected: plan.consume_from,
            chain_next: plan.chain_next,
            bucket_floor: plan.bucket_floor_ms,
            mode: plan.rewrite.clone().map_or(Mode::Chain, |claim| {
                Mode::Rewrite(Box::new(Rewrite { claim, retention: plan.retention_gap.is_some() }))
            }),
            // A gap inside a claimed range being re-written is told by that range's data object itself.
            retention_gap_pending: plan.retention_gap.filter(|_| plan.rewrite.is_none()).map(|gap| gap.start()),
            no_records_pending: None,
            parked: None,
            fetched_ids: [None; 2],
            last_record_at: now,
            range_checked_at: None,
            open: None,
            learned: LearnedColumns::default(),
            uploads,
            uploader,
        }
    }

    /// Whether the topic's values name their schemas (fetched from the registry before encoding).
    pub(super) fn values_name_schemas(&self) -> bool {
        self.profile.values.schemas().is_some()
    }

    /// Whether the topic's keys name their schemas (`--key-format`).
    pub(super) fn keys_name_schemas(&self) -> bool {
        self.profile.keys.schemas().is_some()
    }

    pub(super) fn is_rewriting(&self) -> bool {
        self.rewrite_end().is_some()
    }

    /// The end of the claimed range being re-written.
    fn rewrite_end(&self) -> Option<i64> {
        match &self.mode {
            Mode::Rewrite(r) => Some(r.claim.end),
            Mode::Chain => None,
        }
    }

    /// How files are written: by the topic's profile, except a re-write, which writes the kind of object
    /// its claim names (another writer may have used another format or compression).
    fn file_spec(&self, settings: &PipelineOptions) -> FileSpec {
        let spec = self.profile.spec;
        match &self.mode {
            Mode::Rewrite(r) => r.claim.object_key(&settings.prefix).map_or(spec, |key| spec.writing(key.kind)),
            Mode::Chain => spec,
        }
    }

    /// The time bucket a record of the chain goes into (see `archive::time_bucket`), never earlier than the
    /// partition's last file's; `None` while re-writing (the file's bucket is its claim's).
    fn chain_bucket(&self, record: &Record, now: Now) -> Option<Bucket> {
        match &self.mode {
            Mode::Rewrite(_) => None,
            Mode::Chain => {
                self.profile.bucketing.map(|b| b.bucket(record.timestamp_ms, now.wall_ms, self.bucket_floor))
            }
        }
    }

    /// The time bucket of a re-write's file: its claimed key's (read once per file, not per record).
    fn claimed_bucket(&self) -> Option<Bucket> {
        match &self.mode {
            Mode::Rewrite(r) => r.claim.object_key(&Prefix::default()).and_then(|key| key.bucket),
            Mode::Chain => None,
        }
    }

    pub(super) fn has_open_file(&self) -> bool {
        self.open.is_some()
    }

    /// What shrinking the open file would free (see `FileEncoder::shrinkable`), when it would.
    pub(super) fn shrinkable(&self) -> Option<u64> {
        self.open.as_ref().map(|f| f.encoder.shrinkable()).filter(|b| *b > 0)
    }

    /// Counts the open file's batch written behind as written, if it is by now (see
    /// `FileEncoder::settle_written`).
    pub(super) fn settle_written(&mut self, budget: &mut Budget) -> Result<(), EncodeError> {
        let Some(file) = self.open.as_mut() else { return Ok(()) };
        if file.encoder.settle_written()? {
            let buffered = file.encoder.buffered_memory();
            budget.resize(file.buffered, buffered);
            file.buffered = buffered;
        }
        Ok(())
    }

    /// Writes the open file's buffers into its spool now (see `FileEncoder::shrink`); whether it did.
    pub(super) fn shrink(&mut self, budget: &mut Budget) -> Result<bool, EncodeError> {
        let Some(file) = self.open.as_mut() else { return Ok(false) };
        let shrunk = file.encoder.shrink()?;
        let buffered = file.encoder.buffered_memory();
        budget.resize(file.buffered, buffered);
        file.buffered = buffered;
        Ok(shrunk)
    }

    /// What the open file holds as the budget counts it (`FileEncoder::held`), when it may be rolled early
    /// for the budget (not a re-write).
    pub(super) fn early_rollable_size(&self) -> Option<u64> {
        self.open.as_ref().filter(|_| !self.is_rewriting()).map(|f| f.encoder.held())
    }

    /// Stops taking records from `offset` on (see `parked`); the caller parks only a writer not parked.
    pub(super) fn park(&mut self, offset: i64, why: Parked) {
        debug_assert!(self.parked.is_none(), "parked twice");
        self.parked = Some((offset, why));
    }

    pub(super) fn is_parked(&self) -> bool {
        self.parked.is_some()
    }

    pub(super) fn parked_for(&self, why: Parked) -> bool {
        self.parked.is_some_and(|(_, parked)| parked == why)
    }

    /// Whether it is parked until a schema is fetched.
    pub(super) fn waits_for_schema(&self) -> bool {
        matches!(self.parked, Some((_, Parked::Schema(_))))
    }

    /// Takes records again, if parked for `why`, from the offset it parked at, under a new epoch
    /// (records of the old one, still in flight, are ignored). Returns that offset.
    pub(super) fn unpark(&mut self, why: Parked, epoch: u64) -> Option<i64> {
        let (at, _) = self.parked.take_if(|(_, parked)| *parked == why)?;
        self.epoch = epoch;
        Some(at)
    }

    /// Retention deleted `missing`, the offsets right before the next record. In the chain, the open
    /// file ends here, so the gap lies between two objects, and the next claim records it before its
    /// first offset. In a re-write, the records read before the gap are dropped (the claimed range's
    /// object must be one object, and it starts after the gap: see `Rewrite::retention`). Returns the
    /// offsets lost, the dropped ones included.
    pub(super) fn retention_gap(
        &mut self,
        missing: OffsetRange,
        settings: &PipelineOptions,
        budget: &mut Budget,
    ) -> Result<OffsetRange, EncodeError> {
        let Mode::Rewrite(r) = &mut self.mode else {
            self.roll(RollReason::RetentionGap, settings, budget)?;
            self.gap_before_next_file(missing.start());
            return Ok(missing);
        };
        r.retention = true;
        let dropped_from = self.open.as_ref().map(|f| f.first);
        self.drop_open_file(budget);
        Ok(dropped_from.map_or(missing, |first| {
            OffsetRange::new(first.min(missing.start()), missing.end()).expect("the file is before the gap")
        }))
    }

    /// The next claim records that retention deleted offsets from `from` on before its first one.
    fn gap_before_next_file(&mut self, from: i64) {
        self.retention_gap_pending = Some(self.retention_gap_pending.map_or(from, |earlier| earlier.min(from)));
    }

    /// Takes one record at `now`: skips what a seek replayed, rolls as the mode and the roll policy say.
    pub(super) fn append(
        &mut self,
        record: &Record,
        now: Now,
        settings: &PipelineOptions,
        budget: &mut Budget,
        metrics: &Metrics,
    ) -> Result<(), EncodeError> {
        let duplicate = self.next_expected.is_some_and(|next| record.offset < next);
        metrics.emit(Event::RecordReceived { duplicate });
        if duplicate {
            return Ok(());
        }
        self.next_expected = Some(record.offset + 1);
        self.last_record_at = now.mono;
        if self.rewrite_end().is_some_and(|end| record.offset > end) {
            // Past the end of the claimed range: whatever was left of it is complete.
            self.finish_rewrite(settings, budget, metrics)?;
        }
        let bucket = self.chain_bucket(record, now);
        if let Some(file) = &self.open {
            let later_bucket =
                matches!((file.bucket, bucket), (Some(open), Some(next)) if next.start_ms() > open.start_ms());
            let reason = self.profile.roll.before_append(&file.stats(), record.payload_size());
            if let Some(reason) = reason.or(later_bucket.then_some(RollReason::Bucket)) {
                self.roll(reason, settings, budget)?;
            }
        }
        if let Some(b) = bucket {
            self.bucket_floor = Some(b.start_ms());
        }
        if !self.open_file(record, now, bucket, settings)?.encoder.append(record, true)? {
            // Fields the file's inferred schema lacks: a new file, with a schema inferred anew. (A
            // re-write does not roll: its file takes the record, kept raw.)
            self.roll(RollReason::Schema, settings, budget)?;
            self.open_file(record, now, bucket, settings)?.encoder.append(record, false)?;
        }
        let file = self.open.as_mut().expect("a file is open");
        file.last = record.offset;
        file.records += 1;
        if let Some(ts) = record.timestamp_ms {
            file.timestamps = Some(file.timestamps.map_or((ts, ts), |(lo, hi)| (lo.min(ts), hi.max(ts))));
        }
        let buffered = file.encoder.buffered_memory();
        budget.resize(file.buffered, buffered);
        file.buffered = buffered;
        let stats = file.stats();
        let reason = match self.rewrite_end() {
            Some(end) => (record.offset == end).then_some(RollReason::Rewrite),
            None => self.profile.roll.after_append(&stats),
        };
        match reason {
            Some(reason) => self.seal(reason, settings, budget),
            None => Ok(()),
        }
    }

    /// The open file, opened for `record` if there is none.
    fn open_file(
        &mut self,
        record: &Record,
        now: Now,
        bucket: Option<Bucket>,
        settings: &PipelineOptions,
    ) -> Result<&mut OpenFile, EncodeError> {
        if self.open.is_none() {
            let file = OpenFile {
                encoder: self.encoder(settings)?,
                first: record.offset,
                last: record.offset,
                records: 0,
                opened: now,
                bucket: bucket.or_else(|| self.claimed_bucket()),
                buffered: 0,
                timestamps: None,
            };
            self.open = Some(file);
        }
        Ok(self.open.as_mut().expect("just opened"))
    }

    fn encoder(&self, settings: &PipelineOptions) -> Result<FileEncoder, EncodeError> {
        let spool = Spool::new(settings.spool.clone());
        let mut encoder =
            FileEncoder::with_keys(self.file_spec(settings), &self.profile.values, &self.profile.keys, spool)?;
        encoder.follow(&self.learned);
        Ok(encoder)
    }

    /// The re-written range still to come, when its records stopped coming for a roll age (and it was
    /// not checked for as long): the consumer is asked whether Kafka still holds any of it.
    pub(super) fn range_to_check(&mut self, now: Instant) -> Option<OffsetRange> {
        let Mode::Rewrite(r) = &self.mode else { return None };
        let after = self.profile.roll.max_age;
        let quiet = |since: Instant| now.saturating_duration_since(since) >= after;
        if !quiet(self.last_record_at) || !self.range_checked_at.is_none_or(quiet) {
            return None;
        }
        self.range_checked_at = Some(now);
        OffsetRange::new(self.next_expected.unwrap_or(r.claim.first), r.claim.end).ok()
    }

    /// Kafka holds no record of `range` any more, and its log starts at `log_start` (compaction removed
    /// them, or a transaction marker follows the last one; or retention deleted them, when the log
    /// starts past the range's start): the re-write is complete with what it has, if `range` is what is
    /// still to come of it.
    pub(super) fn range_empty(
        &mut self,
        range: OffsetRange,
        log_start: i64,
        settings: &PipelineOptions,
        budget: &mut Budget,
        metrics: &Metrics,
    ) -> Result<(), EncodeError> {
        let next = self.next_expected.unwrap_or(range.start());
        if self.rewrite_end() != Some(range.end()) || next < range.start() {
            return Ok(());
        }
        if log_start > range.start() {
            // Retention took the rest: nothing follows what the open file holds, so it is kept, named by
            // what it holds (the gap after it shows between objects).
            let missing = OffsetRange::new(range.start(), (log_start - 1).min(range.end())).expect("ordered");
            match (&mut self.mode, self.open.is_some()) {
                (Mode::Rewrite(r), true) => r.retention = true,
                _ => {
                    self.retention_gap(missing, settings, budget)?;
                }
            }
            metrics.emit(Event::RetentionGap { tp: &self.tp, missing, resume_at: range.end() + 1 });
        }
        self.finish_rewrite(settings, budget, metrics)
    }

    /// The claimed range being re-written has no more records: upload what it has as the claim's
    /// object. With nothing to upload, go on after it, the next claim saying why the claim has no
    /// object: retention took what was left (a retention gap from the claim's first offset), or
    /// compaction removed all of it (no records there).
    fn finish_rewrite(
        &mut self,
        settings: &PipelineOptions,
        budget: &mut Budget,
        metrics: &Metrics,
    ) -> Result<(), EncodeError> {
        let Mode::Rewrite(r) = &self.mode else { return Ok(()) };
        if self.open.is_some() {
            return self.seal(RollReason::Rewrite, settings, budget);
        }
        let (start, first, end, retention) = (r.claim.chain_start, r.claim.first, r.claim.end, r.retention);
        self.chain_next = end + 1;
        self.mode = Mode::Chain;
        match retention {
            true => self.gap_before_next_file(first),
            false => {
                metrics.emit(Event::RewriteEmpty { tp: &self.tp, end });
                self.no_records_pending = Some(start);
            }
        }
        Ok(())
    }

    /// Whether the open file must roll by age or schedule at `now`, and why.
    pub(super) fn roll_due(&self, now: Now) -> Option<RollReason> {
        self.open.as_ref().and_then(|f| self.profile.roll.due(&f.stats(), now))
    }

    /// Rolls the open file by the roll policy (records, bytes, age, budget, flush). A file re-writing a
    /// claim is not rolled: it ends exactly at the claim's end, or is dropped.
    pub(super) fn roll(
        &mut self,
        reason: RollReason,
        settings: &PipelineOptions,
        budget: &mut Budget,
    ) -> Result<(), EncodeError> {
        match self.mode {
            Mode::Chain => self.seal(reason, settings, budget),
            Mode::Rewrite(_) => Ok(()),
        }
    }

    /// Drops the open file (its records are read again by the next owner); true if there was one.
    pub(super) fn drop_open_file(&mut self, budget: &mut Budget) -> bool {
        match self.open.take() {
            Some(file) => {
                budget.release(file.buffered);
                budget.notify_freed();
                true
            }
            None => false,
        }
    }

    /// Stops taking files: the uploader finishes what it has (or, with `abort`, stops at once).
    pub(super) fn close(self, abort: bool) -> JoinHandle<()> {
        drop(self.uploads);
        if abort {
            self.uploader.abort();
        }
        self.uploader
    }

    /// Seals the open file and queues it for upload, moving the chain on.
    fn seal(&mut self, reason: RollReason, settings: &PipelineOptions, budget: &mut Budget) -> Result<(), EncodeError> {
        let Some(file) = self.open.take() else { return Ok(()) };
        budget.release(file.buffered);
        let range = OffsetRange::new(file.first, file.last).expect("offsets grow within a file");
        let kind = self.file_spec(settings).kind();
        let mut key = ObjectKey::new(settings.prefix.clone(), self.tp.clone(), range, kind).in_bucket(file.bucket);
        let chain_start = self.chain_next;
        let claim = match std::mem::replace(&mut self.mode, Mode::Chain) {
            // The claim exists already: only its data object is written, under exactly the key it names
            // (so a late upload by its first writer meets a 412), unless retention took part of the
            // range (see `Rewrite::retention`).
            Mode::Rewrite(rewrite) => {
                let Rewrite { claim: existing, retention } = *rewrite;
                self.chain_next = existing.end + 1;
                if !retention {
                    key = existing.object_key(&settings.prefix).filter(|k| k.tp == self.tp).unwrap_or_else(|| {
                        ObjectKey::new(settings.prefix.clone(), self.tp.clone(), existing.data(), kind)
                            .in_bucket(file.bucket)
                    });
                }
                None
            }
            Mode::Chain => {
                self.chain_next = range.next();
                let gap_from = self.retention_gap_pending.take();
                settings.claims.then(|| Claim {
                    chain_start,
                    first: range.start(),
                    end: range.end(),
                    records: file.records,
                    retention_gap: gap_from.is_some(),
                    retention_gap_from: gap_from.filter(|from| *from < chain_start),
                    no_records_from: self.no_records_pending.take(),
                    writer: settings.writer_id.clone(),
                    time_ms: super::read_clock().wall_ms,
                    timestamps: file.timestamps,
                    topic_id: self.topic.id().map(str::to_string),
                    time_source: key.bucket.and(self.profile.bucketing).map(|b| b.source),
                    object: Some(key.relative()),
                    // Once the file's last batch is taken (below).
                    schema_ids: Vec::new(),
                })
            }
        };
        let meta = FileMeta { tp: self.tp.clone(), range: key.range, records: file.records };
        // The values' and keys' stats are complete only once the last batch is taken (misfits found then).
        let Finished { spool, footer, values, keys } = file.encoder.finish(&meta)?;
        if let Some(footer) = &footer {
            self.learned.learn(footer);
        }
        let claim = claim.map(|claim| Claim {
            schema_ids: values.as_ref().map(|v| v.schema_ids.iter().copied().collect()).unwrap_or_default(),
            ..claim
        });
        // The uploader only ends when this writer is closed or it gave up the chain (a restart is
        // then on its way), so a failed send loses nothing.
        let sealed = SealedFile {
            key,
            records: file.records,
            spool,
            footer,
            reason,
            chain_start,
            claim,
            values,
            keys,
            newest_record_ms: file.timestamps.map(|(_, newest)| newest),
        };
        let _ = self.uploads.send(sealed);
        Ok(())
    }
}

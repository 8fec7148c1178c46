//! The pipeline: per assigned partition a writer (`writer`) whose open file takes the partition's
//! records and rolls by the roll policy, and an uploader task (`uploader`) that uploads the partition's
//! sealed files one at a time, in order, then hands the commit back to the consumer. Different
//! partitions upload concurrently; all files share one memory and disk budget (`budget`).
//!
//! With claims (the default), each file is first claimed (see `archive::claim`); an uploader that loses a
//! claim stops, and the pipeline recovers that partition again from the archive (`recoverer`) and
//! re-positions the consumer. Recovery may find a claim whose data object is missing: the partition's
//! writer then re-writes exactly that claim's range.

mod budget;
pub mod commit;
pub mod dead_letters;
pub mod profile;
mod recoverer;
mod room;
pub mod schemas;
mod sealed;
#[cfg(test)]
mod tests;
mod uploader;
mod writer;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, StreamExt};

use thiserror::Error;
use tokio::sync::mpsc;

use self::budget::Budget;
use self::commit::CommitStage;
pub use self::dead_letters::DeadLetterSink;
pub use self::profile::{TopicMatch, TopicProfile, TopicProfiles};
use self::recoverer::{Recovered, Recoverer, Recovering, Resumed, RECOVERIES_AT_ONCE};
use self::uploader::{Uploader, UploaderEvent};
use self::writer::{Parked, PartitionWriter};
use crate::archive::object_key::Prefix;
use crate::archive::partition::TopicPartition;
use crate::clock::wall_clock_ms;
use crate::encode::roll::{Now, RollReason};
use crate::encode::spool::SpoolOptions;
use crate::encode::EncodeError;
use crate::recovery::CommitHint;
pub use crate::recovery::TopicIdLookup;
use crate::source::StartFrom;
use crate::source::{AssignedPartition, Control, Fetched, ResumeAt, SourceCommand, SourceLink};
use crate::store::{ObjectStore, StoreError};
use crate::telemetry::{DropReason, Event, Metrics};
use crate::values::wire::SchemaId;

/// How often age deadlines are checked.
const TICK: Duration = Duration::from_millis(200);

#[derive(Debug, Error)]
pub enum PipelineError {
    #[error("archive store failed: {0}")]
    Store(#[from] StoreError),
    #[error("uploading {key} failed")]
    Upload { key: String, source: StoreError },
    #[error("encoding a file of {tp} failed")]
    Encode { tp: TopicPartition, source: EncodeError },
    #[error("sending dead letters of {key} failed: {why}")]
    DeadLetters { key: String, why: String },
}

#[derive(Debug, Clone)]
pub struct PipelineOptions {
    pub prefix: Prefix,
    /// How each topic's files are written.
    pub profiles: Arc<TopicProfiles>,
    pub spool: SpoolOptions,
    pub max_buffer_bytes: u64,
    pub max_spool_bytes: u64,
    pub revoke_timeout: Duration,
    pub start_from: StartFrom,
    /// Claim each file's start offset before uploading it (see `archive::claim`).
    pub claims: bool,
    /// Names this process in its claims (host:pid).
    pub writer_id: String,
}

pub struct Pipeline {
    settings: PipelineOptions,
    store: Arc<dyn ObjectStore>,
    link: SourceLink,
    metrics: Arc<Metrics>,
    partitions: HashMap<TopicPartition, PartitionWriter>,
    budget: Budget,
    uploader_events: mpsc::UnboundedSender<UploaderEvent>,
    from_uploaders: mpsc::UnboundedReceiver<UploaderEvent>,
    /// Where records whose value did not fit the value schema also go (`--dlq-topic`).
    dead_letters: Option<Arc<dyn DeadLetterSink>>,
    /// What follows an object's durability (Kafka's commit).
    commits: Arc<CommitStage>,
    /// Recoveries under way, off the loop: a store that fails for a while (retried for as long as it
    /// takes) never keeps revokes, uploads or other partitions' records waiting.
    recoveries: FuturesUnordered<BoxFuture<'static, Recovered>>,
    /// The partitions being recovered, and for which epoch.
    recovering: Recovering,
    /// Turns at the store for recoveries (see `RECOVERIES_AT_ONCE`).
    recovery_turns: Arc<tokio::sync::Semaphore>,
    topics: AssignedTopics,
    /// Asked for a topic's identity when its assignment could not tell it.
    topic_ids: Arc<dyn TopicIdLookup>,
    /// Where the schemas that values name come from (`--value-format avro`).
    registry: Option<schemas::Registry>,
    /// The schema IDs being fetched (a partition whose value names one waits, parked), and the fetches.
    fetching_ids: BTreeSet<SchemaId>,
    fetching: FuturesUnordered<BoxFuture<'static, SchemaId>>,
}

/// The topics this process has been assigned partitions of, and the partitions it holds now (shared
/// with the `_SUCCESS` marker task, topics a regex subscription matches being known only from their
/// assignments, and with the table committer).
#[derive(Debug, Clone, Default)]
pub struct AssignedTopics(Arc<std::sync::Mutex<Assigned>>);

#[derive(Debug, Default)]
struct Assigned {
    partitions: BTreeMap<String, BTreeSet<i32>>,
    /// Every partition held since start (the table committer's last commit covers them).
    ever: BTreeMap<String, BTreeSet<i32>>,
    /// Counts assignments, so a task sees that partitions came.
    assignments: u64,
}

impl AssignedTopics {
    fn insert(&self, tp: &TopicPartition) {
        let mut assigned = self.0.lock().expect("assigned topics");
        assigned.partitions.entry(tp.topic().to_string()).or_default().insert(tp.partition());
        assigned.ever.entry(tp.topic().to_string()).or_default().insert(tp.partition());
        assigned.assignments += 1;
    }

    fn remove(&self, tp: &TopicPartition) {
        let mut assigned = self.0.lock().expect("assigned topics");
        if let Some(partitions) = assigned.partitions.get_mut(tp.topic()) {
            partitions.remove(&tp.partition());
        }
    }

    /// The topics so far, in name order.
    pub fn snapshot(&self) -> Vec<String> {
        self.0.lock().expect("assigned topics").partitions.keys().cloned().collect()
    }

    /// The partitions of `topic` held now, in order.
    pub fn partitions(&self, topic: &str) -> Vec<i32> {
        let assigned = self.0.lock().expect("assigned topics");
        assigned.partitions.get(topic).map_or_else(Vec::new, |p| p.iter().copied().collect())
    }

    /// Per topic held, its partitions held now.
    pub fn held_now(&self) -> BTreeMap<String, BTreeSet<i32>> {
        let assigned = self.0.lock().expect("assigned topics");
        assigned.partitions.iter().filter(|(_, p)| !p.is_empty()).map(|(t, p)| (t.clone(), p.clone())).collect()
    }

    /// Per topic, every partition held since start, held now or not.
    pub fn held_since_start(&self) -> BTreeMap<String, BTreeSet<i32>> {
        self.0.lock().expect("assigned topics").ever.clone()
    }

    /// How many partitions were assigned so far.
    pub fn assignments(&self) -> u64 {
        self.0.lock().expect("assigned topics").assignments
    }
}

impl Pipeline {
    pub fn new(
        settings: PipelineOptions,
        store: Arc<dyn ObjectStore>,
        link: SourceLink,
        metrics: Arc<Metrics>,
        topic_ids: Arc<dyn TopicIdLookup>,
    ) -> Self {
        let (uploader_events, from_uploaders) = mpsc::unbounded_channel();
        metrics.emit(Event::PipelineStarted { budget_bytes: settings.max_buffer_bytes });
        let budget = Budget::new(settings.max_buffer_bytes, settings.max_spool_bytes, settings.spool.usage.clone());
        let commits = Arc::new(CommitStage::new(link.commands.clone()));
        Self {
            settings,
            store,
            link,
            commits,
            metrics,
            partitions: HashMap::new(),
            budget,
            uploader_events,
            from_uploaders,
            dead_letters: None,
            recoveries: FuturesUnordered::new(),
            recovering: Recovering::default(),
            recovery_turns: Arc::new(tokio::sync::Semaphore::new(RECOVERIES_AT_ONCE)),
            topics: AssignedTopics::default(),
            topic_ids,
            registry: None,
            fetching_ids: BTreeSet::new(),
            fetching: FuturesUnordered::new(),
        }
    }

    /// Fetches the schemas that values name from `registry` before their batch is encoded.
    pub fn with_registry(mut self, registry: schemas::Registry) -> Self {
        self.registry = Some(registry);
        self
    }

    /// Tells `recent` of each Parquet object it creates (its size and footer), for the table commits
    /// of this process.
    pub fn with_recent_objects(mut self, recent: Arc<crate::table::recent::RecentObjects>) -> Self {
        self.commits = Arc::new(CommitStage::new(self.link.commands.clone()).with_recent(recent));
        self
    }

    /// Also sends records whose value did not fit the value schema to `sink`, before their file is
    /// uploaded.
    pub fn with_dead_letters(mut self, sink: Arc<dyn DeadLetterSink>) -> Self {
        self.dead_letters = Some(sink);
        self
    }

    /// The topics this pipeline is assigned partitions of, as they come.
    pub fn assigned_topics(&self) -> AssignedTopics {
        self.topics.clone()
    }

    /// Records are held back while over budget, except while a partition re-writes a claimed range:
    /// that file cannot roll early, so it must get its records; the other partitions are parked
    /// meanwhile (their records are dropped and read again once there is room), so the budget holds.
    /// Only the re-write's own file may pass it, bounded by its claim (another writer's roll size).
    fn holding_back(&self) -> bool {
        self.budget.exceeded() && !self.rewrite_waiting()
    }

    fn rewrite_waiting(&self) -> bool {
        self.partitions.values().any(|w| w.is_rewriting() && w.has_open_file())
    }

    /// Runs until the source closes its channels (then flushes what is left) or a fatal error. Control
    /// events are handled even while the budget holds records back.
    pub async fn run(
        mut self,
        mut control: mpsc::UnboundedReceiver<Control>,
        mut records: mpsc::Receiver<Vec<Fetched>>,
    ) -> Result<(), PipelineError> {
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let holding_back = self.holding_back();
            self.budget.note_holding_back(holding_back, Instant::now());
            let freed = self.budget.freed();
            tokio::select! {
                biased;
                Some(ev) = control.recv() => self.handle(ev).await?,
                Some(ev) = self.from_uploaders.recv() => self.on_uploader_event(ev)?,
                Some(done) = self.recoveries.next(), if !self.recoveries.is_empty() => self.recovered(done)?,
                // Before the records, which may always be there: ages and schedules roll files, and
                // fetched schemas unpark partitions, also while records come faster than they are taken.
                _ = tick.tick() => self.tick(read_clock())?,
                Some(id) = self.fetching.next(), if !self.fetching.is_empty() => self.fetched(id),
                batch = records.recv(), if !holding_back => match batch {
                    Some(batch) => self.take(batch)?,
                    None => break,
                },
                _ = freed.notified(), if holding_back => {}
            }
        }
        let all: Vec<TopicPartition> = self.partitions.keys().cloned().collect();
        self.revoke(&all, false).await?;
        // The last files were sealed (and may have gone to disk) after the last tick.
        self.report_buffered();
        while let Ok(ev) = self.from_uploaders.try_recv() {
            if let UploaderEvent::Failed { key, error } = ev {
                return Err(PipelineError::Upload { key, source: error });
            }
        }
        Ok(())
    }

    async fn handle(&mut self, ev: Control) -> Result<(), PipelineError> {
        match ev {
            Control::Assigned { partitions, reply } => self.assign(partitions, reply),
            Control::RangeEmpty { tp, epoch, range, log_start } => {
                if let Some(writer) = self.partitions.get_mut(&tp).filter(|w| w.epoch == epoch) {
                    writer
                        .range_empty(range, log_start, &self.settings, &mut self.budget, &self.metrics)
                        .map_err(|source| PipelineError::Encode { tp: tp.clone(), source })?;
                }
            }
            Control::Revoked { partitions, lost, reply } => {
                self.revoke(&partitions, lost).await?;
                let _ = reply.send(());
            }
        }
        Ok(())
    }

    fn on_uploader_event(&mut self, ev: UploaderEvent) -> Result<(), PipelineError> {
        match ev {
            UploaderEvent::Failed { key, error } => Err(PipelineError::Upload { key, source: error }),
            UploaderEvent::DeadLetters { key, why } => Err(PipelineError::DeadLetters { key, why }),
            UploaderEvent::GaveUp { tp, writer, chain_start } => {
                self.restart(tp, writer, chain_start);
                Ok(())
            }
        }
    }

    /// Takes a batch of records; a partition whose value names a schema not fetched yet waits for it
    /// (see `schemas`), the others go on.
    fn take(&mut self, batch: Vec<Fetched>) -> Result<(), PipelineError> {
        let now = read_clock();
        for fetched in batch {
            self.append(fetched, now)?;
        }
        Ok(())
    }

    /// Schema `id` was fetched: the partitions waiting for it read again from where they parked.
    fn fetched(&mut self, id: SchemaId) {
        self.fetching_ids.remove(&id);
        self.unpark(Parked::Schema(id));
    }

    /// Takes one record, received at `now`, unless its partition is parked (the record is dropped, and
    /// read again from where the partition parked) or parks at it: over budget while another partition
    /// re-writes a claimed range, or its value names a schema not fetched yet (fetched once however many
    /// partitions wait for it). A retention gap before the record is taken first either way.
    fn append(&mut self, fetched: Fetched, now: Now) -> Result<(), PipelineError> {
        let Fetched { tp, epoch, record, retention_gap } = fetched;
        // Looked at only when over budget: it visits every partition.
        let park_others = self.budget.exceeded() && self.rewrite_waiting();
        let Some(writer) = self.partitions.get_mut(&tp).filter(|w| w.epoch == epoch) else { return Ok(()) };
        if writer.is_parked() {
            return Ok(());
        }
        let encode = |source| PipelineError::Encode { tp: tp.clone(), source };
        if let Some(missing) = retention_gap {
            let missing = writer.retention_gap(missing, &self.settings, &mut self.budget).map_err(encode)?;
            self.metrics.emit(Event::RetentionGap { tp: &tp, missing, resume_at: record.offset });
        }
        if park_others && !writer.is_rewriting() {
            writer.park(record.offset, Parked::Budget);
            self.metrics.emit(Event::Parked { tp: &tp, at: record.offset });
            return Ok(());
        }
        if let Some(registry) = &self.registry {
            if let Some(id) = schemas::missing(writer, &record, &registry.cache) {
                writer.park(record.offset, Parked::Schema(id));
                self.metrics.emit(Event::WaitingForSchema { tp: &tp, at: record.offset, id: id.0 });
                if self.fetching_ids.insert(id) {
                    self.fetching.push(Box::pin(schemas::fetch(registry.clone(), id, self.metrics.clone())));
                }
                return Ok(());
            }
        }
        writer.append(&record, now, &self.settings, &mut self.budget, &self.metrics).map_err(encode)?;
        if self.budget.exceeded() {
            self.make_room()?;
        }
        Ok(())
    }

    /// Moves the partitions parked for `why` back to where they parked.
    fn unpark(&mut self, why: Parked) {
        for (tp, writer) in self.partitions.iter_mut().filter(|(_, w)| w.parked_for(why)) {
            let from_epoch = writer.epoch;
            let epoch = self.link.next_epoch();
            if let Some(at) = writer.unpark(why, epoch) {
                self.metrics.emit(Event::Unparked { tp, at, schema: why != Parked::Budget });
                let position = ResumeAt::Offset(at);
                let _ = self.link.commands.send(SourceCommand::Seek { tp: tp.clone(), from_epoch, epoch, position });
            }
        }
    }

    /// Sets the gauges of what is buffered (and the count of files spooled to disk).
    fn report_buffered(&self) {
        self.metrics.emit(Event::Buffered {
            bytes: self.budget.memory_used(),
            files_to_disk: self.budget.files_to_disk(),
            held_back: self.budget.held_back(Instant::now()),
            open_files: self.partitions.values().filter(|w| w.has_open_file()).count(),
            assigned: self.partitions.len(),
            waiting_for_schemas: self.partitions.values().filter(|w| w.waits_for_schema()).count(),
        });
    }

    /// Every 200 ms: counts the batches written behind by now as written, unparks what the budget has room
    /// for, sets the gauges of what is buffered, and rolls files by age and schedule.
    fn tick(&mut self, now: Now) -> Result<(), PipelineError> {
        self.settle_written()?;
        if self.budget.exceeded() {
            // A batch written behind may have filled a spool since the last record was taken (which
            // made room as it was taken).
            self.make_room()?;
        }
        if !self.budget.exceeded() {
            self.unpark(Parked::Budget);
        }
        self.report_buffered();
        let due: Vec<(TopicPartition, RollReason)> =
            self.partitions.iter().filter_map(|(tp, w)| w.roll_due(now).map(|reason| (tp.clone(), reason))).collect();
        for (tp, reason) in due {
            self.roll(&tp, reason)?;
        }
        // Re-writes whose records stopped coming for a roll age: is anything of their range left?
        for (tp, writer) in &mut self.partitions {
            if let Some(range) = writer.range_to_check(now.mono) {
                let check = SourceCommand::CheckRange { tp: tp.clone(), epoch: writer.epoch, range };
                let _ = self.link.commands.send(check);
            }
        }
        Ok(())
    }

    /// Counts the open files' batches written behind by now as written (see `FileEncoder::settle_written`).
    fn settle_written(&mut self) -> Result<(), PipelineError> {
        for (tp, writer) in &mut self.partitions {
            let encode = |source| PipelineError::Encode { tp: tp.clone(), source };
            writer.settle_written(&mut self.budget).map_err(encode)?;
        }
        Ok(())
    }

    fn roll(&mut self, tp: &TopicPartition, reason: RollReason) -> Result<(), PipelineError> {
        let Some(writer) = self.partitions.get_mut(tp) else { return Ok(()) };
        writer
            .roll(reason, &self.settings, &mut self.budget)
            .map_err(|source| PipelineError::Encode { tp: tp.clone(), source })
    }

    /// A writer for a recovered partition (none is there), with its uploader running. The writer's id,
    /// which its uploader's reports name, is the epoch it starts with.
    fn start_writer(&mut self, tp: &TopicPartition, epoch: u64, Resumed { plan, topic }: Resumed) {
        let (uploads, files) = mpsc::unbounded_channel();
        let profile = self.settings.profiles.for_topic(tp.topic()).clone();
        let dead_letters = self.dead_letters.clone().zip(profile.dlq_topic.clone());
        let uploader = Uploader {
            store: self.store.clone(),
            prefix: self.settings.prefix.clone(),
            tp: tp.clone(),
            writer: epoch,
            link: self.link.clone(),
            events: self.uploader_events.clone(),
            freed: self.budget.freed(),
            metrics: self.metrics.clone(),
            dead_letters,
            commits: self.commits.clone(),
        };
        let uploader = tokio::spawn(uploader.run(files));
        let writer =
            PartitionWriter::new(tp.clone(), topic, profile, epoch, &plan, (uploads, uploader), Instant::now());
        self.partitions.insert(tp.clone(), writer);
    }

    /// Where the consumer resumes a recovered partition (`None`: it cannot be archived).
    fn resume_at(&self, resumed: Option<&Resumed>) -> ResumeAt {
        match (resumed.map(|r| r.plan.consume_from), self.settings.start_from) {
            (None, _) => ResumeAt::Stop,
            (Some(Some(at)), _) => ResumeAt::Offset(at),
            (Some(None), StartFrom::Earliest) => ResumeAt::Earliest,
            (Some(None), StartFrom::Latest) => ResumeAt::Latest,
        }
    }

    /// Starts recovering newly assigned partitions; each one's answer goes to `reply` once it is
    /// recovered (one waiting, on its topic's ID say, never holds up the others).
    fn assign(&mut self, partitions: Vec<AssignedPartition>, reply: std_mpsc::Sender<Vec<(TopicPartition, ResumeAt)>>) {
        let surveys = self.recoverer().surveys(&partitions);
        for p in partitions {
            self.topics.insert(&p.tp);
            if let Some(mut old) = self.partitions.remove(&p.tp) {
                old.drop_open_file(&mut self.budget);
                old.close(true);
            }
            self.recovering.start(&p.tp, p.epoch);
            let (recoverer, reply, survey) = (self.recoverer(), reply.clone(), surveys.get(p.tp.topic()).cloned());
            self.recoveries.push(Box::pin(async move {
                let log = (p.log_start, p.log_end);
                let recovery = recoverer.recover(&p.tp, p.epoch, p.hint, log, p.topic.clone(), survey).await;
                Recovered::Assigned { partition: p, recovery: Box::new(recovery), reply }
            }));
        }
    }

    /// The uploader of `writer` gave up its partition's chain: drop what is buffered, recover from the
    /// archive again (off the loop) and then move the consumer, from where the writer's epoch has it
    /// now, to the new position.
    fn restart(&mut self, tp: TopicPartition, writer: u64, chain_start: i64) {
        if self.partitions.get(&tp).is_none_or(|w| w.id != writer) {
            return; // Revoked or re-assigned since.
        }
        let mut old = self.partitions.remove(&tp).expect("checked above");
        let from_epoch = old.epoch;
        if old.drop_open_file(&mut self.budget) {
            self.metrics.emit(Event::FileDropped { tp: &tp, why: DropReason::ChainGivenUp });
        }
        let topic = old.topic.clone();
        old.close(true);
        let hint = CommitHint { next_offset: chain_start + 1, chain_start: Some(chain_start) };
        let epoch = self.link.next_epoch();
        self.recovering.start(&tp, epoch);
        let recoverer = self.recoverer();
        self.recoveries.push(Box::pin(async move {
            let recovery = recoverer.recover(&tp, epoch, Some(hint), (None, None), Some(topic), None).await;
            Recovered::Restarted { tp, from_epoch, epoch, recovery: Box::new(recovery) }
        }));
    }

    /// A recovery ended: start the writers of the partitions still ours, and tell the consumer where
    /// they resume. A permanent store error stops the archiver.
    fn recovered(&mut self, done: Recovered) -> Result<(), PipelineError> {
        match done {
            Recovered::Assigned { partition: p, recovery, reply } => {
                let resumed = if self.recovering.end(&p.tp, p.epoch) { (*recovery)? } else { self.void(&p.tp) };
                let _ = reply.send(vec![(p.tp.clone(), self.resume_at(resumed.as_ref()))]);
                if let Some(resumed) = resumed {
                    self.start_writer(&p.tp, p.epoch, resumed);
                }
            }
            Recovered::Restarted { tp, from_epoch, epoch, recovery } => {
                if !self.recovering.end(&tp, epoch) {
                    self.void(&tp);
                    return Ok(());
                }
                let resumed = (*recovery)?;
                let position = self.resume_at(resumed.as_ref());
                if let Some(resumed) = resumed {
                    self.start_writer(&tp, epoch, resumed);
                }
                let _ = self.link.commands.send(SourceCommand::Seek { tp, from_epoch, epoch, position });
            }
        }
        Ok(())
    }

    /// A recovery of `tp` ended after its partition was revoked (or assigned again): its result is
    /// dropped, and the partition's series with it if it is not this instance's any more.
    fn void(&self, tp: &TopicPartition) -> Option<Resumed> {
        if !self.partitions.contains_key(tp) && !self.recovering.any(tp) {
            self.metrics.forget_partition(tp);
        }
        None
    }

    /// Flushes (or drops, when `lost`) the partitions' open files and waits, within the revoke
    /// timeout, for their uploads; uploads still running then are aborted. When this returns, nothing
    /// of these partitions is uploaded any more. A file re-writing a claim is dropped unless complete:
    /// a part of it would hide the rest of the claimed range from the next owner.
    async fn revoke(&mut self, partitions: &[TopicPartition], lost: bool) -> Result<(), PipelineError> {
        let deadline = tokio::time::Instant::now() + self.settings.revoke_timeout;
        let mut waiting = Vec::new();
        for tp in partitions {
            // A recovery under way has nothing to upload; its result will be dropped.
            self.recovering.cancel(tp);
            self.topics.remove(tp);
            let Some(mut writer) = self.partitions.remove(tp) else { continue };
            let drop_reason = match (lost, writer.is_rewriting()) {
                (true, _) => Some(DropReason::PartitionLost),
                (false, true) => Some(DropReason::PartialRewrite),
                (false, false) => None,
            };
            match drop_reason {
                Some(why) => {
                    if writer.drop_open_file(&mut self.budget) {
                        self.metrics.emit(Event::FileDropped { tp, why });
                    }
                }
                None => writer
                    .roll(RollReason::Flush, &self.settings, &mut self.budget)
                    .map_err(|source| PipelineError::Encode { tp: tp.clone(), source })?,
            }
            waiting.push((tp.clone(), writer.close(lost)));
        }
        for (tp, mut task) in waiting {
            if tokio::time::timeout_at(deadline, &mut task).await.is_err() {
                task.abort();
                // Ends once the upload's future is dropped: a file:// link under way is finished or
                // never made. (An S3 request already sent may still be applied by S3: claims make that
                // harmless, it can only create the claimed key.)
                let _ = task.await;
                self.metrics.emit(Event::FileDropped { tp: &tp, why: DropReason::RevokeTimeout });
            }
            self.metrics.forget_partition(&tp);
        }
        Ok(())
    }

    fn recoverer(&self) -> Recoverer {
        Recoverer {
            store: self.store.clone(),
            prefix: self.settings.prefix.clone(),
            claims: self.settings.claims,
            metrics: self.metrics.clone(),
            topic_ids: self.topic_ids.clone(),
            recovering: self.recovering.clone(),
            turns: self.recovery_turns.clone(),
        }
    }
}

/// The monotonic and the wall clock, read together.
fn read_clock() -> Now {
    Now { mono: Instant::now(), wall_ms: wall_clock_ms() }
}

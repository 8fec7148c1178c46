//! The consumer's context: librdkafka calls it on the polling thread for rebalances (assign: the
//! pipeline recovers positions from the archive and the callback waits for its answer, a bounded
//! while — a recovery still running then, e.g. on a failing store, ends later and its partitions wait
//! paused until it does, so the thread goes back to polling and stays in the group; revoke: the
//! pipeline flushes or drops the partitions' files), logs and statistics. The polling thread also has
//! it apply the pipeline's commands (commits, seeks) and handle out-of-range positions.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{RecvTimeoutError, TryRecvError};
use std::sync::{mpsc as std_mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, RebalanceProtocol};
use rdkafka::error::{KafkaError, KafkaResult, RDKafkaErrorCode};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::types::RDKafkaRespErr;
use rdkafka::ClientContext;
use tokio::sync::mpsc;
use tracing::{debug, error, info, warn};

use super::consumer::SourceOptions;
use super::messages::{AssignedPartition, Commit, Control, Fetched, ResumeAt, SourceCommand};
use super::offsets::log_offsets;
use super::out_of_range::{OutOfRangeState, Watermarks};
use super::pending::Pending;
use super::probe::{probe_range, RangeProbe};
use super::topic_id::topic_ids;
use crate::archive::partition::{OffsetRange, TopicPartition};
use crate::recovery::CommitHint;
use crate::telemetry::{Event, Metrics, StopReason};

/// How long one metadata, watermark, committed-offsets or seek request may take.
pub(super) const METADATA_TIMEOUT: Duration = Duration::from_secs(10);
/// How often a seek that failed (the partition's fetch had not started yet) is tried again.
const SEEK_ATTEMPTS: u32 = 50;

/// What the consumer thread knows of one assigned partition.
pub(super) struct Assigned {
    pub(super) epoch: u64,
    /// Not consumed (the archive is ahead of the log, recovery failed, or recovery has not ended yet).
    pub(super) stopped: bool,
    /// The offset this partition delivers next: where it was assigned or moved to, then the last
    /// record's offset + 1. `None` until known (started at earliest or latest, nothing delivered yet).
    pub(super) next_offset: Option<i64>,
    /// Where it was assigned or last moved to.
    pub(super) start: Offset,
    /// Offsets retention deleted past `next_offset`, to hand over with the next record.
    pub(super) gap_before_next: Option<OffsetRange>,
}

/// The answers of recoveries that outlasted the assign callback's wait.
struct LateAnswer {
    reply: std_mpsc::Receiver<Vec<(TopicPartition, ResumeAt)>>,
    /// The partitions still to be answered, with the assignment (epoch) each position is for.
    epochs: HashMap<TopicPartition, u64>,
}

#[derive(Default)]
pub(super) struct SourceState {
    pub(super) assigned: HashMap<TopicPartition, Assigned>,
    /// Recoveries still running after their assign callback returned.
    late: Vec<LateAnswer>,
    /// Records polled while the pipeline's channel was full.
    pub(super) pending: Pending,
    pub(super) paused_for_backpressure: bool,
    /// Out-of-range errors not yet traced to their partitions, and the partitions being checked.
    pub(super) out_of_range: OutOfRangeState,
}

impl SourceState {
    /// The partitions being consumed.
    pub(super) fn active(&self) -> TopicPartitionList {
        tpl_of(self.assigned.iter().filter(|(_, a)| !a.stopped).map(|(tp, _)| tp))
    }

    /// A partition's record at `offset`, if the partition is assigned and consumed: its epoch, and the
    /// retention gap right before it, if one was found.
    pub(super) fn take_record(&mut self, tp: &TopicPartition, offset: i64) -> Option<(u64, Option<OffsetRange>)> {
        let a = self.assigned.get_mut(tp).filter(|a| !a.stopped)?;
        a.next_offset = Some(offset + 1);
        Some((a.epoch, a.gap_before_next.take()))
    }

    pub(super) fn nothing_assigned(&self) -> bool {
        self.assigned.is_empty()
    }
}

pub(super) struct ArchiverContext {
    pub(super) records: mpsc::Sender<Vec<Fetched>>,
    pub(super) control: mpsc::UnboundedSender<Control>,
    pub(super) commands: Mutex<std_mpsc::Receiver<SourceCommand>>,
    /// Seeks that failed (the partition's fetch had not started yet), tried again on the next poll.
    pub(super) seeks_to_retry: Mutex<Vec<(SourceCommand, u32)>>,
    pub(super) epochs: Arc<AtomicU64>,
    pub(super) assignment_lost: Arc<AtomicBool>,
    pub(super) state: Mutex<SourceState>,
    pub(super) revoke_wait: Duration,
    /// How long an assign callback waits for the pipeline's recovery (below `max.poll.interval.ms`).
    pub(super) assign_wait: Duration,
    /// How to reach the brokers for range probes (see `probe`).
    pub(super) probe: ClientConfig,
    /// Set when the process is crashing on purpose (demo): nothing more is flushed or committed.
    pub(super) crashed: Arc<AtomicBool>,
    pub(super) metrics: Arc<Metrics>,
    /// The first failure librdkafka reported (a broker refusing the credentials, a TLS handshake
    /// failing, a refused connection): it says why start-up cannot reach the brokers. Later ones ("all
    /// brokers are down") say less.
    pub(super) first_failure: Mutex<Option<String>>,
    /// Reads the log offsets of partitions stopped on an out-of-range position (see `out_of_range`).
    pub(super) watermarks: Mutex<Watermarks>,
    /// What it was started with (for messages that name the group and its settings).
    pub(super) settings: SourceOptions,
}

impl ClientContext for ArchiverContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        match level {
            RDKafkaLogLevel::Emerg | RDKafkaLogLevel::Alert | RDKafkaLogLevel::Critical | RDKafkaLogLevel::Error => {
                error!(target: "librdkafka", "{fac}: {message}");
                self.first_failure.lock().expect("first failure").get_or_insert_with(|| message.to_string());
            }
            RDKafkaLogLevel::Warning => warn!(target: "librdkafka", "{fac}: {message}"),
            RDKafkaLogLevel::Notice | RDKafkaLogLevel::Info => info!(target: "librdkafka", "{fac}: {message}"),
            RDKafkaLogLevel::Debug => debug!(target: "librdkafka", "{fac}: {message}"),
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        warn!(target: "librdkafka", "{error}: {reason}");
        self.first_failure.lock().expect("first failure").get_or_insert_with(|| reason.to_string());
    }

    /// librdkafka's periodic statistics: each assigned partition's log end, and so what is not
    /// archived yet (recovery set its archived offset); and which fetchers an out-of-range position
    /// stopped.
    fn stats(&self, statistics: rdkafka::Statistics) {
        self.find_stopped_fetchers(&statistics);
        let assigned: Vec<TopicPartition> = self.state.lock().expect("source state").assigned.keys().cloned().collect();
        for (topic, t) in &statistics.topics {
            for (partition, p) in &t.partitions {
                let is_assigned = assigned.iter().any(|tp| tp.topic() == topic && tp.partition() == *partition);
                if !is_assigned || p.hi_offset < 0 {
                    continue;
                }
                self.metrics.emit(Event::LogEnd { topic, partition: *partition, log_end: p.hi_offset });
            }
        }
    }
}

impl ConsumerContext for ArchiverContext {
    fn rebalance(&self, consumer: &BaseConsumer<Self>, err: RDKafkaRespErr, tpl: &mut TopicPartitionList) {
        self.metrics.emit(Event::Rebalance);
        let cooperative = matches!(consumer.rebalance_protocol(), RebalanceProtocol::Cooperative);
        match err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => {
                let stopped = self.on_assign(consumer, tpl);
                let result = if cooperative { consumer.incremental_assign(tpl) } else { consumer.assign(tpl) };
                if let Err(e) = result {
                    error!("assigning partitions failed: {e}");
                }
                // A pause of ours outlives a revoke (librdkafka forgets only its own): a partition paused
                // before, and assigned again, is resumed here; unless fetching is paused for backpressure,
                // which then holds for it too.
                let consumed: Vec<TopicPartition> =
                    to_tps(tpl).into_iter().filter(|tp| !stopped.contains(tp)).collect();
                let _ = match self.state.lock().expect("source state").paused_for_backpressure {
                    true => consumer.pause(&tpl_of(&consumed)),
                    false => consumer.resume(&tpl_of(&consumed)),
                };
                if !stopped.is_empty() {
                    let _ = consumer.pause(&tpl_of(&stopped));
                }
            }
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => {
                let tps = to_tps(tpl);
                self.on_revoke(consumer, &tps, consumer.assignment_lost());
                let result = if cooperative { consumer.incremental_unassign(tpl) } else { consumer.unassign() };
                if let Err(e) = result {
                    error!("unassigning partitions failed: {e}");
                }
            }
            other => {
                error!("rebalance failed ({:?}); dropping every assigned partition", RDKafkaErrorCode::from(other));
                let all: Vec<TopicPartition> =
                    self.state.lock().expect("source state").assigned.keys().cloned().collect();
                self.on_revoke(consumer, &all, true);
                let _ = consumer.unassign();
            }
        }
    }
}

/// The consumer's start offset for a partition; `None`: do not consume it.
pub(super) fn kafka_offset(at: &ResumeAt) -> Option<Offset> {
    match at {
        ResumeAt::Offset(o) => Some(Offset::Offset(*o)),
        ResumeAt::Earliest => Some(Offset::Beginning),
        ResumeAt::Latest => Some(Offset::End),
        ResumeAt::Stop => None,
    }
}

impl ArchiverContext {
    /// Has the pipeline recover the newly assigned partitions, and sets where each starts in `tpl`.
    /// Returns the partitions not to consume.
    fn on_assign(&self, consumer: &BaseConsumer<Self>, tpl: &mut TopicPartitionList) -> Vec<TopicPartition> {
        let tps = to_tps(tpl);
        if tps.is_empty() {
            // A cooperative rebalance that gives this member nothing new.
            return Vec::new();
        }
        let asked = Instant::now();
        let committed = consumer.committed_offsets(tpl.clone(), METADATA_TIMEOUT).unwrap_or_else(|e| {
            warn!("could not read committed offsets ({e}); recovering from full archive listings");
            TopicPartitionList::new()
        });
        let topics: Vec<String> =
            tps.iter().map(|tp| tp.topic().to_string()).collect::<BTreeSet<_>>().into_iter().collect();
        let topic_ids = topic_ids(consumer.client(), &topics, METADATA_TIMEOUT).unwrap_or_else(|e| {
            warn!("{e}; recovery asks again for the topics' IDs before these partitions go on");
            BTreeMap::new()
        });
        let logs = log_offsets(consumer, &tps, METADATA_TIMEOUT);
        let first_epoch = self.epochs.fetch_add(tps.len() as u64, Ordering::SeqCst);
        let partitions: Vec<AssignedPartition> = tps
            .iter()
            .zip(first_epoch..)
            .map(|(tp, epoch)| {
                let hint = committed
                    .find_partition(tp.topic(), tp.partition())
                    .and_then(|e| e.offset().to_raw().and_then(|o| CommitHint::parse(o, e.metadata())));
                let log = logs.get(tp);
                let (log_start, log_end) = (log.map(|l| l.log_start), log.map(|l| l.log_end));
                let topic = topic_ids.get(tp.topic()).cloned();
                AssignedPartition { tp: tp.clone(), epoch, hint, log_start, log_end, topic }
            })
            .collect();
        let kafka_ms = asked.elapsed().as_millis() as u64;
        info!(partitions = ?names(&tps), kafka_ms, "partitions assigned; recovering positions from the archive");
        let (reply_tx, reply_rx) = std_mpsc::channel();
        let mut positions = HashMap::new();
        let mut late = None;
        if self.control.send(Control::Assigned { partitions, reply: reply_tx }).is_ok() {
            let deadline = Instant::now() + self.assign_wait;
            while positions.len() < tps.len() {
                match reply_rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                    Ok(answer) => positions.extend(answer),
                    Err(RecvTimeoutError::Timeout) => {
                        let epochs: HashMap<TopicPartition, u64> = tps
                            .iter()
                            .cloned()
                            .zip(first_epoch..)
                            .filter(|(tp, _)| !positions.contains_key(tp))
                            .collect();
                        self.recovery_outlasted_wait(&epochs);
                        late = Some(LateAnswer { reply: reply_rx, epochs });
                        break;
                    }
                    Err(RecvTimeoutError::Disconnected) => break,
                }
            }
        }
        let mut state = self.state.lock().expect("source state");
        state.late.extend(late);
        let mut stopped = Vec::new();
        for (tp, epoch) in tps.iter().zip(first_epoch..) {
            let offset = kafka_offset(positions.get(tp).unwrap_or(&ResumeAt::Stop));
            if offset.is_none() {
                stopped.push(tp.clone());
            }
            if let Err(e) = tpl.set_partition_offset(tp.topic(), tp.partition(), offset.unwrap_or(Offset::Beginning)) {
                error!("cannot set the start offset of {tp}: {e}");
            }
            let next_offset = offset.and_then(|o| o.to_raw()).filter(|o| *o >= 0);
            let stopped = offset.is_none();
            let start = offset.unwrap_or(Offset::Beginning);
            state.out_of_range.forget(tp);
            state.assigned.insert(tp.clone(), Assigned { epoch, stopped, next_offset, start, gap_before_next: None });
        }
        stopped
    }

    /// Says which partitions of an assignment are still recovering when its callback stops waiting.
    fn recovery_outlasted_wait(&self, waiting: &HashMap<TopicPartition, u64>) {
        let (wait, count) = (self.assign_wait, waiting.len());
        match self.metrics.store_up.get() {
            0 => warn!(
                partitions = ?waiting.keys().map(ToString::to_string).collect::<Vec<_>>(),
                "recovery is taking longer than {wait:?} (the archive store is failing): these partitions wait, \
                 paused, and start where recovery says once it ends"
            ),
            _ => info!(
                count,
                "recovery is taking longer than {wait:?} for {count} partitions: they start, each where recovery \
                 says, as their recoveries end"
            ),
        }
    }

    /// Probes `range` on a thread of its own (a probe takes up to seconds); tells the pipeline if it is
    /// empty.
    fn check_range(&self, tp: TopicPartition, epoch: u64, range: OffsetRange) {
        let (config, control) = (self.probe.clone(), self.control.clone());
        let spawned = std::thread::Builder::new().name("range-probe".into()).spawn(move || {
            match probe_range(&config, &tp, range) {
                Ok(RangeProbe::Empty { log_start }) => {
                    let _ = control.send(Control::RangeEmpty { tp, epoch, range, log_start });
                }
                Ok(found) => debug!(%tp, %range, ?found, "range probe"),
                Err(e) => warn!(%tp, %range, "probing the re-written range failed (tried again later): {e}"),
            }
        });
        if let Err(e) = spawned {
            warn!("cannot start a range probe (tried again later): {e}");
        }
    }

    /// Starts the partitions whose recovery ended after their assign callback returned (still assigned
    /// to the same epoch), at the position recovery found.
    pub(super) fn apply_late_answers(&self, consumer: &BaseConsumer<Self>) {
        let mut arrived = Vec::new();
        self.state.lock().expect("source state").late.retain_mut(|late| loop {
            match late.reply.try_recv() {
                Ok(answer) => arrived.extend(
                    answer.into_iter().filter_map(|(tp, at)| late.epochs.remove(&tp).map(|epoch| (tp, at, epoch))),
                ),
                Err(TryRecvError::Empty) => break !late.epochs.is_empty(),
                Err(TryRecvError::Disconnected) => break false,
            }
        });
        for (tp, at, epoch) in arrived {
            let offset = {
                let mut state = self.state.lock().expect("source state");
                let Some(a) = state.assigned.get_mut(&tp).filter(|a| a.epoch == epoch) else {
                    continue; // Revoked or re-assigned since.
                };
                let Some(offset) = kafka_offset(&at) else { continue };
                a.stopped = false;
                a.next_offset = offset.to_raw().filter(|o| *o >= 0);
                a.start = offset;
                offset
            };
            info!(%tp, position = ?at, "recovery ended; starting the partition");
            restart_fetch(consumer, &tp, offset);
            if !self.state.lock().expect("source state").paused_for_backpressure {
                let _ = consumer.resume(&tpl_of([&tp]));
            }
        }
    }

    fn on_revoke(&self, consumer: &BaseConsumer<Self>, tps: &[TopicPartition], lost: bool) {
        // Polled but not yet handed over: never archived, so the next owner reads them again.
        self.state.lock().expect("source state").pending.forget(tps);
        if !self.crashed.load(Ordering::SeqCst) && !tps.is_empty() {
            info!(partitions = ?names(tps), lost, "partitions revoked; flushing");
            let (reply_tx, reply_rx) = std_mpsc::sync_channel(1);
            let sent = self.control.send(Control::Revoked { partitions: tps.to_vec(), lost, reply: reply_tx });
            if sent.is_ok() && reply_rx.recv_timeout(self.revoke_wait).is_err() {
                error!("the pipeline did not finish revoking within {:?}", self.revoke_wait);
            }
            // Commit what became durable while the partitions are still ours, so the next owner's
            // listing starts at the right key. (Seeks wait for the next poll: moving fetching here, inside
            // librdkafka's revoke, would be taken for the callback's own answer.)
            if !lost {
                self.apply_commands(consumer, CommitMode::Sync, false);
            }
        }
        let mut state = self.state.lock().expect("source state");
        for tp in tps {
            state.assigned.remove(tp);
            state.out_of_range.forget(tp);
            self.metrics.forget_partition(tp);
        }
    }

    /// Applies the pipeline's seeks (unless `seek` is false: they wait for the next call) and commits the
    /// latest durable position of each partition.
    pub(super) fn apply_commands(&self, consumer: &BaseConsumer<Self>, mode: CommitMode, seek: bool) {
        let mut latest: HashMap<TopicPartition, Commit> = HashMap::new();
        let mut seeks: Vec<(SourceCommand, u32)> =
            std::mem::take(&mut *self.seeks_to_retry.lock().expect("seek queue"));
        for command in self.commands.lock().expect("command queue").try_iter() {
            match command {
                SourceCommand::Commit(c) => {
                    latest.insert(c.tp.clone(), c);
                }
                seek @ SourceCommand::Seek { .. } => queue_seek(&mut seeks, seek),
                SourceCommand::CheckRange { tp, epoch, range } => self.check_range(tp, epoch, range),
            }
        }
        match seek {
            true => seeks.into_iter().for_each(|(seek, attempts)| self.seek(consumer, seek, attempts)),
            false => self.seeks_to_retry.lock().expect("seek queue").extend(seeks),
        }
        if latest.is_empty() || self.crashed.load(Ordering::SeqCst) {
            return;
        }
        let mut tpl = TopicPartitionList::new();
        let state = self.state.lock().expect("source state");
        for c in latest.values().filter(|c| state.assigned.contains_key(&c.tp)) {
            let mut e = tpl.add_partition(c.tp.topic(), c.tp.partition());
            if e.set_offset(Offset::Offset(c.next_offset)).is_ok() {
                e.set_metadata(CommitHint::metadata_for(c.chain_start));
            }
        }
        drop(state);
        if tpl.count() > 0 {
            if let Err(e) = consumer.commit(&tpl, mode) {
                // Commits are hints: the archive is the source of truth, so a failed commit costs a
                // longer listing on the next recovery, nothing more.
                warn!("committing offsets failed: {e}");
            }
        }
    }

    fn seek(&self, consumer: &BaseConsumer<Self>, command: SourceCommand, attempts: u32) {
        let SourceCommand::Seek { tp, from_epoch, epoch, position } = &command else { return };
        let mut state = self.state.lock().expect("source state");
        let Some(a) = state.assigned.get_mut(tp).filter(|a| a.epoch == *from_epoch && !a.stopped) else {
            return; // Revoked or re-assigned since: the new assignment recovered by itself.
        };
        let Some(offset) = kafka_offset(position) else {
            a.stopped = true;
            let _ = consumer.pause(&tpl_of([tp]));
            return;
        };
        match move_fetch(consumer, tp, offset) {
            Ok(()) => {
                info!(%tp, ?position, "re-positioned after re-recovering from the archive");
                a.epoch = *epoch;
                a.next_offset = offset.to_raw().filter(|o| *o >= 0);
                a.start = offset;
                a.gap_before_next = None;
                state.out_of_range.forget(tp);
                state.pending.forget(std::slice::from_ref(tp));
            }
            Err(e) if attempts < SEEK_ATTEMPTS => {
                debug!(%tp, "seek failed ({e}); trying again");
                drop(state);
                self.seeks_to_retry.lock().expect("seek queue").push((command, attempts + 1));
            }
            Err(e) => {
                a.stopped = true;
                let _ = consumer.pause(&tpl_of([tp]));
                drop(state);
                let why = format!("cannot seek to {position:?} ({e}); this partition is stopped. Restart the archiver");
                self.metrics.emit(Event::PartitionStopped { tp, reason: StopReason::SeekFailed, why: &why });
            }
        }
    }
}

/// Queues a seek of the pipeline's. One that continues a seek still waiting to be retried (it moves the
/// partition from the epoch that one moves it to) replaces it, taking the partition from where that one
/// takes it: applied one after the other, the first would fail again and the second, finding the
/// partition still at the first's epoch, would be dropped as stale.
fn queue_seek(seeks: &mut Vec<(SourceCommand, u32)>, seek: SourceCommand) {
    let SourceCommand::Seek { tp, from_epoch, epoch, position } = seek else { return };
    let waiting = seeks.iter_mut().find(
        |(queued, _)| matches!(queued, SourceCommand::Seek { tp: t, epoch: e, .. } if *t == tp && *e == from_epoch),
    );
    match waiting {
        Some((SourceCommand::Seek { epoch: queued_epoch, position: queued_position, .. }, attempts)) => {
            (*queued_epoch, *queued_position, *attempts) = (epoch, position, 0);
        }
        _ => seeks.push((SourceCommand::Seek { tp, from_epoch, epoch, position }, 0)),
    }
}

/// Moves `tp`'s fetching to `offset`. After an out-of-range error (with `auto.offset.reset=error`)
/// librdkafka has stopped the partition's fetcher and refuses a seek, so the partition is taken out of
/// the local assignment and put back at `offset` (incremental, so the group does not rebalance).
pub(super) fn move_fetch(
    consumer: &BaseConsumer<ArchiverContext>,
    tp: &TopicPartition,
    offset: Offset,
) -> KafkaResult<()> {
    if consumer.seek(tp.topic(), tp.partition(), offset, METADATA_TIMEOUT).is_ok() {
        return Ok(());
    }
    let mut at = TopicPartitionList::new();
    at.add_partition_offset(tp.topic(), tp.partition(), offset)?;
    // After a half-done earlier move (unassigned, not assigned again), only the assign is left to do.
    if consumer.assignment()?.find_partition(tp.topic(), tp.partition()).is_some() {
        consumer.incremental_unassign(&tpl_of([tp]))?;
    }
    consumer.incremental_assign(&at)
}

/// `move_fetch`, saying so when it fails.
pub(super) fn restart_fetch(consumer: &BaseConsumer<ArchiverContext>, tp: &TopicPartition, offset: Offset) {
    if let Err(e) = move_fetch(consumer, tp, offset) {
        error!(%tp, "cannot move fetching to {offset:?}: {e}");
    }
}

fn names(tps: &[TopicPartition]) -> Vec<String> {
    tps.iter().map(ToString::to_string).collect()
}

pub(super) fn to_tps(tpl: &TopicPartitionList) -> Vec<TopicPartition> {
    tpl.elements()
        .iter()
        .filter_map(|e| match TopicPartition::new(e.topic(), e.partition()) {
            Ok(tp) => Some(tp),
            Err(err) => {
                error!("ignoring assigned partition {}/{}: {err}", e.topic(), e.partition());
                None
            }
        })
        .collect()
}

pub(super) fn tpl_of<'a>(tps: impl IntoIterator<Item = &'a TopicPartition>) -> TopicPartitionList {
    let mut tpl = TopicPartitionList::new();
    for tp in tps {
        tpl.add_partition(tp.topic(), tp.partition());
    }
    tpl
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resume_positions_map_to_consumer_offsets() {
        assert_eq!(kafka_offset(&ResumeAt::Offset(42)), Some(Offset::Offset(42)));
        assert_eq!(kafka_offset(&ResumeAt::Earliest), Some(Offset::Beginning));
        assert_eq!(kafka_offset(&ResumeAt::Latest), Some(Offset::End));
        assert_eq!(kafka_offset(&ResumeAt::Stop), None);
    }

    #[test]
    fn partition_lists_round_trip() {
        let tps = vec![TopicPartition::new("a", 0).unwrap(), TopicPartition::new("b.c-d", 7).unwrap()];
        assert_eq!(to_tps(&tpl_of(&tps)), tps);
    }

    #[test]
    fn only_consumed_partitions_are_active_and_take_records() {
        let mut state = SourceState::default();
        let (a, b) = (TopicPartition::new("t", 0).unwrap(), TopicPartition::new("t", 1).unwrap());
        let gap = OffsetRange::new(11, 13).unwrap();
        state.assigned.insert(
            a.clone(),
            Assigned {
                epoch: 3,
                stopped: false,
                next_offset: Some(10),
                start: Offset::Offset(10),
                gap_before_next: None,
            },
        );
        state.assigned.insert(
            b.clone(),
            Assigned { epoch: 4, stopped: true, next_offset: None, start: Offset::Beginning, gap_before_next: None },
        );
        assert_eq!(to_tps(&state.active()), vec![a.clone()]);
        assert_eq!(state.take_record(&a, 10), Some((3, None)));
        state.assigned.get_mut(&a).unwrap().gap_before_next = Some(gap);
        assert_eq!(state.take_record(&a, 14), Some((3, Some(gap))), "the gap goes with the next record");
        assert_eq!(state.take_record(&a, 15), Some((3, None)), "once");
        assert_eq!(state.assigned[&a].next_offset, Some(16), "follows what was delivered");
        assert_eq!(state.take_record(&b, 0), None);
        assert_eq!(state.take_record(&TopicPartition::new("t", 2).unwrap(), 0), None);
        assert!(!state.nothing_assigned());
    }

    #[test]
    fn a_seek_that_continues_one_waiting_for_a_retry_replaces_it() {
        let tp = TopicPartition::new("t", 0).unwrap();
        let seek = |from_epoch, epoch, at| SourceCommand::Seek {
            tp: tp.clone(),
            from_epoch,
            epoch,
            position: ResumeAt::Offset(at),
        };
        // Unparked (epoch 1 -> 2, back to 40), the seek failed and waits; then the partition lost a claim
        // (2 -> 3, to 75).
        let mut seeks = vec![(seek(1, 2, 40), 3)];
        queue_seek(&mut seeks, seek(2, 3, 75));
        assert!(
            matches!(
                &seeks[..],
                [(SourceCommand::Seek { from_epoch: 1, epoch: 3, position: ResumeAt::Offset(75), .. }, 0)]
            ),
            "{seeks:?}"
        );
        // Another partition's, or one from another epoch, queues beside it.
        queue_seek(&mut seeks, seek(7, 8, 5));
        assert_eq!(seeks.len(), 2);
    }
}

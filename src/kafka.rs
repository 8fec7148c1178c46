//! The Kafka side: an rdkafka consumer polled on its own thread, so rebalance callbacks can block while
//! the async pipeline recovers positions from the archive (on assign) or flushes open files (on revoke).
//!
//! Positions are set at assignment time from the archive; the committed offset is only a listing hint.
//! Records reach the pipeline over a bounded channel; assignments and revocations over a separate
//! control channel, so a rebalance is handled even while the pipeline holds records back (memory budget
//! reached, uploads failing). Every assignment of a partition gets a new epoch, carried by its records:
//! records still queued from an earlier assignment are recognised and ignored.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc as std_mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, RebalanceProtocol};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{BorrowedMessage, Header as KafkaHeader, Headers, Message, OwnedHeaders, Timestamp};
use rdkafka::producer::FutureRecord;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::types::RDKafkaRespErr;
use rdkafka::ClientContext;
use thiserror::Error;
use tokio::sync::mpsc::{self, error::TrySendError};
use tracing::{debug, error, info, warn};

use crate::core::audit::LogOffsets;
use crate::core::partition::{OffsetRange, TopicPartition};
use crate::core::record::{Header, Record, TimestampKind};
use crate::core::recovery::CommitHint;
use crate::stats::Stats;

const METADATA_TIMEOUT: Duration = Duration::from_secs(10);
/// How long start-up waits for the brokers to answer before giving up with a clear error.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(15);
/// How long one hand-over waits for room in the pipeline's channel before polling again (which keeps
/// rebalance callbacks served).
const HAND_OVER_WAIT: Duration = Duration::from_millis(100);
/// Pending (polled, not yet handed over) record bytes above which fetching is paused.
const PAUSE_ABOVE_BYTES: u64 = 32 << 20;

#[derive(Debug, Error)]
pub enum SourceError {
    #[error("cannot create the Kafka consumer: {0}. Check --brokers and the --kafka settings")]
    Create(KafkaError),
    #[error("cannot subscribe to {topics:?}: {source}")]
    Subscribe { topics: Vec<String>, source: KafkaError },
    #[error("fatal Kafka consumer error: {0}. The archiver stops; restart it once the cause is fixed")]
    Fatal(KafkaError),
    #[error("cannot reach the Kafka brokers {brokers} within {timeout:?} ({source}). Check --brokers, the network, and the TLS/SASL settings (--kafka)")]
    Unreachable { brokers: String, timeout: Duration, source: KafkaError },
    #[error("topic {topic:?} does not exist on {brokers}: create it, or correct --topic")]
    UnknownTopic { topic: String, brokers: String },
}

/// What the consumer settles for a newly assigned partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartPosition {
    Offset(i64),
    Earliest,
    Latest,
    /// Do not consume this partition; the reason was logged.
    Stop,
}

#[derive(Debug, Clone)]
pub struct AssignedPartition {
    pub tp: TopicPartition,
    /// Identifies this assignment of the partition; its records carry it.
    pub epoch: u64,
    pub hint: Option<CommitHint>,
    /// The partition's log start offset (low watermark), when the broker told it.
    pub log_start: Option<i64>,
}

/// One consumed record.
#[derive(Debug)]
pub struct Fetched {
    pub tp: TopicPartition,
    pub epoch: u64,
    pub record: Record,
}

/// Rebalance and position news for the pipeline.
#[derive(Debug)]
pub enum Control {
    /// Recover these partitions and answer with where each starts.
    Assigned { partitions: Vec<AssignedPartition>, reply: std_mpsc::SyncSender<Vec<(TopicPartition, StartPosition)>> },
    /// Flush (or, when `lost`, drop) these partitions and answer once nothing of them will be uploaded.
    Revoked { partitions: Vec<TopicPartition>, lost: bool, reply: std_mpsc::SyncSender<()> },
    /// Retention removed `missing` before it was archived; consumption resumed after it.
    RetentionGap { tp: TopicPartition, missing: OffsetRange },
}

/// A durable object's end, to be committed to Kafka as a hint.
#[derive(Debug, Clone)]
pub struct Commit {
    pub tp: TopicPartition,
    pub next_offset: i64,
    pub chain_start: i64,
}

/// What the pipeline asks of the consumer thread.
#[derive(Debug)]
pub enum SourceCommand {
    Commit(Commit),
    /// Move a partition whose records carry `from_epoch` to `position`; records from then on carry
    /// `epoch`. Sent when the pipeline re-recovered the partition (it lost a claim).
    Seek {
        tp: TopicPartition,
        from_epoch: u64,
        epoch: u64,
        position: StartPosition,
    },
}

/// What the pipeline holds of the source.
#[derive(Debug, Clone)]
pub struct SourceLink {
    pub commands: std_mpsc::Sender<SourceCommand>,
    /// Epochs are drawn from one counter by the consumer (assignments) and the pipeline (seeks).
    pub epochs: Arc<AtomicU64>,
    /// The consumer's last word on whether its assignment was lost (e.g. it stalled past the session
    /// timeout): checked before claiming, to narrow a zombie's window (claims close it).
    pub assignment_lost: Arc<AtomicBool>,
}

impl SourceLink {
    pub fn new() -> (Self, std_mpsc::Receiver<SourceCommand>) {
        let (commands, rx) = std_mpsc::channel();
        (Self { commands, epochs: Arc::new(AtomicU64::new(1)), assignment_lost: Arc::new(AtomicBool::new(false)) }, rx)
    }

    pub fn next_epoch(&self) -> u64 {
        self.epochs.fetch_add(1, Ordering::SeqCst)
    }
}

/// Consumer settings the source needs.
#[derive(Debug, Clone)]
pub struct SourceSettings {
    pub brokers: String,
    pub group: String,
    pub subscription: Vec<String>,
    pub kafka_props: Vec<(String, String)>,
    /// How long a revoke callback waits for the pipeline before giving up on it.
    pub revoke_wait: Duration,
}

/// What the consumer thread knows of one assigned partition.
struct Assigned {
    epoch: u64,
    /// Not consumed (the archive is ahead of the log, or recovery failed).
    stopped: bool,
    /// Where the partition was assigned to start, until its first record arrives.
    awaiting_first: Option<i64>,
}

#[derive(Default)]
struct SourceState {
    assigned: HashMap<TopicPartition, Assigned>,
    /// Records polled while the pipeline's channel was full.
    pending: VecDeque<Fetched>,
    /// Payload bytes of the pending records.
    pending_bytes: u64,
    paused_for_backpressure: bool,
}

impl SourceState {
    fn active(&self) -> TopicPartitionList {
        tpl_of(self.assigned.iter().filter(|(_, a)| !a.stopped).map(|(tp, _)| tp))
    }
}

struct ArchiverContext {
    records: mpsc::Sender<Fetched>,
    control: mpsc::UnboundedSender<Control>,
    commands: Mutex<std_mpsc::Receiver<SourceCommand>>,
    /// Seeks that failed (the partition's fetch had not started yet), tried again on the next poll.
    seeks_to_retry: Mutex<Vec<(SourceCommand, u32)>>,
    epochs: Arc<AtomicU64>,
    assignment_lost: Arc<AtomicBool>,
    state: Mutex<SourceState>,
    revoke_wait: Duration,
    /// Set when the process is crashing on purpose (demo): nothing more is flushed or committed.
    crashed: Arc<AtomicBool>,
    stats: Arc<Stats>,
}

impl ClientContext for ArchiverContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        match level {
            RDKafkaLogLevel::Emerg | RDKafkaLogLevel::Alert | RDKafkaLogLevel::Critical | RDKafkaLogLevel::Error => {
                error!(target: "librdkafka", "{fac}: {message}")
            }
            RDKafkaLogLevel::Warning => warn!(target: "librdkafka", "{fac}: {message}"),
            RDKafkaLogLevel::Notice | RDKafkaLogLevel::Info => info!(target: "librdkafka", "{fac}: {message}"),
            RDKafkaLogLevel::Debug => debug!(target: "librdkafka", "{fac}: {message}"),
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        warn!(target: "librdkafka", "{error}: {reason}");
    }

    /// librdkafka's periodic statistics: each assigned partition's log end, and so what is not
    /// archived yet (recovery set its archived offset).
    fn stats(&self, statistics: rdkafka::Statistics) {
        let assigned: Vec<TopicPartition> = self.state.lock().expect("source state").assigned.keys().cloned().collect();
        for (topic, t) in &statistics.topics {
            for (partition, p) in &t.partitions {
                let is_assigned = assigned.iter().any(|tp| tp.topic() == topic && tp.partition() == *partition);
                if !is_assigned || p.hi_offset < 0 {
                    continue;
                }
                let labels = [topic.as_str(), &partition.to_string()];
                self.stats.log_end_offset.with_label_values(&labels).set(p.hi_offset);
                if let Ok(archived) = self.stats.archived_offset.get_metric_with_label_values(&labels) {
                    self.stats
                        .unarchived_records
                        .with_label_values(&labels)
                        .set((p.hi_offset - archived.get() - 1).max(0));
                }
            }
        }
    }
}

fn to_tps(tpl: &TopicPartitionList) -> Vec<TopicPartition> {
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

fn tpl_of<'a>(tps: impl IntoIterator<Item = &'a TopicPartition>) -> TopicPartitionList {
    let mut tpl = TopicPartitionList::new();
    for tp in tps {
        tpl.add_partition(tp.topic(), tp.partition());
    }
    tpl
}

impl ArchiverContext {
    fn on_assign(&self, consumer: &BaseConsumer<Self>, tpl: &mut TopicPartitionList) -> Vec<TopicPartition> {
        let tps = to_tps(tpl);
        if tps.is_empty() {
            // A cooperative rebalance that gives this member nothing new.
            return Vec::new();
        }
        let committed = consumer.committed_offsets(tpl.clone(), METADATA_TIMEOUT).unwrap_or_else(|e| {
            warn!("could not read committed offsets ({e}); recovering from full archive listings");
            TopicPartitionList::new()
        });
        let first_epoch = self.epochs.fetch_add(tps.len() as u64, Ordering::SeqCst);
        let partitions: Vec<AssignedPartition> = tps
            .iter()
            .zip(first_epoch..)
            .map(|(tp, epoch)| {
                let hint = committed
                    .find_partition(tp.topic(), tp.partition())
                    .and_then(|e| e.offset().to_raw().and_then(|o| CommitHint::parse(o, e.metadata())));
                let log_start =
                    consumer.fetch_watermarks(tp.topic(), tp.partition(), METADATA_TIMEOUT).ok().map(|w| w.0);
                AssignedPartition { tp: tp.clone(), epoch, hint, log_start }
            })
            .collect();
        info!(partitions = ?tps.iter().map(ToString::to_string).collect::<Vec<_>>(), "partitions assigned; recovering positions from the archive");
        let (reply_tx, reply_rx) = std_mpsc::sync_channel(1);
        let positions = if self.control.send(Control::Assigned { partitions, reply: reply_tx }).is_ok() {
            reply_rx.recv().unwrap_or_default()
        } else {
            Vec::new()
        };
        let positions: HashMap<TopicPartition, StartPosition> = positions.into_iter().collect();
        let mut state = self.state.lock().expect("source state");
        let mut stopped = Vec::new();
        for (tp, epoch) in tps.iter().zip(first_epoch..) {
            let pos = positions.get(tp).cloned().unwrap_or(StartPosition::Stop);
            let (offset, awaiting_first) = match pos {
                StartPosition::Offset(o) => (Offset::Offset(o), Some(o)),
                StartPosition::Earliest => (Offset::Beginning, None),
                StartPosition::Latest => (Offset::End, None),
                StartPosition::Stop => {
                    stopped.push(tp.clone());
                    (Offset::Beginning, None)
                }
            };
            if let Err(e) = tpl.set_partition_offset(tp.topic(), tp.partition(), offset) {
                error!("cannot set the start offset of {tp}: {e}");
            }
            let stopped = matches!(pos, StartPosition::Stop);
            state.assigned.insert(tp.clone(), Assigned { epoch, stopped, awaiting_first });
        }
        stopped
    }

    fn on_revoke(&self, consumer: &BaseConsumer<Self>, tps: &[TopicPartition], lost: bool) {
        {
            let mut state = self.state.lock().expect("source state");
            // Polled but not yet handed over: never archived, so the next owner reads them again.
            state.pending.retain(|f| !tps.contains(&f.tp));
            state.pending_bytes = state.pending.iter().map(|f| f.record.payload_size()).sum();
        }
        if !self.crashed.load(Ordering::SeqCst) && !tps.is_empty() {
            info!(partitions = ?tps.iter().map(ToString::to_string).collect::<Vec<_>>(), lost, "partitions revoked; flushing");
            let (reply_tx, reply_rx) = std_mpsc::sync_channel(1);
            let sent = self.control.send(Control::Revoked { partitions: tps.to_vec(), lost, reply: reply_tx });
            if sent.is_ok() && reply_rx.recv_timeout(self.revoke_wait).is_err() {
                error!("the pipeline did not finish revoking within {:?}", self.revoke_wait);
            }
            // Commit what became durable while the partitions are still ours, so the next owner's
            // listing starts at the right key.
            if !lost {
                self.apply_commands(consumer, CommitMode::Sync);
            }
        }
        let mut state = self.state.lock().expect("source state");
        for tp in tps {
            state.assigned.remove(tp);
        }
    }

    /// Applies the pipeline's seeks and commits the latest durable position of each partition.
    fn apply_commands(&self, consumer: &BaseConsumer<Self>, mode: CommitMode) {
        let mut latest: HashMap<TopicPartition, Commit> = HashMap::new();
        let mut seeks: Vec<(SourceCommand, u32)> =
            std::mem::take(&mut *self.seeks_to_retry.lock().expect("seek queue"));
        for command in self.commands.lock().expect("command queue").try_iter() {
            match command {
                SourceCommand::Commit(c) => {
                    latest.insert(c.tp.clone(), c);
                }
                seek @ SourceCommand::Seek { .. } => seeks.push((seek, 0)),
            }
        }
        for (seek, attempts) in seeks {
            self.seek(consumer, seek, attempts);
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
        let offset = match position {
            StartPosition::Offset(o) => Offset::Offset(*o),
            StartPosition::Earliest => Offset::Beginning,
            StartPosition::Latest => Offset::End,
            StartPosition::Stop => {
                a.stopped = true;
                let _ = consumer.pause(&tpl_of([tp]));
                return;
            }
        };
        match consumer.seek(tp.topic(), tp.partition(), offset, METADATA_TIMEOUT) {
            Ok(()) => {
                info!(%tp, ?position, "re-positioned after re-recovering from the archive");
                a.epoch = *epoch;
                a.awaiting_first = offset.to_raw().filter(|o| *o >= 0);
                state.pending.retain(|f| &f.tp != tp);
                state.pending_bytes = state.pending.iter().map(|f| f.record.payload_size()).sum();
            }
            Err(e) if attempts < 50 => {
                debug!(%tp, "seek failed ({e}); trying again");
                drop(state);
                self.seeks_to_retry.lock().expect("seek queue").push((command, attempts + 1));
            }
            Err(e) => {
                error!(%tp, "cannot seek to {position:?} ({e}); this partition is stopped. Restart the archiver");
                a.stopped = true;
                let _ = consumer.pause(&tpl_of([tp]));
                Stats::add(&self.stats.partitions_stopped, 1);
            }
        }
    }

    /// The broker said a fetch position is out of range. The error does not say which partition, so
    /// check the partitions that have not delivered a record since they were assigned.
    fn on_out_of_range(&self, consumer: &BaseConsumer<Self>) {
        let candidates: Vec<(TopicPartition, i64)> = {
            let state = self.state.lock().expect("source state");
            state
                .assigned
                .iter()
                .filter(|(_, a)| !a.stopped)
                .filter_map(|(tp, a)| a.awaiting_first.map(|o| (tp.clone(), o)))
                .collect()
        };
        for (tp, start) in candidates {
            let Ok((low, high)) = consumer.fetch_watermarks(tp.topic(), tp.partition(), METADATA_TIMEOUT) else {
                continue;
            };
            if start < low {
                let missing = OffsetRange::new(start, low - 1).expect("start < low");
                error!(%tp, %missing, "RETENTION GAP: offsets {missing} were deleted by retention before they were archived; resuming at {low}");
                if let Err(e) = consumer.seek(tp.topic(), tp.partition(), Offset::Offset(low), METADATA_TIMEOUT) {
                    error!(%tp, "cannot seek to the log start {low}: {e}");
                }
                if let Some(a) = self.state.lock().expect("source state").assigned.get_mut(&tp) {
                    a.awaiting_first = Some(low);
                }
                let _ = self.control.send(Control::RetentionGap { tp, missing });
            } else if start > high {
                error!(
                    %tp,
                    "the archive of {tp} already holds offsets up to {}, but the partition's log ends at {high}: \
                     the topic was probably deleted and re-created. This partition is stopped so that nothing is \
                     skipped silently; archive the new topic under another --dest prefix (or move the old archive \
                     away) and restart",
                    start - 1
                );
                let _ = consumer.pause(&tpl_of([&tp]));
                Stats::add(&self.stats.partitions_stopped, 1);
                if let Some(a) = self.state.lock().expect("source state").assigned.get_mut(&tp) {
                    a.stopped = true;
                }
            }
        }
    }
}

impl ConsumerContext for ArchiverContext {
    fn rebalance(&self, consumer: &BaseConsumer<Self>, err: RDKafkaRespErr, tpl: &mut TopicPartitionList) {
        self.stats.rebalances.inc();
        let cooperative = matches!(consumer.rebalance_protocol(), RebalanceProtocol::Cooperative);
        match err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => {
                let stopped = self.on_assign(consumer, tpl);
                let result = if cooperative { consumer.incremental_assign(tpl) } else { consumer.assign(tpl) };
                if let Err(e) = result {
                    error!("assigning partitions failed: {e}");
                }
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

fn to_record(msg: &BorrowedMessage<'_>) -> Record {
    let (timestamp_ms, timestamp_kind) = match msg.timestamp() {
        Timestamp::NotAvailable => (None, TimestampKind::NotAvailable),
        Timestamp::CreateTime(t) => (Some(t), TimestampKind::CreateTime),
        Timestamp::LogAppendTime(t) => (Some(t), TimestampKind::LogAppendTime),
    };
    let headers = msg
        .headers()
        .map(|hs| hs.iter().map(|h| Header { key: h.key.to_string(), value: h.value.map(<[u8]>::to_vec) }).collect())
        .unwrap_or_default();
    Record {
        offset: msg.offset(),
        timestamp_ms,
        timestamp_kind,
        key: msg.key().map(<[u8]>::to_vec),
        value: msg.payload().map(<[u8]>::to_vec),
        headers,
    }
}

/// A record's headers for producing, in order.
pub fn kafka_headers(rec: &Record) -> OwnedHeaders {
    rec.headers
        .iter()
        .fold(OwnedHeaders::new(), |hs, h| hs.insert(KafkaHeader { key: &h.key, value: h.value.as_deref() }))
}

/// A record to produce to `topic`/`partition` with the record's key, value and timestamp (when it has
/// one) and `headers`: the inverse of reading a message into a [`Record`].
pub fn to_future_record<'a>(
    topic: &'a str,
    partition: i32,
    rec: &'a Record,
    headers: OwnedHeaders,
) -> FutureRecord<'a, [u8], [u8]> {
    let mut fr: FutureRecord<'a, [u8], [u8]> = FutureRecord::to(topic).partition(partition).headers(headers);
    if let Some(ts) = rec.timestamp_ms {
        fr = fr.timestamp(ts);
    }
    if let Some(k) = rec.key.as_deref() {
        fr = fr.key(k);
    }
    if let Some(v) = rec.value.as_deref() {
        fr = fr.payload(v);
    }
    fr
}

/// The running consumer thread.
pub struct KafkaSource {
    thread: JoinHandle<Result<(), SourceError>>,
    stop: Arc<AtomicBool>,
    crashed: Arc<AtomicBool>,
}

impl KafkaSource {
    /// Creates the consumer, subscribes, and starts polling on a new thread.
    pub fn spawn(
        settings: &SourceSettings,
        records: mpsc::Sender<Fetched>,
        control: mpsc::UnboundedSender<Control>,
        link: &SourceLink,
        commands: std_mpsc::Receiver<SourceCommand>,
        stats: Arc<Stats>,
    ) -> Result<Self, SourceError> {
        let crashed = Arc::new(AtomicBool::new(false));
        let context = ArchiverContext {
            records,
            control,
            commands: Mutex::new(commands),
            seeks_to_retry: Mutex::default(),
            epochs: link.epochs.clone(),
            assignment_lost: link.assignment_lost.clone(),
            state: Mutex::new(SourceState::default()),
            revoke_wait: settings.revoke_wait,
            crashed: crashed.clone(),
            stats,
        };
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", &settings.brokers)
            .set("group.id", &settings.group)
            .set("client.id", format!("kafka-s3-archiver-{}", std::process::id()))
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            // An out-of-range position must surface as an error we handle, never as a silent jump.
            .set("auto.offset.reset", "error")
            .set("enable.partition.eof", "false")
            .set("partition.assignment.strategy", "cooperative-sticky")
            .set("statistics.interval.ms", "5000");
        for (k, v) in &settings.kafka_props {
            config.set(k, v);
        }
        let consumer: BaseConsumer<ArchiverContext> =
            config.create_with_context(context).map_err(SourceError::Create)?;
        check_topics(&consumer, settings)?;
        let topics: Vec<&str> = settings.subscription.iter().map(String::as_str).collect();
        consumer
            .subscribe(&topics)
            .map_err(|source| SourceError::Subscribe { topics: settings.subscription.clone(), source })?;
        let stop = Arc::new(AtomicBool::new(false));
        let thread_stop = stop.clone();
        let shutdown_wait = settings.revoke_wait + Duration::from_secs(10);
        let thread = std::thread::Builder::new()
            .name("kafka-source".into())
            .spawn(move || poll_loop(consumer, thread_stop, shutdown_wait))
            .expect("spawn kafka-source thread");
        Ok(Self { thread, stop, crashed })
    }

    /// Graceful stop: leave the group (revoking, so every open file is flushed and committed), then end.
    pub fn request_stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    /// Waits for the polling thread to end.
    pub fn join(self) -> Result<(), SourceError> {
        self.thread.join().unwrap_or_else(|_| Err(SourceError::Fatal(KafkaError::Canceled)))
    }

    /// Simulates a crash (demo): no flush, no commit, consumer dropped.
    pub fn crash(self) {
        self.crashed.store(true, Ordering::SeqCst);
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.thread.join();
    }
}

/// What Kafka says of one partition: its log offsets, and the group's committed offset with its
/// metadata (when a group was named and it committed).
pub type PartitionOffsets = (LogOffsets, Option<(i64, String)>);

/// The offsets of every partition of `topics` (for `verify --brokers` and `status`). Blocks.
pub fn partition_offsets(
    brokers: &str,
    props: &[(String, String)],
    group: Option<&str>,
    topics: &[String],
) -> Result<BTreeMap<TopicPartition, PartitionOffsets>, SourceError> {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", brokers).set("enable.auto.commit", "false");
    if let Some(group) = group {
        config.set("group.id", group);
    }
    for (k, v) in props {
        config.set(k, v);
    }
    let consumer: BaseConsumer = config.create().map_err(SourceError::Create)?;
    let unreachable =
        |source| SourceError::Unreachable { brokers: brokers.to_string(), timeout: STARTUP_TIMEOUT, source };
    let unknown = |topic: &String| SourceError::UnknownTopic { topic: topic.clone(), brokers: brokers.to_string() };
    let mut out = BTreeMap::new();
    for topic in topics {
        let metadata = consumer.fetch_metadata(Some(topic), STARTUP_TIMEOUT).map_err(unreachable)?;
        let partitions =
            metadata.topics().first().filter(|t| t.error().is_none()).map(|t| t.partitions().len()).unwrap_or(0);
        if partitions == 0 {
            return Err(unknown(topic));
        }
        let mut tpl = TopicPartitionList::new();
        for p in 0..partitions as i32 {
            tpl.add_partition(topic, p);
        }
        let committed = match group {
            Some(_) => Some(consumer.committed_offsets(tpl, METADATA_TIMEOUT).map_err(unreachable)?),
            None => None,
        };
        for p in 0..partitions as i32 {
            let (log_start, log_end) = consumer.fetch_watermarks(topic, p, METADATA_TIMEOUT).map_err(unreachable)?;
            let tp = TopicPartition::new(topic.as_str(), p).map_err(|_| unknown(topic))?;
            let commit = committed
                .as_ref()
                .and_then(|c| c.find_partition(topic, p))
                .and_then(|e| e.offset().to_raw().filter(|o| *o >= 0).map(|o| (o, e.metadata().to_string())));
            out.insert(tp, (LogOffsets { log_start, log_end }, commit));
        }
    }
    Ok(out)
}

/// Before subscribing: the brokers answer, and every topic named (not matched by a regex) exists.
/// Blocks for up to `STARTUP_TIMEOUT`.
fn check_topics(consumer: &BaseConsumer<ArchiverContext>, settings: &SourceSettings) -> Result<(), SourceError> {
    let metadata = consumer.fetch_metadata(None, STARTUP_TIMEOUT).map_err(|source| SourceError::Unreachable {
        brokers: settings.brokers.clone(),
        timeout: STARTUP_TIMEOUT,
        source,
    })?;
    for name in settings.subscription.iter().filter(|t| !t.starts_with('^')) {
        let exists =
            metadata.topics().iter().any(|t| t.name() == name && t.error().is_none() && !t.partitions().is_empty());
        if !exists {
            return Err(SourceError::UnknownTopic { topic: name.clone(), brokers: settings.brokers.clone() });
        }
    }
    Ok(())
}

fn poll_loop(
    consumer: BaseConsumer<ArchiverContext>,
    stop: Arc<AtomicBool>,
    shutdown_wait: Duration,
) -> Result<(), SourceError> {
    let ctx = consumer.context().clone();
    let mut leaving: Option<Instant> = None;
    let mut last_tp: Option<TopicPartition> = None;
    loop {
        if stop.load(Ordering::SeqCst) {
            if ctx.crashed.load(Ordering::SeqCst) {
                return Ok(());
            }
            match leaving {
                None => {
                    info!("leaving the consumer group");
                    consumer.unsubscribe();
                    leaving = Some(Instant::now());
                }
                Some(since) => {
                    let done = ctx.state.lock().expect("source state").assigned.is_empty();
                    if done || since.elapsed() > shutdown_wait {
                        if !done {
                            warn!("gave up waiting for the group to revoke partitions after {shutdown_wait:?}");
                        }
                        return Ok(());
                    }
                }
            }
        }
        match consumer.poll(Duration::from_millis(100)) {
            None => {}
            Some(Ok(msg)) => {
                let tp = match &last_tp {
                    Some(tp) if tp.partition() == msg.partition() && tp.topic() == msg.topic() => tp.clone(),
                    _ => match TopicPartition::new(msg.topic(), msg.partition()) {
                        Ok(tp) => tp,
                        Err(e) => {
                            error!("skipping a record of an unusable partition: {e}");
                            continue;
                        }
                    },
                };
                last_tp = Some(tp.clone());
                let mut state = ctx.state.lock().expect("source state");
                let epoch = match state.assigned.get_mut(&tp) {
                    Some(a) if !a.stopped => {
                        a.awaiting_first = None;
                        a.epoch
                    }
                    _ => continue,
                };
                let record = to_record(&msg);
                state.pending_bytes += record.payload_size();
                state.pending.push_back(Fetched { tp, epoch, record });
            }
            Some(Err(KafkaError::MessageConsumption(
                RDKafkaErrorCode::AutoOffsetReset | RDKafkaErrorCode::OffsetOutOfRange,
            ))) => ctx.on_out_of_range(&consumer),
            Some(Err(e @ KafkaError::MessageConsumptionFatal(_))) => return Err(SourceError::Fatal(e)),
            Some(Err(e)) => warn!("Kafka consumer error (librdkafka retries): {e}"),
        }
        ctx.assignment_lost.store(consumer.assignment_lost(), Ordering::SeqCst);
        hand_over(&consumer, &ctx);
        ctx.apply_commands(&consumer, CommitMode::Async);
    }
}

/// Moves pending events into the pipeline's channel, waiting up to `HAND_OVER_WAIT` for room: while
/// this thread waits, librdkafka's bounded prefetch queue fills and fetching slows down by itself.
/// Only when the pipeline stays behind (the pending events exceed `PAUSE_ABOVE_BYTES`, e.g. uploads
/// are failing) is fetching paused outright; pausing drops librdkafka's prefetched data, so it is
/// kept for that case.
fn hand_over(consumer: &BaseConsumer<ArchiverContext>, ctx: &ArchiverContext) {
    let deadline = Instant::now() + HAND_OVER_WAIT;
    let mut state = ctx.state.lock().expect("source state");
    loop {
        while let Some(fetched) = state.pending.pop_front() {
            let size = fetched.record.payload_size();
            match ctx.records.try_send(fetched) {
                Ok(()) => state.pending_bytes -= size,
                Err(TrySendError::Full(fetched)) => {
                    state.pending.push_front(fetched);
                    break;
                }
                Err(TrySendError::Closed(_)) => {
                    state.pending.clear();
                    state.pending_bytes = 0;
                    break;
                }
            }
        }
        if state.pending.is_empty() || Instant::now() >= deadline {
            break;
        }
        drop(state);
        std::thread::sleep(Duration::from_millis(1));
        state = ctx.state.lock().expect("source state");
    }
    let pause = state.pending_bytes > PAUSE_ABOVE_BYTES;
    if pause != state.paused_for_backpressure && (pause || state.pending.is_empty()) {
        let active = state.active();
        if pause {
            warn!(
                pending_bytes = state.pending_bytes,
                "the pipeline is behind (uploads slow or failing?): pausing fetch"
            );
            let _ = consumer.pause(&active);
        } else {
            info!("the pipeline caught up: resuming fetch");
            let _ = consumer.resume(&active);
        }
        state.paused_for_backpressure = pause;
    }
}

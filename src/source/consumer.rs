//! The consumer thread: creates the rdkafka consumer, checks the brokers and topics, subscribes, and
//! polls — handing records to the pipeline, serving rebalance callbacks (`context`), and applying the
//! pipeline's commits and seeks — until it is asked to stop.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc as std_mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::BorrowedMessage;
use rdkafka::message::Message;
use tokio::sync::mpsc::{self, error::TrySendError};
use tracing::{error, info, warn};

use super::context::{ArchiverContext, SourceState};
use super::convert::to_record;
use super::group;
use super::messages::{Control, Fetched, SourceCommand, SourceLink};
use super::out_of_range::Watermarks;
use super::probe::probe_config;
use super::SourceError;
use crate::archive::partition::TopicPartition;
use crate::telemetry::Metrics;

/// How long start-up waits for the brokers to answer before giving up with a clear error.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(15);
/// How long one hand-over waits for room in the pipeline's channel before polling again (which keeps
/// rebalance callbacks served).
const HAND_OVER_WAIT: Duration = Duration::from_millis(100);
/// Messages polled before the pending ones are handed over.
const POLL_BATCH: usize = 256;
/// Records per channel message to the pipeline (one wake-up of the pipeline per batch, not per record).
pub const HAND_OVER_BATCH: usize = 256;
/// The longest an assign callback waits for recovery (see `assign_wait`): a healthy store answers an
/// assignment of a hundred partitions well within it. The partitions still recovering then start as
/// their recoveries end (recoveries take turns at the store, so they end one after another), rather
/// than all together once the last has.
const ASSIGN_WAIT: Duration = Duration::from_secs(2);
/// librdkafka's default `max.poll.interval.ms`.
const DEFAULT_MAX_POLL_INTERVAL: Duration = Duration::from_secs(300);
/// Pending (polled, not yet handed over) record bytes above which fetching is paused.
const PAUSE_ABOVE_BYTES: u64 = 32 << 20;

/// Consumer settings the source needs.
#[derive(Debug, Clone)]
pub struct SourceOptions {
    pub brokers: String,
    pub group: String,
    pub subscription: Vec<String>,
    pub kafka_props: Vec<(String, String)>,
    /// How long a revoke callback waits for the pipeline before giving up on it.
    pub revoke_wait: Duration,
    /// The pipeline's memory budget, which librdkafka's prefetch queue is sized from.
    pub max_buffer_bytes: u64,
}

/// The pipeline's ends of the channels the source feeds.
pub struct PipelineChannels {
    /// Batches of up to `HAND_OVER_BATCH` records.
    pub records: mpsc::Sender<Vec<Fetched>>,
    pub control: mpsc::UnboundedSender<Control>,
    pub commands: std_mpsc::Receiver<SourceCommand>,
}

/// The running consumer thread.
pub struct KafkaSource {
    thread: JoinHandle<Result<(), SourceError>>,
    stop: Arc<AtomicBool>,
    crashed: Arc<AtomicBool>,
}

impl KafkaSource {
    /// Creates the consumer, checks the brokers answer and the topics exist, subscribes, and starts
    /// polling on a new thread.
    pub fn spawn(
        settings: &SourceOptions,
        channels: PipelineChannels,
        link: &SourceLink,
        metrics: Arc<Metrics>,
    ) -> Result<Self, SourceError> {
        let crashed = Arc::new(AtomicBool::new(false));
        let context = Self::context(settings, channels, link, metrics, crashed.clone());
        let consumer = connect(settings, context)?;
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

    /// The rebalance callbacks' state and links to the pipeline.
    fn context(
        settings: &SourceOptions,
        channels: PipelineChannels,
        link: &SourceLink,
        metrics: Arc<Metrics>,
        crashed: Arc<AtomicBool>,
    ) -> ArchiverContext {
        ArchiverContext {
            records: channels.records,
            control: channels.control,
            commands: Mutex::new(channels.commands),
            seeks_to_retry: Mutex::default(),
            epochs: link.epochs.clone(),
            assignment_lost: link.assignment_lost.clone(),
            state: Mutex::new(SourceState::default()),
            revoke_wait: settings.revoke_wait,
            assign_wait: assign_wait(&settings.kafka_props),
            probe: probe_config(&settings.brokers, &settings.kafka_props),
            crashed,
            watermarks: Mutex::new(
                Watermarks::spawn(probe_config(&settings.brokers, &settings.kafka_props), metrics.clone())
                    .expect("spawn the out-of-range thread"),
            ),
            metrics,
            first_failure: Mutex::default(),
            settings: settings.clone(),
        }
    }

    /// `run --check`: the brokers answer (with the TLS/SASL settings given) and every topic named exists;
    /// nothing is subscribed or consumed. Blocks for up to `STARTUP_TIMEOUT`.
    pub fn check(settings: &SourceOptions) -> Result<(), SourceError> {
        let (records, _) = tokio::sync::mpsc::channel(1);
        let (control, _) = tokio::sync::mpsc::unbounded_channel();
        let (link, commands) = SourceLink::new();
        let channels = PipelineChannels { records, control, commands };
        let context = Self::context(settings, channels, &link, Arc::new(Metrics::default()), Arc::default());
        connect(settings, context)?;
        match group::session_timeout_refused(&settings.brokers, &settings.kafka_props) {
            Some(why) => Err(SourceError::GroupRefused { group: settings.group.clone(), why }),
            None => Ok(()),
        }
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

/// Whether the group uses KIP-848's consumer protocol (`--kafka group.protocol=consumer`), where the
/// broker assigns partitions and client-side assignment settings are refused.
pub(super) fn uses_consumer_protocol(props: &[(String, String)]) -> bool {
    props.iter().any(|(k, v)| k == "group.protocol" && v.eq_ignore_ascii_case("consumer"))
}

/// Creates the archiver's consumer and checks, before anything subscribes, that the brokers answer and
/// every topic named exists.
fn connect(settings: &SourceOptions, context: ArchiverContext) -> Result<BaseConsumer<ArchiverContext>, SourceError> {
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
        // Committed records only (aborted ones and transaction markers leave holes the claims
        // explain), whichever instance reads a range.
        .set("isolation.level", "read_committed")
        .set("statistics.interval.ms", "5000")
        // librdkafka waits this long before fetching again once its queue is full (1000 ms by
        // default): a consumer that drains the queue in less than that — any that does real work
        // per record — then idles each second. At the default the archiver took ~100k records/s
        // on a broker that serves 1.2M/s; at 20 ms, ~270k (`localstack/bench.sh`). `--kafka` may
        // set it otherwise.
        .set("fetch.queue.backoff.ms", "20")
        .set("queued.max.messages.kbytes", prefetch_kbytes(settings.max_buffer_bytes).to_string())
        .set("fetch.max.bytes", fetch_max_bytes(settings.max_buffer_bytes, &settings.kafka_props).to_string());
    if !uses_consumer_protocol(&settings.kafka_props) {
        // Classic groups: incremental rebalances, so partitions that stay are not flushed and
        // recovered again. (KIP-848's consumer protocol is always incremental; the broker assigns.)
        config.set("partition.assignment.strategy", "cooperative-sticky");
    }
    for (k, v) in &settings.kafka_props {
        config.set(k, v);
    }
    let consumer: BaseConsumer<ArchiverContext> = config.create_with_context(context).map_err(SourceError::Create)?;
    check_topics(&consumer, settings)?;
    Ok(consumer)
}

/// Before subscribing: the brokers answer, and every topic named (not matched by a regex) exists.
/// Blocks for up to `STARTUP_TIMEOUT`.
fn check_topics(consumer: &BaseConsumer<ArchiverContext>, settings: &SourceOptions) -> Result<(), SourceError> {
    let metadata = consumer.fetch_metadata(None, STARTUP_TIMEOUT).map_err(|source| {
        // librdkafka queues its logs and errors until the client is served: serve them, to say why.
        for _ in 0..10 {
            consumer.poll(Duration::from_millis(50));
        }
        let said = consumer.context().first_failure.lock().expect("first failure").take();
        let why = match said {
            Some(said) => format!("{source}; the client reported: {said}"),
            None => source.to_string(),
        };
        SourceError::Unreachable { brokers: settings.brokers.clone(), timeout: STARTUP_TIMEOUT, why }
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
                    let done = ctx.state.lock().expect("source state").nothing_assigned();
                    if done || since.elapsed() > shutdown_wait {
                        if !done {
                            warn!("gave up waiting for the group to revoke partitions after {shutdown_wait:?}");
                        }
                        return Ok(());
                    }
                }
            }
        }
        poll_batch(&consumer, &ctx, &mut last_tp)?;
        ctx.assignment_lost.store(consumer.assignment_lost(), Ordering::SeqCst);
        ctx.apply_late_answers(&consumer);
        ctx.apply_out_of_range(&consumer);
        hand_over(&consumer, &ctx);
        ctx.apply_commands(&consumer, CommitMode::Async, true);
    }
}

/// Polls up to `POLL_BATCH` messages into the pending queue, waiting up to 100 ms for the first: the
/// bookkeeping after it (hand-over, commands) then runs once per batch, not once per record.
fn poll_batch(
    consumer: &BaseConsumer<ArchiverContext>,
    ctx: &ArchiverContext,
    last_tp: &mut Option<TopicPartition>,
) -> Result<(), SourceError> {
    let mut wait = Duration::from_millis(100);
    for _ in 0..POLL_BATCH {
        match consumer.poll(wait) {
            None => return Ok(()),
            Some(Ok(msg)) => take_message(ctx, &msg, last_tp),
            Some(Err(KafkaError::MessageConsumption(
                RDKafkaErrorCode::AutoOffsetReset | RDKafkaErrorCode::OffsetOutOfRange,
            ))) => {
                ctx.out_of_range_seen();
                return Ok(());
            }
            Some(Err(e @ KafkaError::MessageConsumptionFatal(_))) => return Err(SourceError::Fatal(e)),
            Some(Err(KafkaError::MessageConsumption(code))) if group::refused_for_a_setting(code) => {
                let settings = &ctx.settings;
                let bounds = group::session_bounds(&settings.brokers, &settings.kafka_props).ok();
                let why = group::explain(code, &settings.group, &settings.kafka_props, bounds);
                return Err(SourceError::GroupRefused { group: settings.group.clone(), why });
            }
            Some(Err(e)) => {
                warn!("Kafka consumer error (librdkafka retries): {e}");
                return Ok(());
            }
        }
        wait = Duration::ZERO;
    }
    Ok(())
}

/// Queues one polled message for the pipeline, if its partition is consumed.
fn take_message(ctx: &ArchiverContext, msg: &BorrowedMessage<'_>, last_tp: &mut Option<TopicPartition>) {
    let tp = match last_tp.as_ref() {
        Some(tp) if tp.partition() == msg.partition() && tp.topic() == msg.topic() => tp.clone(),
        _ => match TopicPartition::new(msg.topic(), msg.partition()) {
            Ok(tp) => tp,
            Err(e) => {
                error!("skipping a record of an unusable partition: {e}");
                return;
            }
        },
    };
    *last_tp = Some(tp.clone());
    let mut state = ctx.state.lock().expect("source state");
    if let Some((epoch, retention_gap)) = state.take_record(&tp, msg.offset()) {
        state.pending.push_back(Fetched { tp, epoch, record: to_record(msg), retention_gap });
    }
}

/// Moves pending records into the pipeline's channel, waiting up to `HAND_OVER_WAIT` for room: while
/// this thread waits, librdkafka's bounded prefetch queue fills and fetching slows down by itself.
/// Only when the pipeline stays behind (the pending records exceed `PAUSE_ABOVE_BYTES`, e.g. uploads
/// are failing) is fetching paused outright; pausing drops librdkafka's prefetched data, so it is
/// kept for that case.
fn hand_over(consumer: &BaseConsumer<ArchiverContext>, ctx: &ArchiverContext) {
    let mut deadline = None;
    let mut state = ctx.state.lock().expect("source state");
    loop {
        while !state.pending.is_empty() {
            match ctx.records.try_reserve() {
                Ok(permit) => permit.send(state.pending.take_batch(HAND_OVER_BATCH)),
                Err(TrySendError::Full(())) => break,
                Err(TrySendError::Closed(())) => state.pending.clear(),
            }
        }
        let deadline = *deadline.get_or_insert_with(|| Instant::now() + HAND_OVER_WAIT);
        if state.pending.is_empty() || Instant::now() >= deadline {
            break;
        }
        drop(state);
        std::thread::sleep(Duration::from_millis(1));
        state = ctx.state.lock().expect("source state");
    }
    let pause = state.pending.bytes() > PAUSE_ABOVE_BYTES;
    if pause != state.paused_for_backpressure && (pause || state.pending.is_empty()) {
        let active = state.active();
        if pause {
            warn!(
                pending_bytes = state.pending.bytes(),
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

/// librdkafka's default `queued.max.messages.kbytes` (64 MiB), the most the prefetch queue is given.
const MAX_PREFETCH_KBYTES: u64 = 64 * 1024;
/// The least it is given.
const MIN_PREFETCH_KBYTES: u64 = 1024;

/// librdkafka's prefetch queue, sized from the memory budget: a quarter of it, between 1 and 64 MiB
/// (`--kafka queued.max.messages.kbytes` overrides). It holds more than it says (fetched responses stay
/// whole while any of their messages is queued): with 1,000 partitions of mixed sizes and the 64 MiB
/// budget, peak RSS was 366–373 MiB at librdkafka's 64 MiB default and 212–213 MiB at 8 MiB. So a smaller
/// budget means less prefetched too; at the 256 MiB default budget it stays at librdkafka's default.
fn prefetch_kbytes(max_buffer_bytes: u64) -> u64 {
    (max_buffer_bytes / 4 / 1024).clamp(MIN_PREFETCH_KBYTES, MAX_PREFETCH_KBYTES)
}

/// The least one fetch response is given: above librdkafka's default `message.max.bytes` (1,000,000),
/// which an explicit `fetch.max.bytes` may not be below (a first batch larger still comes whole).
const MIN_FETCH_BYTES: u64 = 2 * 1024 * 1024;

/// The most one fetch response may carry: a sixteenth of the prefetch queue (so 2–4 MiB), and at least
/// `message.max.bytes` when `--kafka` sets it (librdkafka refuses less); `--kafka fetch.max.bytes`
/// overrides. A response stays in memory whole while any of its messages is queued, so with many
/// partitions librdkafka holds far more than its queue's size: a plain consumer of 1,000 partitions of
/// mixed sizes (`examples/librdkafka_memory.rs`) peaked at 185 MiB with a 64 MiB queue and librdkafka's
/// default responses (50 MiB, or the queue's size if smaller), 119 MiB with 4 MiB ones; at a 16 MiB
/// queue, 98 and 47 MiB (with 2 MiB ones). The archiver's rate did not clearly move (docs/performance-history.md).
fn fetch_max_bytes(max_buffer_bytes: u64, kafka_props: &[(String, String)]) -> u64 {
    let message_max = kafka_props
        .iter()
        .find(|(k, _)| k == "message.max.bytes")
        .and_then(|(_, v)| v.parse::<u64>().ok())
        .unwrap_or(0);
    (prefetch_kbytes(max_buffer_bytes) * 1024 / 16).max(MIN_FETCH_BYTES).max(message_max)
}

/// How long an assign callback waits for recovery: long enough for a healthy store, and well below
/// `max.poll.interval.ms`, which the callback's wait counts against (the group would evict a member
/// that does not poll for that long). A recovery still running then ends later; see `context`.
fn assign_wait(kafka_props: &[(String, String)]) -> Duration {
    let max_poll_interval = kafka_props
        .iter()
        .find(|(k, _)| k == "max.poll.interval.ms")
        .and_then(|(_, v)| v.parse::<u64>().ok())
        .map_or(DEFAULT_MAX_POLL_INTERVAL, Duration::from_millis);
    ASSIGN_WAIT.min(max_poll_interval / 4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_assign_wait_stays_well_below_the_poll_interval() {
        let props = |v: &str| vec![("max.poll.interval.ms".to_string(), v.to_string())];
        assert_eq!(assign_wait(&[]), ASSIGN_WAIT);
        assert_eq!(assign_wait(&props("600000")), ASSIGN_WAIT);
        assert_eq!(assign_wait(&props("4000")), Duration::from_secs(1));
    }

    #[test]
    fn the_prefetch_queue_is_a_quarter_of_the_budget_within_librdkafkas_default() {
        assert_eq!(prefetch_kbytes(256 << 20), 64 * 1024, "the default budget keeps librdkafka's default");
        assert_eq!(prefetch_kbytes(64 << 20), 16 * 1024);
        assert_eq!(prefetch_kbytes(1 << 30), 64 * 1024);
        assert_eq!(prefetch_kbytes(1 << 20), 1024);
    }

    #[test]
    fn a_fetch_response_is_a_sixteenth_of_the_prefetch_queue_and_at_least_2_mib() {
        assert_eq!(fetch_max_bytes(256 << 20, &[]), 4 << 20, "the default budget");
        assert_eq!(fetch_max_bytes(64 << 20, &[]), 2 << 20);
        assert_eq!(fetch_max_bytes(1 << 20, &[]), 2 << 20);
        assert_eq!(fetch_max_bytes(4 << 30, &[]), 4 << 20, "the queue stops at 64 MiB");
        let larger_messages = [("message.max.bytes".to_string(), "10485760".to_string())];
        assert_eq!(fetch_max_bytes(256 << 20, &larger_messages), 10 << 20, "librdkafka refuses less");
    }

    #[test]
    fn the_consumer_group_protocol_is_recognised() {
        let props = |kv: &[(&str, &str)]| kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<Vec<_>>();
        assert!(uses_consumer_protocol(&props(&[("group.protocol", "consumer")])));
        assert!(uses_consumer_protocol(&props(&[("security.protocol", "SSL"), ("group.protocol", "CONSUMER")])));
        assert!(!uses_consumer_protocol(&props(&[("group.protocol", "classic")])));
        assert!(!uses_consumer_protocol(&props(&[])));
    }
}

//! Wires a Kafka source, a pipeline and a store into a running archiver.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use thiserror::Error;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tracing::warn;

use crate::archive::destination::Destination;
use crate::archive::keys::ListRequest;
use crate::config::ArchiverConfig;
use crate::config::TableConfig;
use crate::encode::spool::{host_name, SpoolData, SpoolOptions, SpoolUsage};
use crate::pipeline::dead_letters::kafka::KafkaDeadLetters;
use crate::pipeline::schemas::Registry;
use crate::pipeline::AssignedTopics;
use crate::pipeline::{Pipeline, PipelineError, PipelineOptions};
use crate::registry::{RegistryClient, RegistryError};
use crate::retry::Backoff;
use crate::service::group_offsets::GroupOffsetsOptions;
use crate::service::markers::MarkerOptions;
use crate::service::tables::TableOptions;
use crate::source::probe::{connection_settings, probe_config};
use crate::source::topic_id::TopicIdClient;
use crate::source::{KafkaSource, PipelineChannels, SourceError, SourceLink, SourceOptions, HAND_OVER_BATCH};
use crate::store::{self, ObjectStore, PutOutcome, Role, StoreError};
use crate::table::catalog;
use crate::table::committer::Committer;
use crate::table::recent::{RecentObjects, RECENT_FOOTER_BYTES, RECENT_OBJECTS};
use crate::telemetry::{Event, Metrics};

/// How long a graceful stop waits for the tables' last commit.
const LAST_COMMIT_TIMEOUT: Duration = Duration::from_secs(30);
/// Batches of records (up to `HAND_OVER_BATCH` each) waiting between the consumer thread and the
/// pipeline: at most 4,096 records.
const RECORD_BATCHES: usize = 4096 / HAND_OVER_BATCH;
/// Files waiting in memory (until uploaded) hold at most this share of `--max-buffer-bytes` together,
/// 1/2: the rest is the open files'. Beyond it, or past `--spool-memory-threshold`, a file moves to
/// the spool directory.
const SPOOL_SHARE_OF_BUFFER: u64 = 2;

#[derive(Debug, Error)]
pub enum ArchiverError {
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("spool directory {dir}: {source}. Pass a writable --spool-dir")]
    SpoolDir { dir: String, source: std::io::Error },
    #[error("the pipeline task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
    #[error("the dead-letter producer cannot be created: {0}. Check --brokers and the --kafka settings")]
    DeadLetters(rdkafka::error::KafkaError),
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error(transparent)]
    Catalog(#[from] crate::table::catalog::CatalogError),
    #[error(
        "listing the consumer groups for --archive-group-offsets failed: {0}. The archiver's Kafka principal needs \
         Describe on the groups to keep (and on the cluster to list them)"
    )]
    GroupOffsets(rdkafka::error::KafkaError),
}

/// Opens the tables' catalog and starts their committer (told of the objects the pipeline creates).
fn start_tables(
    config: &ArchiverConfig,
    table: &TableConfig,
    (store, recent): (Arc<dyn ObjectStore>, Arc<RecentObjects>),
    assigned: AssignedTopics,
    metrics: &Arc<Metrics>,
) -> Result<TableTask, ArchiverError> {
    let committer = Committer {
        catalog: catalog::open(&table.catalog.location, &table.catalog.name, store.clone())?,
        store,
        prefix: config.store.dest.prefix().clone(),
        max_files: table.cadence.max_files,
        recent,
    };
    let options =
        TableOptions { config: table.clone(), profiles: Arc::new(config.pipeline.profiles.clone()), assigned };
    let (stop, stopped) = watch::channel(false);
    let task = tokio::spawn(crate::service::tables::run(committer, options, metrics.clone(), stopped));
    Ok(TableTask { task, stop })
}

/// The tables' committer, and how to tell it the pipeline has finished.
struct TableTask {
    task: JoinHandle<()>,
    stop: watch::Sender<bool>,
}

impl TableTask {
    /// Lets it commit what the stopped pipeline uploaded last, for at most [`LAST_COMMIT_TIMEOUT`].
    async fn finish(mut self, metrics: &Metrics) {
        let _ = self.stop.send(true);
        if tokio::time::timeout(LAST_COMMIT_TIMEOUT, &mut self.task).await.is_err() {
            self.task.abort();
            metrics.emit(Event::TableLastCommitCut { waited: LAST_COMMIT_TIMEOUT });
        }
    }
}

/// `run --check`: the store can be listed and honours conditional writes (the start-up checks, once,
/// with the configured encryption and storage class), without cleaning anything up.
pub async fn check_store(config: &ArchiverConfig) -> Result<Arc<dyn ObjectStore>, StoreError> {
    let store = store::open(&config.store.dest, &config.store.settings, Role::Inspect).await?;
    preflight(config, store.as_ref()).await?;
    probe_conditional_writes(config, store.as_ref()).await?;
    Ok(store)
}

/// How long start-up keeps trying a store that fails transiently (a brownout) before it gives up.
pub const STARTUP_STORE_PATIENCE: Duration = Duration::from_secs(5 * 60);

/// Opens the store and checks it (`store::open`, `preflight`, `probe_conditional_writes`), trying again
/// on transient errors for up to [`STARTUP_STORE_PATIENCE`] and saying so; permanent errors (no
/// bucket, access denied, no conditional writes) fail at once.
pub async fn open_checked_store(config: &ArchiverConfig) -> Result<Arc<dyn ObjectStore>, StoreError> {
    let started = std::time::Instant::now();
    let backoff = Backoff::default();
    let mut attempt = 0;
    loop {
        let opened = async {
            let store = store::open(&config.store.dest, &config.store.settings, Role::Archive).await?;
            preflight(config, store.as_ref()).await?;
            probe_conditional_writes(config, store.as_ref()).await?;
            Ok::<_, StoreError>(store)
        };
        match opened.await {
            Err(e) if e.is_transient() && started.elapsed() < STARTUP_STORE_PATIENCE => {
                let left = STARTUP_STORE_PATIENCE.saturating_sub(started.elapsed());
                warn!(
                    "the archive store does not answer at start-up (attempt {}): {e}; trying again for up to {}s \
                     before giving up",
                    attempt + 1,
                    left.as_secs()
                );
                tokio::time::sleep(backoff.delay(attempt, fastrand::f64())).await;
                attempt += 1;
            }
            other => return other,
        }
    }
}

/// Checks, before anything consumes, that the archive can be listed: a missing bucket or wrong
/// credentials fail here with a message that says what to fix.
async fn preflight(config: &ArchiverConfig, store: &dyn ObjectStore) -> Result<(), StoreError> {
    let req = ListRequest { prefix: config.store.dest.prefix().as_str().to_string(), start_after: None };
    store.list(&req, 1).await.map(|_| ())
}

/// Proves that the store honours conditional writes before anything is archived: a probe key put twice
/// with `If-None-Match: *` must be refused the second time. A store that ignores the header would let
/// every claim "win", and exactly-once would be void without a sign. The probe is removed afterwards.
async fn probe_conditional_writes(config: &ArchiverConfig, store: &dyn ObjectStore) -> Result<(), StoreError> {
    let key = format!("{}_probe/{}-{:016x}.probe", config.store.dest.prefix().root(), writer_id(), fastrand::u64(..));
    const PROBE: &[u8] = b"conditional write probe";
    let (body, len) = (SpoolData::memory(Bytes::from_static(PROBE)), PROBE.len() as u64);
    store.put_if_absent(&key, &body, len).await?;
    let second = store.put_if_absent(&key, &body, len).await;
    let _ = store.delete(&key).await;
    match second? {
        PutOutcome::AlreadyExists => Ok(()),
        PutOutcome::Created => Err(StoreError::Permanent {
            what: format!(
                "the store at {}{} does not honour conditional writes: a second create of {key} (If-None-Match: *, \
                 or GCS's ifGenerationMatch=0) was accepted",
                store.describe(),
                match &config.store.dest {
                    Destination::S3 { .. } =>
                        config.store.settings.s3.endpoint().map(|e| format!(" (endpoint {e})")).unwrap_or_default(),
                    _ => String::new(),
                }
            ),
            fix: "the archiver's exactly-once guarantee rests on them (claims, and never overwriting an object); use \
                  a store that honours them (S3: If-None-Match on PutObject and CompleteMultipartUpload)"
                .into(),
        }),
    }
}

fn source_options(config: &ArchiverConfig) -> SourceOptions {
    SourceOptions {
        brokers: config.source.brokers.clone(),
        group: config.source.group.clone(),
        subscription: config.source.subscription.clone(),
        kafka_props: config.source.kafka_props.clone(),
        revoke_wait: config.pipeline.revoke_timeout + std::time::Duration::from_secs(5),
        max_buffer_bytes: config.pipeline.max_buffer_bytes,
    }
}

/// `run --check`: what `run` checks before it consumes — the brokers answer and the named topics exist,
/// the store can be listed and honours conditional writes — once each, without waiting out brownouts.
/// Returns a line per check passed.
pub async fn check(config: &ArchiverConfig) -> Result<Vec<String>, ArchiverError> {
    let settings = source_options(config);
    tokio::task::spawn_blocking(move || KafkaSource::check(&settings)).await??;
    let topics = config.source.subscription.join(", ");
    let store = check_store(config).await?;
    let mut passed = vec![
        format!("brokers {}: reachable; topics: {topics}", config.source.brokers),
        format!("archive {}: listable, conditional writes honoured", store.describe()),
    ];
    if let Some(kept) = &config.source.group_offsets {
        let (brokers, props) = (config.source.brokers.clone(), connection_settings(&config.source.kafka_props));
        let (groups, own) = (kept.groups.clone(), config.source.group.clone());
        let matching =
            tokio::task::spawn_blocking(move || crate::service::group_offsets::check(&brokers, &props, &groups, &own))
                .await?
                .map_err(ArchiverError::GroupOffsets)?;
        passed.push(format!("group offsets: the consumer groups can be listed, {matching} match now"));
    }
    if let Some(registry) = &config.pipeline.registry {
        let client = RegistryClient::new(registry.options.clone());
        let subjects = client.subjects().await?;
        passed.push(format!("schema registry {}: reachable, {subjects} subjects", client.url()));
    }
    if let Some(table) = &config.table {
        passed.push(format!(
            "iceberg {}",
            catalog::open(&table.catalog.location, &table.catalog.name, store)?.check().await?
        ));
    }
    Ok(passed)
}

/// Names this process in claims: host and pid.
fn writer_id() -> String {
    format!("{}:{}", host_name(), std::process::id())
}

/// A running archiver.
pub struct Archiver {
    source: KafkaSource,
    pipeline: JoinHandle<Result<(), PipelineError>>,
    metrics: Arc<Metrics>,
    /// Puts `_SUCCESS` markers into complete time buckets (with time buckets).
    markers: Option<JoinHandle<()>>,
    /// Keeps consumer groups' committed offsets in the archive (with `--archive-group-offsets`).
    group_offsets: Option<JoinHandle<()>>,
    /// Commits durable files to the topics' tables (with `--table iceberg`).
    tables: Option<TableTask>,
}

impl Archiver {
    pub fn start(config: &ArchiverConfig, store: Arc<dyn ObjectStore>) -> Result<Self, ArchiverError> {
        let spool = SpoolOptions {
            memory_threshold: config.pipeline.spool_memory_threshold,
            dir: config.pipeline.spool_dir.clone(),
            usage: Arc::new(SpoolUsage::with_memory_limit(config.pipeline.max_buffer_bytes / SPOOL_SHARE_OF_BUFFER)),
        };
        spool.prepare_dir().map_err(|source| ArchiverError::SpoolDir {
            dir: config.pipeline.spool_dir.display().to_string(),
            source,
        })?;
        let metrics = Arc::new(Metrics::default());
        let (records_tx, records_rx) = mpsc::channel(RECORD_BATCHES);
        let (control_tx, control_rx) = mpsc::unbounded_channel();
        let (link, commands) = SourceLink::new();
        let profiles = Arc::new(config.pipeline.profiles.clone());
        let settings = PipelineOptions {
            prefix: config.store.dest.prefix().clone(),
            profiles: profiles.clone(),
            spool,
            max_buffer_bytes: config.pipeline.max_buffer_bytes,
            max_spool_bytes: config.pipeline.max_spool_bytes,
            revoke_timeout: config.pipeline.revoke_timeout,
            start_from: config.source.start_from,
            claims: config.pipeline.claims,
            writer_id: writer_id(),
        };
        let topic_ids = TopicIdClient::new(&probe_config(&config.source.brokers, &config.source.kafka_props))
            .map_err(|e| ArchiverError::Source(SourceError::Create(e)))?;
        let mut pipeline = Pipeline::new(settings, store.clone(), link.clone(), metrics.clone(), Arc::new(topic_ids));
        if profiles.any_dead_letters() {
            let sink = KafkaDeadLetters::new(&config.source.brokers, &connection_settings(&config.source.kafka_props))
                .map_err(ArchiverError::DeadLetters)?;
            pipeline = pipeline.with_dead_letters(Arc::new(sink));
        }
        if let Some(registry) = &config.pipeline.registry {
            let client = Arc::new(RegistryClient::new(registry.options.clone()));
            pipeline = pipeline.with_registry(Registry { client, cache: registry.cache.clone() });
        }
        let tables = match &config.table {
            Some(table) => {
                let recent = Arc::new(RecentObjects::new(RECENT_OBJECTS, RECENT_FOOTER_BYTES));
                pipeline = pipeline.with_recent_objects(recent.clone());
                let tables =
                    start_tables(config, table, (store.clone(), recent), pipeline.assigned_topics(), &metrics)?;
                Some(tables)
            }
            None => None,
        };
        let group_offsets = config.source.group_offsets.as_ref().map(|kept| {
            let settings = GroupOffsetsOptions {
                prefix: config.store.dest.prefix().clone(),
                topics: config.source.subscription.iter().filter(|t| !t.starts_with('^')).cloned().collect(),
                assigned: pipeline.assigned_topics(),
                brokers: config.source.brokers.clone(),
                kafka_props: connection_settings(&config.source.kafka_props),
                own_group: config.source.group.clone(),
                groups: kept.groups.clone(),
                interval: kept.interval,
                writer_id: writer_id(),
            };
            tokio::spawn(crate::service::group_offsets::run(store.clone(), settings, metrics.clone()))
        });
        let markers = profiles.any_bucketed().then(|| {
            let settings = MarkerOptions {
                prefix: config.store.dest.prefix().clone(),
                topics: config.source.subscription.iter().filter(|t| !t.starts_with('^')).cloned().collect(),
                profiles,
                brokers: config.source.brokers.clone(),
                kafka_props: connection_settings(&config.source.kafka_props),
                group: config.source.group.clone(),
                writer_id: writer_id(),
                interval: config.pipeline.marker_interval,
                assigned: pipeline.assigned_topics(),
            };
            tokio::spawn(crate::service::markers::run(store, settings, metrics.clone()))
        });
        let pipeline = tokio::spawn(pipeline.run(control_rx, records_rx));
        let source = KafkaSource::spawn(
            &source_options(config),
            PipelineChannels { records: records_tx, control: control_tx, commands },
            &link,
            metrics.clone(),
        )?;
        Ok(Self { source, pipeline, metrics, markers, group_offsets, tables })
    }

    pub fn metrics(&self) -> Arc<Metrics> {
        self.metrics.clone()
    }

    /// True once the pipeline has ended (only a fatal error ends it before a stop is requested).
    pub fn is_finished(&self) -> bool {
        self.pipeline.is_finished()
    }

    /// Graceful stop: stop fetching, upload what is buffered, commit, leave the group.
    pub async fn shutdown(self) -> Result<(), ArchiverError> {
        for task in self.markers.iter().chain(&self.group_offsets) {
            task.abort();
        }
        self.source.request_stop();
        let source = self.source;
        let source_result = tokio::task::spawn_blocking(move || source.join()).await?;
        let pipeline_result = self.pipeline.await;
        // Whatever the pipeline's end, what it made durable may be committed.
        if let Some(tables) = self.tables {
            tables.finish(&self.metrics).await;
        }
        pipeline_result??;
        source_result?;
        Ok(())
    }

    /// Simulated crash: nothing is flushed or committed (used by `demo`).
    pub async fn crash(self) {
        for task in self.markers.iter().chain(&self.group_offsets).chain(self.tables.as_ref().map(|t| &t.task)) {
            task.abort();
        }
        self.pipeline.abort();
        let source = self.source;
        let _ = tokio::task::spawn_blocking(move || source.crash()).await;
    }
}

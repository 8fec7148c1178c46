//! Wires a Kafka source, a pipeline and a store into a running archiver.

use std::sync::Arc;

use thiserror::Error;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::warn;

use crate::config::ArchiverConfig;
use crate::core::destination::Destination;
use crate::core::recovery::ListRequest;
use crate::core::spool::{SpoolConfig, SpoolUsage};
use crate::kafka::{KafkaSource, SourceError, SourceLink, SourceSettings};
use crate::pipeline::{Pipeline, PipelineError, PipelineSettings};
use crate::stats::Stats;
use crate::store::{LocalStore, ObjectStore, S3Settings, S3Store, StoreError};

/// Records waiting between the consumer thread and the pipeline.
const RECORD_QUEUE: usize = 4096;

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
}

/// Opens the store a destination names. On S3, first aborts our multipart uploads that crashes left
/// behind (older than `--abort-stale-uploads-after`).
pub async fn open_store(config: &ArchiverConfig) -> Result<Arc<dyn ObjectStore>, StoreError> {
    Ok(match &config.dest {
        Destination::S3 { bucket, prefix } => {
            let store = S3Store::connect(S3Settings {
                bucket: bucket.clone(),
                endpoint: config.s3_endpoint.clone(),
                region: config.s3_region.clone(),
                multipart_threshold: config.upload_part_size * 2,
                part_size: config.upload_part_size,
                part_concurrency: config.upload_concurrency,
                attempt_timeout: config.s3_attempt_timeout,
            })
            .await;
            let aborted = store.abort_stale_uploads(prefix, config.abort_stale_uploads_after).await?;
            if !aborted.is_empty() {
                warn!(count = aborted.len(), keys = ?aborted, "aborted stale multipart uploads left by earlier crashes");
            }
            Arc::new(store)
        }
        Destination::File { root, .. } => Arc::new(LocalStore::new(root)?),
    })
}

/// Opens a destination for reading (`verify`): no uploads, no clean-up.
pub async fn open_reader(
    dest: &Destination,
    endpoint: Option<String>,
    region: Option<String>,
) -> Result<Arc<dyn ObjectStore>, StoreError> {
    Ok(match dest {
        Destination::S3 { bucket, .. } => Arc::new(
            S3Store::connect(S3Settings {
                bucket: bucket.clone(),
                endpoint,
                region,
                multipart_threshold: 16 << 20,
                part_size: 8 << 20,
                part_concurrency: 1,
                attempt_timeout: std::time::Duration::from_secs(60),
            })
            .await,
        ),
        Destination::File { root, .. } => Arc::new(LocalStore::new(root)?),
    })
}

/// Checks, before anything consumes, that the archive can be listed: a missing bucket or wrong
/// credentials fail here with a message that says what to fix.
pub async fn preflight(config: &ArchiverConfig, store: &dyn ObjectStore) -> Result<(), StoreError> {
    let req = ListRequest { prefix: config.dest.prefix().as_str().to_string(), start_after: None };
    store.list(&req, 1).await.map(|_| ())
}

/// Names this process in claims: host and pid.
fn writer_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_string()).unwrap_or_default();
    format!("{}:{}", if host.is_empty() { "unknown-host" } else { &host }, std::process::id())
}

/// A running archiver.
pub struct Archiver {
    source: KafkaSource,
    pipeline: JoinHandle<Result<(), PipelineError>>,
    stats: Arc<Stats>,
}

impl Archiver {
    pub fn start(config: &ArchiverConfig, store: Arc<dyn ObjectStore>) -> Result<Self, ArchiverError> {
        let spool = SpoolConfig {
            memory_threshold: config.spool_memory_threshold,
            dir: config.spool_dir.clone(),
            usage: Arc::new(SpoolUsage::default()),
        };
        spool
            .prepare_dir()
            .map_err(|source| ArchiverError::SpoolDir { dir: config.spool_dir.display().to_string(), source })?;
        let stats = Arc::new(Stats::default());
        let (records_tx, records_rx) = mpsc::channel(RECORD_QUEUE);
        let (control_tx, control_rx) = mpsc::unbounded_channel();
        let (link, commands) = SourceLink::new();
        let settings = PipelineSettings {
            prefix: config.dest.prefix().clone(),
            spec: config.spec,
            roll: config.roll,
            spool,
            max_buffer_bytes: config.max_buffer_bytes,
            max_spool_bytes: config.max_spool_bytes,
            revoke_timeout: config.revoke_timeout,
            start_from: config.start_from,
            claims: config.claims,
            writer_id: writer_id(),
        };
        let pipeline = Pipeline::new(settings, store, link.clone(), stats.clone());
        let pipeline = tokio::spawn(pipeline.run(control_rx, records_rx));
        let source = KafkaSource::spawn(
            &SourceSettings {
                brokers: config.brokers.clone(),
                group: config.group.clone(),
                subscription: config.subscription.clone(),
                kafka_props: config.kafka_props.clone(),
                revoke_wait: config.revoke_timeout + std::time::Duration::from_secs(5),
            },
            records_tx,
            control_tx,
            &link,
            commands,
            stats.clone(),
        )?;
        Ok(Self { source, pipeline, stats })
    }

    pub fn stats(&self) -> Arc<Stats> {
        self.stats.clone()
    }

    /// True once the pipeline has ended (only a fatal error ends it before a stop is requested).
    pub fn is_finished(&self) -> bool {
        self.pipeline.is_finished()
    }

    /// Graceful stop: stop fetching, upload what is buffered, commit, leave the group.
    pub async fn shutdown(self) -> Result<(), ArchiverError> {
        self.source.request_stop();
        let source = self.source;
        let source_result = tokio::task::spawn_blocking(move || source.join()).await?;
        self.pipeline.await??;
        source_result?;
        Ok(())
    }

    /// Simulated crash: nothing is flushed or committed (used by `demo`).
    pub async fn crash(self) {
        self.pipeline.abort();
        let source = self.source;
        let _ = tokio::task::spawn_blocking(move || source.crash()).await;
    }
}

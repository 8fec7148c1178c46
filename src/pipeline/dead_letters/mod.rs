//! `--dlq-topic`: records whose value did not fit the value schema are also produced to a dead-letter
//! topic (each topic's profile names its own), before their file's data object is uploaded (so a crash cannot lose them; a re-run after a
//! crash may produce them again). They stay in the archive too, every offset in exactly one object.

pub mod kafka;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::sealed::SealedFile;
use crate::archive::partition::TopicPartition;
use crate::encode::{dead_letters, DeadLetter};
use crate::retry::Backoff;
use crate::telemetry::{Event, Metrics};

/// Where dead letters go.
#[async_trait]
pub trait DeadLetterSink: Send + Sync {
    /// Produces `letters` of `source` to the topic `to`, returning once every one is acknowledged.
    async fn send(&self, to: &str, source: &TopicPartition, letters: &[DeadLetter]) -> Result<(), String>;
}

/// Sends a sealed file's dead letters, retrying the sink with backoff until it takes them; an error
/// reading them from the file is returned (it would not go away).
pub(super) async fn send_dead_letters(
    sink: &Arc<dyn DeadLetterSink>,
    to: &str,
    tp: &TopicPartition,
    file: &SealedFile,
    metrics: &Metrics,
) -> Result<(), String> {
    let (kind, data) = (file.key.kind, file.spool.data().clone());
    let letters = tokio::task::spawn_blocking(move || dead_letters(kind, &data))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("reading the records that did not fit from {}: {e}", file.key))?;
    let backoff = Backoff { base: Duration::from_millis(200), max: Duration::from_secs(30) };
    let mut attempt = 0;
    loop {
        match sink.send(to, tp, &letters).await {
            Ok(()) => {
                metrics.emit(Event::DeadLettersSent { tp, key: &file.key.to_string(), records: letters.len() as u64 });
                return Ok(());
            }
            Err(why) => {
                metrics.emit(Event::DeadLettersFailed { tp, why: &why });
                tokio::time::sleep(backoff.delay(attempt, fastrand::f64())).await;
                attempt = attempt.saturating_add(1);
            }
        }
    }
}

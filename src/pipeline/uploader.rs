//! One partition's uploader: uploads its sealed files one at a time, in order — claim (with claims),
//! dead letters (with `--dlq-topic`), then data, then the commit stage (`commit`). Transient store
//! errors are retried forever with backoff (the files keep their budget, so fetching pauses); a permanent one stops the archiver.
//! Losing a claim, or the consumer's assignment, ends the uploader and asks the pipeline to recover
//! the partition again. It reports to the pipeline over one channel of [`UploaderEvent`]s.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::{mpsc, Notify};

use super::commit::{CommitStage, Durable};
use super::dead_letters::{send_dead_letters, DeadLetterSink};
use super::sealed::SealedFile;
use crate::archive::claim::{Claim, ClaimKey};
use crate::archive::object_key::Prefix;
use crate::archive::partition::TopicPartition;
use crate::encode::spool::SpoolData;
use crate::retry::with_retries;
use crate::source::SourceLink;
use crate::store::{ObjectStore, PutOutcome, StoreError};
use crate::telemetry::events::ObjectUploaded;
use crate::telemetry::{Event, Metrics};

/// What an uploader tells the pipeline.
#[derive(Debug)]
pub(super) enum UploaderEvent {
    /// A permanent store error on `key`: the archiver stops.
    Failed { key: String, error: StoreError },
    /// The records of `key` that did not fit cannot be read for the dead-letter topic: it stops.
    DeadLetters { key: String, why: String },
    /// The uploader gave up its partition's chain (lost a claim, or the assignment was lost): the
    /// partition must be recovered again from `chain_start` on, if `writer` still writes it.
    GaveUp { tp: TopicPartition, writer: u64, chain_start: i64 },
}

/// What claiming a file's start ended in.
enum ClaimOutcome {
    /// Ours (created now, or by an earlier attempt whose answer was lost).
    Won,
    /// Another writer holds it for another range.
    Lost(Claim),
}

pub(super) struct Uploader {
    pub(super) store: Arc<dyn ObjectStore>,
    pub(super) prefix: Prefix,
    pub(super) tp: TopicPartition,
    /// The writer it uploads for (`PartitionWriter::id`).
    pub(super) writer: u64,
    pub(super) link: SourceLink,
    pub(super) events: mpsc::UnboundedSender<UploaderEvent>,
    pub(super) freed: Arc<Notify>,
    pub(super) metrics: Arc<Metrics>,
    /// Where the records of its files that do not fit also go, and to which topic (the profile's).
    pub(super) dead_letters: Option<(Arc<dyn DeadLetterSink>, String)>,
    /// Where a durable object is reported.
    pub(super) commits: Arc<CommitStage>,
}

impl Uploader {
    pub(super) async fn run(self, mut files: mpsc::UnboundedReceiver<SealedFile>) {
        while let Some(file) = files.recv().await {
            if let Err(event) = self.upload(&file).await {
                let _ = self.events.send(event);
                return;
            }
            drop(file);
            self.freed.notify_one();
        }
    }

    /// Claim, data, commit; an `Err` ends this uploader.
    async fn upload(&self, file: &SealedFile) -> Result<(), UploaderEvent> {
        let started = Instant::now();
        if let Some(claim) = &file.claim {
            if self.link.assignment_lost.load(Ordering::SeqCst) {
                self.metrics.emit(Event::AssignmentLost { tp: &self.tp });
                return Err(self.give_up(file.chain_start));
            }
            let key = ClaimKey::new(self.prefix.clone(), self.tp.clone(), claim.chain_start).to_string();
            let outcome =
                self.claim(&key, claim).await.map_err(|error| UploaderEvent::Failed { key: key.clone(), error })?;
            match outcome {
                ClaimOutcome::Won => self.metrics.emit(Event::ClaimCreated),
                ClaimOutcome::Lost(theirs) => {
                    self.metrics.emit(Event::ClaimLost { key: &key, ours: claim.data(), theirs: &theirs });
                    return Err(self.give_up(file.chain_start));
                }
            }
        }
        let key = file.key.to_string();
        if let (Some((sink, to)), Some(values)) = (&self.dead_letters, &file.values) {
            if values.misfits > 0 {
                send_dead_letters(sink, to, &self.tp, file, &self.metrics)
                    .await
                    .map_err(|why| UploaderEvent::DeadLetters { key: key.clone(), why })?;
            }
        }
        let outcome = self
            .retry_transient(&key, || self.store.put_if_absent(&key, file.spool.data(), file.spool.len()))
            .await
            .map_err(|error| UploaderEvent::Failed { key: key.clone(), error })?;
        let durable = Durable {
            key: file.key.clone(),
            chain_start: file.chain_start,
            records: file.records,
            bytes: file.spool.len(),
            footer: file.footer.clone(),
        };
        self.metrics.emit(Event::ObjectUploaded(ObjectUploaded {
            tp: &self.tp,
            key: &key,
            range: durable.key.range,
            records: durable.records,
            bytes: durable.bytes,
            row_groups: durable.footer.as_ref().map(|f| f.num_row_groups()),
            elapsed: started.elapsed(),
            reason: file.reason,
            outcome,
            values: file.values.as_ref(),
            keys: file.keys.as_ref(),
            newest_record_ms: file.newest_record_ms,
        }));
        if outcome == PutOutcome::Created {
            self.commits.created(&durable);
        }
        self.commits.durable(&durable);
        Ok(())
    }

    fn give_up(&self, chain_start: i64) -> UploaderEvent {
        UploaderEvent::GaveUp { tp: self.tp.clone(), writer: self.writer, chain_start }
    }

    async fn claim(&self, key: &str, claim: &Claim) -> Result<ClaimOutcome, StoreError> {
        let json = bytes::Bytes::from(claim.to_json());
        let len = json.len() as u64;
        let body = SpoolData::memory(json);
        match self.retry_transient(key, || self.store.put_if_absent(key, &body, len)).await? {
            PutOutcome::Created => Ok(ClaimOutcome::Won),
            PutOutcome::AlreadyExists => {
                let existing = self.retry_transient(key, || self.store.get(key)).await?;
                match Claim::from_json(key, &existing) {
                    Ok(other) if other.same_object(claim) => Ok(ClaimOutcome::Won),
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
        with_retries(u32::MAX, key, Some((&self.metrics.upload_retries, &self.metrics.store_up)), op).await
    }
}

//! What the archiver reports as it works: each event's log line and the counters and gauges it moves,
//! in one place. Code that decides says what happened (`metrics.emit(Event::…)`); this file says how
//! that is logged and counted, so the decisions read as decisions and a log line never drifts from
//! its counter.

use std::time::Duration;

use tracing::{debug, error, info, warn};

pub use self::recovery::{RecoveryFinished, TopicSurveyed};
pub use self::stop_reason::StopReason;
use super::metrics::{Archived, Metrics};
use crate::archive::claim::Claim;
use crate::archive::partition::{OffsetRange, TopicPartition};
use crate::encode::roll::RollReason;
use crate::encode::ValueStats;
use crate::store::PutOutcome;

/// Why an open (or sealed, not yet uploaded) file was dropped: its records are read again by
/// whoever archives the partition next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// The partition was lost (not revoked cleanly): its data must not be uploaded.
    PartitionLost,
    /// A file re-writing a claimed range was not complete at the revoke: uploading part of it would
    /// hide the rest of the range from the next owner.
    PartialRewrite,
    /// The upload did not finish within the revoke timeout.
    RevokeTimeout,
    /// The uploader gave up the partition's chain (lost a claim, or the assignment was lost).
    ChainGivenUp,
}

impl DropReason {
    fn as_str(self) -> &'static str {
        match self {
            DropReason::PartitionLost => "the partition was lost",
            DropReason::PartialRewrite => "it re-wrote part of a claimed range when the partition was revoked",
            DropReason::RevokeTimeout => "its upload did not finish within the revoke timeout",
            DropReason::ChainGivenUp => "another writer holds its claim; recovering again",
        }
    }
}

/// An object is durable (created now, or found already there).
#[derive(Debug)]
pub struct ObjectUploaded<'a> {
    pub tp: &'a TopicPartition,
    pub key: &'a str,
    pub range: OffsetRange,
    pub records: u64,
    pub bytes: u64,
    /// A Parquet object's row groups.
    pub row_groups: Option<usize>,
    pub elapsed: Duration,
    pub reason: RollReason,
    pub outcome: PutOutcome,
    /// What its typed values came to (`--value-format json`).
    pub values: Option<&'a ValueStats>,
    /// What its typed keys came to (`--key-format`).
    pub keys: Option<&'a ValueStats>,
    /// The newest record timestamp in it (ms since the epoch), if its records have any.
    pub newest_record_ms: Option<i64>,
}

/// Something the archiver did or found.
#[derive(Debug)]
pub enum Event<'a> {
    /// A partition's position was recovered from the archive.
    RecoveryFinished(RecoveryFinished<'a>),
    /// An assignment looked at a topic's folders before its partitions' recoveries.
    TopicSurveyed(TopicSurveyed<'a>),
    /// A key in a partition's folders that the archiver did not write.
    ForeignKey {
        tp: &'a TopicPartition,
        key: &'a str,
    },
    /// Two data objects of a partition overlap (an archive written without claims).
    Overlap {
        tp: &'a TopicPartition,
        earlier: OffsetRange,
        later: OffsetRange,
    },
    /// Retention deleted `missing` before it was archived; consumption resumes at `resume_at`.
    RetentionGap {
        tp: &'a TopicPartition,
        missing: OffsetRange,
        resume_at: i64,
    },
    /// The last claim's data object is missing: its range is written again, exactly.
    RewritingClaim {
        tp: &'a TopicPartition,
        claim: &'a Claim,
    },
    /// The claimed range being re-written has no records left (compaction removed them): its object is
    /// written empty.
    RewriteEmpty {
        tp: &'a TopicPartition,
        end: i64,
    },
    ClaimCreated,
    /// Over budget, `files` open files wrote their buffers compressed into their spools (`make_room`).
    Shrunk {
        files: u64,
    },
    /// Over budget while another partition re-writes a claimed range (that file cannot roll early):
    /// this partition takes no records from `at` on until the budget has room, then is moved back.
    Parked {
        tp: &'a TopicPartition,
        at: i64,
    },
    /// A parked partition goes on from `at`: the budget has room (`schema`: false) or the schema it
    /// waited for was fetched.
    Unparked {
        tp: &'a TopicPartition,
        at: i64,
        schema: bool,
    },
    /// Another writer holds the claim for our file's chain position, for another range.
    ClaimLost {
        key: &'a str,
        ours: OffsetRange,
        theirs: &'a Claim,
    },
    /// The consumer lost its assignment: nothing more is claimed for this partition.
    AssignmentLost {
        tp: &'a TopicPartition,
    },
    /// An object is durable (created now, or found already there).
    ObjectUploaded(ObjectUploaded<'a>),
    /// A file was dropped without being uploaded.
    FileDropped {
        tp: &'a TopicPartition,
        why: DropReason,
    },
    /// A file's records that did not fit the value schema were produced to the dead-letter topic.
    DeadLettersSent {
        tp: &'a TopicPartition,
        key: &'a str,
        records: u64,
    },
    /// Producing them failed; retried (the file waits).
    DeadLettersFailed {
        tp: &'a TopicPartition,
        why: &'a str,
    },
    /// A schema was fetched from the registry: usable, or why not (its values are then misfits).
    SchemaFetched {
        id: u32,
        outcome: Result<(), &'a str>,
    },
    /// A partition's value at `at` names schema `id`, not fetched yet: the partition waits there.
    WaitingForSchema {
        tp: &'a TopicPartition,
        at: i64,
        id: u32,
    },
    /// A registry request failed transiently; retried (the partitions that need it wait).
    SchemaRegistryFailed {
        why: &'a str,
    },
    /// The brokers did not tell a topic's ID (asked again: the partition waits, it does not go on
    /// unchecked).
    TopicIdUnknown {
        tp: &'a TopicPartition,
        why: &'a str,
    },
    /// A partition is not archived any more until a restart, for `reason`; `why` says what to do.
    PartitionStopped {
        tp: &'a TopicPartition,
        reason: StopReason,
        why: &'a str,
    },
    /// The pipeline starts with this memory budget (the store answered at start-up).
    PipelineStarted {
        budget_bytes: u64,
    },
    /// A rebalance callback: partitions assigned or revoked.
    Rebalance,
    /// librdkafka's statistics told an assigned partition's log end.
    LogEnd {
        topic: &'a str,
        partition: i32,
        log_end: i64,
    },
    /// A record reached its partition's writer; a `duplicate` (a seek replayed it) is dropped.
    RecordReceived {
        duplicate: bool,
    },
    /// What is buffered, and how many partitions wait for a schema, every tick.
    Buffered {
        bytes: u64,
        /// Spools moved from memory to the spool directory so far.
        files_to_disk: u64,
        /// How long records were held back for room in the budget so far.
        held_back: Duration,
        open_files: usize,
        assigned: usize,
        waiting_for_schemas: usize,
    },
    /// Reading the log offsets of a partition stopped on an out-of-range position failed (asked again).
    OutOfRangeLookupFailed {
        tp: &'a TopicPartition,
        why: &'a str,
    },
    /// A recovery starts (`true`) or stops (`false`) waiting for its topic's ID.
    TopicIdWait {
        waiting: bool,
    },
    /// A look for complete time buckets of `topic` put this many `_SUCCESS` markers, or failed.
    MarkersLooked {
        topic: &'a str,
        outcome: Result<u64, &'a str>,
    },
    /// A snapshot of the committed offsets of `groups` consumer groups on `topic` was put into the archive
    /// (`Ok(true)`), was there already (another instance took it first: `Ok(false)`), or failed (`topic`
    /// is `-` when listing the groups, or reading one, failed).
    GroupOffsetsKept {
        topic: &'a str,
        groups: usize,
        outcome: Result<bool, &'a str>,
    },
    /// A commit of `topic`'s durable files to its table (`--table iceberg`) ended.
    TableCommitted {
        topic: &'a str,
        table: &'a str,
        outcome: Result<TableCommit<'a>, &'a str>,
    },
    /// The tables' last commit at a graceful stop did not end within `waited` and was cut short.
    TableLastCommitCut {
        waited: std::time::Duration,
    },
}

/// What a table commit did: the files and records it added (none: the table was up to date), in
/// which snapshot, after how many attempts that met a newer table, and where it left each partition's
/// position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableCommit<'a> {
    pub files: usize,
    pub records: u64,
    pub snapshot_id: Option<i64>,
    pub conflicts: u32,
    pub positions: &'a std::collections::BTreeMap<i32, i64>,
}

impl Metrics {
    /// Logs the event and moves its metrics.
    pub fn emit(&self, event: Event<'_>) {
        match event {
            Event::RecoveryFinished(e) => self.recovery_finished(e),
            Event::TopicSurveyed(e) => self.topic_surveyed(e),
            Event::ForeignKey { tp, key } => {
                warn!(%tp, key, "ignoring an object in the archive folder that is not ours")
            }
            Event::Overlap { tp, earlier, later } => warn!(%tp, %earlier, %later, "archive holds overlapping objects"),
            Event::RetentionGap { tp, missing, resume_at } => {
                self.retention_gaps.inc();
                error!(
                    %tp,
                    %missing,
                    resume_at,
                    "RETENTION GAP: offsets {missing} were deleted by Kafka retention before they were archived; \
                     resuming at {resume_at}"
                );
            }
            Event::RewritingClaim { tp, claim } => {
                self.claims_rewritten.inc();
                warn!(
                    %tp,
                    range = %claim.data(),
                    writer = claim.writer,
                    "the last claim's data object is missing (its writer stopped between claim and upload); \
                     re-writing exactly that range"
                );
            }
            Event::RewriteEmpty { tp, end } => warn!(
                %tp,
                end,
                "no records left of the claimed range being re-written (compaction removed them): writing its \
                 object empty, so the claim stays fulfilled"
            ),
            Event::ClaimCreated => self.claims_created.inc(),
            Event::Shrunk { files } => {
                self.shrinks.inc_by(files);
                debug!(files, "over budget: open files' buffers written compressed into their spools");
            }
            Event::Parked { tp, at } => {
                self.partitions_parked.inc();
                info!(%tp, at, "over the buffer budget while a claimed range is re-written: pausing this partition")
            }
            Event::Unparked { tp, at, schema: false } => {
                info!(%tp, at, "the buffer budget has room again: resuming this partition")
            }
            Event::Unparked { tp, at, schema: true } => {
                info!(%tp, at, "the schema this partition waited for was fetched: resuming it")
            }
            Event::ClaimLost { key, ours, theirs } => {
                self.claims_lost.inc();
                warn!(
                    key,
                    %ours,
                    theirs = %theirs.data(),
                    writer = theirs.writer,
                    "another writer claimed this start for another range; dropping our files and recovering again"
                );
            }
            Event::AssignmentLost { tp } => {
                warn!(%tp, "the consumer lost its assignment: not claiming; recovering again")
            }
            Event::ObjectUploaded(e) => self.object_uploaded(e),
            Event::FileDropped { tp, why } => {
                self.files_dropped.inc();
                match why {
                    DropReason::RevokeTimeout => {
                        warn!(%tp, "a file was dropped: {}; the next owner re-reads it", why.as_str())
                    }
                    _ => info!(%tp, "a file was dropped: {}; its records are read again", why.as_str()),
                }
            }
            Event::DeadLettersSent { tp, key, records } => {
                self.dead_letters.inc_by(records);
                info!(%tp, key, records, "records that did not fit the value schema produced to the dead-letter topic");
            }
            Event::DeadLettersFailed { tp, why } => {
                self.dead_letter_failures.inc();
                warn!(%tp, "{why}; retrying (the file is uploaded once they are produced)");
            }
            Event::SchemaFetched { id, outcome } => {
                self.schemas_fetched.inc();
                match outcome {
                    Ok(()) => info!(id, "schema fetched from the Schema Registry"),
                    Err(why) => warn!(id, "the values naming this schema ID cannot be decoded: {why}; they are kept raw (value_error says why)"),
                }
            }
            Event::WaitingForSchema { tp, at, id } => {
                self.schema_waits.inc();
                info!(%tp, at, id, "the value names a schema not fetched yet: this partition waits for it here")
            }
            Event::SchemaRegistryFailed { why } => {
                self.schema_registry_failures.inc();
                warn!("{why}; retrying (partitions whose values need the schema wait)");
            }
            Event::TopicIdUnknown { tp, why } => {
                self.topic_id_lookup_failures.inc();
                warn!(
                    %tp,
                    "the topic's ID is not known yet ({why}); the partition waits until it is (asking again), so that \
                     an archive of another incarnation of the topic is never continued"
                );
            }
            Event::PartitionStopped { tp, reason, why } => {
                self.partitions_stopped.inc();
                let partition = tp.partition().to_string();
                self.partition_stopped.with_label_values(&[tp.topic(), partition.as_str(), reason.as_str()]).set(1);
                error!(%tp, reason = reason.as_str(), "{why}");
            }
            Event::PipelineStarted { budget_bytes } => {
                self.buffer_budget_bytes.set(gauge_value(budget_bytes));
                self.store_up.set(1);
            }
            Event::Rebalance => self.rebalances.inc(),
            Event::LogEnd { topic, partition, log_end } => self.log_end(topic, partition, log_end),
            Event::RecordReceived { duplicate } => {
                self.records_received.inc();
                if duplicate {
                    self.duplicates_skipped.inc();
                }
            }
            Event::Buffered { bytes, files_to_disk, held_back, open_files, assigned, waiting_for_schemas } => {
                self.buffered_bytes.set(gauge_value(bytes));
                self.spool_files_to_disk.inc_by(files_to_disk.saturating_sub(self.spool_files_to_disk.get()));
                self.held_back_seconds.inc_by((held_back.as_secs_f64() - self.held_back_seconds.get()).max(0.0));
                self.open_files.set(gauge_value(open_files as u64));
                self.assigned_partitions.set(gauge_value(assigned as u64));
                self.partitions_waiting_for_schemas.set(gauge_value(waiting_for_schemas as u64));
            }
            Event::OutOfRangeLookupFailed { tp, why } => {
                self.out_of_range_lookup_failures.inc();
                warn!(
                    %tp,
                    "reading the log offsets of a partition stopped on an out-of-range position failed ({why}); \
                     trying again"
                );
            }
            Event::TopicIdWait { waiting: true } => self.topic_ids_waiting.inc(),
            Event::TopicIdWait { waiting: false } => self.topic_ids_waiting.dec(),
            Event::MarkersLooked { outcome: Ok(written), .. } => self.markers_written.inc_by(written),
            Event::MarkersLooked { topic, outcome: Err(why) } => {
                warn!("looking for complete time buckets of {topic} failed (tried again later): {why}")
            }
            Event::GroupOffsetsKept { topic, groups, outcome: Ok(created) } => {
                self.group_offset_snapshots.inc_by(u64::from(created));
                debug!(topic, groups, created, "kept the consumer groups' committed offsets in the archive");
            }
            Event::GroupOffsetsKept { topic, outcome: Err(why), .. } => {
                self.group_offset_snapshot_failures.inc();
                warn!(topic, "keeping the consumer groups' committed offsets failed (tried again next time): {why}")
            }
            Event::TableCommitted { topic, table, outcome } => self.table_committed(topic, table, outcome),
            Event::TableLastCommitCut { waited } => {
                self.table_commit_failures.inc();
                warn!(
                    waited_s = waited.as_secs(),
                    "the tables' last commit before stopping did not finish in time: the partitions' next owner \
                     commits their files"
                )
            }
        }
    }

    fn table_committed(&self, topic: &str, table: &str, outcome: Result<TableCommit<'_>, &str>) {
        match outcome {
            Ok(c) => {
                self.table_commit_conflicts.inc_by(u64::from(c.conflicts));
                for (partition, position) in c.positions {
                    self.table_position.with_label_values(&[topic, partition.to_string().as_str()]).set(*position);
                }
                if let Some(snapshot) = c.snapshot_id {
                    self.table_commits.inc();
                    self.table_files_committed.inc_by(c.files as u64);
                    info!(
                        topic,
                        table,
                        files = c.files,
                        records = c.records,
                        snapshot,
                        conflicts = c.conflicts,
                        "committed archived files to the table"
                    );
                } else if c.conflicts > 0 {
                    info!(
                        topic,
                        table,
                        conflicts = c.conflicts,
                        "the table moved while committing: another committer had added what this round planned; it added nothing"
                    );
                }
            }
            Err(why) => {
                self.table_commit_failures.inc();
                warn!(topic, table, "committing archived files to the table failed (tried again later): {why}")
            }
        }
    }

    fn object_uploaded(&self, e: ObjectUploaded<'_>) {
        match e.outcome {
            PutOutcome::Created => self.objects_uploaded.inc(),
            PutOutcome::AlreadyExists => self.objects_already_present.inc(),
        }
        self.objects_by_roll_reason.with_label_values(&[e.reason.as_str()]).inc();
        self.records_archived.inc_by(e.records);
        self.bytes_uploaded.inc_by(e.bytes);
        self.upload_seconds.observe(e.elapsed.as_secs_f64());
        self.archived_through(e.tp, e.range.end(), e.newest_record_ms);
        let partition = e.tp.partition().to_string();
        let labels = [e.tp.topic(), partition.as_str()];
        self.partition_records_archived.with_label_values(&labels).inc_by(e.records);
        self.partition_bytes_uploaded.with_label_values(&labels).inc_by(e.bytes);
        if e.outcome == PutOutcome::Created {
            self.partition_objects_uploaded.with_label_values(&labels).inc();
        }
        if let Some(newest) = e.newest_record_ms {
            self.archived_record_time.with_label_values(&labels).set(newest / 1000);
        }
        info!(
            key = e.key,
            records = e.records,
            bytes = e.bytes,
            row_groups = e.row_groups,
            ms = e.elapsed.as_millis() as u64,
            reason = e.reason.as_str(),
            outcome = ?e.outcome,
            "object uploaded"
        );
        if let Some(values) = e.values {
            self.value_misfits.inc_by(values.misfits);
            self.value_fields_ignored.inc_by(values.ignored_fields);
            if let Some((offset, why)) = &values.first_misfit {
                warn!(
                    key = e.key,
                    misfits = values.misfits,
                    first_offset = offset,
                    first_reason = why.as_str(),
                    "records whose value does not fit the value schema: kept whole in value_raw, reason in value_error"
                );
            }
        }
        if let Some(keys) = e.keys {
            self.key_misfits.inc_by(keys.misfits);
            if let Some((offset, why)) = &keys.first_misfit {
                warn!(
                    key = e.key,
                    misfits = keys.misfits,
                    first_offset = offset,
                    first_reason = why.as_str(),
                    "records whose key does not fit the key schema: kept whole in key_raw, reason in key_error"
                );
            }
        }
    }

    /// `tp` is not this instance's any more: its series go (a fleet that moves thousands of
    /// partitions around would otherwise keep a series for every partition it ever held).
    pub fn forget_partition(&self, tp: &TopicPartition) {
        let partition = tp.partition().to_string();
        let labels = [tp.topic(), partition.as_str()];
        for series in [
            &self.archived_offset,
            &self.log_end_offset,
            &self.unarchived_records,
            &self.table_position,
            &self.archived_record_time,
            &self.archive_lag_seconds,
        ] {
            let _ = series.remove_label_values(&labels);
        }
        for series in
            [&self.partition_records_archived, &self.partition_bytes_uploaded, &self.partition_objects_uploaded]
        {
            let _ = series.remove_label_values(&labels);
        }
        self.archived.lock().expect("archived partitions").remove(&(tp.topic().to_string(), tp.partition()));
        for reason in StopReason::ALL {
            let _ = self.partition_stopped.remove_label_values(&[tp.topic(), partition.as_str(), reason.as_str()]);
        }
    }

    /// An assigned partition's log end, and so what of it is not archived yet (once recovery or an
    /// upload set its archived offset), and for how long (once an upload told its newest record's time).
    fn log_end(&self, topic: &str, partition_number: i32, log_end: i64) {
        let partition = partition_number.to_string();
        let labels = [topic, partition.as_str()];
        self.log_end_offset.with_label_values(&labels).set(log_end);
        // Told only once known: before, the lag would read as the whole log.
        let known =
            self.archived.lock().expect("archived partitions").get(&(topic.to_string(), partition_number)).copied();
        let Some(Archived { offset, newest_ms }) = known else { return };
        let unarchived = (log_end - offset - 1).max(0);
        self.unarchived_records.with_label_values(&labels).set(unarchived);
        match (unarchived, newest_ms) {
            (0, _) => self.archive_lag_seconds.with_label_values(&labels).set(0),
            (_, Some(ms)) => {
                let lag = (crate::clock::wall_clock_ms() - ms).max(0) / 1000;
                self.archive_lag_seconds.with_label_values(&labels).set(lag);
            }
            // Records wait, and no upload of this instance told how old the archive's newest is: unknown.
            (_, None) => {
                let _ = self.archive_lag_seconds.remove_label_values(&labels);
            }
        }
    }

    /// The highest offset of `tp` whose object is durable, and the newest record time in it if told (a
    /// recovery does not tell it: the one an upload here told stays).
    fn archived_through(&self, tp: &TopicPartition, offset: i64, newest_ms: Option<i64>) {
        let partition = tp.partition().to_string();
        self.archived_offset.with_label_values(&[tp.topic(), partition.as_str()]).set(offset);
        let mut archived = self.archived.lock().expect("archived partitions");
        let entry = archived.entry((tp.topic().to_string(), tp.partition())).or_insert(Archived { offset, newest_ms });
        entry.offset = offset;
        entry.newest_ms = newest_ms.or(entry.newest_ms);
    }
}

/// A count as a gauge's value (gauges are signed).
fn gauge_value(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

mod recovery;
mod stop_reason;
#[cfg(test)]
mod tests;

//! What the archiver did and where it stands, as Prometheus metrics shared by its tasks: served at
//! `/metrics` (see `http`), summed up in a log line at exit, and read by `demo` and the tests. What
//! moves them, and what is logged with them, is in `events`.

use prometheus::{Counter, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry};

pub struct Metrics {
    pub registry: Registry,
    pub records_received: IntCounter,
    pub duplicates_skipped: IntCounter,
    pub records_archived: IntCounter,
    pub objects_uploaded: IntCounter,
    pub objects_already_present: IntCounter,
    pub bytes_uploaded: IntCounter,
    pub upload_retries: IntCounter,
    /// Spools (files being written or waiting for upload) moved from memory to the spool directory.
    pub spool_files_to_disk: IntCounter,
    /// Times an open file's buffers were written compressed into its spool for the budget.
    pub shrinks: IntCounter,
    /// Seconds records were held back because the budget had no room.
    pub held_back_seconds: Counter,
    pub list_retries: IntCounter,
    pub files_dropped: IntCounter,
    pub retention_gaps: IntCounter,
    /// Partitions stopped until an operator acts: the archive ahead of the log (topic re-created?), an
    /// unreadable last claim, an archive of another incarnation of the topic (or brokers that cannot
    /// tell), a seek that kept failing.
    pub partitions_stopped: IntCounter,
    /// Per partition stopped now, and why (`reason`): 1 until it is revoked or the instance restarts.
    pub partition_stopped: IntGaugeVec,
    /// Per partition held (their series go with it): records archived, bytes and objects uploaded.
    pub partition_records_archived: IntCounterVec,
    pub partition_bytes_uploaded: IntCounterVec,
    pub partition_objects_uploaded: IntCounterVec,
    pub rebalances: IntCounter,
    pub recoveries: IntCounter,
    pub claims_created: IntCounter,
    /// Claims another writer held for another range (this instance was a zombie, or raced one).
    pub claims_lost: IntCounter,
    /// Claimed ranges whose data object was missing at recovery, re-written.
    pub claims_rewritten: IntCounter,
    pub partitions_parked: IntCounter,
    pub recovery_list_requests: IntCounter,
    /// Keys listed by recoveries (two per partition when the commit hint is exact).
    pub recovery_objects_seen: IntCounter,
    pub upload_seconds: Histogram,
    pub recovery_seconds: Histogram,
    pub buffered_bytes: IntGauge,
    pub buffer_budget_bytes: IntGauge,
    pub open_files: IntGauge,
    pub assigned_partitions: IntGauge,
    pub recoveries_in_progress: IntGauge,
    /// Recoveries waiting for their topic's ID (the brokers did not tell it yet).
    pub topic_ids_waiting: IntGauge,
    pub topic_id_lookup_failures: IntCounter,
    /// Reads of the log offsets of a partition stopped on an out-of-range position that failed (retried).
    pub out_of_range_lookup_failures: IntCounter,
    /// 1 while the last request to the archive store succeeded, 0 while requests fail.
    pub store_up: IntGauge,
    /// Per partition: the highest offset whose object is durable.
    pub archived_offset: IntGaugeVec,
    /// Per partition: the log end offset, from the consumer's statistics.
    pub log_end_offset: IntGaugeVec,
    /// Per partition: records in the log not archived yet.
    pub unarchived_records: IntGaugeVec,
    /// The partitions whose archived offset is known (recovered here), with what their lags are told from
    /// (looking a series up creates it, at 0: only these are looked up).
    pub(crate) archived: std::sync::Mutex<std::collections::HashMap<(String, i32), Archived>>,
    /// Per partition: the newest record timestamp (s) of its last durable object.
    pub archived_record_time: IntGaugeVec,
    /// Per partition with records not archived yet: seconds since the newest record archived was stamped
    /// (0 when every record is archived).
    pub archive_lag_seconds: IntGaugeVec,
    /// Objects uploaded (or found there), by why their file rolled.
    pub objects_by_roll_reason: IntCounterVec,
    pub value_misfits: IntCounter,
    pub key_misfits: IntCounter,
    pub value_fields_ignored: IntCounter,
    pub dead_letters: IntCounter,
    pub dead_letter_failures: IntCounter,
    pub markers_written: IntCounter,
    pub group_offset_snapshots: IntCounter,
    pub group_offset_snapshot_failures: IntCounter,
    pub table_commits: IntCounter,
    pub table_commit_conflicts: IntCounter,
    pub table_commit_failures: IntCounter,
    pub table_files_committed: IntCounter,
    /// Per partition: the offset after the last file its topic's table holds, as this instance's last
    /// commit found or moved it (`archived_offset + 1` minus it is the table's lag).
    pub table_position: IntGaugeVec,
    /// Schemas fetched from the Schema Registry (each ID once per process).
    pub schemas_fetched: IntCounter,
    pub schema_registry_failures: IntCounter,
    pub schema_waits: IntCounter,
    /// Partitions waiting for a schema right now (`/readyz` is not ready while any is).
    pub partitions_waiting_for_schemas: IntGauge,
}

fn counter(registry: &Registry, name: &str, help: &str) -> IntCounter {
    let c = IntCounter::new(format!("ksa_{name}"), help).expect("valid metric");
    registry.register(Box::new(c.clone())).expect("registered once");
    c
}

fn seconds_counter(registry: &Registry, name: &str, help: &str) -> Counter {
    let c = Counter::new(format!("ksa_{name}"), help).expect("valid metric");
    registry.register(Box::new(c.clone())).expect("registered once");
    c
}

fn gauge(registry: &Registry, name: &str, help: &str) -> IntGauge {
    let g = IntGauge::new(format!("ksa_{name}"), help).expect("valid metric");
    registry.register(Box::new(g.clone())).expect("registered once");
    g
}

/// What a partition held here has archived: its lags are told from it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Archived {
    /// The highest offset whose object is durable.
    pub(crate) offset: i64,
    /// The newest record timestamp (ms) of its last durable object, once an upload here told it.
    pub(crate) newest_ms: Option<i64>,
}

fn partition_counter(registry: &Registry, name: &str, help: &str) -> IntCounterVec {
    let c = IntCounterVec::new(Opts::new(format!("ksa_{name}"), help), &["topic", "partition"]).expect("valid metric");
    registry.register(Box::new(c.clone())).expect("registered once");
    c
}

fn partition_gauge(registry: &Registry, name: &str, help: &str) -> IntGaugeVec {
    let g = IntGaugeVec::new(Opts::new(format!("ksa_{name}"), help), &["topic", "partition"]).expect("valid metric");
    registry.register(Box::new(g.clone())).expect("registered once");
    g
}

fn counter_by(registry: &Registry, name: &str, help: &str, label: &str) -> IntCounterVec {
    let c = IntCounterVec::new(Opts::new(format!("ksa_{name}"), help), &[label]).expect("valid metric");
    registry.register(Box::new(c.clone())).expect("registered once");
    c
}

fn histogram(registry: &Registry, name: &str, help: &str, buckets: Vec<f64>) -> Histogram {
    let h =
        Histogram::with_opts(HistogramOpts::new(format!("ksa_{name}"), help).buckets(buckets)).expect("valid metric");
    registry.register(Box::new(h.clone())).expect("registered once");
    h
}

impl Default for Metrics {
    fn default() -> Self {
        let r = Registry::new();
        let seconds = vec![0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];
        Self {
            records_received: counter(&r, "records_consumed_total", "Records consumed from Kafka."),
            duplicates_skipped: counter(
                &r,
                "duplicates_skipped_total",
                "Records consumed twice after a seek, skipped.",
            ),
            records_archived: counter(
                &r,
                "records_archived_total",
                "Records in objects uploaded (or found already there).",
            ),
            objects_uploaded: counter(&r, "objects_uploaded_total", "Objects created in the archive."),
            objects_already_present: counter(
                &r,
                "objects_already_present_total",
                "Uploads that found the same object there (412).",
            ),
            bytes_uploaded: counter(&r, "bytes_uploaded_total", "Bytes of objects uploaded."),
            partition_records_archived: partition_counter(
                &r,
                "partition_records_archived_total",
                "Records in objects uploaded (or found already there), per partition this instance holds.",
            ),
            partition_bytes_uploaded: partition_counter(
                &r,
                "partition_bytes_uploaded_total",
                "Bytes of objects uploaded, per partition this instance holds.",
            ),
            partition_objects_uploaded: partition_counter(
                &r,
                "partition_objects_uploaded_total",
                "Objects created in the archive, per partition this instance holds.",
            ),
            upload_retries: counter(
                &r,
                "upload_retries_total",
                "Claim and object uploads retried after a transient error.",
            ),
            spool_files_to_disk: counter(
                &r,
                "spool_files_to_disk_total",
                "Spools (files being written or waiting for upload) moved from memory to the spool directory: past \
                 --spool-memory-threshold, or the spools in memory would pass half of --max-buffer-bytes (the \
                 store is behind, or the budget small).",
            ),
            shrinks: counter(
                &r,
                "shrinks_total",
                "Times an open file wrote its buffered records compressed into its spool early (a Parquet row group, \
                 a JSON lines block) because --max-buffer-bytes was full: its records then wait at about their \
                 compressed size, rather than in a file rolled early.",
            ),
            held_back_seconds: seconds_counter(
                &r,
                "held_back_seconds_total",
                "Seconds the pipeline took no records because the files filled --max-buffer-bytes (or the spool \
                 directory --max-spool-bytes), whether or not records were waiting: fetching slows down meanwhile. \
                 Growing by about a second per second means uploads or the budget bound the rate, not Kafka or the \
                 encoder. (While a claimed range is re-written, other partitions are parked instead: not counted.)",
            ),
            list_retries: counter(
                &r,
                "list_retries_total",
                "Recovery listings and claim reads retried after a transient error.",
            ),
            files_dropped: counter(
                &r,
                "files_dropped_total",
                "Open files dropped (partition lost, revoke timeout, lost claim).",
            ),
            retention_gaps: counter(
                &r,
                "retention_gaps_total",
                "Ranges deleted by retention before they were archived.",
            ),
            partitions_stopped: counter(
                &r,
                "partitions_stopped_total",
                "Partitions stopped until an operator acts (archive ahead of the log, unreadable claim, another topic incarnation, a failed seek).",
            ),
            rebalances: counter(&r, "rebalances_total", "Partition assignments and revocations."),
            recoveries: counter(&r, "recoveries_total", "Partition positions recovered from the archive."),
            claims_created: counter(&r, "claims_created_total", "Claims created."),
            claims_lost: counter(&r, "claims_lost_total", "Claims another writer held for another range."),
            partitions_parked: counter(
                &r,
                "partitions_parked_total",
                "Times a partition stopped taking records (and was moved back later) to keep the budget while \
                 another re-wrote a claimed range.",
            ),
            claims_rewritten: counter(
                &r,
                "claims_rewritten_total",
                "Claimed ranges re-written because their object was missing.",
            ),
            recovery_list_requests: counter(&r, "recovery_list_requests_total", "List requests made by recoveries."),
            recovery_objects_seen: counter(&r, "recovery_keys_listed_total", "Keys listed by recoveries."),
            upload_seconds: histogram(
                &r,
                "upload_seconds",
                "Time to upload one object (claim included).",
                seconds.clone(),
            ),
            recovery_seconds: histogram(&r, "recovery_seconds", "Time to recover one partition's position.", seconds),
            buffered_bytes: gauge(&r, "buffered_bytes", "Memory held by open and sealed files."),
            buffer_budget_bytes: gauge(&r, "buffer_budget_bytes", "The memory budget (--max-buffer-bytes)."),
            open_files: gauge(&r, "open_files", "Files being written."),
            assigned_partitions: gauge(&r, "assigned_partitions", "Partitions assigned to this instance."),
            recoveries_in_progress: gauge(&r, "recoveries_in_progress", "Partitions being recovered right now."),
            topic_ids_waiting: gauge(
                &r,
                "topic_ids_waiting",
                "Recoveries waiting for the brokers to tell their topic's ID (KIP-516).",
            ),
            out_of_range_lookup_failures: counter(
                &r,
                "out_of_range_lookup_failures_total",
                "Reads of the log offsets of a partition stopped on an out-of-range position that failed (retried).",
            ),
            topic_id_lookup_failures: counter(
                &r,
                "topic_id_lookup_failures_total",
                "Times the brokers did not tell a topic's ID when a recovery asked (asked again).",
            ),
            store_up: gauge(&r, "store_up", "1 while the archive store answers, 0 while its requests fail."),
            partition_stopped: {
                let help = "1 for each partition this instance stopped (until an operator acts), by reason.";
                let g = IntGaugeVec::new(Opts::new("ksa_partition_stopped", help), &["topic", "partition", "reason"])
                    .expect("valid metric");
                r.register(Box::new(g.clone())).expect("registered once");
                g
            },
            archived_offset: partition_gauge(&r, "archived_offset", "Highest offset whose object is durable."),
            log_end_offset: partition_gauge(&r, "log_end_offset", "Log end offset, from the consumer's statistics."),
            archived: Default::default(),
            archived_record_time: partition_gauge(
                &r,
                "archived_record_timestamp_seconds",
                "The newest record timestamp in the partition's last durable object.",
            ),
            archive_lag_seconds: partition_gauge(
                &r,
                "archive_lag_seconds",
                "With records not archived yet: seconds since the newest archived record was stamped (0: all archived).",
            ),
            unarchived_records: partition_gauge(&r, "unarchived_records", "Records in the log not archived yet."),
            objects_by_roll_reason: counter_by(
                &r,
                "objects_by_roll_reason_total",
                "Objects uploaded (or found there), by why their file rolled: records, bytes, age, schedule, \
                 bucket, schema, budget, flush, rewrite, retention-gap.",
                "reason",
            ),
            value_misfits: counter(
                &r,
                "value_misfits_total",
                "Records in uploaded objects whose value did not fit --value-schema (kept in value_raw).",
            ),
            key_misfits: counter(
                &r,
                "key_misfits_total",
                "Records in uploaded objects whose key did not fit its schema (--key-format; every key is in key_raw).",
            ),
            value_fields_ignored: counter(
                &r,
                "value_fields_ignored_total",
                "JSON object keys --value-schema does not declare, in uploaded objects' values (ignored).",
            ),
            dead_letters: counter(
                &r,
                "dead_letters_total",
                "Records that did not fit --value-schema produced to --dlq-topic (a re-run may produce some again).",
            ),
            dead_letter_failures: counter(
                &r,
                "dead_letter_failures_total",
                "Attempts to produce a file's dead letters that failed (retried with backoff).",
            ),
            markers_written: counter(
                &r,
                "markers_written_total",
                "_SUCCESS markers this instance put into complete time buckets' folders.",
            ),
            group_offset_snapshots: counter(
                &r,
                "group_offset_snapshots_total",
                "Snapshots of consumer groups' committed offsets this instance put into the archive.",
            ),
            group_offset_snapshot_failures: counter(
                &r,
                "group_offset_snapshot_failures_total",
                "Snapshots of consumer groups' committed offsets that failed (taken again at the next interval).",
            ),
            table_commits: counter(&r, "table_commits_total", "Snapshots this instance committed to topics' tables."),
            table_commit_conflicts: counter(
                &r,
                "table_commit_conflicts_total",
                "Table commits that met a newer table (another committer's) and were planned again on it.",
            ),
            table_commit_failures: counter(
                &r,
                "table_commit_failures_total",
                "Table commits that failed (catalog or store errors; tried again at the next interval).",
            ),
            table_files_committed: counter(&r, "table_files_committed_total", "Archive objects added to topics' tables."),
            table_position: partition_gauge(
                &r,
                "table_position",
                "Offset after the last file the topic's table holds, as this instance's last commit left it.",
            ),
            schemas_fetched: counter(
                &r,
                "schemas_fetched_total",
                "Schemas fetched from the Schema Registry by ID (once each per process; unknown IDs included).",
            ),
            schema_registry_failures: counter(
                &r,
                "schema_registry_failures_total",
                "Schema Registry requests that failed transiently (retried with backoff; records wait).",
            ),
            partitions_waiting_for_schemas: gauge(
                &r,
                "partitions_waiting_for_schemas",
                "Partitions parked at a value naming a schema not fetched yet (the registry does not answer).",
            ),
            schema_waits: counter(
                &r,
                "schema_waits_total",
                "Times a partition parked at a value naming a schema not fetched yet (it reads on once it is).",
            ),
            registry: r,
        }
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.summary())
    }
}

impl Metrics {
    /// Ready to archive: no recovery under way, and the archive store answers.
    pub fn ready(&self) -> bool {
        self.recoveries_in_progress.get() == 0
            && self.store_up.get() == 1
            && self.partitions_waiting_for_schemas.get() == 0
    }

    /// One line for logs.
    pub fn summary(&self) -> String {
        format!(
            "records received {}, archived {}, duplicates skipped {}; objects uploaded {} ({} bytes), already present {}, \
             upload retries {}, files dropped {}, files spooled to disk {}, shrinks {}, held back for room {:.1} s; claims created {}, lost {}, re-written {}; recoveries {} ({} list requests); \
             retention gaps {}, partitions stopped {}",
            self.records_received.get(),
            self.records_archived.get(),
            self.duplicates_skipped.get(),
            self.objects_uploaded.get(),
            self.bytes_uploaded.get(),
            self.objects_already_present.get(),
            self.upload_retries.get(),
            self.files_dropped.get(),
            self.spool_files_to_disk.get(),
            self.shrinks.get(),
            self.held_back_seconds.get(),
            self.claims_created.get(),
            self.claims_lost.get(),
            self.claims_rewritten.get(),
            self.recoveries.get(),
            self.recovery_list_requests.get(),
            self.retention_gaps.get(),
            self.partitions_stopped.get(),
        )
    }
}

//! The settings' defaults, as named constants, and the lowest layer of the settings made of them.

use std::time::Duration;

use super::units::{ByteSize, HumanDuration};
use super::*;
use crate::store::{self, DEFAULT_ATTEMPT_TIMEOUT, DEFAULT_MAX_REQUESTS, DEFAULT_PART_CONCURRENCY, DEFAULT_PART_SIZE};

pub const DEFAULT_FORMAT: Format = Format::Parquet;
pub const DEFAULT_COMPRESSION: Compression = Compression::Zstd;
pub const DEFAULT_ROLL_RECORDS: u64 = 1_000_000;
pub const DEFAULT_ROLL_BYTES: ByteSize = ByteSize(64 << 20);
pub const DEFAULT_ROLL_AGE: HumanDuration = HumanDuration(Duration::from_secs(5 * 60));
pub const DEFAULT_START_FROM: StartFrom = StartFrom::Earliest;
/// Twice the default roll size: a file rolled by size ends near it (its footer and the rows still in
/// builders are estimated), and must not be copied to disk for a few bytes more.
pub const DEFAULT_SPOOL_MEMORY_THRESHOLD: ByteSize = ByteSize(128 << 20);
pub const DEFAULT_MAX_BUFFER_BYTES: ByteSize = ByteSize(256 << 20);
pub const DEFAULT_MAX_SPOOL_BYTES: ByteSize = ByteSize(4 << 30);
pub const DEFAULT_UPLOAD_PART_SIZE: ByteSize = ByteSize(DEFAULT_PART_SIZE);
pub const DEFAULT_UPLOAD_CONCURRENCY: usize = DEFAULT_PART_CONCURRENCY;
pub const DEFAULT_S3_MAX_REQUESTS: usize = DEFAULT_MAX_REQUESTS;
pub const DEFAULT_S3_ATTEMPT_TIMEOUT: HumanDuration = HumanDuration(DEFAULT_ATTEMPT_TIMEOUT);
pub const DEFAULT_REVOKE_TIMEOUT: HumanDuration = HumanDuration(Duration::from_secs(20));
pub const DEFAULT_ABORT_STALE_UPLOADS_AFTER: HumanDuration = HumanDuration(store::DEFAULT_ABORT_STALE_UPLOADS_AFTER);
pub const DEFAULT_CLAIMS: bool = true;
pub const DEFAULT_TIME_BUCKETS: TimeBuckets = TimeBuckets::None;
pub const DEFAULT_TIME_SOURCE: TimeSource = TimeSource::Record;
pub const DEFAULT_MARKER_INTERVAL: HumanDuration = HumanDuration(Duration::from_secs(5 * 60));
pub const DEFAULT_GROUP_OFFSETS_INTERVAL: HumanDuration = HumanDuration(Duration::from_secs(60));
pub const DEFAULT_VALUE_FORMAT: ValueFormatName = ValueFormatName::Raw;
pub const DEFAULT_KEY_FORMAT: KeyFormatName = KeyFormatName::Raw;
pub const DEFAULT_KEEP_RAW_VALUE: bool = false;

impl Settings {
    /// The defaults, as the lowest layer.
    pub fn defaults() -> Self {
        Settings {
            start_from: Some(DEFAULT_START_FROM),
            upload_part_size: Some(DEFAULT_UPLOAD_PART_SIZE),
            upload_concurrency: Some(DEFAULT_UPLOAD_CONCURRENCY),
            s3_max_requests: Some(DEFAULT_S3_MAX_REQUESTS),
            s3_attempt_timeout: Some(DEFAULT_S3_ATTEMPT_TIMEOUT),
            abort_stale_uploads_after: Some(DEFAULT_ABORT_STALE_UPLOADS_AFTER),
            format: Some(DEFAULT_FORMAT),
            compression: Some(DEFAULT_COMPRESSION),
            roll_records: Some(DEFAULT_ROLL_RECORDS),
            roll_bytes: Some(DEFAULT_ROLL_BYTES),
            roll_age: Some(DEFAULT_ROLL_AGE),
            spool_dir: Some(std::env::temp_dir().join("kafka-s3-archiver-spool")),
            spool_memory_threshold: Some(DEFAULT_SPOOL_MEMORY_THRESHOLD),
            max_buffer_bytes: Some(DEFAULT_MAX_BUFFER_BYTES),
            max_spool_bytes: Some(DEFAULT_MAX_SPOOL_BYTES),
            revoke_timeout: Some(DEFAULT_REVOKE_TIMEOUT),
            claims: Some(DEFAULT_CLAIMS),
            time_buckets: Some(DEFAULT_TIME_BUCKETS),
            time_source: Some(DEFAULT_TIME_SOURCE),
            marker_interval: Some(DEFAULT_MARKER_INTERVAL),
            group_offsets_interval: Some(DEFAULT_GROUP_OFFSETS_INTERVAL),
            table: Some(DEFAULT_TABLE),
            iceberg_catalog_name: Some(DEFAULT_ICEBERG_CATALOG_NAME.into()),
            iceberg_namespace: Some(DEFAULT_ICEBERG_NAMESPACE.into()),
            iceberg_scope: Some(DEFAULT_ICEBERG_SCOPE.into()),
            table_commit_interval: Some(DEFAULT_TABLE_COMMIT_INTERVAL),
            table_commit_files: Some(DEFAULT_TABLE_COMMIT_FILES),
            value_format: Some(DEFAULT_VALUE_FORMAT),
            key_format: Some(DEFAULT_KEY_FORMAT),
            keep_raw_value: Some(DEFAULT_KEEP_RAW_VALUE),
            ..Settings::default()
        }
    }
}

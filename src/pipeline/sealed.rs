//! A finished file on its way from the partition's writer to its uploader (and, for its dead letters,
//! to the dead-letter topic).

use std::sync::Arc;

use parquet::file::metadata::ParquetMetaData;

use crate::archive::claim::Claim;
use crate::archive::object_key::ObjectKey;
use crate::encode::roll::RollReason;
use crate::encode::spool::SealedSpool;
use crate::encode::ValueStats;

/// A file ready to upload.
pub(super) struct SealedFile {
    pub(super) key: ObjectKey,
    pub(super) records: u64,
    pub(super) spool: SealedSpool,
    /// A Parquet file's footer (row groups, column statistics).
    pub(super) footer: Option<Arc<ParquetMetaData>>,
    pub(super) reason: RollReason,
    /// The file's chain position (its claim's start).
    pub(super) chain_start: i64,
    /// The claim to create before uploading; `None` without claims, or when re-writing a claim.
    pub(super) claim: Option<Claim>,
    /// What its typed values came to (`--value-format json`).
    pub(super) values: Option<ValueStats>,
    /// What its typed keys came to (`--key-format`).
    pub(super) keys: Option<ValueStats>,
    /// The newest record timestamp in it (ms since the epoch), if its records have any.
    pub(super) newest_record_ms: Option<i64>,
}

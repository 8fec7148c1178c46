//! Encoders (records in, file bytes out) and decoders (file bytes in, records out) for the archive's
//! formats. Decoding is used by `demo`, tests and checks; it reads exactly what encoding writes.

mod jsonl;
mod parquet;
pub mod roll;
pub mod spool;

use std::fmt;
use std::sync::Arc;

use ::parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::archive::object_key::FileKind;
use crate::archive::partition::{OffsetRange, TopicPartition};
use crate::archive::record::Record;
use crate::encode::spool::{SealedSpool, Spool, SpoolData};
use crate::values::ValueFormat;

pub use self::jsonl::{write_line as json_line, JsonlEncoder};
pub use self::parquet::{LearnedColumns, ParquetEncoder};
pub use crate::values::columns::ValueStats;

#[derive(Debug, Error)]
pub enum EncodeError {
    #[error("writing the file failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("encoding Parquet failed: {0}")]
    Parquet(#[from] ::parquet::errors::ParquetError),
    #[error("building Arrow arrays failed: {0}")]
    Arrow(#[from] arrow_schema::ArrowError),
    #[error("JSON line {line} is not a valid archived record: {why}")]
    BadJsonLine { line: usize, why: String },
    #[error("Parquet file does not have the archive's schema: {0}")]
    BadParquet(String),
    #[error(transparent)]
    Columns(#[from] crate::values::columns::ColumnsError),
    #[error("format {format} does not support compression {compression}; {hint}")]
    UnsupportedCompression { format: Format, compression: Compression, hint: &'static str },
}

/// How a file is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    Parquet,
    Jsonl,
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::Parquet => "parquet",
            Format::Jsonl => "jsonl",
        })
    }
}

/// How a file is compressed (Parquet: per column chunk; JSON lines: the whole file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    None,
    Zstd,
    Gzip,
    Snappy,
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Compression::None => "none",
            Compression::Zstd => "zstd",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
        })
    }
}

/// A validated format + compression pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileSpec {
    format: Format,
    compression: Compression,
}

impl FileSpec {
    pub fn new(format: Format, compression: Compression) -> Result<Self, EncodeError> {
        if format == Format::Jsonl && compression == Compression::Snappy {
            return Err(EncodeError::UnsupportedCompression {
                format,
                compression,
                hint: "use zstd, gzip or none for JSON lines",
            });
        }
        Ok(Self { format, compression })
    }

    pub fn format(&self) -> Format {
        self.format
    }

    pub fn compression(&self) -> Compression {
        self.compression
    }

    /// The spec that writes files of `kind`: this one when it does, else the format and compression the
    /// kind names (Parquet keeps this spec's compression).
    pub fn writing(self, kind: FileKind) -> FileSpec {
        let (format, compression) = match kind {
            _ if self.kind() == kind => return self,
            FileKind::Parquet => (Format::Parquet, self.compression),
            FileKind::Jsonl => (Format::Jsonl, Compression::None),
            FileKind::JsonlGz => (Format::Jsonl, Compression::Gzip),
            FileKind::JsonlZst => (Format::Jsonl, Compression::Zstd),
        };
        FileSpec { format, compression }
    }

    pub fn kind(&self) -> FileKind {
        match (self.format, self.compression) {
            (Format::Parquet, _) => FileKind::Parquet,
            (Format::Jsonl, Compression::Gzip) => FileKind::JsonlGz,
            (Format::Jsonl, Compression::Zstd) => FileKind::JsonlZst,
            (Format::Jsonl, _) => FileKind::Jsonl,
        }
    }
}

/// What a sealed file says about itself (Parquet stores it in the footer's key-value metadata).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileMeta {
    pub tp: TopicPartition,
    pub range: OffsetRange,
    pub records: u64,
}

/// An open file of one partition.
pub enum FileEncoder {
    Parquet(Box<ParquetEncoder>),
    Jsonl(Box<JsonlEncoder>),
}

impl FileEncoder {
    /// An encoder of records whose keys are archived as they are.
    pub fn new(spec: FileSpec, values: &ValueFormat, spool: Spool) -> Result<Self, EncodeError> {
        Self::with_keys(spec, values, &ValueFormat::Raw, spool)
    }

    /// An encoder of records whose keys are archived as `keys` says (typed in Parquet; JSON lines keep
    /// them as they are).
    pub fn with_keys(
        spec: FileSpec,
        values: &ValueFormat,
        keys: &ValueFormat,
        spool: Spool,
    ) -> Result<Self, EncodeError> {
        Ok(match spec.format {
            Format::Parquet => {
                FileEncoder::Parquet(Box::new(ParquetEncoder::new(spec.compression, values, keys, spool)?))
            }
            Format::Jsonl => FileEncoder::Jsonl(Box::new(JsonlEncoder::new(spec.compression, values, spool)?)),
        })
    }

    /// Follows what the partition's last Parquet files taught about their columns (see
    /// [`LearnedColumns`]); called before the first record. JSON lines files are compressed whole, as
    /// their name says.
    pub fn follow(&mut self, learned: &LearnedColumns) {
        if let FileEncoder::Parquet(e) = self {
            e.follow(learned);
        }
    }

    /// Appends a record. With values typed by a schema inferred per file and `may_roll`, a record
    /// with fields the file's schema lacks is not taken (returns false): it belongs in a new file.
    pub fn append(&mut self, record: &Record, may_roll: bool) -> Result<bool, EncodeError> {
        match self {
            FileEncoder::Parquet(e) => e.append(record, may_roll),
            FileEncoder::Jsonl(e) => e.append(record).map(|()| true),
        }
    }

    /// Takes back a Parquet file's batch written behind the pipeline once it is written, without waiting
    /// for it; whether it did (its sizes are then measured again). A file waits for its batch when it
    /// needs its writer anyway; this counts it as written sooner.
    pub fn settle_written(&mut self) -> Result<bool, EncodeError> {
        match self {
            FileEncoder::Parquet(e) => e.settle_written(),
            FileEncoder::Jsonl(_) => Ok(false),
        }
    }

    /// About how large the file is so far, as it will be uploaded.
    pub fn encoded_size(&self) -> u64 {
        match self {
            FileEncoder::Parquet(e) => e.encoded_size(),
            FileEncoder::Jsonl(e) => e.encoded_size(),
        }
    }

    /// What the file holds as the memory budget counts it: its spool's bytes and its encoder's buffers.
    pub fn held(&self) -> u64 {
        match self {
            FileEncoder::Parquet(e) => e.held(),
            FileEncoder::Jsonl(e) => e.held(),
        }
    }

    /// Writes what the file holds in its buffers into its spool now, encoded and compressed (a Parquet row
    /// group, a JSON lines block): under memory pressure a file then keeps its records at about their
    /// compressed size rather than being rolled early into a small file. Returns whether anything was
    /// written (see `shrinkable`).
    pub fn shrink(&mut self) -> Result<bool, EncodeError> {
        match self {
            FileEncoder::Parquet(e) => e.shrink(),
            FileEncoder::Jsonl(e) => e.shrink(),
        }
    }

    /// The memory `shrink` would free (about: the compressed bytes go to the spool; a Parquet row group's
    /// metadata is taken off), or 0 when it would write nothing or free nothing: no records buffered,
    /// fewer than the new row group's metadata, a Parquet file that has its most row groups from
    /// shrinking (`MAX_SHRUNK_ROW_GROUPS`), or one with typed values or keys before its first batch
    /// (4,096 records or 4 MiB) is written, which makes its columns.
    pub fn shrinkable(&self) -> u64 {
        match self {
            FileEncoder::Parquet(e) => e.shrinkable(),
            FileEncoder::Jsonl(e) => e.shrinkable(),
        }
    }

    /// Memory held by encoder buffers, beyond what the spool itself holds.
    pub fn buffered_memory(&self) -> u64 {
        match self {
            FileEncoder::Parquet(e) => e.buffered_memory(),
            FileEncoder::Jsonl(e) => e.buffered_memory(),
        }
    }

    pub fn finish(self, meta: &FileMeta) -> Result<Finished, EncodeError> {
        match self {
            FileEncoder::Parquet(e) => {
                let (spool, [values, keys]) = e.finish(meta)?;
                let footer = Some(Arc::new(parquet_footer(spool.data())?));
                Ok(Finished { spool, footer, values, keys })
            }
            FileEncoder::Jsonl(e) => {
                let values = e.value_stats().cloned();
                Ok(Finished { spool: e.finish()?, footer: None, values, keys: None })
            }
        }
    }
}

/// The footer of a sealed Parquet file, read back from its end (a few KiB). `ArrowWriter::finish` would
/// return it, but the writer's bytes can then only be taken by `into_inner`, which writes the footer
/// again. A footer that cannot be read back means a file not worth uploading: the error stops the
/// pipeline, and a restart reads the records again.
fn parquet_footer(data: &SpoolData) -> Result<ParquetMetaData, EncodeError> {
    let reader = ParquetMetaDataReader::new();
    Ok(match data {
        SpoolData::Memory(chunks) => reader.parse_and_finish(chunks)?,
        SpoolData::Disk(path) => reader.parse_and_finish(&std::fs::File::open(path)?)?,
    })
}

/// A finished file: its bytes, and for Parquet its footer (row groups, column statistics), which the
/// stages after durability hand on (a table commit needs it).
#[derive(Debug)]
pub struct Finished {
    pub spool: SealedSpool,
    pub footer: Option<Arc<ParquetMetaData>>,
    /// What the file's typed values and keys came to, all of its batches taken.
    pub values: Option<ValueStats>,
    pub keys: Option<ValueStats>,
}

/// A record whose value did not fit the value schema, and why (for `--dlq-topic`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    pub record: Record,
    pub error: String,
}

/// The dead letters of a sealed file of `kind` with typed values, read a part at a time.
pub fn dead_letters(kind: FileKind, data: &SpoolData) -> Result<Vec<DeadLetter>, EncodeError> {
    if kind == FileKind::Parquet {
        return match data {
            SpoolData::Memory(chunks) => parquet::dead_letters(chunks.clone()),
            SpoolData::Disk(path) => parquet::dead_letters(std::fs::File::open(path)?),
        };
    }
    let reader: Box<dyn std::io::Read> = match data {
        SpoolData::Memory(chunks) => Box::new(chunks.reader(0)),
        SpoolData::Disk(path) => Box::new(std::fs::File::open(path)?),
    };
    match kind {
        FileKind::JsonlGz => jsonl::dead_letters(flate2::read::MultiGzDecoder::new(reader)),
        FileKind::JsonlZst => jsonl::dead_letters(zstd::stream::read::Decoder::new(reader)?),
        _ => jsonl::dead_letters(reader),
    }
}

/// Marks a text field that holds base64 (bytes that are not UTF-8): JSON lines' `*_encoding` fields and
/// Parquet's header `key_encoding`.
const BASE64: &str = "base64";

/// A header name as a text field keeps it: itself when it is UTF-8, else its base64, marked `BASE64`.
fn header_name_text(name: &[u8]) -> (std::borrow::Cow<'_, str>, Option<&'static str>) {
    use base64::Engine;
    match std::str::from_utf8(name) {
        Ok(text) => (text.into(), None),
        Err(_) => (base64::engine::general_purpose::STANDARD.encode(name).into(), Some(BASE64)),
    }
}

/// A header name back from its text field and encoding marker (`header_name_text`).
fn header_name_from_text(text: &str, encoding: Option<&str>) -> Result<Vec<u8>, String> {
    use base64::Engine;
    match encoding {
        None => Ok(text.as_bytes().to_vec()),
        Some(BASE64) => base64::engine::general_purpose::STANDARD.decode(text).map_err(|e| format!("bad base64: {e}")),
        Some(other) => Err(format!("unknown encoding {other:?}")),
    }
}

/// A whole archived file's records, and what its typed values came to.
#[derive(Debug, Default)]
pub struct Decoded {
    pub records: Vec<Record>,
    /// Records whose value did not fit the schema when archived (kept raw).
    pub misfits: u64,
    /// Values re-encoded as JSON from their typed columns (archived without `--keep-raw-value`): the
    /// same data, but not necessarily the bytes produced.
    pub reencoded: u64,
}

/// Decodes a whole archived file.
pub fn decode(kind: FileKind, data: bytes::Bytes) -> Result<Decoded, EncodeError> {
    let records = |(records, misfits)| Ok(Decoded { records, misfits, reencoded: 0 });
    match kind {
        FileKind::Parquet => parquet::decode(data),
        FileKind::Jsonl => records(jsonl::decode(&data[..])?),
        FileKind::JsonlGz => records(jsonl::decode(flate2::read::MultiGzDecoder::new(&data[..]))?),
        FileKind::JsonlZst => records(jsonl::decode(zstd::stream::read::Decoder::new(&data[..])?)?),
    }
}

#[cfg(test)]
mod tests;

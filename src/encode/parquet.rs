//! Parquet: one row per record. Columns: `offset` int64, `timestamp` timestamp(ms, UTC), `timestamp_type`
//! utf8, `key` and `value` binary (nullable), `headers` list<struct<key: utf8, value: binary>>.
//! Topic, partition, start/end offset and record count go in the footer's key-value metadata.
//! With typed values (`--value-format json`, ...) `value` is a struct and `value_raw` (binary) and
//! `value_error` (utf8) follow `headers`; with typed keys (`--key-format`) `key` is a struct and
//! `key_raw` (every key's bytes) and `key_error` come last.

use std::sync::{Arc, LazyLock};

use arrow_array::cast::AsArray;
use arrow_array::types::{Int64Type, TimestampMillisecondType};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ProjectionMask;
use parquet::basic::{Compression as PqCompression, GzipLevel, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::file::reader::ChunkReader;
use parquet::schema::types::ColumnPath;

use super::{header_name_from_text, Compression, DeadLetter, Decoded, EncodeError, FileMeta};
use crate::archive::record::{Header, Record, TimestampKind};
use crate::encode::spool::{SealedSpool, Spool};
use crate::values::columns::{ValueStats, VALUE_ERROR, VALUE_RAW};
use crate::values::{ValueFormat, VALUE_FIELD};

mod behind;
mod builders;
mod dictionary;
mod given_back;
mod incompressible;
mod learned;
mod parallel;
mod row_groups;

use behind::{Behind, Counted};
use builders::Builders;
pub use learned::LearnedColumns;
use parallel::ColumnsWriter;
use row_groups::row_group_metadata;
pub(super) use row_groups::{MAX_SHRUNK_ROW_GROUPS, ROW_GROUP_METADATA_PER_COLUMN};

/// Rows buffered in Arrow builders before they are handed to the Parquet writer (and, inferring a
/// value schema, the rows it is inferred from).
pub(super) const BATCH_ROWS: usize = 4096;
/// Payload bytes buffered in Arrow builders before they are handed to the Parquet writer.
const BATCH_BYTES: u64 = 4 << 20;
/// How much memory Arrow builders may hold per byte appended (their buffers double as they grow).
const BUILDER_GROWTH: u64 = 2;
/// How often (in rows) the typed columns' allocation is measured for the memory budget (and at each
/// power of two before: a file's first batch grows from nothing): a batch's growth is counted within
/// this many rows of it, at a cost per row too small to see.
const MEASURE_DECODED_EVERY: usize = 64;
/// Row groups are flushed to the spool at this estimated size, bounding the writer's memory.
const ROW_GROUP_BYTES: usize = 16 << 20;

/// The footer key counting a typed file's misfits (records kept raw).
pub const VALUE_MISFITS_KEY: &str = "kafka.value_misfits";
/// The footer key of the Schema Registry IDs a file's typed values were written with (`1,7`).
pub const SCHEMA_IDS_KEY: &str = "kafka.schema_ids";

/// The footer metadata keys, in the order written.
const PARQUET_METADATA_KEYS: [&str; 5] =
    ["kafka.topic", "kafka.partition", "kafka.start_offset", "kafka.end_offset", "kafka.record_count"];

/// A header's fields: `key` is its name as text (base64 when the name is not UTF-8, `key_encoding`
/// then saying `base64`; files written before names were kept whole have no `key_encoding`).
fn header_fields() -> Fields {
    Fields::from(vec![
        Field::new("key", DataType::Utf8, false),
        Field::new("value", DataType::Binary, true),
        Field::new("key_encoding", DataType::Utf8, true),
    ])
}

fn header_item() -> Arc<Field> {
    Arc::new(Field::new("item", DataType::Struct(header_fields()), false))
}

/// The `key` and `value` columns' places in [`SCHEMA`].
const KEY_COLUMN: usize = 3;
const VALUE_COLUMN: usize = 4;
/// A typed key's columns (see `ValueColumns::fields`, whose `value` columns they are named for).
pub const KEY_RAW: &str = "key_raw";
pub const KEY_ERROR: &str = "key_error";
/// Footer keys of a file of typed keys: its key misfits, and the Schema Registry IDs its keys name.
pub const KEY_MISFITS_KEY: &str = "kafka.key_misfits";
pub const KEY_SCHEMA_IDS_KEY: &str = "kafka.key_schema_ids";

/// The Parquet column of the headers' values.
const HEADER_VALUE_PATH: [&str; 4] = ["headers", "list", "item", "value"];

static SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        Field::new("offset", DataType::Int64, false),
        Field::new("timestamp", DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())), true),
        Field::new("timestamp_type", DataType::Utf8, false),
        Field::new("key", DataType::Binary, true),
        Field::new("value", DataType::Binary, true),
        Field::new("headers", DataType::List(header_item()), false),
    ]))
});

pub struct ParquetEncoder {
    /// Created with the first batch (whose schema may be inferred); until then, what it needs.
    writer: Option<Writer>,
    props: WriterProperties,
    builders: Builders,
    /// The writer's sizes, measured when it took a batch or wrote a row group (they change only then),
    /// so the per-record size checks stay O(1).
    measured: Measured,
    /// The records' bytes of the batches the writer has taken (a batch behind, once waited for).
    taken_bytes: u64,
}

/// Where a batch is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Then {
    /// On an encoding thread, the pipeline going on.
    Behind,
    /// Here, now.
    Wait,
}

/// The file's Parquet writer, or what it is made of, or the batch it is writing behind.
enum Writer {
    /// Before the first batch: its spool.
    Waiting(Spool),
    Ready(Box<ColumnsWriter<Spool>>),
    /// Writing a batch on an encoding thread (see `behind`).
    Behind(Behind),
}

/// The writer's sizes when last measured.
#[derive(Debug, Default)]
struct Measured {
    /// Its in-progress row group's estimated size and memory.
    in_progress: u64,
    memory: u64,
    in_progress_rows: usize,
    /// The bytes written to the spool.
    written: u64,
    row_groups: usize,
    /// What the row groups written so far keep in memory (`ROW_GROUP_METADATA_PER_COLUMN`).
    row_group_metadata: u64,
}

impl ParquetEncoder {
    /// An encoder of records whose values and keys are archived as `values` and `keys` say.
    pub fn new(
        compression: Compression,
        values: &ValueFormat,
        keys: &ValueFormat,
        spool: Spool,
    ) -> Result<Self, EncodeError> {
        let compression = match compression {
            Compression::None => PqCompression::UNCOMPRESSED,
            Compression::Zstd => PqCompression::ZSTD(ZstdLevel::default()),
            Compression::Gzip => PqCompression::GZIP(GzipLevel::default()),
            Compression::Snappy => PqCompression::SNAPPY,
        };
        let props = WriterProperties::builder()
            .set_compression(compression)
            .set_max_row_group_bytes(Some(ROW_GROUP_BYTES))
            // Offsets are unique and values mostly distinct (header values too: trace IDs), a dictionary
            // of them only costs.
            .set_column_dictionary_enabled(ColumnPath::from("offset"), false)
            .set_column_dictionary_enabled(ColumnPath::from("value"), false)
            .set_column_dictionary_enabled(ColumnPath::from("value_raw"), false)
            .set_column_dictionary_enabled(ColumnPath::from(HEADER_VALUE_PATH.map(String::from).to_vec()), false)
            .set_created_by(format!("kafka-s3-archiver {}", env!("CARGO_PKG_VERSION")))
            .build();
        let builders = Builders::new(values, keys);
        let writer = Some(Writer::Waiting(spool));
        Ok(Self { writer, props, builders, measured: Measured::default(), taken_bytes: 0 })
    }

    /// Follows what the partition's last files taught ([`LearnedColumns`]): the columns not worth
    /// compressing are left uncompressed, those a dictionary does not pay for written without one.
    /// Called before the first record.
    pub fn follow(&mut self, learned: &LearnedColumns) {
        debug_assert!(
            matches!(self.writer, Some(Writer::Waiting(_))),
            "the file's columns are set before it is written"
        );
        let mut props = self.props.clone().into_builder();
        for column in learned.incompressible.plain() {
            props = props.set_column_compression(column.clone(), PqCompression::UNCOMPRESSED);
        }
        for column in learned.dictionaries.without() {
            props = props.set_column_dictionary_enabled(column.clone(), false);
        }
        self.props = props.build();
    }

    /// Appends a record; or returns false, taking nothing, for a record with fields the file's
    /// inferred schema lacks when `may_roll` (it belongs in a new file).
    pub fn append(&mut self, record: &Record, may_roll: bool) -> Result<bool, EncodeError> {
        if !self.builders.push(record, may_roll) {
            return Ok(false);
        }
        if self.builders.rows >= BATCH_ROWS || self.builders.bytes >= BATCH_BYTES {
            self.write_buffered(Then::Behind)?;
            self.builders.make_room();
        }
        Ok(true)
    }

    /// Writes the buffered rows, once the file's batch before them is written (and the file re-written,
    /// when the values' schema widened): on an encoding thread (see `behind`), or here when the file
    /// waits for them anyway (a shrink, the seal: not queued behind other files' batches).
    fn write_buffered(&mut self, then: Then) -> Result<(), EncodeError> {
        if self.builders.rows == 0 {
            return Ok(());
        }
        let widened = self.builders.changed_schema();
        self.settle()?;
        if let Some(schema) = widened {
            self.rewrite(schema)?;
            self.measure_writer();
        }
        let (raw, memory) = (self.builders.bytes, self.builders.counted() + self.builders.decoded);
        let batch = self.builders.take_batch()?;
        let mut writer = match self.writer.take() {
            Some(Writer::Ready(writer)) => writer,
            Some(Writer::Waiting(spool)) => {
                Box::new(ColumnsWriter::try_new(spool, batch.schema(), self.props.clone())?)
            }
            Some(Writer::Behind(_)) | None => unreachable!("settled above"),
        };
        match then {
            Then::Behind => {
                let counted = Counted { raw, bytes: self.at_ratio(raw), memory };
                self.writer = Some(Writer::Behind(Behind::write(writer, batch, counted)));
            }
            Then::Wait => {
                writer.write(&batch)?;
                self.writer = Some(Writer::Ready(writer));
                self.taken_bytes += raw;
                self.measure_writer();
            }
        }
        Ok(())
    }

    /// `raw` records' bytes at what the file's records so far came to as the writer counts them.
    fn at_ratio(&self, raw: u64) -> u64 {
        at_ratio(raw, self.measured.written + self.measured.in_progress, self.taken_bytes)
    }

    /// Waits for the batch written behind, if one is, and measures the writer.
    fn settle(&mut self) -> Result<(), EncodeError> {
        if let Some(Writer::Behind(_)) = self.writer {
            let Some(Writer::Behind(behind)) = self.writer.take() else { unreachable!("matched above") };
            let raw = behind.counted.raw;
            self.writer = Some(Writer::Ready(behind.wait()?));
            self.taken_bytes += raw;
            self.measure_writer();
        }
        Ok(())
    }

    /// Takes the writer back if the batch written behind is written by now, without waiting (the file's
    /// sizes are then measured again); whether it did.
    pub fn settle_written(&mut self) -> Result<bool, EncodeError> {
        let written = match &mut self.writer {
            Some(Writer::Behind(behind)) => behind.written(),
            _ => false,
        };
        if written {
            self.settle()?;
        }
        Ok(written)
    }

    /// What the batch written behind counts for, until it is done.
    fn behind(&self) -> Counted {
        match &self.writer {
            Some(Writer::Behind(behind)) => behind.counted,
            _ => Counted::default(),
        }
    }

    /// Measures the writer after it took a batch or wrote a row group (its sizes change only then).
    fn measure_writer(&mut self) {
        let Some(Writer::Ready(writer)) = &self.writer else { return };
        let columns: usize = writer.flushed_row_groups().iter().map(|g| g.columns().len()).sum();
        self.measured = Measured {
            in_progress: writer.in_progress_size() as u64,
            memory: writer.memory_size() as u64,
            in_progress_rows: writer.in_progress_rows(),
            written: writer.inner().len(),
            row_groups: writer.flushed_row_groups().len(),
            row_group_metadata: columns as u64 * ROW_GROUP_METADATA_PER_COLUMN,
        };
    }

    /// Re-writes the rows written so far under `schema`, whose value or key column widened (a newer
    /// version of their schema that holds the old): each batch read back, its values and keys converted
    /// by their columns, into a new spool. Once per such version a file takes.
    fn rewrite(&mut self, schema: SchemaRef) -> Result<(), EncodeError> {
        let Some(Writer::Ready(old)) = self.writer.take_if(|w| matches!(w, Writer::Ready(_))) else { return Ok(()) };
        let fresh = old.inner().sibling();
        let written = old.into_inner()?.seal()?;
        let batches = ParquetRecordBatchReaderBuilder::try_new(written.reader()?)?.build()?;
        let mut writer = ColumnsWriter::try_new(fresh, schema.clone(), self.props.clone())?;
        let typed = [
            (&self.builders.value, [VALUE_FIELD, VALUE_RAW, VALUE_ERROR]),
            (&self.builders.key, ["key", KEY_RAW, KEY_ERROR]),
        ];
        for batch in batches {
            let batch = batch?;
            let mut columns = batch.columns().to_vec();
            for (column, names) in typed.iter().filter_map(|(c, names)| Some((c.typed()?, names))) {
                let mut at = [0; 3];
                for (i, name) in at.iter_mut().zip(names) {
                    *i = batch.schema().index_of(name)?;
                }
                let rewritten = column.rewrite(at.map(|i| columns[i].clone()))?;
                for (i, column) in at.into_iter().zip(rewritten) {
                    columns[i] = column;
                }
            }
            writer.write(&RecordBatch::try_new(schema.clone(), columns)?)?;
        }
        self.writer = Some(Writer::Ready(Box::new(writer)));
        Ok(())
    }

    /// See [`super::FileEncoder::shrinkable`]: the buffers, less the metadata of the row group written;
    /// or, with no rows to write, the room a batch left the value column.
    pub fn shrinkable(&self) -> u64 {
        self.writable().max(self.builders.spare_room())
    }

    /// The buffers a row group would take, less its metadata, or 0 (see `shrinkable`).
    fn writable(&self) -> u64 {
        let behind = matches!(self.writer, Some(Writer::Behind(_)));
        let buffered = self.builders.rows > 0 || behind || self.measured.in_progress_rows > 0;
        let room = self.measured.row_groups < MAX_SHRUNK_ROW_GROUPS;
        let Some(schema) = self.builders.schema.as_ref().filter(|_| room && buffered) else {
            return 0;
        };
        self.buffers().saturating_sub(row_group_metadata(schema.fields()))
    }

    /// What the file holds, as the budget counts it: its bytes written and its buffers.
    pub fn held(&self) -> u64 {
        self.written() + self.buffered_memory()
    }

    /// The bytes written to the spool so far.
    fn written(&self) -> u64 {
        self.measured.written
    }

    /// See [`super::FileEncoder::shrink`].
    pub fn shrink(&mut self) -> Result<bool, EncodeError> {
        if self.writable() == 0 {
            let spare = self.builders.spare_room() > 0;
            self.builders.give_back_room();
            return Ok(spare);
        }
        self.write_buffered(Then::Wait)?;
        self.builders.give_back_room();
        self.settle()?;
        if let Some(Writer::Ready(writer)) = &mut self.writer {
            writer.flush()?;
        }
        self.measure_writer();
        Ok(true)
    }

    /// The bytes written, in progress and buffered (a batch written behind among them, estimated at the
    /// file's ratio so far until the file takes it back), and the written row groups' metadata (to come
    /// in the footer, and kept in memory until then).
    pub fn encoded_size(&self) -> u64 {
        let m = &self.measured;
        self.written() + m.in_progress + self.behind().bytes + self.builders.bytes + m.row_group_metadata
    }

    /// The writer's memory, and the Arrow builders' at their bound: their buffers grow by doubling, so
    /// they hold up to twice the bytes appended (measured with 1,000 open files of mixed-size records:
    /// 1.9–2.3 × the payload), the raw value column at its room if more (`Builders::counted`). Counting
    /// less let 1,000 partitions overrun the budget by as much. Typed
    /// values' decoded columns come on top, as allocated: they may take far more than the values' bytes;
    /// and the written row groups' metadata. A batch written behind counts as it did in the builders
    /// until the file waits for it.
    pub fn buffered_memory(&self) -> u64 {
        self.buffers() + self.measured.row_group_metadata
    }

    /// The writer's and the builders' memory (what a shrink writes out).
    fn buffers(&self) -> u64 {
        self.measured.memory + self.behind().memory + self.builders.counted() + self.builders.decoded
    }

    /// The sealed file, and what its typed values and keys came to (all of its batches taken).
    pub fn finish(mut self, meta: &FileMeta) -> Result<(SealedSpool, [Option<ValueStats>; 2]), EncodeError> {
        self.write_buffered(Then::Wait)?;
        self.settle()?;
        let Some(Writer::Ready(mut writer)) = self.writer.take() else {
            return Err(EncodeError::BadParquet("a file without records has no schema".into()));
        };
        let values = [
            meta.tp.topic().to_string(),
            meta.tp.partition().to_string(),
            meta.range.start().to_string(),
            meta.range.end().to_string(),
            meta.records.to_string(),
        ];
        for (k, v) in PARQUET_METADATA_KEYS.iter().zip(values) {
            writer.append_key_value_metadata(KeyValue::new(k.to_string(), v));
        }
        if let Some(stats) = self.builders.value_stats() {
            writer.append_key_value_metadata(KeyValue::new(VALUE_MISFITS_KEY.into(), stats.misfits.to_string()));
            if !stats.schema_ids.is_empty() {
                let ids: Vec<String> = stats.schema_ids.iter().map(u32::to_string).collect();
                writer.append_key_value_metadata(KeyValue::new(SCHEMA_IDS_KEY.into(), ids.join(",")));
            }
            for (key, value) in stats.value_schema.iter().flat_map(given_back::footer) {
                writer.append_key_value_metadata(KeyValue::new(key.into(), value));
            }
        }
        if let Some(stats) = self.builders.key_stats() {
            writer.append_key_value_metadata(KeyValue::new(KEY_MISFITS_KEY.into(), stats.misfits.to_string()));
            let ids: Vec<String> = stats.schema_ids.iter().map(u32::to_string).collect();
            writer.append_key_value_metadata(KeyValue::new(KEY_SCHEMA_IDS_KEY.into(), ids.join(",")));
        }
        let stats = [self.builders.value_stats().cloned(), self.builders.key_stats().cloned()];
        Ok((writer.into_inner()?.seal()?, stats))
    }
}

/// `raw` records' bytes at the ratio `taken` records' bytes came to, `encoded`; at most `raw` (a file's
/// first rows written alone carry its columns' fixed costs), and `raw` before any were taken.
pub(super) fn at_ratio(raw: u64, encoded: u64, taken: u64) -> u64 {
    if taken == 0 {
        return raw;
    }
    let estimated = u128::from(raw) * u128::from(encoded) / u128::from(taken);
    u64::try_from(estimated).map_or(raw, |estimated| estimated.min(raw))
}

pub(super) fn column<'a>(batch: &'a RecordBatch, name: &str) -> Result<&'a ArrayRef, EncodeError> {
    batch.column_by_name(name).ok_or_else(|| EncodeError::BadParquet(format!("column {name:?} is missing")))
}

pub(super) fn binary_at(a: &arrow_array::BinaryArray, i: usize) -> Option<Vec<u8>> {
    (!a.is_null(i)).then(|| a.value(i).to_vec())
}

pub fn decode(data: bytes::Bytes) -> Result<Decoded, EncodeError> {
    let builder = ParquetRecordBatchReaderBuilder::try_new(data)?;
    let given = given_back::Given::from_footer(builder.metadata().file_metadata().key_value_metadata())?;
    let mut out = Decoded::default();
    for batch in builder.build()? {
        let batch = batch?;
        let values = given_back::values_of(&batch, given.as_ref(), &mut out)?;
        push_records(&batch, values, &mut out.records)?;
    }
    Ok(out)
}

/// The records of a typed file whose value did not fit, with the reason; read without the typed
/// `value` column.
pub fn dead_letters<R: ChunkReader + 'static>(file: R) -> Result<Vec<DeadLetter>, EncodeError> {
    let builder = ParquetRecordBatchReaderBuilder::try_new(file)?;
    let fields = builder.schema().fields().clone();
    // The typed value and key are not read: the raw columns hold what is produced.
    let typed_key = fields.iter().any(|f| f.name() == KEY_RAW);
    let roots =
        (0..fields.len()).filter(|&i| fields[i].name() != VALUE_FIELD && !(typed_key && fields[i].name() == "key"));
    let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
    let mut out = Vec::new();
    for batch in builder.with_projection(mask).build()? {
        let batch = batch?;
        let bad = |what: &str| EncodeError::BadParquet(format!("column {what} has the wrong type"));
        let raw = column(&batch, VALUE_RAW)?.as_binary_opt::<i32>().ok_or_else(|| bad(VALUE_RAW))?;
        let error = column(&batch, VALUE_ERROR)?.as_string_opt::<i32>().ok_or_else(|| bad(VALUE_ERROR))?;
        let mut records = Vec::with_capacity(batch.num_rows());
        push_records(&batch, (0..raw.len()).map(|i| binary_at(raw, i)).collect(), &mut records)?;
        for (i, record) in records.into_iter().enumerate() {
            if !error.is_null(i) {
                out.push(DeadLetter { record, error: error.value(i).to_string() });
            }
        }
    }
    Ok(out)
}

/// A batch's records, with their values given.
fn push_records(batch: &RecordBatch, values: Vec<Option<Vec<u8>>>, out: &mut Vec<Record>) -> Result<(), EncodeError> {
    let bad = |what: &str| EncodeError::BadParquet(format!("column {what} has the wrong type"));
    let offset = column(batch, "offset")?.as_primitive_opt::<Int64Type>().ok_or_else(|| bad("offset"))?;
    let ts =
        column(batch, "timestamp")?.as_primitive_opt::<TimestampMillisecondType>().ok_or_else(|| bad("timestamp"))?;
    let ts_type = column(batch, "timestamp_type")?.as_string_opt::<i32>().ok_or_else(|| bad("timestamp_type"))?;
    // Typed keys keep every key's bytes in `key_raw`.
    let key = batch.column_by_name(KEY_RAW).map_or_else(|| column(batch, "key"), Ok)?;
    let key = key.as_binary_opt::<i32>().ok_or_else(|| bad("key"))?;
    let headers = column(batch, "headers")?.as_list_opt::<i32>().ok_or_else(|| bad("headers"))?;
    for (i, value) in values.into_iter().enumerate() {
        let kind = TimestampKind::parse(ts_type.value(i))
            .ok_or_else(|| EncodeError::BadParquet(format!("unknown timestamp_type {:?}", ts_type.value(i))))?;
        let entries = headers.value(i);
        let entries = entries.as_struct_opt().ok_or_else(|| bad("headers.item"))?;
        let hk = entries.column(0).as_string_opt::<i32>().ok_or_else(|| bad("headers.key"))?;
        let hv = entries.column(1).as_binary_opt::<i32>().ok_or_else(|| bad("headers.value"))?;
        let encoding = match entries.column_by_name("key_encoding") {
            Some(c) => Some(c.as_string_opt::<i32>().ok_or_else(|| bad("headers.key_encoding"))?),
            None => None,
        };
        let name = |j: usize| {
            let encoding = encoding.filter(|e| !e.is_null(j)).map(|e| e.value(j));
            header_name_from_text(hk.value(j), encoding)
                .map_err(|why| EncodeError::BadParquet(format!("header key: {why}")))
        };
        out.push(Record {
            offset: offset.value(i),
            timestamp_ms: (!ts.is_null(i)).then(|| ts.value(i)),
            timestamp_kind: kind,
            key: binary_at(key, i),
            value,
            headers: (0..entries.len())
                .map(|j| Ok(Header { key: name(j)?, value: binary_at(hv, j) }))
                .collect::<Result<_, EncodeError>>()?,
        });
    }
    Ok(())
}

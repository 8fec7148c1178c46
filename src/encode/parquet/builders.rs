//! The Arrow builders a Parquet file's next batch is appended to, one per column (the typed value and
//! key columns are the values seam's, `ValueColumns`), and the batch taken from them.

use std::sync::Arc;

use arrow_array::builder::{
    BinaryBuilder, Int64Builder, ListBuilder, StringBuilder, StructBuilder, TimestampMillisecondBuilder,
};
use arrow_array::cast::AsArray;
use arrow_array::{ArrayRef, RecordBatch, StringArray};
use arrow_schema::{Field, Schema, SchemaRef};

use super::{
    header_fields, header_item, EncodeError, BATCH_BYTES, BUILDER_GROWTH, KEY_COLUMN, KEY_ERROR, KEY_RAW,
    MEASURE_DECODED_EVERY, SCHEMA, VALUE_COLUMN,
};
use crate::archive::record::Record;
use crate::encode::header_name_text;
use crate::values::column::{Room, MAX_ROOM_BYTES};
use crate::values::columns::ValueStats;
use crate::values::{value_columns, ValueColumns, ValueFormat, VALUE_FIELD};

// The room of a raw value column is made as a typed column's is (`Room::spared_bytes`): at most
// `MAX_ROOM_BYTES`, which must hold a whole batch.
const _: () = assert!(MAX_ROOM_BYTES >= BATCH_BYTES as usize);

/// How the `key` or `value` column is built.
pub(super) enum ValueColumn {
    Raw(BinaryBuilder),
    Typed(Box<dyn ValueColumns>),
}

impl ValueColumn {
    fn new(format: &ValueFormat) -> Self {
        match value_columns(format) {
            None => ValueColumn::Raw(BinaryBuilder::with_capacity(0, 0)),
            Some(columns) => ValueColumn::Typed(columns),
        }
    }

    pub(super) fn typed(&self) -> Option<&dyn ValueColumns> {
        match self {
            ValueColumn::Raw(_) => None,
            ValueColumn::Typed(t) => Some(t.as_ref()),
        }
    }

    /// The batch's column, and a typed one's raw and error columns after it.
    fn take(&mut self, offsets: &[i64], extra: &mut Vec<ArrayRef>) -> Result<ArrayRef, EncodeError> {
        Ok(match self {
            ValueColumn::Raw(b) => Arc::new(b.finish()),
            ValueColumn::Typed(t) => {
                let [value, raw, error] = t.take(offsets)?;
                extra.extend([raw, error]);
                value
            }
        })
    }
}

pub(super) struct Builders {
    /// The batches' schema, once the value column's is known (inferred values: after the first batch).
    pub(super) schema: Option<SchemaRef>,
    offset: Int64Builder,
    timestamp: TimestampMillisecondBuilder,
    timestamp_type: StringBuilder,
    pub(super) key: ValueColumn,
    pub(super) value: ValueColumn,
    headers: ListBuilder<StructBuilder>,
    pub(super) rows: usize,
    pub(super) bytes: u64,
    /// What the typed columns' decoded values hold allocated, measured every `MEASURE_DECODED_EVERY`
    /// rows of a batch (from its first, whose columns are made at the last batch's size).
    pub(super) decoded: u64,
    /// The raw value column's last batch: its rows and bytes, the room the next batch starts with.
    last_values: (usize, usize),
}

impl Builders {
    pub(super) fn new(values: &ValueFormat, keys: &ValueFormat) -> Self {
        let (key, value) = (ValueColumn::new(keys), ValueColumn::new(values));
        let raw = matches!((&key, &value), (ValueColumn::Raw(_), ValueColumn::Raw(_)));
        Self {
            schema: raw.then(|| SCHEMA.clone()),
            offset: Int64Builder::with_capacity(0),
            timestamp: TimestampMillisecondBuilder::with_capacity(0).with_timezone("UTC"),
            timestamp_type: StringBuilder::with_capacity(0, 0),
            key,
            value,
            headers: ListBuilder::with_capacity(StructBuilder::from_fields(header_fields(), 0), 0)
                .with_field(header_item()),
            rows: 0,
            bytes: 0,
            decoded: 0,
            last_values: (0, 0),
        }
    }

    /// What the typed value and key columns hold allocated now.
    fn decoded_allocated(&self) -> u64 {
        [&self.value, &self.key].iter().map(|c| c.typed().map_or(0, |t| t.allocated()) as u64).sum()
    }

    /// Takes a record, or (`may_roll`) refuses one whose value the file's schema cannot hold, or whose
    /// key has a schema while the file's keys have none (its first batch had no typed key). Other keys
    /// never roll the file: one its key schema cannot hold is a key misfit (every key keeps its bytes).
    pub(super) fn push(&mut self, r: &Record, may_roll: bool) -> bool {
        if may_roll && self.key.typed().is_some_and(|k| k.refuses(r.key.as_deref())) {
            return false;
        }
        match &mut self.value {
            ValueColumn::Raw(b) => b.append_option(r.value.as_deref()),
            ValueColumn::Typed(t) => {
                if !t.push(r.offset, r.value.as_deref(), may_roll) {
                    return false;
                }
            }
        }
        match &mut self.key {
            ValueColumn::Raw(b) => b.append_option(r.key.as_deref()),
            ValueColumn::Typed(t) => {
                let taken = t.push(r.offset, r.key.as_deref(), false);
                debug_assert!(taken, "columns that may not roll take every value");
            }
        }
        self.offset.append_value(r.offset);
        self.timestamp.append_option(r.timestamp_ms);
        self.timestamp_type.append_value(r.timestamp_kind.as_str());
        let entries = self.headers.values();
        for h in &r.headers {
            let (name, encoding) = header_name_text(&h.key);
            entries.field_builder::<StringBuilder>(0).expect("header key builder").append_value(name);
            entries.field_builder::<BinaryBuilder>(1).expect("header value builder").append_option(h.value.as_deref());
            entries.field_builder::<StringBuilder>(2).expect("header key encoding builder").append_option(encoding);
            entries.append(true);
        }
        self.headers.append(true);
        self.rows += 1;
        self.bytes += r.payload_size();
        if self.rows.is_power_of_two() || self.rows % MEASURE_DECODED_EVERY == 1 {
            self.decoded = self.decoded_allocated();
        }
        true
    }

    /// The typed archive's schema: the value struct in place of the binary value, then value_raw and
    /// value_error; the key struct in place of the binary key, then key_raw and key_error.
    fn typed_schema(&self) -> Option<SchemaRef> {
        let mut fields: Vec<Field> = SCHEMA.fields().iter().map(|f| f.as_ref().clone()).collect();
        if let Some(typed) = self.value.typed() {
            let [value, raw, error] = typed.fields()?;
            fields[VALUE_COLUMN] = value;
            fields.extend([raw, error]);
        }
        if let Some(typed) = self.key.typed() {
            let [key, raw, error] = typed.fields()?;
            fields[KEY_COLUMN] = key.with_name("key");
            fields.extend([raw.with_name(KEY_RAW), error.with_name(KEY_ERROR)]);
        }
        Some(Arc::new(Schema::new(fields)))
    }

    /// The typed schema, when the values' or keys' schema changed since the last batch (see
    /// `ValueColumns::widened`; its Arrow type may be the same, an enum that gained a symbol): the
    /// file's rows so far are to be re-written under it.
    pub(super) fn changed_schema(&mut self) -> Option<SchemaRef> {
        let widened = [&self.key, &self.value].iter().any(|c| c.typed().is_some_and(|t| t.widened()));
        if !widened {
            return None;
        }
        let new = self.typed_schema()?;
        self.schema = Some(new.clone());
        Some(new)
    }

    pub(super) fn take_batch(&mut self) -> Result<RecordBatch, EncodeError> {
        if let ValueColumn::Raw(b) = &self.value {
            self.last_values = (self.rows, b.values_slice().len());
        }
        let offsets = self.offset.finish();
        let (mut typed_values, mut typed_keys) = (Vec::new(), Vec::new());
        let value = self.value.take(offsets.values(), &mut typed_values)?;
        let key = self.key.take(offsets.values(), &mut typed_keys)?;
        if let Some(error) = typed_keys.get_mut(1) {
            *error = key_reasons(error);
        }
        let mut columns: Vec<ArrayRef> = vec![
            Arc::new(offsets),
            Arc::new(self.timestamp.finish()),
            Arc::new(self.timestamp_type.finish()),
            key,
            value,
            Arc::new(self.headers.finish()),
        ];
        columns.extend(typed_values.into_iter().chain(typed_keys));
        self.rows = 0;
        self.bytes = 0;
        self.decoded = 0;
        let schema = match &self.schema {
            Some(schema) => schema.clone(),
            None => self.schema.insert(self.typed_schema().expect("the schema is known after a batch")).clone(),
        };
        Ok(RecordBatch::try_new(schema, columns)?)
    }

    /// Gives the raw value column, between batches, the room its last batch took and an eighth, at once
    /// (at most [`MAX_ROOM_BYTES`]): growing it by doubling copied the bytes at every step and touched twice
    /// the pages. Called once the last batch is taken; it may still be written behind (see `behind`), so
    /// the allocator hands its pages back for the batch after next.
    pub(super) fn make_room(&mut self) {
        if let (ValueColumn::Raw(b), 0) = (&mut self.value, self.rows) {
            let (rows, bytes) = self.last_values;
            *b = BinaryBuilder::with_capacity(rows, Room::spared_bytes(bytes));
        }
    }

    /// Gives back the room `make_room` gave, while no record is in it (a file shrunk for the budget).
    pub(super) fn give_back_room(&mut self) {
        if let (ValueColumn::Raw(b), 0) = (&mut self.value, self.rows) {
            *b = BinaryBuilder::with_capacity(0, 0);
        }
    }

    /// The room for the raw value column's bytes (the offsets', 4 bytes a row, left out).
    fn room(&self) -> u64 {
        match &self.value {
            ValueColumn::Raw(b) => b.values_capacity() as u64,
            ValueColumn::Typed(_) => 0,
        }
    }

    /// The room given to a raw value column holding no rows yet: what a shrink gives back.
    pub(super) fn spare_room(&self) -> u64 {
        if self.rows == 0 {
            self.room()
        } else {
            0
        }
    }

    /// What the builders hold, as the budget counts them: twice the bytes appended (buffers grow by
    /// doubling), the raw value column's at its room if that is more.
    pub(super) fn counted(&self) -> u64 {
        let values = match &self.value {
            ValueColumn::Raw(b) => b.values_slice().len() as u64,
            ValueColumn::Typed(_) => 0,
        };
        BUILDER_GROWTH * self.bytes.saturating_sub(values) + (BUILDER_GROWTH * values).max(self.room())
    }

    pub(super) fn value_stats(&self) -> Option<&ValueStats> {
        self.value.typed().map(|t| t.stats())
    }

    pub(super) fn key_stats(&self) -> Option<&ValueStats> {
        self.key.typed().map(|t| t.stats())
    }
}

/// A typed key's misfit reasons, which the value columns word for values (`value: ...`,
/// `value.id: ...`), as the key's.
fn key_reasons(error: &ArrayRef) -> ArrayRef {
    let error = error.as_string::<i32>();
    let reasons: StringArray = error
        .iter()
        .map(|why| why.map(|why| why.strip_prefix(VALUE_FIELD).map_or(why.to_string(), |rest| format!("key{rest}"))))
        .collect();
    Arc::new(reasons)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::record::TimestampKind;

    fn record(offset: i64, value_bytes: usize) -> Record {
        Record {
            offset,
            timestamp_ms: Some(offset),
            timestamp_kind: TimestampKind::CreateTime,
            key: Some(b"k".to_vec()),
            value: Some(vec![7; value_bytes]),
            headers: vec![],
        }
    }

    /// After a batch, the raw value column starts the next with the room the last took and an eighth,
    /// counted from then on; a shrink gives it back; a batch ended by a large record does not size the next.
    #[test]
    fn a_raw_value_column_starts_each_batch_with_the_room_of_the_last() {
        let mut builders = Builders::new(&ValueFormat::Raw, &ValueFormat::Raw);
        for offset in 0..100 {
            assert!(builders.push(&record(offset, 1000), true));
        }
        drop(builders.take_batch().unwrap());
        assert!(builders.room() < 1000, "taken: {}", builders.room());
        builders.make_room();
        assert!(
            builders.room() >= 100 * 1000 * 9 / 8,
            "the last batch's 100,000 bytes and an eighth: {}",
            builders.room()
        );
        assert_eq!(builders.counted(), builders.room(), "counted before any row comes");
        assert!(builders.push(&record(100, 1000), true));
        let appended = record(100, 1000).payload_size();
        assert_eq!(builders.counted(), builders.room() + 2 * (appended - 1000), "the value within its room");
        drop(builders.take_batch().unwrap());
        builders.make_room();
        assert!(builders.spare_room() >= 1000);
        builders.give_back_room();
        assert_eq!((builders.spare_room(), builders.counted()), (0, 0), "given back");
        assert!(builders.push(&record(101, 20 << 20), true));
        drop(builders.take_batch().unwrap());
        builders.make_room();
        assert_eq!(builders.room(), MAX_ROOM_BYTES as u64, "a 20 MiB value does not size the next batch");
    }
}

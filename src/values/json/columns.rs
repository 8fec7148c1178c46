//! JSON values' typed columns in a Parquet file (`--value-format json`), a `ValueColumns`: `value` (a
//! struct, each record's JSON decoded into it as the record is pushed), `value_raw` (the bytes, for
//! misfits or with `--keep-raw-value`) and `value_error` (why a record did not fit). Every record has
//! its row: a misfit's value is null. Inferring (`--value-schema infer`), the file's schema comes from
//! its first batch, whose values are decoded when it is taken; a later record with fields that schema
//! lacks is not taken (the file rolls, and the next one infers anew).

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef};
use arrow_schema::{Field, FieldRef};

use super::decode::decode;
use super::value_column;
use crate::values::column::{Room, Struct};
use crate::values::columns::{typed_fields, ColumnsError, Rows, ValueStats};
use crate::values::{value_field, Inference, JsonValues, ValueColumns, ValueSchema};

/// One file's JSON values: the batch's rows and its `value` column.
pub struct JsonColumns {
    json: Arc<JsonValues>,
    /// The file's schema and its `value` field: declared, or inferred from the first batch.
    schema: Option<(ValueSchema, FieldRef)>,
    /// Bytes before the JSON in each value (a Schema Registry's header), kept in `value_raw` but not
    /// decoded.
    header: usize,
    batch: Rows,
    /// The offsets of the batch's records (for a misfit found when its values are decoded again).
    offsets: Vec<i64>,
    /// The batch's `value` column, each value decoded into it as it is pushed; none before the file's
    /// schema is known, or since it changed (then made again from the batch's bytes when next needed).
    value: Option<Struct>,
    /// The room the last batch's `value` column took, made in the next one's.
    room: Room,
    /// The schema taking shape from the first batch's values (inferring, until it is taken).
    inference: Inference,
    stats: ValueStats,
}

impl JsonColumns {
    pub fn new(json: Arc<JsonValues>) -> Self {
        let schema = json.declared.clone().map(with_field);
        Self::with(json, schema, 0)
    }

    /// Columns of JSON values after a `header` of that many bytes, whose schema is given later
    /// ([`set_schema`](Self::set_schema)); every value keeps its bytes.
    pub(crate) fn framed(header: usize) -> Self {
        Self::with(Arc::new(JsonValues { declared: None, keep_raw: true }), None, header)
    }

    fn with(json: Arc<JsonValues>, schema: Option<(ValueSchema, FieldRef)>, header: usize) -> Self {
        let (batch, offsets, value, room, inference, stats) = Default::default();
        Self { json, schema, header, batch, offsets, value, room, inference, stats }
    }

    /// The file's schema: the batch's values taken so far are decoded again by it.
    pub(crate) fn set_schema(&mut self, schema: ValueSchema) {
        self.schema = Some(with_field(schema));
        self.value = None;
    }

    pub(crate) fn schema(&self) -> Option<&ValueSchema> {
        self.schema.as_ref().map(|(schema, _)| schema)
    }

    /// Takes a value that does not fit, for `why`.
    pub(crate) fn push_misfit(&mut self, offset: i64, value: &[u8], why: String) {
        self.stats.misfit(offset, &why);
        if let Some((_, column)) = self.parts() {
            column.push_null();
        }
        self.batch.push(Some(value), Some(why), false);
        self.offsets.push(offset);
    }

    pub(crate) fn stats_mut(&mut self) -> &mut ValueStats {
        &mut self.stats
    }

    /// Whether the file's schema is inferred from its values (rather than declared or given).
    fn inferring(&self) -> bool {
        self.json.declared.is_none() && self.header == 0
    }

    /// The file's schema and the batch's `value` column (made, the batch's values decoded into it, if
    /// there is none), once the schema is known.
    fn parts(&mut self) -> Option<(&ValueSchema, &mut Struct)> {
        if self.value.is_none() {
            let value = self.decode_batch()?;
            self.value = Some(value);
        }
        let (schema, _) = self.schema.as_ref()?;
        Some((schema, self.value.as_mut()?))
    }

    /// The batch's values decoded by the file's schema: a row for each, null for a tombstone or a
    /// misfit (a value that no longer fits becomes one). Only a batch whose values' bytes are all held
    /// has rows here: one pushed before the file's schema was known, or framed values (kept), whose
    /// schema may widen mid-batch; a declared schema's column is made before its first value.
    fn decode_batch(&mut self) -> Option<Struct> {
        let (schema, _) = self.schema.as_ref()?;
        debug_assert!(self.batch.len() == 0 || self.header > 0 || self.json.declared.is_none(), "bytes not held");
        let mut value = value_column(schema, &self.room);
        for i in 0..self.batch.len() {
            let fit = match self.batch.fitting(i) {
                Some(payload) => decode(schema, &payload[self.header.min(payload.len())..], &mut value),
                None => {
                    value.push_null();
                    continue;
                }
            };
            if let Err(misfit) = fit {
                value.push_null();
                let why = misfit.to_string();
                self.stats.misfit(self.offsets[i], &why);
                self.batch.rows[i].misfit = Some(why);
            }
        }
        Some(value)
    }

    /// The `value` column of a batch taken before the file's schema last changed, decoded again by it
    /// from the values' bytes (`raw`, which every framed value keeps; `error` says which fit).
    pub(crate) fn redecode(&self, raw: &ArrayRef, error: &ArrayRef) -> Result<ArrayRef, ColumnsError> {
        let (schema, _) = self.schema.as_ref().expect("a batch was taken, so the file has a schema");
        let (raw, error) = (raw.as_binary::<i32>(), error.as_string::<i32>());
        let mut value = value_column(schema, &Room::rows(raw.len()));
        for i in 0..raw.len() {
            match raw.is_valid(i) && error.is_null(i) {
                true => {
                    let payload = raw.value(i);
                    decode(schema, &payload[self.header.min(payload.len())..], &mut value)
                        .map_err(|misfit| ColumnsError::Decode(misfit.to_string()))?;
                }
                false => value.push_null(),
            }
        }
        Ok(Arc::new(value.finish()?))
    }
}

/// A schema with its `value` field.
fn with_field(schema: ValueSchema) -> (ValueSchema, FieldRef) {
    let field = Arc::new(value_field(&schema));
    (schema, field)
}

impl ValueColumns for JsonColumns {
    /// The three columns' fields, in order, once the file's schema is known.
    fn fields(&self) -> Option<[Field; 3]> {
        let (_, field) = self.schema.as_ref()?;
        Some(typed_fields(field.as_ref().clone()))
    }

    /// Takes a record's value, decoding it; or, inferring, refuses one with fields the file's schema
    /// lacks when `may_roll` (then nothing is taken: the record belongs in a new file).
    fn push(&mut self, offset: i64, value: Option<&[u8]>, may_roll: bool) -> bool {
        let Some(value) = value else {
            if let Some((_, column)) = self.parts() {
                column.push_null();
            }
            self.batch.push(None, None, false);
            self.offsets.push(offset);
            return true;
        };
        let (inferring, header) = (self.inferring(), self.header);
        let misfit = match self.parts() {
            // The schema is inferred from the batch's objects when it is taken; a value conflicting with
            // those before it does not fit.
            None => super::shape(value)
                .and_then(|fields| self.inference.add(&fields).map_err(|why| format!("value{why}")))
                .err(),
            Some((schema, column)) => match decode(schema, &value[header.min(value.len())..], column) {
                Ok(fit) if fit.ignored_fields > 0 && inferring => {
                    column.truncate(column.rows() - 1);
                    if may_roll {
                        return false;
                    }
                    column.push_null();
                    Some("value: has fields this file's inferred schema lacks (a re-written file is one file)".into())
                }
                Ok(fit) => {
                    self.stats.ignored_fields += fit.ignored_fields;
                    None
                }
                Err(misfit) => {
                    column.push_null();
                    Some(misfit.to_string())
                }
            },
        };
        if let Some(why) = &misfit {
            self.stats.misfit(offset, why);
        }
        // A value that fits is in its columns: its bytes are held only to be kept (`--keep-raw-value`,
        // framed values) or decoded when the first batch's inferred schema is known.
        let held = misfit.is_some() || self.json.keep_raw || self.schema.is_none();
        self.batch.push(Some(value).filter(|_| held), misfit, false);
        self.offsets.push(offset);
        true
    }

    /// Plain JSON names no schema (a file without one infers it).
    fn refuses(&self, _value: Option<&[u8]>) -> bool {
        false
    }

    /// A JSON file's schema never changes once taken.
    fn widened(&self) -> bool {
        false
    }

    fn rewrite(&self, columns: [ArrayRef; 3]) -> Result<[ArrayRef; 3], ColumnsError> {
        Ok(columns)
    }

    /// Builds the batch's three columns and starts the next batch.
    fn take(&mut self, _offsets: &[i64]) -> Result<[ArrayRef; 3], ColumnsError> {
        if self.schema.is_none() {
            let schema = std::mem::take(&mut self.inference).schema();
            self.set_schema(schema);
        }
        self.parts().expect("the file's schema is known");
        let value = self.value.take().expect("made by parts");
        if value.rows() != self.batch.len() {
            return Err(ColumnsError::RowCount { decoded: value.rows(), records: self.batch.len() });
        }
        self.room = value.room();
        let value: ArrayRef = Arc::new(value.finish()?);
        self.offsets.clear();
        let [raw, error] = self.batch.take_raw_and_error(self.json.keep_raw);
        Ok([value, raw, error])
    }

    fn stats(&self) -> &ValueStats {
        &self.stats
    }

    fn allocated(&self) -> usize {
        self.value.as_ref().map_or(0, Struct::allocated)
    }
}

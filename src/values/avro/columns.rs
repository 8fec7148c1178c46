//! Avro values in Confluent's wire format as typed columns (`--value-format avro`), a `ValueColumns`:
//! each value names its schema by ID; the file takes the schema of its first value, and a value written
//! with another schema starts the next file (a re-written file, which cannot roll, keeps it raw). A
//! value that is not framed, names a schema the registry does not have, or does not decode by its
//! schema is a misfit: a null `value`, its bytes in `value_raw`, the reason in `value_error`.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::builder::StructBuilder;
use arrow_array::{ArrayRef, NullArray, StructArray};
use arrow_buffer::NullBuffer;
use arrow_schema::{DataType, Field, Fields};

use super::binary::{append_null_record, append_record, check, struct_fields, Reader};
use super::{Avro, AvroRecord};
use crate::values::arrow::{placeholder_fields, typed_value_field};
use crate::values::columns::{ColumnsError, Rows, ValueStats, VALUE_ERROR, VALUE_RAW};
use crate::values::wire::{split, SchemaId};
use crate::values::{AvroValues, ValueColumns};

/// The schema a file's values are decoded by.
struct FileSchema {
    /// The top-level record.
    record: Avro,
    fields: AvroRecord,
    /// The IDs seen in the file, and whether each names this schema.
    ids: HashMap<SchemaId, bool>,
}

pub struct AvroColumns {
    avro: Arc<AvroValues>,
    schema: Option<FileSchema>,
    /// The file's first batch held no value with a usable schema: its `value` column is a placeholder
    /// (all null), and a value with a schema starts the next file.
    placeholder: bool,
    /// The batch's payloads (header included).
    batch: Rows,
    stats: ValueStats,
}

/// What a value is to this file.
enum Judged {
    Fits(SchemaId),
    Misfit(String),
    /// Written with a schema other than the file's.
    OtherSchema(SchemaId),
}

impl AvroColumns {
    pub fn new(avro: Arc<AvroValues>) -> Self {
        Self { avro, schema: None, placeholder: false, batch: Rows::default(), stats: ValueStats::default() }
    }

    fn judge(&mut self, payload: &[u8]) -> Judged {
        let (id, body) = match split(payload) {
            Ok(framed) => framed,
            Err(e) => return Judged::Misfit(format!("value: {e}")),
        };
        let fields = match self.avro.schemas.avro(id) {
            None => return Judged::Misfit(format!("value: schema {id} was not fetched from the registry")),
            Some(Err(why)) => return Judged::Misfit(format!("value: schema {id}: {why}")),
            Some(Ok(fields)) => fields,
        };
        if self.placeholder {
            return Judged::OtherSchema(id);
        }
        let file = self.schema.get_or_insert_with(|| FileSchema {
            record: Avro::Record(fields.clone()),
            fields: fields.clone(),
            ids: HashMap::new(),
        });
        if !*file.ids.entry(id).or_insert_with(|| *file.fields == *fields) {
            return Judged::OtherSchema(id);
        }
        let mut reader = Reader::new(body);
        match check(&file.record, &mut reader) {
            Ok(()) if reader.at_end() => Judged::Fits(id),
            Ok(()) => Judged::Misfit(format!("value: bytes left after the record of schema {id}")),
            Err(why) => Judged::Misfit(format!("value: does not decode by schema {id}: {why}")),
        }
    }

    /// The batch's `value` column: each value that fits decoded, a null row for every other.
    fn decode(&self, schema: &FileSchema) -> Result<ArrayRef, ColumnsError> {
        let mut value = StructBuilder::from_fields(struct_fields(&schema.fields), self.batch.len());
        for i in 0..self.batch.len() {
            match self.batch.fitting(i) {
                Some(payload) => {
                    let (_, body) = split(payload).map_err(|e| ColumnsError::Decode(e.to_string()))?;
                    append_record(&schema.fields, &mut Reader::new(body), &mut value).map_err(ColumnsError::Decode)?;
                }
                None => append_null_record(&schema.fields, &mut value),
            }
        }
        Ok(Arc::new(value.finish()))
    }

    /// The file's `value` field: a nullable struct of its schema's fields, or the placeholder's.
    fn value_field(&self) -> Option<Field> {
        match (&self.schema, self.placeholder) {
            (Some(schema), _) => Some(typed_value_field(struct_fields(&schema.fields))),
            (None, true) => Some(typed_value_field(Fields::empty())),
            (None, false) => None,
        }
    }

    /// A batch's `value` column when the file's struct has no fields (see `typed_value_field`): every
    /// row null.
    fn placeholder_column(&self) -> ArrayRef {
        let rows = self.batch.len();
        let column: ArrayRef = Arc::new(NullArray::new(rows));
        Arc::new(StructArray::new(placeholder_fields(), vec![column], Some(NullBuffer::new_null(rows))))
    }
}

impl ValueColumns for AvroColumns {
    fn push(&mut self, offset: i64, value: Option<&[u8]>, may_roll: bool) -> bool {
        let Some(value) = value else {
            self.batch.push(None, None);
            return true;
        };
        let misfit = match self.judge(value) {
            Judged::Fits(id) => {
                self.stats.schema_ids.insert(id.0);
                None
            }
            Judged::OtherSchema(_) if may_roll => return false,
            Judged::OtherSchema(id) => {
                Some(format!("value: written with schema {id}, not this file's (a re-written file is one file)"))
            }
            Judged::Misfit(why) => Some(why),
        };
        if let Some(why) = &misfit {
            self.stats.misfit(offset, why);
        }
        self.batch.push(Some(value), misfit);
        true
    }

    fn fields(&self) -> Option<[Field; 3]> {
        Some([
            self.value_field()?,
            Field::new(VALUE_RAW, DataType::Binary, true),
            Field::new(VALUE_ERROR, DataType::Utf8, true),
        ])
    }

    fn take(&mut self, _offsets: &[i64]) -> Result<[ArrayRef; 3], ColumnsError> {
        self.placeholder |= self.schema.is_none();
        let value = match &self.schema {
            Some(schema) if !schema.fields.is_empty() => self.decode(schema)?,
            _ => self.placeholder_column(),
        };
        let [raw, error] = self.batch.take_raw_and_error(self.avro.keep_raw);
        Ok([value, raw, error])
    }

    fn stats(&self) -> &ValueStats {
        &self.stats
    }
}

#[cfg(test)]
mod tests;

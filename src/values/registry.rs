//! Values in Confluent's wire format of any schema type (`--value-format registry`), a `ValueColumns`:
//! the file's first value whose schema is at hand gives it its type (Avro, Protobuf or JSON Schema), and
//! its values are then decoded as that format's columns do, versions and all. A value of another type
//! starts the next file (a re-written file, which cannot roll, keeps it raw as a misfit). Tombstones and
//! misfits before the first such value wait here and go into the columns of the type chosen (or, if the
//! batch is taken before one is, into a file without a schema, as the formats' own columns do).

use std::sync::Arc;

use arrow_array::ArrayRef;
use arrow_schema::Field;

use super::avro::columns::AvroColumns;
use super::columns::{ColumnsError, ValueStats};
use super::json_schema::columns::JsonSchemaColumns;
use super::protobuf::columns::ProtobufColumns;
use super::wire::split;
use super::{RegistryValues, SchemaType, ValueColumns};

pub struct RegistryColumns {
    values: Arc<RegistryValues>,
    /// The file's columns once there are any, and the type of their values once one chose it (`None`:
    /// a batch was taken before any did, and the file has no schema).
    columns: Option<(Option<SchemaType>, Box<dyn ValueColumns>)>,
    /// Values pushed before the file had columns: tombstones and misfits, by offset.
    waiting: Vec<(i64, Option<Vec<u8>>)>,
    /// The file's stats while it has no columns (none: nothing is counted before they decode).
    none: ValueStats,
}

impl RegistryColumns {
    pub fn new(values: Arc<RegistryValues>) -> Self {
        Self { values, columns: None, waiting: Vec::new(), none: ValueStats::default() }
    }

    /// The schema type `value` names, when its schema is at hand and usable.
    fn schema_type(&self, value: Option<&[u8]>) -> Option<SchemaType> {
        let (id, _) = split(value?).ok()?;
        self.values.avro.schemas.schema_type(id)
    }

    /// The columns of `ty`'s format (`None`: any, for a file without a schema), with the values that
    /// waited for them pushed.
    fn open(&mut self, ty: Option<SchemaType>) -> &mut Box<dyn ValueColumns> {
        let mut columns: Box<dyn ValueColumns> = match ty {
            Some(SchemaType::Avro) | None => Box::new(AvroColumns::new(self.values.avro.clone())),
            Some(SchemaType::Protobuf) => Box::new(ProtobufColumns::new(self.values.protobuf.clone())),
            Some(SchemaType::Json) => Box::new(JsonSchemaColumns::new(self.values.json_schema.clone())),
        };
        for (offset, value) in self.waiting.drain(..) {
            // Tombstones and misfits are taken by any file.
            columns.push(offset, value.as_deref(), false);
        }
        &mut self.columns.insert((ty, columns)).1
    }
}

impl ValueColumns for RegistryColumns {
    fn push(&mut self, offset: i64, value: Option<&[u8]>, may_roll: bool) -> bool {
        let ty = self.schema_type(value);
        let Some((file, columns)) = &mut self.columns else {
            let Some(ty) = ty else {
                self.waiting.push((offset, value.map(<[u8]>::to_vec)));
                return true;
            };
            return self.open(Some(ty)).push(offset, value, may_roll);
        };
        if may_roll && ty.is_some_and(|ty| *file != Some(ty)) {
            return false;
        }
        columns.push(offset, value, may_roll)
    }

    /// A value with a schema in a file without one. Not one of another type: keys of two types taking
    /// turns would roll a file at every turn (values roll at the first of each, in `push`).
    fn refuses(&self, value: Option<&[u8]>) -> bool {
        match &self.columns {
            Some((None, _)) => self.schema_type(value).is_some(),
            Some((Some(_), columns)) => columns.refuses(value),
            None => false,
        }
    }

    fn fields(&self) -> Option<[Field; 3]> {
        self.columns.as_ref().and_then(|(_, columns)| columns.fields())
    }

    fn take(&mut self, offsets: &[i64]) -> Result<[ArrayRef; 3], ColumnsError> {
        if let Some((_, columns)) = &mut self.columns {
            return columns.take(offsets);
        }
        self.open(None).take(offsets)
    }

    fn widened(&self) -> bool {
        self.columns.as_ref().is_some_and(|(_, columns)| columns.widened())
    }

    fn rewrite(&self, columns: [ArrayRef; 3]) -> Result<[ArrayRef; 3], ColumnsError> {
        match &self.columns {
            Some((_, file)) => file.rewrite(columns),
            None => Ok(columns),
        }
    }

    fn stats(&self) -> &ValueStats {
        self.columns.as_ref().map_or(&self.none, |(_, columns)| columns.stats())
    }

    fn allocated(&self) -> usize {
        self.columns.as_ref().map_or(0, |(_, columns)| columns.allocated())
    }
}

#[cfg(test)]
mod tests;

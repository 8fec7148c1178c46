//! JSON Schema values in Confluent's wire format as typed columns (`--value-format json-schema`), a
//! `ValueColumns`: each value names its schema by ID; the file takes its first value's schema, and the
//! JSON after the header is checked and decoded as `--value-format json` does (`JsonColumns`). Values
//! of versions the file's schema holds (`fit`) go into the same file; a newer version that holds the
//! file's whole (added optional properties) becomes the file's, the rows taken so far decoded again from
//! their bytes under it; any other schema starts the next file (a re-written file, which cannot roll,
//! keeps it raw). A value that is not framed, names a schema
//! the registry does not have, or does not fit its file's schema is a misfit. Every value keeps its
//! bytes in `value_raw` (JSON has no one encoding its columns would give back byte for byte).

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::ArrayRef;
use arrow_schema::Field;

use super::fit::holds;
use crate::values::columns::{ColumnsError, ValueStats};
use crate::values::json::columns::JsonColumns;
use crate::values::wire::{split, SchemaId};
use crate::values::{JsonSchemaValues, ValueColumns, ValueSchema};

/// The wire format's header: the magic byte and the schema ID.
const HEADER: usize = 5;

pub struct JsonSchemaColumns {
    values: Arc<JsonSchemaValues>,
    columns: JsonColumns,
    /// The schemas seen in the file: held (`None`), or why not.
    seen: HashMap<SchemaId, Option<String>>,
    /// A batch was taken before any value gave the file a schema: it has none, and a value with one
    /// starts the next file.
    schemaless: bool,
    /// How many times the file's schema widened, and how many times it had when the last batch was
    /// taken.
    widenings: (u32, u32),
}

impl JsonSchemaColumns {
    pub fn new(values: Arc<JsonSchemaValues>) -> Self {
        Self {
            values,
            columns: JsonColumns::framed(HEADER),
            seen: HashMap::new(),
            schemaless: false,
            widenings: (0, 0),
        }
    }

    /// Whether a value of schema `id` goes into this file; else why it is not.
    fn judge(&mut self, id: SchemaId) -> Result<Result<(), String>, String> {
        let schema = match self.values.schemas.json_schema(id) {
            None => return Err(format!("value: schema {id} was not fetched from the registry")),
            Some(Err(why)) => return Err(format!("value: schema {id}: {why}")),
            Some(Ok(schema)) => schema,
        };
        if self.schemaless {
            return Ok(Err("this file has no schema".into()));
        }
        let Some(file) = self.columns.schema() else {
            self.columns.set_schema(schema);
            self.seen.insert(id, None);
            return Ok(Ok(()));
        };
        let held = self.seen.entry(id).or_insert_with(|| holds(file, &schema).err()).clone();
        match held {
            Some(why) if !self.widen_to(&schema) => Ok(Err(why)),
            _ => Ok(Ok(())),
        }
    }

    /// Makes `schema` the file's if it holds the file's and every version the file holds; the rows
    /// taken so far are then decoded again under it (`rewrite`). Only while no value had properties
    /// the file's schema does not declare: the newer version might type one otherwise (JSON Schema
    /// allows any by default). Whether it did.
    fn widen_to(&mut self, schema: &ValueSchema) -> bool {
        let Some(file) = self.columns.schema() else { return false };
        if self.columns.stats().ignored_fields > 0 || holds(schema, file).is_err() {
            return false;
        }
        let mut seen = HashMap::with_capacity(self.seen.len());
        for (id, held) in &self.seen {
            let now = match self.values.schemas.json_schema(*id) {
                Some(Ok(version)) => holds(schema, &version).err(),
                _ => Some(format!("schema {id} is no longer at hand")),
            };
            if held.is_none() && now.is_some() {
                return false;
            }
            seen.insert(*id, now);
        }
        self.seen = seen;
        self.columns.set_schema(schema.clone());
        self.widenings.0 += 1;
        true
    }
}

impl ValueColumns for JsonSchemaColumns {
    fn push(&mut self, offset: i64, value: Option<&[u8]>, may_roll: bool) -> bool {
        let Some(value) = value else { return self.columns.push(offset, None, may_roll) };
        let id = match split(value) {
            Ok((id, _)) => id,
            Err(e) => {
                self.columns.push_misfit(offset, value, format!("value: {e}"));
                return true;
            }
        };
        match self.judge(id) {
            Err(why) => self.columns.push_misfit(offset, value, why),
            Ok(Err(_)) if may_roll => return false,
            Ok(Err(why)) => self.columns.push_misfit(
                offset,
                value,
                format!("value: written with schema {id}, which this file's does not hold ({why}; a re-written file is one file)"),
            ),
            Ok(Ok(())) => {
                let misfits = self.columns.stats().misfits;
                if !self.columns.push(offset, Some(value), may_roll) {
                    return false;
                }
                if self.columns.stats().misfits == misfits {
                    self.columns.stats_mut().schema_ids.insert(id.0);
                }
            }
        }
        true
    }

    fn refuses(&self, value: Option<&[u8]>) -> bool {
        let usable = || matches!(self.values.schemas.json_schema(split(value?).ok()?.0), Some(Ok(_))).then_some(());
        self.schemaless && usable().is_some()
    }

    fn fields(&self) -> Option<[Field; 3]> {
        self.columns.fields()
    }

    fn take(&mut self, offsets: &[i64]) -> Result<[ArrayRef; 3], ColumnsError> {
        self.schemaless |= self.columns.schema().is_none();
        self.widenings.1 = self.widenings.0;
        self.columns.take(offsets)
    }

    /// The batches taken were decoded under an older version than the file's now.
    fn widened(&self) -> bool {
        self.widenings.0 != self.widenings.1
    }

    /// Rows taken under an older version, decoded again from their bytes (in `value_raw`) under the
    /// file's: they had no property it lacks, so each decodes as it did, the added ones null.
    fn rewrite(&self, [value, raw, error]: [ArrayRef; 3]) -> Result<[ArrayRef; 3], ColumnsError> {
        if !self.widened() {
            return Ok([value, raw, error]);
        }
        Ok([self.columns.redecode(&raw, &error)?, raw, error])
    }

    fn stats(&self) -> &ValueStats {
        self.columns.stats()
    }

    fn allocated(&self) -> usize {
        self.columns.allocated()
    }
}

#[cfg(test)]
mod tests;

//! Protobuf values in Confluent's wire format as typed columns (`--value-format protobuf`), a
//! `ValueColumns`: each value names its schema by ID and its message by indexes; the file takes its
//! first value's message; values of versions it holds (`fit`) are decoded under it, field by number. A
//! value of a newer version that holds the file's message whole becomes the file's message, the rows
//! taken so far widened into it (`widen`); any other message starts the next file (a re-written file,
//! which cannot roll, keeps it raw). A value that is not framed, names a schema the registry does not
//! have, or does not decode is a misfit. A value of the file's own schema and message whose columns
//! encode back to its very bytes (`reencode`: told as it is decoded, `Scratch::canonical`, or else
//! encoded and compared byte for byte when the batch is taken) keeps none:
//! the file's footer holds the schema it is encoded back by. Every other value keeps its bytes in
//! `value_raw` (another version, unknown fields, another field order or packing than serializers write).

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef};
use arrow_schema::Field;

use super::arrow::struct_fields;
use super::decode::{append_message, Scratch};
use super::fit::holds;
use super::reencode::Encoder;
use super::widen::widen_message;
use super::{indexes, ProtoMessage};
use crate::values::arrow::typed_value_field;
use crate::values::column::{Room, Struct};
use crate::values::columns::{kept_bytes, typed_fields, ColumnsError, FooterSchema, Rows, ValueStats};
use crate::values::wire::{frame, split, SchemaId};
use crate::values::{ProtobufValues, ValueColumns};

/// A message: the schema that declares it, and its indexes there.
type MessageRef = (SchemaId, Vec<i32>);

/// The message a file's values are decoded by.
struct FileSchema {
    message: ProtoMessage,
    /// Where it is: the schema and the message's indexes there.
    at: MessageRef,
    /// The schema's files, for the footer (see `ProtoFile::descriptors`).
    descriptors: Arc<str>,
    /// What a value of it starts with: the wire format's header and the message's indexes.
    prefix: Vec<u8>,
    /// How many times the file's message widened (its version in the file).
    widenings: u32,
    /// The messages seen in the file: held (`None`), or why not.
    seen: HashMap<MessageRef, Option<String>>,
}

pub struct ProtobufColumns {
    values: Arc<ProtobufValues>,
    schema: Option<FileSchema>,
    /// The file's first batch held no value with a usable schema: its `value` column is a placeholder
    /// (all null), and a value with a schema starts the next file.
    placeholder: bool,
    batch: Rows,
    /// The batch's `value` column, each value decoded into it as it is pushed (from the first value
    /// that fits; the rows before are null).
    value: Option<Struct>,
    /// The room the last batch's `value` column took, made in the next one's.
    room: Room,
    /// The message of the batches taken so far (the file's, unless it widened since), how many times
    /// the file's had widened then, and its values' prefix.
    taken: Option<(u32, ProtoMessage, Vec<u8>)>,
    scratch: Scratch,
    stats: ValueStats,
}

/// What a value is to this file.
enum Judged {
    /// Decoded into the batch's `value` column; `given_back`: its bytes are what the row encodes back
    /// to (`canonical`), so they are not kept.
    Fits {
        id: SchemaId,
        given_back: bool,
    },
    Misfit(String),
    /// Written with a message the file's does not hold (the reason).
    OtherSchema(String),
}

impl ProtobufColumns {
    pub fn new(values: Arc<ProtobufValues>) -> Self {
        Self {
            values,
            schema: None,
            placeholder: false,
            batch: Rows::default(),
            value: None,
            room: Room::default(),
            taken: None,
            scratch: Scratch::default(),
            stats: ValueStats::default(),
        }
    }

    fn judge(&mut self, payload: &[u8]) -> Judged {
        // A value of the file's own schema and message, the commonest: its header says so.
        if let Some(schema) = self.schema.as_ref().filter(|s| payload.starts_with(&s.prefix)) {
            let (id, at) = (schema.at.0, schema.prefix.len());
            return self.decode(id, payload, &payload[at..]);
        }
        let (id, body) = match split(payload) {
            Ok(framed) => framed,
            Err(e) => return Judged::Misfit(format!("value: {e}")),
        };
        let file = match self.values.schemas.protobuf(id) {
            None => return Judged::Misfit(format!("value: schema {id} was not fetched from the registry")),
            Some(Err(why)) => return Judged::Misfit(format!("value: schema {id}: {why}")),
            Some(Ok(file)) => file,
        };
        let (path, bytes) = match indexes::split(body) {
            Ok(split) => split,
            Err(why) => return Judged::Misfit(format!("value: {why}")),
        };
        let message = match file.message(&path) {
            Ok(message) => message,
            Err(why) => return Judged::Misfit(format!("value: schema {id}: {why}")),
        };
        if self.placeholder {
            return Judged::OtherSchema("this file has no schema".into());
        }
        let key = (id, path);
        let schema = self
            .schema
            .get_or_insert_with(|| FileSchema::new(message.clone(), key.clone(), file.descriptors.clone(), 0));
        let held = match schema.seen.get(&key) {
            Some(held) => held.clone(),
            None => {
                let held = holds(&schema.message, message).err();
                schema.seen.insert(key.clone(), held.clone());
                held
            }
        };
        if let Some(why) = held {
            if holds(message, &schema.message).is_err() || !self.widen_to(message, key, &file.descriptors) {
                return Judged::OtherSchema(why);
            }
        }
        self.decode(id, payload, bytes)
    }

    /// Decodes `payload`'s protobuf bytes `bytes` (of schema `id`, the message the file's holds) under
    /// the file's message, into the batch's `value` column.
    fn decode(&mut self, id: SchemaId, payload: &[u8], bytes: &[u8]) -> Judged {
        let schema = self.schema.as_ref().expect("the file's schema, chosen before");
        let value = self.value.get_or_insert_with(|| {
            let mut value = Struct::new(struct_fields(&schema.message), &self.room);
            (0..self.batch.len()).for_each(|_| value.push_null());
            value
        });
        match append_message(&schema.message, bytes, value, &mut self.scratch) {
            Ok(()) => {
                let canonical = self.scratch.canonical() && !self.values.keep_raw;
                Judged::Fits { id, given_back: canonical && schema.gives_back(payload, bytes) }
            }
            Err(why) => Judged::Misfit(format!("value: does not decode by schema {id}: {why}")),
        }
    }

    /// Makes `message` (which holds the file's whole; at `at`, of a schema of `descriptors`) the file's, if
    /// it holds every message whose values the file holds too; the rows taken so far are then widened into
    /// it (`rewrite`). Whether it did.
    fn widen_to(&mut self, message: &ProtoMessage, at: MessageRef, descriptors: &Arc<str>) -> bool {
        let Some(schema) = &mut self.schema else { return false };
        if self.taken.as_ref().is_some_and(|(_, taken, _)| holds(message, taken).is_err()) {
            return false;
        }
        let mut seen = HashMap::with_capacity(schema.seen.len());
        for ((id, path), held) in &schema.seen {
            let now = match self.values.schemas.protobuf(*id) {
                Some(Ok(file)) => file.message(path).and_then(|m| holds(message, m)).err(),
                _ => Some(format!("schema {id} is no longer at hand")),
            };
            if held.is_none() && now.is_some() {
                return false;
            }
            seen.insert((*id, path.clone()), now);
        }
        // The batch's rows were decoded under the file's message: they must decode under the new one
        // too (the fields it adds were skipped unchecked), and are decoded again under it.
        let fitting = (0..self.batch.len()).map(|i| self.batch.fitting(i));
        let Ok(value) = decode_values(message, fitting, self.batch.len(), &mut self.scratch) else { return false };
        self.value = Some(value);
        // Their bytes were told canonical under the file's message: the newer one's columns are compared.
        self.batch.keep_all();
        let widenings = schema.widenings + 1;
        *schema = FileSchema { seen, ..FileSchema::new(message.clone(), at, descriptors.clone(), widenings) };
        true
    }

    /// Marks the rows of the batch that need not keep their bytes: values of the file's schema and
    /// message that its columns (`value`, the batch's) encode back to byte for byte, each encoded and
    /// compared unless its bytes were told canonical when it was decoded into these very columns (then
    /// it was marked when pushed). Should the columns not be the message's (they are), every value not
    /// marked keeps its bytes.
    fn give_back(&mut self, value: &ArrayRef) {
        let Some(schema) = self.schema.as_ref().filter(|s| !s.message.fields.is_empty() && !self.values.keep_raw)
        else {
            return;
        };
        let Some(encoder) = value.as_struct_opt().and_then(|v| Encoder::new(&schema.message, v).ok()) else {
            return;
        };
        // Made for each batch: an open file holds no buffer the size of its largest value.
        let mut encoded = Vec::new();
        for i in 0..self.batch.len() {
            let compared = self.batch.keeps(i).then(|| self.batch.fitting(i)).flatten();
            let Some(payload) = compared.filter(|p| p.starts_with(&schema.prefix)) else { continue };
            encoded.clear();
            encoded.extend_from_slice(&schema.prefix);
            if encoder.encode(i, &mut encoded).is_ok() && encoded == payload {
                self.batch.give_back(i);
            }
        }
    }

    fn value_field(&self) -> Option<Field> {
        match (&self.schema, self.placeholder) {
            (Some(schema), _) => Some(typed_value_field(struct_fields(&schema.message))),
            (None, true) => Some(typed_value_field(Default::default())),
            (None, false) => None,
        }
    }
}

impl ValueColumns for ProtobufColumns {
    fn push(&mut self, offset: i64, value: Option<&[u8]>, may_roll: bool) -> bool {
        let Some(value) = value else {
            if let Some(value) = self.value.as_mut() {
                value.push_null();
            }
            self.batch.push(None, None, false);
            return true;
        };
        let (misfit, keep) = match self.judge(value) {
            Judged::Fits { id, given_back } => {
                self.stats.schema_ids.insert(id.0);
                (None, !given_back)
            }
            Judged::OtherSchema(_) if may_roll => return false,
            Judged::OtherSchema(why) => (
                Some(format!(
                    "value: written with a message this file's does not hold ({why}; a re-written file is one file)"
                )),
                true,
            ),
            Judged::Misfit(why) => (Some(why), true),
        };
        if let Some(why) = &misfit {
            self.stats.misfit(offset, why);
            if let Some(value) = self.value.as_mut() {
                value.push_null();
            }
        }
        self.batch.push(Some(value), misfit, keep);
        true
    }

    fn refuses(&self, value: Option<&[u8]>) -> bool {
        let usable = || {
            let (id, body) = split(value?).ok()?;
            let file = self.values.schemas.protobuf(id)?.ok()?;
            file.message(&indexes::split(body).ok()?.0).ok().map(drop)
        };
        self.placeholder && usable().is_some()
    }

    fn fields(&self) -> Option<[Field; 3]> {
        self.value_field().map(typed_fields)
    }

    fn take(&mut self, _offsets: &[i64]) -> Result<[ArrayRef; 3], ColumnsError> {
        self.placeholder |= self.schema.is_none();
        let rows = self.batch.len();
        let value = match (&self.schema, self.value.take()) {
            (Some(_), Some(value)) if value.rows() != rows => {
                return Err(ColumnsError::RowCount { decoded: value.rows(), records: rows })
            }
            (Some(_), Some(value)) => {
                self.room = value.room();
                Arc::new(value.finish()?) as ArrayRef
            }
            // No value fitted (or the column is not at hand): decoded from the batch's bytes.
            (Some(schema), None) => {
                let fitting = (0..rows).map(|i| self.batch.fitting(i));
                Arc::new(decode_values(&schema.message, fitting, rows, &mut self.scratch)?.finish()?)
            }
            (None, _) => crate::values::arrow::placeholder_column(rows),
        };
        self.give_back(&value);
        let [raw, error] = self.batch.take_raw_and_error(self.values.keep_raw);
        self.taken = self.schema.as_ref().map(|s| (s.widenings, s.message.clone(), s.prefix.clone()));
        self.stats.value_schema =
            self.schema.as_ref().filter(|s| !s.message.fields.is_empty()).map(|s| FooterSchema::Protobuf {
                id: s.at.0 .0,
                descriptors: s.descriptors.clone(),
                message: s.message.name.clone(),
                indexes: s.at.1.clone(),
            });
        Ok([value, raw, error])
    }

    /// The batches taken were of another message than the file's now.
    fn widened(&self) -> bool {
        matches!((&self.taken, &self.schema), (Some((widenings, ..)), Some(now)) if *widenings != now.widenings)
    }

    /// Rows taken under an older version, widened into the file's; those whose bytes were to be given
    /// back from their columns keep them now (encoded by the older version, which gives them back
    /// exactly), as the newer version's columns would not.
    fn rewrite(&self, [value, raw, error]: [ArrayRef; 3]) -> Result<[ArrayRef; 3], ColumnsError> {
        let (Some((widenings, taken, prefix)), Some(now)) = (&self.taken, &self.schema) else {
            return Ok([value, raw, error]);
        };
        if *widenings == now.widenings {
            return Ok([value, raw, error]);
        }
        let typed = value.as_struct();
        let encoder = Encoder::new(taken, typed).map_err(ColumnsError::Decode)?;
        let raw = kept_bytes(typed, raw.as_binary::<i32>(), |i, out| {
            out.extend_from_slice(prefix);
            encoder.encode(i, out)
        })
        .map_err(ColumnsError::Decode)?;
        // Each row again from its bytes, so a field its version did not know but the newer one does
        // (kept by a service that passed it through) shows its value; should any row not decode under
        // the newer message (it was checked under its own), the rows are widened column by column.
        let (bytes, errors) = (raw.as_binary::<i32>(), error.as_string::<i32>());
        let fitting =
            || (0..bytes.len()).map(|i| Some(bytes.value(i)).filter(|_| bytes.is_valid(i) && errors.is_null(i)));
        if let Ok(value) = decode_values(&now.message, fitting(), bytes.len(), &mut Scratch::default()) {
            return Ok([Arc::new(value.finish()?), raw, error]);
        }
        let widened = widen_message(value.as_struct(), taken, &now.message).map_err(ColumnsError::Decode)?;
        Ok([Arc::new(widened), raw, error])
    }

    fn stats(&self) -> &ValueStats {
        &self.stats
    }

    fn allocated(&self) -> usize {
        self.value.as_ref().map_or(0, Struct::allocated)
    }
}

impl FileSchema {
    fn new(message: ProtoMessage, at: MessageRef, descriptors: Arc<str>, widenings: u32) -> Self {
        let prefix = frame(at.0, &indexes::header(&at.1));
        Self { message, at, descriptors, prefix, widenings, seen: HashMap::new() }
    }

    /// Whether `payload`, whose protobuf bytes `bytes` decoded under the file's message as its row
    /// encodes back to (`Scratch::canonical`), is given back exactly by that row: written with the
    /// file's schema and message, header and all (a message without fields gives nothing back).
    fn gives_back(&self, payload: &[u8], bytes: &[u8]) -> bool {
        !self.message.fields.is_empty()
            && payload.starts_with(&self.prefix)
            && payload.len() == self.prefix.len() + bytes.len()
    }
}

/// The protobuf bytes of a framed payload (after its schema ID and message indexes).
fn body(payload: &[u8]) -> Result<&[u8], String> {
    let (_, body) = split(payload).map_err(|e| e.to_string())?;
    Ok(indexes::split(body)?.1)
}

/// A `value` column of `rows` rows: each payload decoded under `message`, a null row for every `None`;
/// an error if one does not decode.
fn decode_values<'a>(
    message: &ProtoMessage,
    payloads: impl Iterator<Item = Option<&'a [u8]>>,
    rows: usize,
    scratch: &mut Scratch,
) -> Result<Struct, ColumnsError> {
    let mut value = Struct::new(struct_fields(message), &Room::rows(rows));
    for payload in payloads {
        match payload {
            Some(payload) => {
                let bytes = body(payload).map_err(ColumnsError::Decode)?;
                append_message(message, bytes, &mut value, scratch).map_err(|e| ColumnsError::Decode(e.into()))?;
            }
            None => value.push_null(),
        }
    }
    Ok(value)
}

#[cfg(test)]
mod tests;

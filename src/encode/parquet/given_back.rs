//! Values given back from a typed file's columns: the footer keys that name the registry's schema a
//! file's `value` column encodes back by (Avro: its text; Protobuf: its files and the message), written
//! with the file and read when it is decoded, and each batch's values — the bytes in `value_raw` where a
//! row has them, else encoded back from its columns (byte for byte under the footer's schema; without
//! one, as JSON, counted as re-encoded).

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, RecordBatch, StructArray};
use arrow_schema::{Field, Schema};
use parquet::file::metadata::KeyValue;

use super::{binary_at, column};
use crate::encode::{Decoded, EncodeError};
use crate::values::avro::reencode::encode_record;
use crate::values::avro::{parse_record, AvroRecord};
use crate::values::columns::{FooterSchema, VALUE_ERROR, VALUE_RAW};
use crate::values::protobuf::indexes::header;
use crate::values::protobuf::reencode::Encoder;
use crate::values::protobuf::schema::footer_message;
use crate::values::protobuf::ProtoMessage;
use crate::values::wire::{frame, SchemaId};

/// Footer keys: the registry's schema of the `value` column, which gives back the bytes of each typed
/// row that has none in `value_raw`: its ID, and an Avro schema's text or a Protobuf schema's files
/// (a base64 `FileDescriptorSet`), message (full name) and message indexes (`1,0`).
pub const VALUE_SCHEMA_ID_KEY: &str = "kafka.value_schema_id";
pub const VALUE_SCHEMA_KEY: &str = "kafka.value_schema";
pub const VALUE_PROTOBUF_DESCRIPTORS_KEY: &str = "kafka.value_protobuf_descriptors";
pub const VALUE_PROTOBUF_MESSAGE_KEY: &str = "kafka.value_protobuf_message";
pub const VALUE_PROTOBUF_INDEXES_KEY: &str = "kafka.value_protobuf_indexes";
/// Footer key: the rules a file's Protobuf rows without bytes were encoded back by (which fields have
/// presence, which are packed, which messages are their bytes: `values::protobuf::schema`), so a later
/// archiver that changes them reads this file by its own, or refuses it, never giving other bytes back.
pub const VALUE_PROTOBUF_ENCODING_KEY: &str = "kafka.value_protobuf_encoding";
/// The rules this archiver writes and reads.
const PROTOBUF_ENCODING: &str = "1";

/// The footer's key-value pairs for `schema`.
pub(super) fn footer(schema: &FooterSchema) -> Vec<(&'static str, String)> {
    match schema {
        FooterSchema::Avro { id, text } => {
            vec![(VALUE_SCHEMA_ID_KEY, id.to_string()), (VALUE_SCHEMA_KEY, text.to_string())]
        }
        FooterSchema::Protobuf { id, descriptors, message, indexes } => {
            let indexes: Vec<String> = indexes.iter().map(i32::to_string).collect();
            vec![
                (VALUE_SCHEMA_ID_KEY, id.to_string()),
                (VALUE_PROTOBUF_DESCRIPTORS_KEY, descriptors.to_string()),
                (VALUE_PROTOBUF_MESSAGE_KEY, message.clone()),
                (VALUE_PROTOBUF_INDEXES_KEY, indexes.join(",")),
                (VALUE_PROTOBUF_ENCODING_KEY, PROTOBUF_ENCODING.to_string()),
            ]
        }
    }
}

/// The schema a file's typed rows without bytes are encoded back by, read from its footer.
pub(super) enum Given {
    Avro(SchemaId, AvroRecord),
    /// What each value starts with (the wire format's header and the message indexes), and the message.
    Protobuf(Vec<u8>, ProtoMessage),
}

impl Given {
    pub(super) fn from_footer(footer: Option<&Vec<KeyValue>>) -> Result<Option<Self>, EncodeError> {
        let value = |key: &str| footer?.iter().find(|kv| kv.key == key)?.value.as_deref();
        let Some(id) = value(VALUE_SCHEMA_ID_KEY) else { return Ok(None) };
        let bad = |why: String| EncodeError::BadParquet(format!("the footer's value schema {id}: {why}"));
        let id = SchemaId(id.parse().map_err(|e: std::num::ParseIntError| bad(e.to_string()))?);
        if let Some(text) = value(VALUE_SCHEMA_KEY) {
            return Ok(Some(Given::Avro(id, parse_record(text).map_err(|e| bad(e.to_string()))?)));
        }
        let protobuf = [VALUE_PROTOBUF_DESCRIPTORS_KEY, VALUE_PROTOBUF_MESSAGE_KEY, VALUE_PROTOBUF_INDEXES_KEY];
        let [Some(descriptors), Some(name), Some(indexes)] = protobuf.map(value) else { return Ok(None) };
        match value(VALUE_PROTOBUF_ENCODING_KEY) {
            Some(PROTOBUF_ENCODING) => {}
            other => {
                let why = format!("Protobuf encoding rules {other:?}, not this archiver's ({PROTOBUF_ENCODING:?})");
                return Err(bad(format!("{why}: read the file with the archiver version that wrote it")));
            }
        }
        let indexes: Vec<i32> = indexes
            .split(',')
            .map(|i| i.parse().map_err(|e: std::num::ParseIntError| bad(format!("message indexes: {e}"))))
            .collect::<Result<_, _>>()?;
        let message = footer_message(descriptors, name).map_err(bad)?;
        Ok(Some(Given::Protobuf(frame(id, &header(&indexes)), message)))
    }
}

/// A batch's values: their bytes as archived, or as given back from the typed columns (under the
/// footer's schema, byte for byte; otherwise JSON, counted as re-encoded).
pub(super) fn values_of(
    batch: &RecordBatch,
    given: Option<&Given>,
    out: &mut Decoded,
) -> Result<Vec<Option<Vec<u8>>>, EncodeError> {
    let bad = |what: &str| EncodeError::BadParquet(format!("column {what} has the wrong type"));
    let value = column(batch, "value")?;
    if let Some(raw) = value.as_binary_opt::<i32>() {
        return Ok((0..raw.len()).map(|i| binary_at(raw, i)).collect());
    }
    let typed = value.as_struct_opt().ok_or_else(|| bad("value"))?;
    let raw = column(batch, VALUE_RAW)?.as_binary_opt::<i32>().ok_or_else(|| bad(VALUE_RAW))?;
    let error = column(batch, VALUE_ERROR)?.as_string_opt::<i32>().ok_or_else(|| bad(VALUE_ERROR))?;
    out.misfits += (0..error.len()).filter(|&i| !error.is_null(i)).count() as u64;
    let mut back = Back::new(given, typed);
    let mut values = Vec::with_capacity(batch.num_rows());
    for i in 0..batch.num_rows() {
        values.push(if !raw.is_null(i) {
            Some(raw.value(i).to_vec())
        } else if typed.is_null(i) {
            None
        } else {
            Some(back.value(i, out)?)
        });
    }
    Ok(values)
}

/// How a batch's rows without bytes are given back, each made when its first row needs it.
struct Back<'a> {
    given: Option<&'a Given>,
    typed: &'a StructArray,
    protobuf: Option<Encoder<'a>>,
    lines: Option<Vec<Vec<u8>>>,
}

impl<'a> Back<'a> {
    fn new(given: Option<&'a Given>, typed: &'a StructArray) -> Self {
        Self { given, typed, protobuf: None, lines: None }
    }

    /// Row `i`'s value, encoded back from its columns.
    fn value(&mut self, i: usize, out: &mut Decoded) -> Result<Vec<u8>, EncodeError> {
        Ok(match self.given {
            Some(Given::Avro(id, fields)) => {
                let mut body = Vec::new();
                encode_record(fields, self.typed, i, &mut body).map_err(EncodeError::BadParquet)?;
                frame(*id, &body)
            }
            Some(Given::Protobuf(prefix, message)) => {
                let encoder = match &mut self.protobuf {
                    Some(encoder) => encoder,
                    None => self.protobuf.insert(Encoder::new(message, self.typed).map_err(EncodeError::BadParquet)?),
                };
                let mut bytes = prefix.clone();
                encoder.encode(i, &mut bytes).map_err(EncodeError::BadParquet)?;
                bytes
            }
            None => {
                out.reencoded += 1;
                let lines = match &mut self.lines {
                    Some(lines) => lines,
                    None => self.lines.insert(json_lines(self.typed)?),
                };
                std::mem::take(&mut lines[i])
            }
        })
    }
}

/// Each row of a struct column as a JSON object (null fields left out).
fn json_lines(typed: &StructArray) -> Result<Vec<Vec<u8>>, EncodeError> {
    // The struct's own nulls (rows without a typed value) are not written: their lines are not used.
    // Its fields are declared nullable here as a null row's fields may hold nulls.
    let (fields, columns, _) = typed.clone().into_parts();
    let fields: Vec<Field> = fields.iter().map(|f| f.as_ref().clone().with_nullable(true)).collect();
    let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)?;
    let mut text = Vec::new();
    let mut writer = arrow_json::LineDelimitedWriter::new(&mut text);
    writer.write(&batch)?;
    writer.finish()?;
    drop(writer);
    Ok(text.split(|b| *b == b'\n').take(typed.len()).map(<[u8]>::to_vec).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::protobuf::schema::compile;

    /// A file's Protobuf footer is read back only under the encoding rules it names: a file written by
    /// other rules (a later archiver's), or naming none, is refused rather than given other bytes.
    #[test]
    fn a_protobuf_footer_of_other_encoding_rules_is_refused() {
        let file = compile(r#"syntax = "proto3"; package p; message M { int64 id = 1; }"#, &[]).unwrap();
        let schema =
            FooterSchema::Protobuf { id: 3, descriptors: file.descriptors, message: "p.M".into(), indexes: vec![0] };
        let footer = |encoding: Option<&str>| -> Vec<KeyValue> {
            let pairs = footer(&schema).into_iter().filter(|(k, _)| *k != VALUE_PROTOBUF_ENCODING_KEY);
            let mut kvs: Vec<KeyValue> = pairs.map(|(k, v)| KeyValue::new(k.to_string(), v)).collect();
            kvs.extend(encoding.map(|e| KeyValue::new(VALUE_PROTOBUF_ENCODING_KEY.to_string(), e.to_string())));
            kvs
        };
        match Given::from_footer(Some(&footer(Some("1")))) {
            Ok(Some(Given::Protobuf(prefix, message))) => {
                assert_eq!((prefix, message.name.as_str()), (vec![0, 0, 0, 0, 3, 0], "p.M"));
            }
            _ => panic!("this archiver's footer reads"),
        }
        for other in [Some("2"), None] {
            let why = Given::from_footer(Some(&footer(other))).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(why.contains("not this archiver's"), "{other:?}: {why}");
        }
    }
}

//! JSON values' typed columns in a Parquet file (`--value-format json`), the first `ValueColumns`: `value` (a struct decoded by
//! arrow-json from each record's bytes), `value_raw` (the bytes, for misfits or with `--keep-raw-value`)
//! and `value_error` (why a record did not fit). Every record has its row: a misfit's value is null.
//! Inferring (`--value-schema infer`), the file's schema comes from its first batch; a later record
//! with fields that schema lacks is not taken (the file rolls, and the next one infers anew).

use std::sync::Arc;

use crate::values::avro::NOT_A_RECORD_FIELD;
use crate::values::{value_field, Inference, JsonValues, ValueColumns, ValueSchema};
use arrow_array::builder::{BinaryBuilder, StringBuilder};
use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef};
use arrow_json::reader::{Decoder, ReaderBuilder};
use arrow_schema::{ArrowError, Field, FieldRef};
use serde_json::Value;

/// Building a batch's typed columns failed.
#[derive(Debug, thiserror::Error)]
pub enum ColumnsError {
    #[error("building Arrow arrays failed: {0}")]
    Arrow(#[from] ArrowError),
    #[error("typed values decoded to {decoded} rows for {records} records")]
    RowCount { decoded: usize, records: usize },
    #[error("a value that was checked did not decode: {0}")]
    Decode(String),
}

/// The raw bytes' column.
pub const VALUE_RAW: &str = "value_raw";
/// The misfit reason's column.
pub const VALUE_ERROR: &str = "value_error";

/// A typed file's three value columns: `value` (of the value format's type), `value_raw`, `value_error`.
pub(crate) fn typed_fields(value: Field) -> [Field; 3] {
    [
        value,
        Field::new(VALUE_RAW, arrow_schema::DataType::Binary, true),
        Field::new(VALUE_ERROR, arrow_schema::DataType::Utf8, true),
    ]
}

/// What one file's values came to, for its log line and counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ValueStats {
    /// Records whose value did not fit the schema (kept raw).
    pub misfits: u64,
    /// Object keys the schema does not declare (ignored).
    pub ignored_fields: u64,
    /// The first misfit's offset and reason.
    pub first_misfit: Option<(i64, String)>,
    /// The Schema Registry IDs of the schemas the values that fit were written with.
    pub schema_ids: std::collections::BTreeSet<u32>,
    /// The registry's schema the `value` column is of, when its rows encode back to the bytes they were
    /// decoded from (those that would not keep their bytes in `value_raw`).
    pub value_schema: Option<FooterSchema>,
}

/// The registry's schema a file's typed values are encoded back by (the rows without `value_raw`), as
/// its footer holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FooterSchema {
    /// The schema's ID and text.
    Avro { id: u32, text: Arc<str> },
    /// The schema's ID, its files (a base64 `FileDescriptorSet`), and the message's full name and indexes.
    Protobuf { id: u32, descriptors: Arc<str>, message: String, indexes: Vec<i32> },
}

impl ValueStats {
    /// Counts a value that does not fit (the file's first is remembered).
    pub(crate) fn misfit(&mut self, offset: i64, why: &str) {
        self.misfits += 1;
        self.first_misfit.get_or_insert_with(|| (offset, why.to_string()));
    }
}

/// One batch's values as they were pushed, for any value format: their bytes back to back, and per row
/// where its bytes are and why it does not fit, if it does not.
#[derive(Default)]
pub(crate) struct Rows {
    bytes: Vec<u8>,
    pub(crate) rows: Vec<Row>,
}

pub(crate) struct Row {
    /// Where the value's bytes are in `bytes`; none for a null value (a tombstone).
    span: Option<(usize, usize)>,
    /// Why the value does not fit, if it does not.
    pub(crate) misfit: Option<String>,
    /// Its bytes are kept though it fits (they would not be given back exactly from its columns).
    keep: bool,
}

impl Rows {
    /// A row; `keep`: its bytes are kept in `value_raw` even if it fits.
    pub(crate) fn push(&mut self, value: Option<&[u8]>, misfit: Option<String>, keep: bool) {
        let span = value.map(|v| {
            let start = self.bytes.len();
            self.bytes.extend_from_slice(v);
            (start, self.bytes.len())
        });
        self.rows.push(Row { span, misfit, keep });
    }

    pub(crate) fn value(&self, row: &Row) -> Option<&[u8]> {
        row.span.map(|(s, e)| &self.bytes[s..e])
    }

    /// Row `i`'s value, if it has one that fits.
    pub(crate) fn fitting(&self, i: usize) -> Option<&[u8]> {
        let row = &self.rows[i];
        self.value(row).filter(|_| row.misfit.is_none())
    }

    /// Row `i` keeps no bytes: its columns give them back.
    pub(crate) fn give_back(&mut self, i: usize) {
        self.rows[i].keep = false;
    }

    /// Keeps every row's bytes (the columns will not give them back).
    pub(crate) fn keep_all(&mut self) {
        self.rows.iter_mut().for_each(|row| row.keep = true);
    }

    pub(crate) fn len(&self) -> usize {
        self.rows.len()
    }

    /// The batch's `value_raw` (misfits' and kept rows' bytes, or every value's with `keep_raw`) and `value_error`
    /// columns; the batch is then empty.
    pub(crate) fn take_raw_and_error(&mut self, keep_raw: bool) -> [ArrayRef; 2] {
        let mut raw = BinaryBuilder::with_capacity(self.rows.len(), 0);
        let mut error = StringBuilder::new();
        for row in &self.rows {
            let keep = row.misfit.is_some() || row.keep || keep_raw;
            raw.append_option(self.value(row).filter(|_| keep));
            error.append_option(row.misfit.as_deref());
        }
        self.rows.clear();
        self.bytes.clear();
        [Arc::new(raw.finish()), Arc::new(error.finish())]
    }
}

/// A batch's `value_raw` with the bytes of every typed row it lacked (one whose bytes its columns were to
/// give back), each written whole, header included, by `encode` (row, out) under the version it was
/// decoded by, which gives them back exactly: for a file that widens to a newer version, whose columns
/// would not.
pub(crate) fn kept_bytes(
    typed: &arrow_array::StructArray,
    raw: &arrow_array::BinaryArray,
    mut encode: impl FnMut(usize, &mut Vec<u8>) -> Result<(), String>,
) -> Result<ArrayRef, String> {
    let mut kept = BinaryBuilder::with_capacity(raw.len(), 0);
    let mut bytes = Vec::new();
    for i in 0..raw.len() {
        if raw.is_valid(i) {
            kept.append_value(raw.value(i));
        } else if typed.is_valid(i) {
            bytes.clear();
            encode(i, &mut bytes)?;
            kept.append_value(&bytes);
        } else {
            kept.append_null();
        }
    }
    Ok(Arc::new(kept.finish()))
}

/// One batch's rows, decoded into the three columns when the batch is taken.
pub struct JsonColumns {
    json: Arc<JsonValues>,
    /// The file's schema and its `value` field: declared, or inferred from the first batch.
    schema: Option<(ValueSchema, FieldRef)>,
    /// Bytes before the JSON in each value (a Schema Registry's header), kept in `value_raw` but not
    /// decoded.
    header: usize,
    batch: Rows,
    stats: ValueStats,
}

impl JsonColumns {
    pub fn new(json: Arc<JsonValues>) -> Self {
        let schema = json.declared.clone().map(|s| {
            let field = Arc::new(value_field(&s));
            (s, field)
        });
        Self { json, schema, header: 0, batch: Rows::default(), stats: ValueStats::default() }
    }

    /// Columns of JSON values after a `header` of that many bytes, whose schema is given later
    /// ([`set_schema`](Self::set_schema)); every value keeps its bytes.
    pub(crate) fn framed(header: usize) -> Self {
        let json = Arc::new(JsonValues { declared: None, keep_raw: true });
        Self { json, schema: None, header, batch: Rows::default(), stats: ValueStats::default() }
    }

    /// The file's schema, before its first batch is taken (framed values: see [`framed`](Self::framed)).
    pub(crate) fn set_schema(&mut self, schema: ValueSchema) {
        let field = Arc::new(value_field(&schema));
        self.schema = Some((schema, field));
    }

    pub(crate) fn schema(&self) -> Option<&ValueSchema> {
        self.schema.as_ref().map(|(schema, _)| schema)
    }

    /// Takes a value that does not fit, for `why`.
    pub(crate) fn push_misfit(&mut self, offset: i64, value: &[u8], why: String) {
        self.stats.misfit(offset, &why);
        self.batch.push(Some(value), Some(why), false);
    }

    pub(crate) fn stats_mut(&mut self) -> &mut ValueStats {
        &mut self.stats
    }

    /// Whether the file's schema is inferred from its values (rather than declared or given).
    fn inferring(&self) -> bool {
        self.json.declared.is_none() && self.header == 0
    }

    /// Row `i`'s JSON, if it fits.
    fn json_of(&self, i: usize) -> Option<&[u8]> {
        self.batch.fitting(i).map(|value| &value[self.header.min(value.len())..])
    }

    /// Infers the file's schema from the batch's values (the first batch), leaving out those that
    /// conflict with the ones before them.
    fn infer(&mut self, offsets: &[i64]) -> (ValueSchema, FieldRef) {
        let mut inference = Inference::default();
        for (i, &offset) in offsets.iter().enumerate() {
            let Some(text) = self.json_of(i) else { continue };
            let Ok(Value::Object(o)) = serde_json::from_slice::<Value>(text) else { continue };
            if let Err(why) = inference.add(&o) {
                let why = format!("value{why}");
                self.stats.misfit(offset, &why);
                self.batch.rows[i].misfit = Some(why);
            }
        }
        let schema = inference.schema();
        let field = Arc::new(value_field(&schema));
        (schema, field)
    }

    /// A decoder taking at most `rows` rows: bytes beyond them are left unread (and so refused).
    fn decoder(&self, rows: usize) -> Result<Decoder, ArrowError> {
        let (_, field) = self.schema.as_ref().expect("the schema is known when decoding");
        ReaderBuilder::new_with_field(field.clone()).with_batch_size(rows.max(1)).build_decoder()
    }

    /// What comes before each value's JSON for the decoder, if the schema reads it as an object's one
    /// field (`ValueSchema::wrapped`): the object's opening and the field's name.
    fn wrap(&self) -> Option<Vec<u8>> {
        let wrapped = self.schema.as_ref().is_some_and(|(schema, _)| schema.wrapped());
        wrapped.then(|| format!("{{{}:", Value::from(NOT_A_RECORD_FIELD)).into_bytes())
    }

    /// Decodes the rows that fit, a null for every other row.
    fn decode_all(&self) -> Result<ArrayRef, ColumnsError> {
        self.decode_rows((0..self.batch.len()).map(|i| self.json_of(i)), self.batch.len())
    }

    /// The `value` column of `rows` rows: each JSON text decoded by the file's schema, a null for `None`.
    fn decode_rows<'a>(
        &self,
        texts: impl Iterator<Item = Option<&'a [u8]>>,
        rows: usize,
    ) -> Result<ArrayRef, ColumnsError> {
        let mut decoder = self.decoder(rows)?;
        let wrap = self.wrap();
        for text in texts {
            match text {
                Some(text) => feed(&mut decoder, text, wrap.as_deref())?,
                None => feed(&mut decoder, b"null", None)?,
            }
        }
        let value = decoder.flush()?.map(|batch| batch.column(0).clone());
        match value {
            Some(value) if value.len() == rows => Ok(value),
            other => Err(ColumnsError::RowCount { decoded: other.map_or(0, |v| v.len()), records: rows }),
        }
    }

    /// The `value` column of a batch taken before the file's schema last changed, decoded again by it
    /// from the values' bytes (`raw`, which every framed value keeps; `error` says which fit).
    pub(crate) fn redecode(&self, raw: &ArrayRef, error: &ArrayRef) -> Result<ArrayRef, ColumnsError> {
        let (raw, error) = (raw.as_binary::<i32>(), error.as_string::<i32>());
        let texts = (0..raw.len()).map(|i| {
            (raw.is_valid(i) && error.is_null(i)).then(|| &raw.value(i)[self.header.min(raw.value(i).len())..])
        });
        self.decode_rows(texts, raw.len())
    }

    fn refuse_undecodable(&mut self, offsets: &[i64]) -> Result<(), ColumnsError> {
        let wrap = self.wrap();
        for (i, &offset) in offsets.iter().enumerate() {
            let Some(text) = self.json_of(i) else { continue };
            let mut decoder = self.decoder(1)?;
            if let Err(e) = feed(&mut decoder, text, wrap.as_deref()).and_then(|()| decoder.flush().map(drop)) {
                let why = format!("value: {e}");
                self.stats.misfit(offset, &why);
                self.batch.rows[i].misfit = Some(why);
            }
        }
        Ok(())
    }
}

/// Feeds one value's JSON `text` to the decoder, after `wrap` (and a closing brace) if it is one.
fn feed(decoder: &mut Decoder, text: &[u8], wrap: Option<&[u8]>) -> Result<(), ArrowError> {
    let parts = match wrap {
        Some(open) => [open, text, b"}"],
        None => [text, b"", b""],
    };
    let incomplete = || ArrowError::JsonError("a value is not one complete JSON document".into());
    for part in parts.into_iter().chain([&b"\n"[..]]) {
        if decoder.decode(part)? != part.len() {
            return Err(incomplete());
        }
    }
    match decoder.has_partial_record() {
        true => Err(incomplete()),
        false => Ok(()),
    }
}

impl ValueColumns for JsonColumns {
    /// The three columns' fields, in order, once the file's schema is known.
    fn fields(&self) -> Option<[Field; 3]> {
        let (_, field) = self.schema.as_ref()?;
        Some(typed_fields(field.as_ref().clone()))
    }

    /// Takes a record's value; or, inferring, refuses one with fields the file's schema lacks when
    /// `may_roll` (then nothing is taken: the record belongs in a new file).
    fn push(&mut self, offset: i64, value: Option<&[u8]>, may_roll: bool) -> bool {
        let Some(value) = value else {
            self.batch.push(None, None, false);
            return true;
        };
        let misfit = match &self.schema {
            // Inferred at the end of the batch; only objects can be.
            None => match serde_json::from_slice::<Value>(value) {
                Ok(Value::Object(_)) => None,
                Ok(_) => Some("value: not a JSON object".to_string()),
                Err(e) => Some(format!("value: not JSON ({e})")),
            },
            Some((schema, _)) => match schema.check(&value[self.header.min(value.len())..]) {
                Ok(fit) if fit.ignored_fields > 0 && self.inferring() => {
                    if may_roll {
                        return false;
                    }
                    Some("value: has fields this file's inferred schema lacks (a re-written file is one file)".into())
                }
                Ok(fit) => {
                    self.stats.ignored_fields += fit.ignored_fields;
                    None
                }
                Err(why) => Some(why.to_string()),
            },
        };
        if let Some(why) = &misfit {
            self.stats.misfit(offset, why);
        }
        self.batch.push(Some(value), misfit, false);
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

    /// Builds the batch's three columns and starts the next batch. `offsets` are the batch's record
    /// offsets (for the stats of a misfit found only by the decoder).
    fn take(&mut self, offsets: &[i64]) -> Result<[ArrayRef; 3], ColumnsError> {
        if self.schema.is_none() {
            self.schema = Some(self.infer(offsets));
        }
        let value = match self.decode_all() {
            Ok(value) => value,
            Err(_) => {
                // The checks let through something the decoder refuses: find those rows one by one,
                // keep them raw, and decode the rest.
                self.refuse_undecodable(offsets)?;
                self.decode_all()?
            }
        };
        let [raw, error] = self.batch.take_raw_and_error(self.json.keep_raw);
        Ok([value, raw, error])
    }

    fn stats(&self) -> &ValueStats {
        &self.stats
    }
}

#[cfg(test)]
mod tests {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Decimal128Type, Int64Type, TimestampMillisecondType};
    use arrow_array::Array;

    use super::*;
    use crate::values::ValueSchema;

    const SCHEMA: &str = r#"{"type":"record","name":"Order","fields":[
        {"name":"id","type":"long"},
        {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
        {"name":"at","type":["null",{"type":"long","logicalType":"timestamp-millis"}]},
        {"name":"user","type":{"type":"record","name":"U","fields":[{"name":"name","type":"string"}]}},
        {"name":"tags","type":{"type":"array","items":"string"}}
    ]}"#;

    fn columns(keep_raw: bool) -> JsonColumns {
        let schema = ValueSchema::from_avro(SCHEMA).unwrap();
        JsonColumns::new(Arc::new(JsonValues { declared: Some(schema), keep_raw }))
    }

    const GOOD: &str =
        r#"{"id":7,"amount":"12.34","at":"2026-11-30T10:00:00Z","user":{"name":"ann"},"tags":["a","b"],"x":1}"#;

    #[test]
    fn fitting_values_become_typed_columns_and_misfits_keep_their_bytes() {
        let mut c = columns(false);
        let broken = b"{\"id\":\"seven\"}";
        let not_json = [0xff, 0x00, b'{'];
        assert!(c.push(10, Some(GOOD.as_bytes()), true));
        assert!(c.push(11, Some(broken), true));
        assert!(c.push(12, None, true));
        assert!(c.push(13, Some(&not_json), true));
        let [value, raw, error] = c.take(&[10, 11, 12, 13]).unwrap();
        let value = value.as_struct();
        assert_eq!((value.len(), value.null_count()), (4, 3));
        assert_eq!(value.column_by_name("id").unwrap().as_primitive::<Int64Type>().value(0), 7);
        let amount = value.column_by_name("amount").unwrap().as_primitive::<Decimal128Type>();
        assert_eq!(amount.value(0), 1234);
        let at = value.column_by_name("at").unwrap().as_primitive::<TimestampMillisecondType>();
        assert_eq!(at.value(0), 1_796_032_800_000);
        let user = value.column_by_name("user").unwrap().as_struct();
        assert_eq!(user.column(0).as_string::<i32>().value(0), "ann");
        let raw = raw.as_binary::<i32>();
        assert!(raw.is_null(0) && raw.is_null(2), "a fitting value and a tombstone keep no bytes");
        assert_eq!((raw.value(1), raw.value(3)), (&broken[..], &not_json[..]));
        let error = error.as_string::<i32>();
        assert_eq!(error.value(1), "value.id: expected a 64-bit integer, got \"seven\"");
        assert!(error.value(3).starts_with("value: not JSON"));
        assert!(error.is_null(0) && error.is_null(2));
        assert_eq!(c.stats().misfits, 2);
        assert_eq!(c.stats().ignored_fields, 1);
        assert_eq!(c.stats().first_misfit.as_ref().map(|(o, _)| *o), Some(11));
    }

    #[test]
    fn keep_raw_keeps_every_value_and_batches_start_afresh() {
        let mut c = columns(true);
        assert!(c.push(0, Some(GOOD.as_bytes()), true));
        let [_, raw, _] = c.take(&[0]).unwrap();
        assert_eq!(raw.as_binary::<i32>().value(0), GOOD.as_bytes());
        assert!(c.push(1, None, true));
        let [value, raw, error] = c.take(&[1]).unwrap();
        assert_eq!((value.len(), raw.len(), error.len()), (1, 1, 1));
        assert!(value.is_null(0) && raw.is_null(0));
    }

    #[test]
    fn a_value_the_checks_pass_but_the_decoder_refuses_is_kept_raw() {
        // Two documents in one value: valid to nobody, caught by the checks already; so force the
        // decoder path with a row whose bytes are changed after the check.
        let mut c = columns(false);
        assert!(c.push(0, Some(GOOD.as_bytes()), true));
        assert!(c.push(1, Some(GOOD.as_bytes()), true));
        let (s, e) = c.batch.rows[1].span.unwrap();
        c.batch.bytes.splice(s..e, br#"{"id":1,"amount":"1","user":{"name":"x"},"tags":[]} {"id":2}"#.iter().copied());
        c.batch.rows[1].span = Some((s, c.batch.bytes.len()));
        let [value, raw, error] = c.take(&[0, 1]).unwrap();
        assert!(!value.is_null(0) && value.is_null(1));
        assert!(raw.as_binary::<i32>().value(1).starts_with(br#"{"id":1"#));
        assert!(error.as_string::<i32>().value(1).contains("not one complete JSON document"));
        assert_eq!(c.stats().misfits, 1);
    }

    /// Snippets of JSON for a field: of every kind, fitting some types and not others.
    const SNIPPETS: [&str; 24] = [
        "null",
        "true",
        "0",
        "-5",
        "7.25",
        "1.5",
        "1e3",
        "3000000000",
        "9223372036854775807",
        "18446744073709551615",
        "1e400",
        "\"12\"",
        "\"1.234\"",
        "\"abc\"",
        "\"2026-11-30\"",
        "\"2026-11-30T10:00:00Z\"",
        "\"2026-11-30 10:00:00\"",
        "\"30/11/2026\"",
        "[]",
        "[1, 2]",
        "[1.5]",
        "{}",
        "{\"x\": true}",
        "\"123e4567-e89b-12d3-a456-426614174000\"",
    ];

    const EVERY_TYPE: &str = r#"{"type":"record","name":"All","fields":[
        {"name":"a","type":["null","long"]},
        {"name":"b","type":["null","int"]},
        {"name":"c","type":["null","double"]},
        {"name":"d","type":["null",{"type":"bytes","logicalType":"decimal","precision":6,"scale":2}]},
        {"name":"e","type":["null",{"type":"long","logicalType":"timestamp-millis"}]},
        {"name":"f","type":["null",{"type":"array","items":"int"}]},
        {"name":"g","type":["null",{"type":"record","name":"G","fields":[{"name":"x","type":"boolean"}]}]},
        {"name":"h","type":["null",{"type":"map","values":"long"}]},
        {"name":"i","type":["null",{"type":"int","logicalType":"date"}]},
        {"name":"j","type":["null",{"type":"enum","name":"J","symbols":["abc"]}]},
        {"name":"k","type":["null",{"type":"string","logicalType":"uuid"}]},
        {"name":"l","type":["null","float"]},
        {"name":"m","type":["null","string"]}
    ]}"#;

    /// What the checks let through, arrow-json decodes (the refusal fallback is never needed): every
    /// snippet in every field of every type, one at a time.
    #[test]
    fn the_checks_never_pass_what_the_decoder_refuses() {
        let schema = ValueSchema::from_avro(EVERY_TYPE).unwrap();
        let mut fits = 0;
        for field in schema.fields().iter().map(|f| f.name.clone()) {
            for snippet in SNIPPETS {
                let json = format!("{{\"{field}\": {snippet}}}");
                let declared = Some(schema.clone());
                let mut c = JsonColumns::new(Arc::new(JsonValues { declared, keep_raw: false }));
                assert!(c.push(0, Some(json.as_bytes()), true));
                if c.batch.rows[0].misfit.is_none() {
                    fits += 1;
                    assert!(c.decode_all().is_ok(), "{json} fits but does not decode");
                }
            }
        }
        assert!(fits > 60, "most types take some snippets: {fits}");
    }
}

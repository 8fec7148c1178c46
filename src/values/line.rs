//! A record's value in a JSON line. Raw values are text (a JSON string, base64 when not UTF-8); typed
//! values (`--value-format json`) are the record's own JSON object, embedded as it was produced (or,
//! when it spans lines, compacted, with the bytes kept in `value_raw`), so JSON lines restore exactly.

use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::Value;

use super::columns::ValueStats;
use super::json::{object, Checker};
use crate::values::JsonValues;

/// The `value` of a line.
#[derive(Debug)]
pub(crate) enum LineValue {
    Text(String),
    Json(Box<RawValue>),
}

impl Serialize for LineValue {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            LineValue::Text(text) => s.serialize_str(text),
            LineValue::Json(raw) => raw.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for LineValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(d)?;
        if raw.get().starts_with('"') {
            serde_json::from_str(raw.get()).map(LineValue::Text).map_err(serde::de::Error::custom)
        } else {
            Ok(LineValue::Json(raw))
        }
    }
}

/// What a typed line says of its value.
#[derive(Debug, Default)]
pub(crate) struct TypedLine {
    pub value: Option<Box<RawValue>>,
    /// The bytes, when kept: a misfit's, a value that spans lines, or every value with `keep_raw`.
    pub raw: bool,
    pub error: Option<String>,
}

/// Typed values of one JSON lines file.
pub(crate) struct LineValues {
    json: Arc<JsonValues>,
    /// The declared schema's checker (none: inferring).
    checker: Option<Checker>,
    pub stats: ValueStats,
}

impl LineValues {
    pub fn new(json: Arc<JsonValues>) -> Self {
        let checker = json.declared.clone().map(Checker::new);
        Self { json, checker, stats: ValueStats::default() }
    }

    /// How the value of the record at `offset` is written.
    pub fn line(&mut self, offset: i64, bytes: &[u8]) -> TypedLine {
        let checked = match &mut self.checker {
            Some(checker) => checker.check(bytes).map(|fit| fit.ignored_fields).map_err(|m| m.to_string()),
            // Inferring: any object fits (a JSON line has no schema to fix).
            None => object(bytes).map(|()| 0),
        };
        match checked {
            Ok(ignored) => {
                self.stats.ignored_fields += ignored;
                let one_line = !bytes.iter().any(|b| matches!(b, b'\n' | b'\r'));
                let text = match one_line {
                    true => std::str::from_utf8(bytes).map(str::to_string).ok(),
                    false => serde_json::from_slice::<Value>(bytes).ok().map(|v| v.to_string()),
                };
                let value = text.and_then(|t| RawValue::from_string(t).ok());
                TypedLine { raw: !one_line || self.json.keep_raw || value.is_none(), value, error: None }
            }
            Err(why) => {
                self.stats.misfits += 1;
                self.stats.first_misfit.get_or_insert_with(|| (offset, why.clone()));
                TypedLine { value: None, raw: true, error: Some(why) }
            }
        }
    }
}

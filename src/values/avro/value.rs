//! Any Avro value in Avro's JSON form (as [`super::resolve`] encodes a default): for files whose records
//! are read and written whole rather than as columns (Iceberg's manifests). A nullable union's value is
//! null or its other branch's; bytes, fixed and a decimal are strings of code points 0–255; a map is an
//! object; a date, time or timestamp is its number.

use serde_json::{Map, Number, Value};

use super::binary::{DecodeError, Reader};
use super::{Avro, AvroField};

/// One record of `fields` read from `r`.
pub fn decode_record(fields: &[AvroField], r: &mut Reader) -> Result<Value, DecodeError> {
    let mut object = Map::new();
    for f in fields {
        let value = decode(&f.avro, r).map_err(|e| format!("{}: {e}", f.name))?;
        object.insert(f.name.clone(), value);
    }
    Ok(Value::Object(object))
}

/// A record of `fields` in Avro's binary encoding, from its JSON form; a field it lacks takes its
/// default.
pub fn encode_record(fields: &[AvroField], record: &Value, out: &mut Vec<u8>) -> Result<(), String> {
    super::resolve::encode(&Avro::Record(fields.into()), record, out)
}

/// One value of `avro` read from `r`.
pub fn decode(avro: &Avro, r: &mut Reader) -> Result<Value, DecodeError> {
    Ok(match avro {
        Avro::Nullable { null_first, inner } => match r.present(*null_first)? {
            true => decode(inner, r)?,
            false => Value::Null,
        },
        Avro::Single(inner) => {
            r.single()?;
            decode(inner, r)?
        }
        Avro::Boolean => Value::Bool(r.boolean()?),
        Avro::Int | Avro::Date | Avro::Time(crate::values::TimeUnit::Millis) => Value::from(r.int()?),
        Avro::Long | Avro::Time(_) | Avro::Timestamp { .. } => Value::from(r.long()?),
        Avro::Float => number(f64::from(r.float()?))?,
        Avro::Double => number(r.double()?)?,
        Avro::String | Avro::Uuid | Avro::DecimalText { .. } => Value::String(r.string()?.to_string()),
        Avro::Bytes | Avro::Decimal { fixed: None, .. } => latin1(r.bytes()?),
        Avro::Fixed(size) | Avro::Decimal { fixed: Some(size), .. } => latin1(r.take(*size)?),
        Avro::Enum(symbols) => Value::String(r.symbol(symbols)?.to_string()),
        Avro::Array(items) => {
            let mut out = Vec::new();
            r.items(0, |r| {
                out.push(decode(items, r)?);
                Ok(())
            })?;
            Value::Array(out)
        }
        Avro::Map(values) => {
            let mut out = Map::new();
            r.items(0, |r| {
                let key = r.string()?.to_string();
                out.insert(key, decode(values, r)?);
                Ok(())
            })?;
            Value::Object(out)
        }
        Avro::Record(fields) => decode_record(fields, r)?,
    })
}

fn number(f: f64) -> Result<Value, DecodeError> {
    Number::from_f64(f).map(Value::Number).ok_or_else(|| format!("{f} has no JSON form"))
}

/// Bytes in Avro's JSON form: a string of code points 0–255.
pub fn latin1(bytes: &[u8]) -> Value {
    Value::String(bytes.iter().map(|b| char::from(*b)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::avro::parse_record;

    #[test]
    fn a_record_reads_back_as_the_json_it_was_encoded_from() {
        let schema = r#"{"type": "record", "name": "r", "fields": [
            {"name": "path", "type": "string", "field-id": 500},
            {"name": "n", "type": ["null", "long"], "default": null},
            {"name": "flag", "type": "boolean"},
            {"name": "b", "type": ["null", "bytes"]},
            {"name": "kv", "type": {"type": "array", "logicalType": "map", "items": {"type": "record",
                "name": "k1_v2", "fields": [{"name": "key", "type": "int"}, {"name": "value", "type": "long"}]}}},
            {"name": "m", "type": {"type": "map", "values": "double"}}
        ]}"#;
        let fields = parse_record(schema).unwrap();
        let value = serde_json::json!({
            "path": "s3://b/k", "n": 7, "flag": true, "b": "\u{0}\u{ff}a",
            "kv": [{"key": 1, "value": -2}], "m": {"x": 1.5}
        });
        let mut bytes = Vec::new();
        encode_record(&fields, &value, &mut bytes).unwrap();
        let mut r = Reader::new(&bytes);
        assert_eq!(decode_record(&fields, &mut r).unwrap(), value);
        assert!(r.at_end());
        let nulls = serde_json::json!({"path": "", "n": null, "flag": false, "b": null, "kv": [], "m": {}});
        let mut bytes = Vec::new();
        encode_record(&fields, &nulls, &mut bytes).unwrap();
        assert_eq!(decode_record(&fields, &mut Reader::new(&bytes)).unwrap(), nulls);
    }
}

//! Whether a record's value fits the schema. The rules are at least as strict as the Arrow JSON decoder
//! that builds the column (same parsers for timestamps, dates and decimals; integers must be integers),
//! so a value that fits is decoded exactly; one that does not is kept raw with the reason.

use std::fmt;

use arrow_array::timezone::Tz;
use arrow_array::types::{Date32Type, Decimal128Type};
use arrow_cast::parse::{parse_decimal, string_to_datetime, Parser};
use serde_json::Value;

use super::{Fields, Node, ValueSchema, ValueType};

/// A value that fits: how many of its object keys the schema does not declare (ignored).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Fit {
    pub ignored_fields: u64,
}

/// Why a value does not fit, and where in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Misfit {
    /// From the top: field names and array indexes.
    path: Vec<Step>,
    why: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Field(String),
    Index(usize),
}

impl Misfit {
    fn new(why: String) -> Self {
        Self { path: Vec::new(), why }
    }

    fn under(mut self, step: Step) -> Self {
        self.path.insert(0, step);
        self
    }
}

impl fmt::Display for Misfit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("value")?;
        for step in &self.path {
            match step {
                Step::Field(name) => write!(f, ".{name}")?,
                Step::Index(i) => write!(f, "[{i}]")?,
            }
        }
        write!(f, ": {}", self.why)
    }
}

impl ValueSchema {
    /// Checks a record's value bytes.
    pub fn check(&self, bytes: &[u8]) -> Result<Fit, Misfit> {
        let value: Value = serde_json::from_slice(bytes).map_err(|e| Misfit::new(format!("not JSON ({e})")))?;
        let mut fit = Fit::default();
        match &*self.fields {
            [field] if self.wrapped => node(&field.node, &value, &mut fit)?,
            _ if !value.is_object() => return Err(Misfit::new(format!("not a JSON object (got {})", kind(&value)))),
            _ => record(&self.fields, &value, &mut fit)?,
        }
        Ok(fit)
    }
}

/// What a JSON value is, for messages.
pub(super) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn record(fields: &Fields, v: &Value, fit: &mut Fit) -> Result<(), Misfit> {
    let Value::Object(o) = v else { unreachable!("checked by the caller") };
    let mut known = 0;
    for f in fields.iter() {
        let value = o.get(&f.name);
        known += usize::from(value.is_some());
        node(&f.node, value.unwrap_or(&Value::Null), fit).map_err(|m| m.under(Step::Field(f.name.clone())))?;
    }
    fit.ignored_fields += (o.len() - known) as u64;
    Ok(())
}

fn node(n: &Node, v: &Value, fit: &mut Fit) -> Result<(), Misfit> {
    if v.is_null() {
        return if n.nullable { Ok(()) } else { Err(Misfit::new("required, but null or missing".into())) };
    }
    let fits = match (&n.ty, v) {
        (ValueType::Boolean, Value::Bool(_)) => true,
        (ValueType::Int, Value::Number(x)) => x.as_i64().is_some_and(|i| i32::try_from(i).is_ok()),
        (ValueType::Long, Value::Number(x)) => x.is_i64(),
        (ValueType::Float | ValueType::Double, Value::Number(_)) => true,
        (ValueType::String, Value::String(_)) => true,
        (ValueType::Uuid, Value::String(s)) => is_uuid(s),
        (ValueType::Enum(symbols), Value::String(s)) => symbols.iter().any(|sym| sym == s),
        (ValueType::Timestamp { .. }, Value::Number(x)) => x.is_i64(),
        (ValueType::Timestamp { .. }, Value::String(s)) => string_to_datetime(&utc(), s).is_ok(),
        (ValueType::Date, Value::Number(x)) => x.as_i64().is_some_and(|i| i32::try_from(i).is_ok()),
        (ValueType::Date, Value::String(s)) => Date32Type::parse(s).is_some(),
        (ValueType::Decimal { precision, scale }, Value::Number(x)) => {
            parse_decimal::<Decimal128Type>(&x.to_string(), *precision, *scale).is_ok()
        }
        (ValueType::Decimal { precision, scale }, Value::String(s)) => {
            parse_decimal::<Decimal128Type>(s, *precision, *scale).is_ok()
        }
        (ValueType::Array(item), Value::Array(items)) => {
            for (i, x) in items.iter().enumerate() {
                node(item, x, fit).map_err(|m| m.under(Step::Index(i)))?;
            }
            true
        }
        (ValueType::Map(values), Value::Object(o)) => {
            for (k, x) in o {
                node(values, x, fit).map_err(|m| m.under(Step::Field(k.clone())))?;
            }
            true
        }
        (ValueType::Record(fields), Value::Object(_)) => {
            record(fields, v, fit)?;
            true
        }
        _ => false,
    };
    if fits {
        Ok(())
    } else {
        Err(Misfit::new(format!("expected {}, got {}", n.ty, shown(v))))
    }
}

/// A value in an error message, cut short.
fn shown(v: &Value) -> String {
    const MAX: usize = 40;
    let text = v.to_string();
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

fn utc() -> Tz {
    "+00:00".parse().expect("UTC is a time zone")
}

fn is_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> ValueSchema {
        ValueSchema::from_avro(
            r#"{"type":"record","name":"R","fields":[
              {"name":"n","type":"int"},
              {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":6,"scale":2}},
              {"name":"at","type":["null",{"type":"long","logicalType":"timestamp-millis"}]},
              {"name":"day","type":["null",{"type":"int","logicalType":"date"}]},
              {"name":"id","type":["null",{"type":"string","logicalType":"uuid"}]},
              {"name":"kind","type":["null",{"type":"enum","name":"K","symbols":["A","B"]}]},
              {"name":"items","type":["null",{"type":"array","items":{"type":"record","name":"I","fields":[
                  {"name":"sku","type":"string"}]}}]},
              {"name":"attrs","type":["null",{"type":"map","values":"long"}]}
            ]}"#,
        )
        .unwrap()
    }

    fn check(json: &str) -> Result<Fit, String> {
        schema().check(json.as_bytes()).map_err(|m| m.to_string())
    }

    #[test]
    fn values_that_fit_and_ignored_fields() {
        assert_eq!(check(r#"{"n":1,"amount":"12.5"}"#), Ok(Fit { ignored_fields: 0 }));
        let full = r#"{"n":-2,"amount":1234.56,"at":"2026-11-30T10:00:00Z","day":"2026-11-30",
            "id":"123e4567-e89b-12d3-a456-426614174000","kind":"B","items":[{"sku":"x","extra":1}],
            "attrs":{"a":1},"more":true}"#;
        assert_eq!(check(full), Ok(Fit { ignored_fields: 2 }));
        assert!(check(r#"{"n":1,"amount":0,"at":1795996800000,"day":20422}"#).is_ok());
    }

    #[test]
    fn misfits_say_where_and_why() {
        assert_eq!(check("nope").unwrap_err().split(" (").next(), Some("value: not JSON"));
        assert_eq!(check("[1]").unwrap_err(), "value: not a JSON object (got an array)");
        assert_eq!(check(r#"{"amount":1}"#).unwrap_err(), "value.n: required, but null or missing");
        assert_eq!(check(r#"{"n":1.5,"amount":1}"#).unwrap_err(), "value.n: expected a 32-bit integer, got 1.5");
        assert_eq!(
            check(r#"{"n":3000000000,"amount":1}"#).unwrap_err(),
            "value.n: expected a 32-bit integer, got 3000000000"
        );
        assert!(check(r#"{"n":1,"amount":"12345.6"}"#)
            .unwrap_err()
            .starts_with("value.amount: expected a decimal(6, 2)"));
        assert!(check(r#"{"n":1,"amount":1,"at":"yesterday"}"#)
            .unwrap_err()
            .starts_with("value.at: expected a timestamp"));
        assert!(check(r#"{"n":1,"amount":1,"day":"30/11/2026"}"#).unwrap_err().starts_with("value.day:"));
        assert!(check(r#"{"n":1,"amount":1,"id":"not-a-uuid"}"#).unwrap_err().starts_with("value.id:"));
        assert_eq!(
            check(r#"{"n":1,"amount":1,"kind":"C"}"#).unwrap_err(),
            r#"value.kind: expected one of A, B, got "C""#
        );
        assert_eq!(
            check(r#"{"n":1,"amount":1,"items":[{"sku":"a"},{"sku":2}]}"#).unwrap_err(),
            "value.items[1].sku: expected a string, got 2"
        );
        assert_eq!(
            check(r#"{"n":1,"amount":1,"attrs":{"k":"v"}}"#).unwrap_err(),
            r#"value.attrs.k: expected a 64-bit integer, got "v""#
        );
    }
}

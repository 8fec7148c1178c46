//! Avro schemas (`.avsc`, JSON, or a registry's schema text) as an [`Avro`] tree that says exactly how a
//! value is encoded: the primitives, records, enums, arrays, maps, fixed, unions of one type with null
//! (nullable), references to named types defined earlier, and the logical types timestamp-millis/micros,
//! local-timestamp-millis/micros, date, time-millis/micros, decimal (on bytes or fixed) and uuid. Unknown
//! logical types fall back to their underlying type, as the Avro specification says. JSON values are
//! typed by the tree's [`Node`]s (`json`); binary Avro is decoded by the tree itself (`binary`).

pub mod binary;
pub(crate) mod columns;
mod json;
pub mod reencode;
pub mod resolve;
pub mod value;
pub mod widen;

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::{Fields, SchemaError, TimeUnit};

/// Arrow's widest decimal here is Decimal128.
const MAX_DECIMAL_PRECISION: u64 = 38;

/// A record's fields, in order.
pub type AvroRecord = Arc<[AvroField]>;

/// A record's field: its name, its type and its default (the JSON the schema gives, which schema
/// resolution writes for a reader's field the writer lacks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AvroField {
    pub name: String,
    pub avro: Avro,
    pub default: Option<Value>,
}

/// An Avro type, as the binary encoding needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Avro {
    Boolean,
    Int,
    Long,
    Float,
    Double,
    Bytes,
    String,
    Fixed(usize),
    Enum(Arc<[String]>),
    Array(Box<Avro>),
    Map(Box<Avro>),
    Record(AvroRecord),
    /// A union of null and one other type; `null_first`: null is branch 0 (else branch 1).
    Nullable {
        null_first: bool,
        inner: Box<Avro>,
    },
    /// A union of one type (its branch index, 0, comes before the value).
    Single(Box<Avro>),
    /// Days since the epoch (an int).
    Date,
    /// Milliseconds (an int) or microseconds (a long) after midnight.
    Time(TimeUnit),
    /// A count of `unit` since the epoch (a long); `utc` is false for the local timestamps.
    Timestamp {
        unit: TimeUnit,
        utc: bool,
    },
    /// A two's-complement big-endian unscaled integer, in bytes or in a fixed of `fixed` bytes.
    Decimal {
        precision: u8,
        scale: i8,
        fixed: Option<usize>,
    },
    /// A decimal declared on a string: not an Avro decimal (binary values are strings, the logical
    /// type ignored as the specification says), but JSON values typed by it are decimals.
    DecimalText {
        precision: u8,
        scale: i8,
    },
    /// A string in the 8-4-4-4-12 hexadecimal form.
    Uuid,
}

/// The name of the one field of a schema that is not a record, read as a record (see [`parse_record`]).
pub const NOT_A_RECORD_FIELD: &str = "value";

/// The schema's top-level record. A schema of another type (a Schema Registry key or value of
/// `"string"` or `"long"`, say) is read as a record of one field, [`NOT_A_RECORD_FIELD`]: a record's
/// encoding is its fields' one after another, so the bytes are the same. Not a union holding a record
/// (`["null", {"type": "record", ...}]`): as a record of one field it would not resolve against the
/// record itself, its other versions' schema.
pub fn parse_record(text: &str) -> Result<AvroRecord, SchemaError> {
    parse_top(text).map(|(fields, _)| fields)
}

/// The top-level record, and whether the schema is one.
fn parse_top(text: &str) -> Result<(AvroRecord, bool), SchemaError> {
    let root: Value = serde_json::from_str(text).map_err(|e| SchemaError::NotJson(e.to_string()))?;
    let mut parser = Parser { names: HashMap::new(), path: vec!["schema".into()] };
    Ok(match parser.node(&root, "")? {
        Avro::Record(fields) => (fields, true),
        Avro::Nullable { inner, .. } | Avro::Single(inner) if matches!(*inner, Avro::Record(_)) => {
            let why = "a union holding a record at the top level (a record is needed there)";
            return Err(parser.fail(why.into()));
        }
        other => (Arc::from([AvroField { name: NOT_A_RECORD_FIELD.into(), avro: other, default: None }]), false),
    })
}

/// The fields of the top-level record, as JSON values are typed (a JSON object per value: the top level
/// must be a record).
pub(super) fn parse(text: &str) -> Result<Fields, SchemaError> {
    match parse_top(text)? {
        (fields, true) => Ok(json::fields(&fields)),
        (_, false) => Err(SchemaError::Unsupported {
            path: "schema".into(),
            why: "the top level must be a record (a JSON object per Kafka value)".into(),
        }),
    }
}

struct Parser {
    /// Named types defined so far, by full and by short name.
    names: HashMap<String, Avro>,
    path: Vec<String>,
}

impl Parser {
    fn fail(&self, why: String) -> SchemaError {
        SchemaError::Unsupported { path: self.path.join("."), why }
    }

    fn node(&mut self, v: &Value, namespace: &str) -> Result<Avro, SchemaError> {
        match v {
            Value::String(name) => self.named(name, namespace),
            Value::Array(branches) => self.union(branches, namespace),
            Value::Object(o) => self.complex(o, namespace),
            other => Err(self.fail(format!("a type is a name, an object or a union, not {other}"))),
        }
    }

    fn named(&self, name: &str, namespace: &str) -> Result<Avro, SchemaError> {
        Ok(match name {
            "boolean" => Avro::Boolean,
            "int" => Avro::Int,
            "long" => Avro::Long,
            "float" => Avro::Float,
            "double" => Avro::Double,
            "bytes" => Avro::Bytes,
            "string" => Avro::String,
            "null" => return Err(self.fail("null is supported only in a union with one other type".into())),
            _ => {
                let full = if name.contains('.') || namespace.is_empty() {
                    name.to_string()
                } else {
                    format!("{namespace}.{name}")
                };
                return self.names.get(&full).or_else(|| self.names.get(name)).cloned().ok_or_else(|| {
                    self.fail(format!("unknown type {name:?} (named types must be defined before use)"))
                });
            }
        })
    }

    fn union(&mut self, branches: &[Value], namespace: &str) -> Result<Avro, SchemaError> {
        let is_null = |v: &Value| v.as_str() == Some("null");
        match branches {
            [one] if !is_null(one) => {
                let inner = self.node(one, namespace)?;
                if matches!(inner, Avro::Nullable { .. } | Avro::Single(_)) {
                    return Err(self.fail("a union cannot hold another union".into()));
                }
                Ok(Avro::Single(Box::new(inner)))
            }
            [null, other] | [other, null] if is_null(null) && !is_null(other) => {
                let inner = self.node(other, namespace)?;
                if matches!(inner, Avro::Nullable { .. } | Avro::Single(_)) {
                    return Err(self.fail("a union cannot hold another union".into()));
                }
                Ok(Avro::Nullable { null_first: is_null(&branches[0]), inner: Box::new(inner) })
            }
            _ => Err(self.fail(format!(
                "unions are supported with null and one other type; this one has {} others (declare such a \
                 field as a string, or split it into fields)",
                branches.iter().filter(|b| !is_null(b)).count()
            ))),
        }
    }

    fn complex(&mut self, o: &Map<String, Value>, namespace: &str) -> Result<Avro, SchemaError> {
        let kind = o.get("type").ok_or_else(|| self.fail("a type object needs \"type\"".into()))?;
        let kind = match kind.as_str() {
            Some(k) => k,
            // {"type": {...}} or {"type": [...]}: a wrapped type.
            None => return self.node(kind, namespace),
        };
        match kind {
            "record" | "error" => self.record(o, namespace),
            "enum" => {
                let symbols = o
                    .get("symbols")
                    .and_then(Value::as_array)
                    .ok_or_else(|| self.fail("an enum needs symbols".into()))?;
                let symbols: Option<Vec<String>> = symbols.iter().map(|s| s.as_str().map(str::to_string)).collect();
                let symbols = symbols.ok_or_else(|| self.fail("enum symbols are strings".into()))?;
                if let Some(twice) = symbols.iter().enumerate().find(|(i, s)| symbols[..*i].contains(s)) {
                    return Err(self.fail(format!("enum symbol {:?} is declared twice", twice.1)));
                }
                self.define(o, namespace, Avro::Enum(symbols.into()))
            }
            "array" => Ok(Avro::Array(Box::new(self.child("items", o, namespace)?))),
            "map" => Ok(Avro::Map(Box::new(self.child("values", o, namespace)?))),
            "fixed" => {
                let size =
                    o.get("size").and_then(Value::as_u64).ok_or_else(|| self.fail("a fixed needs a size".into()))?;
                if size > i32::MAX as u64 {
                    return Err(self.fail(format!("a fixed of {size} bytes is too large")));
                }
                let fixed = self.logical(o, Avro::Fixed(size as usize))?;
                self.define(o, namespace, fixed)
            }
            primitive => {
                let base = self.named(primitive, namespace)?;
                self.logical(o, base)
            }
        }
    }

    fn child(&mut self, key: &str, o: &Map<String, Value>, namespace: &str) -> Result<Avro, SchemaError> {
        let v = o.get(key).ok_or_else(|| self.fail(format!("needs \"{key}\"")))?;
        self.path.push(key.to_string());
        let node = self.node(v, namespace);
        self.path.pop();
        node
    }

    /// The logical type on `base`, or `base` when there is none or it is unknown.
    fn logical(&self, o: &Map<String, Value>, base: Avro) -> Result<Avro, SchemaError> {
        let Some(logical) = o.get("logicalType").and_then(Value::as_str) else { return Ok(base) };
        let timestamp = |unit, utc| Avro::Timestamp { unit, utc };
        Ok(match (logical, &base) {
            ("timestamp-millis", Avro::Long) => timestamp(TimeUnit::Millis, true),
            ("timestamp-micros", Avro::Long) => timestamp(TimeUnit::Micros, true),
            ("local-timestamp-millis", Avro::Long) => timestamp(TimeUnit::Millis, false),
            ("local-timestamp-micros", Avro::Long) => timestamp(TimeUnit::Micros, false),
            ("date", Avro::Int) => Avro::Date,
            ("time-millis", Avro::Int) => Avro::Time(TimeUnit::Millis),
            ("time-micros", Avro::Long) => Avro::Time(TimeUnit::Micros),
            ("uuid", Avro::String) => Avro::Uuid,
            ("decimal", Avro::Bytes | Avro::Fixed(_) | Avro::String) => {
                let precision = o.get("precision").and_then(Value::as_u64).unwrap_or(0);
                let scale = o.get("scale").and_then(Value::as_u64).unwrap_or(0);
                if precision == 0 || precision > MAX_DECIMAL_PRECISION || scale > precision {
                    return Err(self.fail(format!(
                        "decimal({precision}, {scale}) is not supported: precision 1 to {MAX_DECIMAL_PRECISION}, \
                         scale at most the precision (declare wider decimals as strings)"
                    )));
                }
                let (precision, scale) = (precision as u8, scale as i8);
                match base {
                    Avro::Fixed(size) => Avro::Decimal { precision, scale, fixed: Some(size) },
                    Avro::String => Avro::DecimalText { precision, scale },
                    _ => Avro::Decimal { precision, scale, fixed: None },
                }
            }
            _ => base,
        })
    }

    fn record(&mut self, o: &Map<String, Value>, namespace: &str) -> Result<Avro, SchemaError> {
        let name = o.get("name").and_then(Value::as_str).unwrap_or("");
        let namespace = o.get("namespace").and_then(Value::as_str).unwrap_or(namespace).to_string();
        let fields =
            o.get("fields").and_then(Value::as_array).ok_or_else(|| self.fail("a record needs fields".into()))?;
        self.path.push(name.to_string());
        let mut out: Vec<AvroField> = Vec::with_capacity(fields.len());
        for f in fields {
            let field_name =
                f.get("name").and_then(Value::as_str).ok_or_else(|| self.fail("a field needs a name".into()))?;
            if out.iter().any(|seen| seen.name == field_name) {
                return Err(self.fail(format!("field {field_name:?} is declared twice")));
            }
            self.path.push(field_name.to_string());
            let ty = f.get("type").ok_or_else(|| self.fail("a field needs a type".into()))?;
            let node = self.node(ty, &namespace)?;
            self.path.pop();
            out.push(AvroField { name: field_name.to_string(), avro: node, default: f.get("default").cloned() });
        }
        self.path.pop();
        self.define(o, &namespace, Avro::Record(Arc::from(out)))
    }

    /// Remembers a named type (record, enum, fixed) for later references.
    fn define(&mut self, o: &Map<String, Value>, namespace: &str, node: Avro) -> Result<Avro, SchemaError> {
        if let Some(name) = o.get("name").and_then(Value::as_str) {
            let ns = o.get("namespace").and_then(Value::as_str).unwrap_or(namespace);
            let full = if name.contains('.') || ns.is_empty() { name.to_string() } else { format!("{ns}.{name}") };
            self.names.insert(full, node.clone());
            self.names.entry(name.to_string()).or_insert_with(|| node.clone());
        }
        Ok(node)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::{Node, ValueType};

    const ORDER: &str = r#"{
      "type": "record", "name": "Order", "namespace": "shop",
      "fields": [
        {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "day", "type": ["null", {"type": "int", "logicalType": "date"}], "default": null},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
        {"name": "user", "type": {"type": "record", "name": "User", "fields": [
            {"name": "name", "type": "string"}, {"name": "age", "type": ["int", "null"]}]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "double"}},
        {"name": "buyer", "type": ["null", "User"]},
        {"name": "at_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "odd", "type": {"type": "int", "logicalType": "something-else"}}
      ]}"#;

    #[test]
    fn maps_avro_types_and_logical_types() {
        let fields = parse(ORDER).unwrap();
        let ty = |name: &str| fields.iter().find(|f| f.name == name).unwrap().node.clone();
        assert_eq!(ty("id"), Node { ty: ValueType::Uuid, nullable: false });
        assert_eq!(ty("amount").ty, ValueType::Decimal { precision: 12, scale: 2 });
        assert_eq!(ty("at").ty, ValueType::Timestamp { unit: TimeUnit::Millis, utc: true });
        assert_eq!(ty("at_us").ty, ValueType::Timestamp { unit: TimeUnit::Micros, utc: true });
        assert_eq!(ty("day"), Node { ty: ValueType::Date, nullable: true });
        assert_eq!(ty("status").ty, ValueType::Enum(vec!["NEW".to_string(), "PAID".to_string()].into()));
        let ValueType::Record(user) = ty("user").ty else { panic!("user is a record") };
        assert_eq!(user[1].node, Node { ty: ValueType::Int, nullable: true });
        assert_eq!(ty("tags").ty, ValueType::Array(Box::new(Node { ty: ValueType::String, nullable: false })));
        assert_eq!(ty("attrs").ty, ValueType::Map(Box::new(Node { ty: ValueType::Double, nullable: false })));
        // A reference to a named type defined earlier, made nullable by the union.
        assert_eq!(ty("buyer"), Node { nullable: true, ..ty("user") });
        assert_eq!(ty("odd").ty, ValueType::Int, "unknown logical types fall back to the underlying type");
    }

    #[test]
    fn json_typing_keeps_what_it_took_before_the_avro_tree() {
        let schema = r#"{"type":"record","name":"R","fields":[
            {"name":"price","type":{"type":"string","logicalType":"decimal","precision":8,"scale":2}},
            {"name":"only","type":["long"]}]}"#;
        let fields = parse(schema).unwrap();
        assert_eq!(fields[0].node.ty, ValueType::Decimal { precision: 8, scale: 2 }, "a decimal on a string");
        assert_eq!(fields[1].node, Node { ty: ValueType::Long, nullable: false }, "a union of one type");
        let record = parse_record(schema).unwrap();
        assert_eq!(record[0].avro, Avro::DecimalText { precision: 8, scale: 2 }, "binary values are strings");
        assert_eq!(record[1].avro, Avro::Single(Box::new(Avro::Long)));
    }

    #[test]
    fn refuses_what_it_cannot_map_and_says_where() {
        let union = r#"{"type":"record","name":"R","fields":[{"name":"x","type":["string","long"]}]}"#;
        let err = parse(union).unwrap_err().to_string();
        assert!(err.contains("schema.R.x") && err.contains("unions"), "{err}");
        let unknown = r#"{"type":"record","name":"R","fields":[{"name":"x","type":"Later"}]}"#;
        assert!(parse(unknown).unwrap_err().to_string().contains("unknown type \"Later\""));
        assert!(parse(r#""string""#).unwrap_err().to_string().contains("top level must be a record"));
        // A registered schema of another type is a record of one field; not a union holding a record.
        let plain = parse_record(r#"["null", "string"]"#).unwrap();
        assert_eq!((plain.len(), plain[0].name.as_str()), (1, NOT_A_RECORD_FIELD));
        let nullable = parse_record(r#"["null", {"type":"record","name":"R","fields":[]}]"#).unwrap_err();
        assert!(nullable.to_string().contains("a union holding a record"), "{nullable}");
        assert!(matches!(parse("{"), Err(SchemaError::NotJson(_))));
        let wide = r#"{"type":"record","name":"R","fields":[{"name":"x","type":
            {"type":"bytes","logicalType":"decimal","precision":40,"scale":2}}]}"#;
        assert!(parse(wide).unwrap_err().to_string().contains("decimal(40, 2)"));
        let twice = r#"{"type":"record","name":"R","fields":[{"name":"x","type":"int"},{"name":"x","type":"int"}]}"#;
        assert!(parse(twice).unwrap_err().to_string().contains("declared twice"));
        let symbols = r#"{"type":"record","name":"R","fields":[{"name":"x","type":
            {"type":"enum","name":"E","symbols":["A","B","A"]}}]}"#;
        assert!(parse(symbols).unwrap_err().to_string().contains("enum symbol \"A\" is declared twice"));
    }
}

//! The Avro tree as JSON values are typed (`--value-format json`): Avro's JSON encoding writes bytes and
//! fixed as strings, so they are kept as text; a nullable union is a nullable node; times are their
//! underlying integers.

use std::sync::Arc;

use super::{Avro, AvroField};
use crate::values::{FieldNode, Fields, Node, ValueType};

pub(super) fn fields(record: &[AvroField]) -> Fields {
    let out: Vec<FieldNode> = record.iter().map(|f| FieldNode { name: f.name.clone(), node: node(&f.avro) }).collect();
    Arc::from(out)
}

fn node(avro: &Avro) -> Node {
    let ty = match avro {
        Avro::Nullable { inner, .. } => return Node { nullable: true, ..node(inner) },
        Avro::Single(inner) => return node(inner),
        Avro::Boolean => ValueType::Boolean,
        Avro::Int | Avro::Time(crate::values::TimeUnit::Millis) => ValueType::Int,
        Avro::Long | Avro::Time(crate::values::TimeUnit::Micros) => ValueType::Long,
        Avro::Float => ValueType::Float,
        Avro::Double => ValueType::Double,
        Avro::Bytes | Avro::String | Avro::Fixed(_) => ValueType::String,
        Avro::Enum(symbols) => ValueType::Enum(symbols.clone()),
        Avro::Array(items) => ValueType::Array(Box::new(node(items))),
        Avro::Map(values) => ValueType::Map(Box::new(node(values))),
        Avro::Record(record) => ValueType::Record(fields(record)),
        Avro::Date => ValueType::Date,
        Avro::Timestamp { unit, utc } => ValueType::Timestamp { unit: *unit, utc: *utc },
        Avro::Decimal { precision, scale, .. } | Avro::DecimalText { precision, scale } => {
            ValueType::Decimal { precision: *precision, scale: *scale }
        }
        Avro::Uuid => ValueType::Uuid,
    };
    Node { ty, nullable: false }
}

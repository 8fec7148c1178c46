//! Value types as Arrow types: record→struct, array→list, map→map (utf8 keys), nullable→nullable,
//! enum, uuid and bytes→utf8, timestamps→timestamp(ms|µs, +00:00 or no zone), date→date32,
//! decimal→decimal128.

use std::sync::Arc;

use arrow_array::{ArrayRef, NullArray, StructArray};
use arrow_buffer::NullBuffer;
use arrow_schema::{DataType, Field, Fields as ArrowFields, TimeUnit as ArrowUnit};

use super::{Fields, Node, TimeUnit, ValueSchema, ValueType};

/// The name of the typed value's column.
pub const VALUE_FIELD: &str = "value";

/// The `value` column of a typed archive: a nullable struct (null for a tombstone or a misfit).
pub fn value_field(schema: &ValueSchema) -> Field {
    typed_value_field(struct_fields(schema.fields()))
}

/// The `value` field of a struct of `fields`. Parquet cannot hold an empty struct, so a schema without
/// fields (a file whose values gave none to infer from, or a record declared empty) gets one field of
/// nulls, `no_schema`.
pub(crate) fn typed_value_field(fields: ArrowFields) -> Field {
    let fields = match fields.is_empty() {
        true => placeholder_fields(),
        false => fields,
    };
    Field::new(VALUE_FIELD, DataType::Struct(fields), true)
}

/// A batch's `value` column of `rows` rows when the file's struct has no fields (see
/// [`typed_value_field`]): every row null.
pub(crate) fn placeholder_column(rows: usize) -> ArrayRef {
    let column: ArrayRef = Arc::new(NullArray::new(rows));
    Arc::new(StructArray::new(placeholder_fields(), vec![column], Some(NullBuffer::new_null(rows))))
}

pub(crate) fn placeholder_fields() -> ArrowFields {
    ArrowFields::from(vec![Field::new("no_schema", DataType::Null, true)])
}

/// A record's struct fields (a record without fields: the placeholder, see [`typed_value_field`]).
fn struct_fields(fields: &Fields) -> ArrowFields {
    match fields.is_empty() {
        true => placeholder_fields(),
        false => fields.iter().map(|f| Field::new(&f.name, data_type(&f.node), f.node.nullable)).collect(),
    }
}

fn data_type(n: &Node) -> DataType {
    match &n.ty {
        ValueType::Boolean => DataType::Boolean,
        ValueType::Int => DataType::Int32,
        ValueType::Long => DataType::Int64,
        ValueType::Float => DataType::Float32,
        ValueType::Double => DataType::Float64,
        ValueType::String | ValueType::Uuid | ValueType::Enum(_) => DataType::Utf8,
        ValueType::Timestamp { unit, utc } => {
            let unit = match unit {
                TimeUnit::Millis => ArrowUnit::Millisecond,
                TimeUnit::Micros => ArrowUnit::Microsecond,
            };
            // An offset, not "UTC": arrow-json parses zone names only with chrono-tz.
            DataType::Timestamp(unit, utc.then(|| "+00:00".into()))
        }
        ValueType::Date => DataType::Date32,
        ValueType::Decimal { precision, scale } => DataType::Decimal128(*precision, *scale),
        ValueType::Array(item) => DataType::List(Arc::new(Field::new("item", data_type(item), item.nullable))),
        ValueType::Map(values) => {
            let entries = ArrowFields::from(vec![
                Field::new("key", DataType::Utf8, false),
                Field::new("value", data_type(values), values.nullable),
            ]);
            DataType::Map(Arc::new(Field::new("entries", DataType::Struct(entries), false)), false)
        }
        ValueType::Record(fields) => DataType::Struct(struct_fields(fields)),
    }
}

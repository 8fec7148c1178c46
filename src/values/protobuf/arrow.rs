//! Protobuf types as Arrow types: message→struct, repeated→list, map→map (keys of their own type),
//! enum→utf8 (the symbol), the integers→int32/int64/uint32/uint64 as declared, bytes and opaque
//! messages→binary, Timestamp→timestamp(µs, +00:00), Duration→duration(µs), wrappers→the wrapped type.
//! Every field is nullable: absent with explicit presence, or in a null row.

use std::sync::Arc;

use arrow_schema::{DataType, Field, Fields, TimeUnit};

use super::{Kind, Proto, ProtoField, ProtoMessage};
use crate::values::arrow::placeholder_fields;
use crate::values::column::Column;

/// The Arrow type of one value of `ty`.
pub fn data_type(ty: &Proto) -> DataType {
    match ty {
        Proto::Double => DataType::Float64,
        Proto::Float => DataType::Float32,
        Proto::Int32 | Proto::SInt32 | Proto::SFixed32 => DataType::Int32,
        Proto::Int64 | Proto::SInt64 | Proto::SFixed64 => DataType::Int64,
        Proto::UInt32 | Proto::Fixed32 => DataType::UInt32,
        Proto::UInt64 | Proto::Fixed64 => DataType::UInt64,
        Proto::Bool => DataType::Boolean,
        Proto::String | Proto::Enum(_) => DataType::Utf8,
        Proto::Bytes | Proto::Opaque => DataType::Binary,
        Proto::Message(message) => DataType::Struct(struct_fields(message)),
        Proto::Timestamp => DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into())),
        Proto::Duration => DataType::Duration(TimeUnit::Microsecond),
        Proto::Wrapper(inner) => data_type(inner),
    }
}

/// The Arrow field of a message's field.
pub fn field(f: &ProtoField) -> Field {
    let ty = match &f.kind {
        Kind::Single | Kind::Optional => data_type(&f.ty),
        Kind::Repeated => DataType::List(Arc::new(Field::new("item", data_type(&f.ty), false))),
        Kind::Map(key) => {
            let entries = Fields::from(vec![
                Field::new("key", data_type(key), false),
                Field::new("value", data_type(&f.ty), true),
            ]);
            DataType::Map(Arc::new(Field::new("entries", DataType::Struct(entries), false)), false)
        }
    };
    Field::new(&f.name, ty, true)
}

/// A message's struct fields; a message without fields gets the placeholder field of nulls (Parquet
/// cannot hold an empty struct).
pub fn struct_fields(message: &ProtoMessage) -> Fields {
    match message.fields.is_empty() {
        true => placeholder_fields(),
        false => message.fields.iter().map(field).collect(),
    }
}

/// Appends what an absent field holds: its default without presence, a null with it, an empty list
/// or map.
pub fn append_absent(f: &ProtoField, column: &mut Column) {
    match (&f.kind, column) {
        (Kind::Single, column) => append_default(&f.ty, column),
        (Kind::Optional, column) => column.push_null(),
        (Kind::Repeated, Column::List(list)) | (Kind::Map(_), Column::Map(list)) => list.close(true),
        (kind, _) => unreachable!("the column made for a {kind:?} field is of its Arrow type"),
    }
}

/// Appends the value of an absent field without presence (proto3's defaults: zero, empty, the enum's
/// first symbol); a type that always has presence gets a null.
pub fn append_default(ty: &Proto, column: &mut Column) {
    match (ty, column) {
        (Proto::Double, Column::Float64(c)) => c.push(0.0),
        (Proto::Float, Column::Float32(c)) => c.push(0.0),
        (Proto::Int32 | Proto::SInt32 | Proto::SFixed32, Column::Int32(c)) => c.push(0),
        (Proto::Int64 | Proto::SInt64 | Proto::SFixed64, Column::Int64(c)) => c.push(0),
        (Proto::UInt32 | Proto::Fixed32, Column::UInt32(c)) => c.push(0),
        (Proto::UInt64 | Proto::Fixed64, Column::UInt64(c)) => c.push(0),
        (Proto::Bool, Column::Boolean(c)) => c.push(false),
        (Proto::String, Column::Utf8(c)) => c.push(""),
        (Proto::Bytes, Column::Binary(c)) => c.push(b""),
        (Proto::Enum(e), Column::Utf8(c)) => c.push(e.default_symbol()),
        (Proto::Message(_) | Proto::Opaque | Proto::Timestamp | Proto::Duration | Proto::Wrapper(_), column) => {
            column.push_null()
        }
        (ty, _) => unreachable!("the column made for {ty:?} is of its Arrow type"),
    }
}

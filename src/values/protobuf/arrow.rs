//! Protobuf types as Arrow types: message→struct, repeated→list, map→map (keys of their own type),
//! enum→utf8 (the symbol), the integers→int32/int64/uint32/uint64 as declared, bytes and opaque
//! messages→binary, Timestamp→timestamp(µs, +00:00), Duration→duration(µs), wrappers→the wrapped type.
//! Every field is nullable: absent with explicit presence, or in a null row.

use std::sync::Arc;

use arrow_array::builder::{
    ArrayBuilder, BinaryBuilder, BooleanBuilder, DurationMicrosecondBuilder, Float32Builder, Float64Builder,
    Int32Builder, Int64Builder, NullBuilder, StringBuilder, StructBuilder, TimestampMicrosecondBuilder, UInt32Builder,
    UInt64Builder,
};
use arrow_schema::{DataType, Field, Fields, TimeUnit};

use super::{Kind, Proto, ProtoField, ProtoMessage};
use crate::values::arrow::{cast, placeholder_fields, DynList, DynMap};

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

/// Appends a null of `f` to `b` (made for its Arrow type).
pub fn append_null_field(f: &ProtoField, b: &mut dyn ArrayBuilder) {
    match &f.kind {
        Kind::Single | Kind::Optional => append_null(&f.ty, b),
        Kind::Repeated => cast::<DynList>(b).append(false),
        Kind::Map(_) => cast::<DynMap>(b).append(false).expect("a null map"),
    }
}

/// Appends a null of `ty`.
pub fn append_null(ty: &Proto, b: &mut dyn ArrayBuilder) {
    match ty {
        Proto::Double => cast::<Float64Builder>(b).append_null(),
        Proto::Float => cast::<Float32Builder>(b).append_null(),
        Proto::Int32 | Proto::SInt32 | Proto::SFixed32 => cast::<Int32Builder>(b).append_null(),
        Proto::Int64 | Proto::SInt64 | Proto::SFixed64 => cast::<Int64Builder>(b).append_null(),
        Proto::UInt32 | Proto::Fixed32 => cast::<UInt32Builder>(b).append_null(),
        Proto::UInt64 | Proto::Fixed64 => cast::<UInt64Builder>(b).append_null(),
        Proto::Bool => cast::<BooleanBuilder>(b).append_null(),
        Proto::String | Proto::Enum(_) => cast::<StringBuilder>(b).append_null(),
        Proto::Bytes | Proto::Opaque => cast::<BinaryBuilder>(b).append_null(),
        Proto::Message(message) => append_null_message(message, cast::<StructBuilder>(b)),
        Proto::Timestamp => cast::<TimestampMicrosecondBuilder>(b).append_null(),
        Proto::Duration => cast::<DurationMicrosecondBuilder>(b).append_null(),
        Proto::Wrapper(inner) => append_null(inner, b),
    }
}

/// A null row of a message: every child a null too.
pub fn append_null_message(message: &ProtoMessage, b: &mut StructBuilder) {
    for (i, f) in message.fields.iter().enumerate() {
        append_null_field(f, b.field_builders_mut()[i].as_mut());
    }
    if message.fields.is_empty() {
        cast::<NullBuilder>(b.field_builders_mut()[0].as_mut()).append_null();
    }
    b.append_null();
}

/// Appends what an absent field holds: its default without presence, a null with it, an empty list
/// or map.
pub fn append_absent(f: &ProtoField, b: &mut dyn ArrayBuilder) {
    match &f.kind {
        Kind::Single => append_default(&f.ty, b),
        Kind::Optional => append_null(&f.ty, b),
        Kind::Repeated => cast::<DynList>(b).append(true),
        Kind::Map(_) => cast::<DynMap>(b).append(true).expect("an empty map"),
    }
}

/// Appends the value of an absent field without presence (proto3's defaults: zero, empty, the enum's
/// first symbol); a type that always has presence gets a null.
pub fn append_default(ty: &Proto, b: &mut dyn ArrayBuilder) {
    match ty {
        Proto::Double => cast::<Float64Builder>(b).append_value(0.0),
        Proto::Float => cast::<Float32Builder>(b).append_value(0.0),
        Proto::Int32 | Proto::SInt32 | Proto::SFixed32 => cast::<Int32Builder>(b).append_value(0),
        Proto::Int64 | Proto::SInt64 | Proto::SFixed64 => cast::<Int64Builder>(b).append_value(0),
        Proto::UInt32 | Proto::Fixed32 => cast::<UInt32Builder>(b).append_value(0),
        Proto::UInt64 | Proto::Fixed64 => cast::<UInt64Builder>(b).append_value(0),
        Proto::Bool => cast::<BooleanBuilder>(b).append_value(false),
        Proto::String => cast::<StringBuilder>(b).append_value(""),
        Proto::Enum(e) => cast::<StringBuilder>(b).append_value(e.default_symbol()),
        Proto::Bytes => cast::<BinaryBuilder>(b).append_value(b""),
        Proto::Message(_) | Proto::Opaque | Proto::Timestamp | Proto::Duration | Proto::Wrapper(_) => {
            append_null(ty, b)
        }
    }
}

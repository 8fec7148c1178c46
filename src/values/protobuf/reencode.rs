//! Decoded rows back to Protobuf's binary encoding, for `restore` and `verify`, and to tell which values
//! need not keep their bytes. It writes what Protobuf's own serializers write (Java, C++, Python's upb,
//! Go): fields by number; a field without presence only when it is not its default (a float's bits not
//! zero); one with presence whenever it is set; a packed field's items in one run; a map entry with
//! its key and its value, both; the shortest varints (a negative int32 or enum in ten bytes). A value
//! whose bytes are exactly what this writes is given back from its columns; the archive keeps the bytes
//! of every other (unknown fields, another order, prost's map entries without their defaults, a
//! Timestamp finer than a microsecond). The decoder tells the values written so as it reads them
//! (`Scratch::canonical`); `columns` encodes the rest and compares them byte for byte.
//!
//! An [`Encoder`] takes a batch's struct column apart once (each column downcast to its values), then
//! encodes any of its rows.

use std::collections::HashMap;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    DurationMicrosecondType, Float32Type, Float64Type, Int32Type, Int64Type, TimestampMicrosecondType, UInt32Type,
    UInt64Type,
};
use arrow_array::{Array, ArrayRef, BooleanArray, StructArray};
use arrow_buffer::NullBuffer;

use super::decode::{self, wire_type};
use super::{Kind, Proto, ProtoField, ProtoMessage};

/// A length-delimited value's wire type, in a tag.
const LEN: u64 = decode::LEN as u64;

/// A batch's `value` column, ready to encode any of its rows as a message.
pub struct Encoder<'a> {
    root: Message<'a>,
}

impl<'a> Encoder<'a> {
    /// The encoder of `array`, a struct column of `message`'s fields (as `decode` appends them).
    pub fn new(message: &'a ProtoMessage, array: &'a StructArray) -> Result<Self, String> {
        Ok(Self { root: Message::new(message, array)? })
    }

    /// Row `row` (not null) in Protobuf's binary encoding, appended to `out`.
    pub fn encode(&self, row: usize, out: &mut Vec<u8>) -> Result<(), String> {
        self.root.encode(row, out)
    }
}

/// A message's columns, its fields in the order of their numbers.
struct Message<'a> {
    fields: Vec<Values<'a>>,
}

/// Where a field's values are.
enum Values<'a> {
    /// One value per row; `optional`: the field has presence (null where it is absent), else it is
    /// left out where it holds its default.
    One { leaf: Leaf<'a>, optional: bool },
    /// A list's items, from `offsets[row]` to `offsets[row + 1]`; `packed`: the tag of their packed run,
    /// if the field is packed.
    List { offsets: &'a [i32], items: Leaf<'a>, packed: Option<u64> },
    /// A map's entries, likewise, each written with `tag`.
    Map { offsets: &'a [i32], tag: u64, keys: Leaf<'a>, values: Leaf<'a> },
}

/// A column of values of one Protobuf type, written with `tag` (its field's number and wire type).
struct Leaf<'a> {
    ty: &'a Proto,
    tag: u64,
    nulls: Option<&'a NullBuffer>,
    data: Data<'a>,
}

enum Data<'a> {
    F64(&'a [f64]),
    F32(&'a [f32]),
    I32(&'a [i32]),
    I64(&'a [i64]),
    U32(&'a [u32]),
    U64(&'a [u64]),
    Bool(&'a BooleanArray),
    Bytes { offsets: &'a [i32], bytes: &'a [u8] },
    Enum { offsets: &'a [i32], bytes: &'a [u8], numbers: HashMap<&'a [u8], i32> },
    Message(Message<'a>),
}

impl<'a> Message<'a> {
    fn new(message: &'a ProtoMessage, array: &'a StructArray) -> Result<Self, String> {
        if message.fields.is_empty() {
            return Ok(Self { fields: Vec::new() });
        }
        if array.num_columns() != message.fields.len() {
            return Err(format!(
                "{}: {} columns for {} fields",
                message.name,
                array.num_columns(),
                message.fields.len()
            ));
        }
        let fields = message.by_number().map(|i| {
            let f = &message.fields[i];
            Values::of(f, array.column(i)).map_err(|e| format!("{}: {e}", f.name))
        });
        Ok(Self { fields: fields.collect::<Result<_, _>>()? })
    }

    fn encode(&self, row: usize, out: &mut Vec<u8>) -> Result<(), String> {
        for values in &self.fields {
            match values {
                Values::One { leaf, optional: true } if leaf.is_null(row) => {}
                Values::One { leaf, optional: false } if leaf.is_default(row)? => {}
                Values::One { leaf, .. } => leaf.field(row, out)?,
                Values::List { offsets, items, packed } => {
                    let (start, end) = (offsets[row] as usize, offsets[row + 1] as usize);
                    match packed {
                        Some(_) if end == start => {}
                        Some(tag) => {
                            varint(*tag, out);
                            delimited(out, |out| (start..end).try_for_each(|i| items.value(i, out)))?;
                        }
                        None => (start..end).try_for_each(|i| items.field(i, out))?,
                    }
                }
                Values::Map { offsets, tag, keys, values } => {
                    for i in offsets[row] as usize..offsets[row + 1] as usize {
                        varint(*tag, out);
                        delimited(out, |out| {
                            keys.field(i, out)?;
                            values.field(i, out)
                        })?;
                    }
                }
            }
        }
        Ok(())
    }
}

impl<'a> Values<'a> {
    /// The values of field `f`, whose column is `array`.
    fn of(f: &'a ProtoField, array: &'a ArrayRef) -> Result<Self, String> {
        let number = u64::from(f.number);
        Ok(match &f.kind {
            Kind::Single | Kind::Optional => {
                Values::One { leaf: Leaf::new(&f.ty, array, number)?, optional: f.kind == Kind::Optional }
            }
            Kind::Repeated => {
                let list = array.as_list_opt::<i32>().ok_or_else(|| bad(array, &f.ty))?;
                let packed = f.packs().then_some((number << 3) | LEN);
                Values::List { offsets: list.value_offsets(), items: Leaf::new(&f.ty, list.values(), number)?, packed }
            }
            Kind::Map(key) => {
                let map = array.as_map_opt().ok_or_else(|| bad(array, &f.ty))?;
                let (keys, values) = (Leaf::new(key, map.keys(), 1)?, Leaf::new(&f.ty, map.values(), 2)?);
                Values::Map { offsets: map.value_offsets(), tag: (number << 3) | LEN, keys, values }
            }
        })
    }
}

fn bad(array: &ArrayRef, ty: &Proto) -> String {
    format!("a {} column for {ty:?}", array.data_type())
}

impl<'a> Leaf<'a> {
    /// The values of `array`, of type `ty`, written as field `number`.
    fn new(ty: &'a Proto, array: &'a ArrayRef, number: u64) -> Result<Self, String> {
        let wrong = || bad(array, ty);
        let data = match ty {
            Proto::Double => Data::F64(array.as_primitive_opt::<Float64Type>().ok_or_else(wrong)?.values()),
            Proto::Float => Data::F32(array.as_primitive_opt::<Float32Type>().ok_or_else(wrong)?.values()),
            Proto::Int32 | Proto::SInt32 | Proto::SFixed32 => {
                Data::I32(array.as_primitive_opt::<Int32Type>().ok_or_else(wrong)?.values())
            }
            Proto::Int64 | Proto::SInt64 | Proto::SFixed64 => {
                Data::I64(array.as_primitive_opt::<Int64Type>().ok_or_else(wrong)?.values())
            }
            Proto::UInt32 | Proto::Fixed32 => {
                Data::U32(array.as_primitive_opt::<UInt32Type>().ok_or_else(wrong)?.values())
            }
            Proto::UInt64 | Proto::Fixed64 => {
                Data::U64(array.as_primitive_opt::<UInt64Type>().ok_or_else(wrong)?.values())
            }
            Proto::Timestamp => {
                Data::I64(array.as_primitive_opt::<TimestampMicrosecondType>().ok_or_else(wrong)?.values())
            }
            Proto::Duration => {
                Data::I64(array.as_primitive_opt::<DurationMicrosecondType>().ok_or_else(wrong)?.values())
            }
            Proto::Bool => Data::Bool(array.as_boolean_opt().ok_or_else(wrong)?),
            Proto::String => {
                let strings = array.as_string_opt::<i32>().ok_or_else(wrong)?;
                Data::Bytes { offsets: strings.value_offsets(), bytes: strings.values() }
            }
            Proto::Bytes | Proto::Opaque => {
                let bytes = array.as_binary_opt::<i32>().ok_or_else(wrong)?;
                Data::Bytes { offsets: bytes.value_offsets(), bytes: bytes.values() }
            }
            Proto::Enum(e) => {
                let strings = array.as_string_opt::<i32>().ok_or_else(wrong)?;
                let numbers = e.values.iter().map(|(n, symbol)| (symbol.as_bytes(), *n)).collect();
                Data::Enum { offsets: strings.value_offsets(), bytes: strings.values(), numbers }
            }
            Proto::Wrapper(inner) => return Ok(Self { ty, tag: (number << 3) | LEN, ..Leaf::new(inner, array, 1)? }),
            Proto::Message(message) => Data::Message(Message::new(message, array.as_struct_opt().ok_or_else(wrong)?)?),
        };
        Ok(Self { ty, tag: (number << 3) | u64::from(wire_type(ty)), nulls: array.nulls(), data })
    }

    fn is_null(&self, i: usize) -> bool {
        self.nulls.is_some_and(|n| n.is_null(i))
    }

    /// Whether value `i` is its type's default, which a field without presence does not write.
    fn is_default(&self, i: usize) -> Result<bool, String> {
        Ok(match &self.data {
            Data::F64(v) => v[i].to_bits() == 0,
            Data::F32(v) => v[i].to_bits() == 0,
            Data::I32(v) => v[i] == 0,
            Data::I64(v) => v[i] == 0,
            Data::U32(v) => v[i] == 0,
            Data::U64(v) => v[i] == 0,
            Data::Bool(v) => !v.value(i),
            Data::Bytes { offsets, .. } => offsets[i] == offsets[i + 1],
            Data::Enum { .. } => self.number(i)? == 0,
            Data::Message(_) => false,
        })
    }

    /// Value `i` as its field: the tag, then the value.
    #[inline]
    fn field(&self, i: usize, out: &mut Vec<u8>) -> Result<(), String> {
        varint(self.tag, out);
        self.value(i, out)
    }

    /// Value `i`, without a tag (a length-delimited one with its length).
    fn value(&self, i: usize, out: &mut Vec<u8>) -> Result<(), String> {
        match (self.ty, &self.data) {
            (Proto::Int64, Data::I64(v)) => varint(v[i] as u64, out),
            (Proto::Int32, Data::I32(v)) => varint(i64::from(v[i]) as u64, out),
            (Proto::SInt32, Data::I32(v)) => varint(u64::from(((v[i] << 1) ^ (v[i] >> 31)) as u32), out),
            (Proto::SFixed32, Data::I32(v)) => out.extend_from_slice(&v[i].to_le_bytes()),
            (Proto::SInt64, Data::I64(v)) => varint(((v[i] << 1) ^ (v[i] >> 63)) as u64, out),
            (Proto::SFixed64, Data::I64(v)) => out.extend_from_slice(&v[i].to_le_bytes()),
            (Proto::UInt32, Data::U32(v)) => varint(u64::from(v[i]), out),
            (Proto::Fixed32, Data::U32(v)) => out.extend_from_slice(&v[i].to_le_bytes()),
            (Proto::UInt64, Data::U64(v)) => varint(v[i], out),
            (Proto::Fixed64, Data::U64(v)) => out.extend_from_slice(&v[i].to_le_bytes()),
            (Proto::Double, Data::F64(v)) => out.extend_from_slice(&v[i].to_le_bytes()),
            (Proto::Float, Data::F32(v)) => out.extend_from_slice(&v[i].to_le_bytes()),
            (Proto::Bool, Data::Bool(v)) => out.push(u8::from(v.value(i))),
            (Proto::String | Proto::Bytes | Proto::Opaque, Data::Bytes { offsets, bytes }) => {
                let value = &bytes[offsets[i] as usize..offsets[i + 1] as usize];
                varint(value.len() as u64, out);
                out.extend_from_slice(value);
            }
            (Proto::Enum(_), _) => varint(i64::from(self.number(i)?) as u64, out),
            (Proto::Message(_), Data::Message(message)) => delimited(out, |out| message.encode(i, out))?,
            (Proto::Timestamp | Proto::Duration, Data::I64(v)) => {
                let (body, n) = well_known_body(self.ty, v[i]);
                out.push(n as u8);
                out.extend_from_slice(&body[..n]);
            }
            (Proto::Wrapper(inner), _) => {
                let tag = (1 << 3) | u64::from(wire_type(inner));
                let wrapped = Leaf { ty: inner, tag, nulls: None, data: self.data.borrowed() };
                delimited(out, |out| match wrapped.is_default(i)? {
                    true => Ok(()),
                    false => wrapped.field(i, out),
                })?
            }
            (ty, _) => unreachable!("a leaf of {ty:?} holds its type's values"),
        }
        Ok(())
    }

    /// Value `i`'s enum number.
    fn number(&self, i: usize) -> Result<i32, String> {
        let Data::Enum { offsets, bytes, numbers } = &self.data else { unreachable!("an enum's leaf") };
        let symbol = &bytes[offsets[i] as usize..offsets[i + 1] as usize];
        numbers.get(symbol).copied().ok_or_else(|| format!("{:?} is not a symbol", String::from_utf8_lossy(symbol)))
    }
}

impl<'a> Data<'a> {
    /// The same values, for a wrapper's inner leaf (only scalars are wrapped).
    fn borrowed(&self) -> Data<'a> {
        match self {
            Data::F64(v) => Data::F64(v),
            Data::F32(v) => Data::F32(v),
            Data::I32(v) => Data::I32(v),
            Data::I64(v) => Data::I64(v),
            Data::U32(v) => Data::U32(v),
            Data::U64(v) => Data::U64(v),
            Data::Bool(v) => Data::Bool(v),
            Data::Bytes { offsets, bytes } => Data::Bytes { offsets, bytes },
            Data::Enum { .. } | Data::Message(_) => unreachable!("the wrappers wrap scalars, strings and bytes"),
        }
    }
}

/// A Timestamp's or Duration's message (`ty`) of `micros` microseconds, without its length: `seconds` = 1
/// and `nanos` = 2, each left out when zero (a Timestamp's nanoseconds are never below zero, a
/// Duration's have its seconds' sign); its bytes and how many there are.
pub(super) fn well_known_body(ty: &Proto, micros: i64) -> ([u8; 24], usize) {
    let (seconds, micros) = match ty {
        Proto::Timestamp => (micros.div_euclid(1_000_000), micros.rem_euclid(1_000_000)),
        _ => (micros / 1_000_000, micros % 1_000_000),
    };
    let nanos = micros * 1000;
    let mut body = [0u8; 24];
    let mut n = 0;
    let mut put = |tag: u8, v: u64| {
        body[n] = tag;
        n += 1;
        let mut v = v;
        while v >= 0x80 {
            body[n] = (v as u8) | 0x80;
            n += 1;
            v >>= 7;
        }
        body[n] = v as u8;
        n += 1;
    };
    if seconds != 0 {
        put(1 << 3, seconds as u64);
    }
    if nanos != 0 {
        put(2 << 3, i64::from(nanos as i32) as u64);
    }
    (body, n)
}

/// What `body` writes, preceded by its length: written in place after a one-byte length, which is
/// widened (the bytes moved up) when the length needs more.
#[inline]
fn delimited(out: &mut Vec<u8>, body: impl FnOnce(&mut Vec<u8>) -> Result<(), String>) -> Result<(), String> {
    let at = out.len();
    out.push(0);
    body(out)?;
    let len = out.len() - at - 1;
    if len < 0x80 {
        out[at] = len as u8;
    } else {
        let mut prefix = Vec::with_capacity(10);
        varint(len as u64, &mut prefix);
        out.splice(at..=at, prefix);
    }
    Ok(())
}

/// A varint, shortest form.
#[inline(always)]
fn varint(v: u64, out: &mut Vec<u8>) {
    // Most (tags, lengths, small numbers) are one byte.
    if v < 0x80 {
        out.push(v as u8);
    } else {
        varint_long(v, out);
    }
}

fn varint_long(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[cfg(test)]
mod tests;

//! Avro's binary encoding, decoded straight into Arrow builders (no intermediate values): a value is
//! first checked from end to end ([`check`]: every length, index, UTF-8 string and decimal), and only a
//! value that passed is appended ([`append`]), so a bad value never leaves a partial row behind. Types
//! map as in `values::arrow`, plus bytes→binary, fixed→fixed-size binary and time→time32/time64.

use std::sync::Arc;

use arrow_array::builder::{
    ArrayBuilder, BinaryBuilder, BooleanBuilder, Date32Builder, Decimal128Builder, FixedSizeBinaryBuilder,
    Float32Builder, Float64Builder, Int32Builder, Int64Builder, NullBuilder, StringBuilder, StructBuilder,
    Time32MillisecondBuilder, Time64MicrosecondBuilder, TimestampMicrosecondBuilder, TimestampMillisecondBuilder,
};
use arrow_schema::{DataType, Field, Fields, TimeUnit as ArrowUnit};

use super::{Avro, AvroField};
use crate::values::arrow::{cast, placeholder_fields, DynList, DynMap};
use crate::values::TimeUnit;

/// Why a value does not decode: where, and what was wrong.
pub type DecodeError = String;

/// The Arrow type of an Avro type (nullable unions: the field is nullable, see [`field`]).
pub fn data_type(avro: &Avro) -> DataType {
    match avro {
        Avro::Nullable { inner, .. } | Avro::Single(inner) => data_type(inner),
        Avro::Boolean => DataType::Boolean,
        Avro::Int => DataType::Int32,
        Avro::Long => DataType::Int64,
        Avro::Float => DataType::Float32,
        Avro::Double => DataType::Float64,
        Avro::Bytes => DataType::Binary,
        Avro::String | Avro::Uuid | Avro::Enum(_) | Avro::DecimalText { .. } => DataType::Utf8,
        Avro::Fixed(size) => DataType::FixedSizeBinary(*size as i32),
        Avro::Array(items) => DataType::List(Arc::new(field("item", items))),
        Avro::Map(values) => {
            let entries = Fields::from(vec![Field::new("key", DataType::Utf8, false), field("value", values)]);
            DataType::Map(Arc::new(Field::new("entries", DataType::Struct(entries), false)), false)
        }
        Avro::Record(fields) => DataType::Struct(struct_fields(fields)),
        Avro::Date => DataType::Date32,
        Avro::Time(TimeUnit::Millis) => DataType::Time32(ArrowUnit::Millisecond),
        Avro::Time(TimeUnit::Micros) => DataType::Time64(ArrowUnit::Microsecond),
        Avro::Timestamp { unit, utc } => {
            let unit = match unit {
                TimeUnit::Millis => ArrowUnit::Millisecond,
                TimeUnit::Micros => ArrowUnit::Microsecond,
            };
            DataType::Timestamp(unit, utc.then(|| "+00:00".into()))
        }
        Avro::Decimal { precision, scale, .. } => DataType::Decimal128(*precision, *scale),
    }
}

pub fn field(name: &str, avro: &Avro) -> Field {
    Field::new(name, data_type(avro), matches!(avro, Avro::Nullable { .. }))
}

/// A record's struct fields; a record without fields gets the placeholder field of nulls (Parquet
/// cannot hold an empty struct).
pub fn struct_fields(fields: &[AvroField]) -> Fields {
    match fields.is_empty() {
        true => placeholder_fields(),
        false => fields.iter().map(|f| field(&f.name, &f.avro)).collect(),
    }
}

/// The bytes of one value, read front to back.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Whether what was read so far is in the canonical form `reencode` writes (shortest varints, an
    /// array or map in one block of a positive count, a decimal in its fewest bytes), so the decoded
    /// value encodes back to these very bytes.
    canonical: bool,
    /// Array items of no width read so far (see `MAX_EMPTY_ITEMS`).
    empty_items: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0, canonical: true, empty_items: 0 }
    }

    /// Whether the bytes read so far encode back to themselves (see [`Reader::canonical`]'s field).
    pub fn canonical(&self) -> bool {
        self.canonical
    }

    /// Whether every byte was read.
    pub fn at_end(&self) -> bool {
        self.pos == self.buf.len()
    }

    pub(super) fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self.pos.checked_add(n).filter(|end| *end <= self.buf.len());
        let end = end.ok_or_else(|| format!("ends after {} bytes, {n} more needed", self.buf.len()))?;
        let out = &self.buf[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    /// A zig-zag varint.
    pub(super) fn long(&mut self) -> Result<i64, DecodeError> {
        let Some(&first) = self.buf.get(self.pos) else { return Err("ends inside a number".into()) };
        self.pos += 1;
        let value = if first & 0x80 == 0 { u64::from(first) } else { self.long_rest(first)? };
        Ok((value >> 1) as i64 ^ -((value & 1) as i64))
    }

    /// A varint's bytes after its first (`first`, which says more follow): at most 10 in all, the tenth
    /// holding only bit 63.
    fn long_rest(&mut self, first: u8) -> Result<u64, DecodeError> {
        let mut value = u64::from(first & 0x7f);
        let mut shift = 7;
        loop {
            let byte = *self.buf.get(self.pos).ok_or("ends inside a number")?;
            self.pos += 1;
            if shift == 63 && byte > 1 {
                return Err("a number beyond 64 bits".into());
            }
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                // A last byte of zero is padding: not the shortest form.
                if byte == 0 {
                    self.canonical = false;
                }
                return Ok(value);
            }
            shift += 7;
        }
    }

    pub(super) fn int(&mut self) -> Result<i32, DecodeError> {
        let v = self.long()?;
        i32::try_from(v).map_err(|_| format!("{v} is out of range for an int"))
    }

    fn len(&mut self) -> Result<usize, DecodeError> {
        let n = self.long()?;
        usize::try_from(n).map_err(|_| format!("a negative length ({n})"))
    }

    pub(super) fn bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let n = self.len()?;
        self.take(n)
    }

    pub(super) fn string(&mut self) -> Result<&'a str, DecodeError> {
        crate::values::utf8(self.bytes()?)
    }

    /// The next block's item count of an array or map (0 ends it), at most what the bytes left can hold
    /// of items at least `width` bytes wide (items of no width: at most `MAX_EMPTY_ITEMS`).
    pub(super) fn block(&mut self, width: usize) -> Result<usize, DecodeError> {
        let n = self.long()?;
        if n < 0 {
            self.canonical = false;
            self.long()?; // The block's size in bytes, which a reader may use to skip it.
        }
        let n = usize::try_from(n.unsigned_abs()).map_err(|_| "a block too large")?;
        let room = match width {
            0 => MAX_EMPTY_ITEMS,
            w => (self.buf.len() - self.pos) / w,
        };
        if n > room {
            return Err(format!(
                "a block of {n} items, more than the {} bytes left can hold",
                self.buf.len() - self.pos
            ));
        }
        Ok(n)
    }

    /// A one-branch union's index, which must be 0.
    pub(super) fn single(&mut self) -> Result<(), DecodeError> {
        match self.long()? {
            0 => Ok(()),
            i => Err(format!("union branch {i} of 1")),
        }
    }

    /// Whether a nullable union's branch is the value (not null).
    pub(super) fn present(&mut self, null_first: bool) -> Result<bool, DecodeError> {
        match (self.long()?, null_first) {
            (0, true) | (1, false) => Ok(false),
            (1, true) | (0, false) => Ok(true),
            (i, _) => Err(format!("union branch {i} of 2")),
        }
    }
}

/// A decimal's unscaled value: big-endian two's complement, at most 16 bytes once sign-extension bytes
/// are dropped, and at most `precision` digits.
fn decimal(bytes: &[u8], precision: u8) -> Result<i128, DecodeError> {
    let negative = bytes.first().is_some_and(|b| b & 0x80 != 0);
    let pad = if negative { 0xff } else { 0 };
    let mut significant =
        bytes.len() - bytes.iter().take_while(|b| **b == pad).count().min(bytes.len().saturating_sub(1));
    // A pad byte whose sign the first significant byte does not carry is part of the value.
    if significant < bytes.len() && (bytes[bytes.len() - significant] & 0x80 != 0) != negative {
        significant += 1;
    }
    if significant > 16 {
        return Err(format!("a decimal of {} bytes does not fit 128 bits", bytes.len()));
    }
    let mut value: i128 = if negative { -1 } else { 0 };
    for b in &bytes[bytes.len() - significant.min(bytes.len())..] {
        value = (value << 8) | i128::from(*b);
    }
    if value.unsigned_abs() >= 10u128.pow(u32::from(precision)) {
        return Err(format!("{value} (unscaled) has more than {precision} digits"));
    }
    Ok(value)
}

/// Reads one value of `avro` to its end, checking everything [`append`] relies on.
pub fn check(avro: &Avro, r: &mut Reader) -> Result<(), DecodeError> {
    match avro {
        Avro::Nullable { null_first, inner } => {
            if r.present(*null_first)? {
                check(inner, r)?;
            }
        }
        Avro::Boolean => match r.take(1)?[0] {
            0 | 1 => {}
            b => return Err(format!("a boolean byte {b}")),
        },
        Avro::Int | Avro::Date | Avro::Time(TimeUnit::Millis) => drop(r.int()?),
        Avro::Long | Avro::Time(TimeUnit::Micros) | Avro::Timestamp { .. } => drop(r.long()?),
        Avro::Float => drop(r.take(4)?),
        Avro::Double => drop(r.take(8)?),
        Avro::Bytes => drop(r.bytes()?),
        Avro::String | Avro::DecimalText { .. } => drop(r.string()?),
        Avro::Single(inner) => {
            r.single()?;
            check(inner, r)?;
        }
        Avro::Uuid => {
            let s = r.string()?;
            if !is_uuid(s) {
                return Err(format!("{s:?} is not a UUID (8-4-4-4-12 hexadecimal)"));
            }
        }
        Avro::Fixed(size) => drop(r.take(*size)?),
        Avro::Enum(symbols) => {
            let i = r.int()?;
            if usize::try_from(i).map_or(true, |i| i >= symbols.len()) {
                return Err(format!("enum index {i} of {}", symbols.len()));
            }
        }
        Avro::Array(items) => {
            let width = min_width(items);
            for block in 0.. {
                let n = r.block(width)?;
                if n == 0 {
                    break;
                }
                // Items of no width are bounded in the whole value, not only per block (a block costs
                // a byte, and arrays nest).
                if width == 0 {
                    r.empty_items += n;
                    if r.empty_items > MAX_EMPTY_ITEMS {
                        return Err(format!("more than {MAX_EMPTY_ITEMS} items that take no bytes"));
                    }
                }
                (0..n).try_for_each(|_| check(items, r))?;
                if block > 0 {
                    r.canonical = false;
                }
            }
        }
        Avro::Map(values) => {
            for block in 0.. {
                // Each entry: a key (at least its length byte), then the value.
                match r.block(1 + min_width(values))? {
                    0 => break,
                    n => (0..n).try_for_each(|_| r.string().and_then(|_| check(values, r)))?,
                }
                if block > 0 {
                    r.canonical = false;
                }
            }
        }
        Avro::Record(fields) => {
            for f in fields.iter() {
                check(&f.avro, r).map_err(|e| format!("{}: {e}", f.name))?;
            }
        }
        Avro::Decimal { precision, fixed, .. } => {
            let bytes = match fixed {
                Some(size) => r.take(*size)?,
                None => r.bytes()?,
            };
            decimal(bytes, *precision)?;
            if fixed.is_none() && !fewest_bytes(bytes) {
                r.canonical = false;
            }
        }
    }
    Ok(())
}

/// Whether a two's-complement integer is in its fewest bytes (at least one), as `reencode` writes it:
/// no leading byte that only repeats the sign.
pub(super) fn fewest_bytes(bytes: &[u8]) -> bool {
    match bytes {
        [] => false,
        [0x00, next, ..] => next & 0x80 != 0,
        [0xff, next, ..] => next & 0x80 == 0,
        _ => true,
    }
}

/// Array items of no width (empty records, zero-size fixed) allowed in one value: a corrupt count must
/// not make the check spin, nor the append fill memory.
const MAX_EMPTY_ITEMS: usize = 1 << 16;

/// The fewest bytes a value of `avro` takes.
pub(super) fn min_width(avro: &Avro) -> usize {
    match avro {
        Avro::Fixed(size) => *size,
        Avro::Record(fields) => fields.iter().map(|f| min_width(&f.avro)).sum(),
        Avro::Decimal { fixed: Some(size), .. } => *size,
        Avro::Float => 4,
        Avro::Double => 8,
        _ => 1,
    }
}

fn is_uuid(s: &str) -> bool {
    s.len() == 36
        && s.char_indices().all(|(i, c)| if [8, 13, 18, 23].contains(&i) { c == '-' } else { c.is_ascii_hexdigit() })
}

/// Appends one value of `avro`, which [`check`] passed, to `b` (made by `make_builder` for its type).
pub fn append(avro: &Avro, r: &mut Reader, b: &mut dyn ArrayBuilder) -> Result<(), DecodeError> {
    match avro {
        Avro::Nullable { null_first, inner } => match r.present(*null_first)? {
            true => append(inner, r, b)?,
            false => append_null(inner, b),
        },
        Avro::Single(inner) => {
            r.single()?;
            append(inner, r, b)?;
        }
        Avro::Boolean => cast::<BooleanBuilder>(b).append_value(r.take(1)?[0] == 1),
        Avro::Int => cast::<Int32Builder>(b).append_value(r.int()?),
        Avro::Date => cast::<Date32Builder>(b).append_value(r.int()?),
        Avro::Time(TimeUnit::Millis) => cast::<Time32MillisecondBuilder>(b).append_value(r.int()?),
        Avro::Long => cast::<Int64Builder>(b).append_value(r.long()?),
        Avro::Time(TimeUnit::Micros) => cast::<Time64MicrosecondBuilder>(b).append_value(r.long()?),
        Avro::Timestamp { unit: TimeUnit::Millis, .. } => {
            cast::<TimestampMillisecondBuilder>(b).append_value(r.long()?)
        }
        Avro::Timestamp { unit: TimeUnit::Micros, .. } => {
            cast::<TimestampMicrosecondBuilder>(b).append_value(r.long()?)
        }
        Avro::Float => cast::<Float32Builder>(b).append_value(f32::from_le_bytes(r.take(4)?.try_into().expect("4"))),
        Avro::Double => cast::<Float64Builder>(b).append_value(f64::from_le_bytes(r.take(8)?.try_into().expect("8"))),
        Avro::Bytes => cast::<BinaryBuilder>(b).append_value(r.bytes()?),
        Avro::String | Avro::Uuid | Avro::DecimalText { .. } => cast::<StringBuilder>(b).append_value(r.string()?),
        Avro::Enum(symbols) => cast::<StringBuilder>(b).append_value(&symbols[r.int()? as usize]),
        Avro::Fixed(size) => {
            cast::<FixedSizeBinaryBuilder>(b).append_value(r.take(*size)?).map_err(|e| e.to_string())?
        }
        Avro::Decimal { precision, fixed, .. } => {
            let bytes = match fixed {
                Some(size) => r.take(*size)?,
                None => r.bytes()?,
            };
            cast::<Decimal128Builder>(b).append_value(decimal(bytes, *precision)?);
        }
        Avro::Array(items) => append_list(r, min_width(items), b, |r, b| append(items, r, b))?,
        Avro::Map(values) => append_map(r, 1 + min_width(values), b, |r, b| append(values, r, b))?,
        Avro::Record(fields) => append_record(fields, r, cast::<StructBuilder>(b))?,
    }
    Ok(())
}

/// Appends an array (its blocks of items at least `width` bytes wide, each appended by `item`) to `b`,
/// a list builder.
#[inline]
pub(super) fn append_list(
    r: &mut Reader,
    width: usize,
    b: &mut dyn ArrayBuilder,
    mut item: impl FnMut(&mut Reader, &mut dyn ArrayBuilder) -> Result<(), DecodeError>,
) -> Result<(), DecodeError> {
    let list = cast::<DynList>(b);
    loop {
        match r.block(width)? {
            0 => break,
            n => (0..n).try_for_each(|_| item(r, list.values().as_mut()))?,
        }
    }
    list.append(true);
    Ok(())
}

/// Appends a map (its blocks of entries at least `width` bytes wide: a string key, then a value that
/// `value` appends) to `b`, a map builder.
#[inline]
pub(super) fn append_map(
    r: &mut Reader,
    width: usize,
    b: &mut dyn ArrayBuilder,
    mut value: impl FnMut(&mut Reader, &mut dyn ArrayBuilder) -> Result<(), DecodeError>,
) -> Result<(), DecodeError> {
    let map = cast::<DynMap>(b);
    loop {
        match r.block(width)? {
            0 => break,
            n => (0..n).try_for_each(|_| {
                cast::<StringBuilder>(map.keys().as_mut()).append_value(r.string()?);
                value(r, map.values().as_mut())
            })?,
        }
    }
    map.append(true).map_err(|e| e.to_string())
}

/// Appends a record's fields to the struct builder's children, then the row.
pub fn append_record(fields: &[AvroField], r: &mut Reader, b: &mut StructBuilder) -> Result<(), DecodeError> {
    for (i, f) in fields.iter().enumerate() {
        append(&f.avro, r, b.field_builders_mut()[i].as_mut())?;
    }
    if fields.is_empty() {
        cast::<NullBuilder>(b.field_builders_mut()[0].as_mut()).append_null();
    }
    b.append(true);
    Ok(())
}

/// Appends a null of `avro` (its children get nulls too, which the null row hides).
pub fn append_null(avro: &Avro, b: &mut dyn ArrayBuilder) {
    match avro {
        Avro::Nullable { inner, .. } | Avro::Single(inner) => append_null(inner, b),
        Avro::Boolean => cast::<BooleanBuilder>(b).append_null(),
        Avro::Int => cast::<Int32Builder>(b).append_null(),
        Avro::Date => cast::<Date32Builder>(b).append_null(),
        Avro::Time(TimeUnit::Millis) => cast::<Time32MillisecondBuilder>(b).append_null(),
        Avro::Long => cast::<Int64Builder>(b).append_null(),
        Avro::Time(TimeUnit::Micros) => cast::<Time64MicrosecondBuilder>(b).append_null(),
        Avro::Timestamp { unit: TimeUnit::Millis, .. } => cast::<TimestampMillisecondBuilder>(b).append_null(),
        Avro::Timestamp { unit: TimeUnit::Micros, .. } => cast::<TimestampMicrosecondBuilder>(b).append_null(),
        Avro::Float => cast::<Float32Builder>(b).append_null(),
        Avro::Double => cast::<Float64Builder>(b).append_null(),
        Avro::Bytes => cast::<BinaryBuilder>(b).append_null(),
        Avro::String | Avro::Uuid | Avro::Enum(_) | Avro::DecimalText { .. } => cast::<StringBuilder>(b).append_null(),
        Avro::Fixed(_) => cast::<FixedSizeBinaryBuilder>(b).append_null(),
        Avro::Decimal { .. } => cast::<Decimal128Builder>(b).append_null(),
        Avro::Array(_) => cast::<DynList>(b).append(false),
        Avro::Map(_) => cast::<DynMap>(b).append(false).expect("a null map entry"),
        Avro::Record(fields) => append_null_record(fields, cast::<StructBuilder>(b)),
    }
}

/// A null row of a record: every child a null too.
pub fn append_null_record(fields: &[AvroField], b: &mut StructBuilder) {
    for (i, f) in fields.iter().enumerate() {
        append_null(&f.avro, b.field_builders_mut()[i].as_mut());
    }
    if fields.is_empty() {
        cast::<NullBuilder>(b.field_builders_mut()[0].as_mut()).append_null();
    }
    b.append_null();
}

#[cfg(test)]
mod tests;

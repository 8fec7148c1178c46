//! Avro's binary encoding, decoded straight into Arrow columns (no intermediate values) in one pass: a
//! value is appended as it is read ([`append`]), every length, index, UTF-8 string and decimal checked
//! on the way, and a value found bad part way is cut back out of the column (`Column::truncate`), so
//! it never leaves a partial row behind. [`check`] reads a value the same way without keeping it. Types
//! map as in `values::arrow`, plus bytes→binary, fixed→fixed-size binary and time→time32/time64.

use std::sync::Arc;

use arrow_schema::{DataType, Field, Fields, TimeUnit as ArrowUnit};

use super::{Avro, AvroField};
use crate::values::arrow::placeholder_fields;
use crate::values::bytes;
use crate::values::column::{Column, List, Strings, Struct};
use crate::values::{is_uuid, TimeUnit};

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
    /// Strings are appended to their columns unchecked, for the columns to check once the value is
    /// read (`Column::validate`).
    unchecked: bool,
}

impl<'a> Reader<'a> {
    /// A reader that checks each string as it reads it.
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0, canonical: true, empty_items: 0, unchecked: false }
    }

    /// A reader that appends strings unchecked: their columns are to be checked once the value is read
    /// (`Column::validate`; one check of a run of bytes costs less than one per string).
    pub fn unchecked(buf: &'a [u8]) -> Self {
        Self { unchecked: true, ..Self::new(buf) }
    }

    /// Whether the bytes read so far encode back to themselves (see [`Reader::canonical`]'s field).
    pub fn canonical(&self) -> bool {
        self.canonical
    }

    /// How many bytes were read.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Whether every byte was read.
    pub fn at_end(&self) -> bool {
        self.pos == self.buf.len()
    }

    #[inline(always)]
    pub(super) fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        bytes::take(self.buf, &mut self.pos, n).ok_or_else(|| bytes::missing(self.buf.len(), n))
    }

    /// A zig-zag varint.
    #[inline(always)]
    pub(super) fn long(&mut self) -> Result<i64, DecodeError> {
        let Some(&first) = self.buf.get(self.pos) else { return Err("ends inside a number".into()) };
        self.pos += 1;
        let value = if first & 0x80 == 0 { u64::from(first) } else { self.long_rest(first)? };
        Ok((value >> 1) as i64 ^ -((value & 1) as i64))
    }

    /// A varint's bytes after its first (`first`, which says more follow); one padded with a last
    /// zero byte is not canonical.
    fn long_rest(&mut self, first: u8) -> Result<u64, DecodeError> {
        let (value, shortest) = bytes::varint_rest(self.buf, &mut self.pos, first)?;
        self.canonical &= shortest;
        Ok(value)
    }

    #[inline(always)]
    pub(super) fn int(&mut self) -> Result<i32, DecodeError> {
        let v = self.long()?;
        i32::try_from(v).map_err(|_| format!("{v} is out of range for an int"))
    }

    #[inline(always)]
    fn len(&mut self) -> Result<usize, DecodeError> {
        let n = self.long()?;
        usize::try_from(n).map_err(|_| format!("a negative length ({n})"))
    }

    #[inline(always)]
    pub(super) fn bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let n = self.len()?;
        self.take(n)
    }

    pub(super) fn string(&mut self) -> Result<&'a str, DecodeError> {
        crate::values::utf8(self.bytes()?)
    }

    /// Appends a string to `column`: checked now, or by the column later (see [`Reader::unchecked`]).
    #[inline(always)]
    pub(super) fn string_into(&mut self, column: &mut Strings) -> Result<(), DecodeError> {
        match self.unchecked {
            true => column.push_unchecked(self.bytes()?),
            false => column.push(self.string()?),
        }
        Ok(())
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

impl<'a> Reader<'a> {
    pub(super) fn boolean(&mut self) -> Result<bool, DecodeError> {
        match self.take(1)?[0] {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(format!("a boolean byte {b}")),
        }
    }

    pub(super) fn float(&mut self) -> Result<f32, DecodeError> {
        Ok(f32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }

    #[inline(always)]
    pub(super) fn double(&mut self) -> Result<f64, DecodeError> {
        Ok(f64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }

    fn uuid(&mut self) -> Result<&'a str, DecodeError> {
        let s = self.string()?;
        match is_uuid(s.as_bytes()) {
            true => Ok(s),
            false => Err(format!("{s:?} is not a UUID (8-4-4-4-12 hexadecimal)")),
        }
    }

    /// An enum's symbol, of `symbols`.
    pub(super) fn symbol<'s>(&mut self, symbols: &'s [String]) -> Result<&'s str, DecodeError> {
        let i = self.int()?;
        match usize::try_from(i).ok().and_then(|i| symbols.get(i)) {
            Some(symbol) => Ok(symbol),
            None => Err(format!("enum index {i} of {}", symbols.len())),
        }
    }

    /// A decimal's unscaled value, in `fixed` bytes or as bytes.
    fn decimal(&mut self, precision: u8, fixed: Option<usize>) -> Result<i128, DecodeError> {
        let bytes = match fixed {
            Some(size) => self.take(size)?,
            None => self.bytes()?,
        };
        let value = decimal(bytes, precision)?;
        if fixed.is_none() && !fewest_bytes(bytes) {
            self.canonical = false;
        }
        Ok(value)
    }

    /// An array's or a map's blocks of items at least `width` bytes wide, each read by `item`.
    #[inline]
    pub(super) fn items(
        &mut self,
        width: usize,
        mut item: impl FnMut(&mut Self) -> Result<(), DecodeError>,
    ) -> Result<(), DecodeError> {
        for block in 0.. {
            let n = self.block(width)?;
            if n == 0 {
                break;
            }
            // Items of no width are bounded in the whole value, not only per block (a block costs a
            // byte, and arrays nest).
            if width == 0 {
                self.empty_items += n;
                if self.empty_items > MAX_EMPTY_ITEMS {
                    return Err(format!("more than {MAX_EMPTY_ITEMS} items that take no bytes"));
                }
            }
            (0..n).try_for_each(|_| item(self))?;
            if block > 0 {
                self.canonical = false;
            }
        }
        Ok(())
    }
}

/// Reads one value of `avro` to its end, checking what [`append`] checks, without appending it.
pub fn check(avro: &Avro, r: &mut Reader) -> Result<(), DecodeError> {
    match avro {
        Avro::Nullable { null_first, inner } => {
            if r.present(*null_first)? {
                check(inner, r)?;
            }
        }
        Avro::Boolean => drop(r.boolean()?),
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
        Avro::Uuid => drop(r.uuid()?),
        Avro::Fixed(size) => drop(r.take(*size)?),
        Avro::Enum(symbols) => drop(r.symbol(symbols)?),
        Avro::Array(items) => r.items(min_width(items), |r| check(items, r))?,
        // Each entry of a map: a key (at least its length byte), then the value.
        Avro::Map(values) => r.items(1 + min_width(values), |r| r.string().and_then(|_| check(values, r)))?,
        Avro::Record(fields) => {
            for f in fields.iter() {
                check(&f.avro, r).map_err(|e| format!("{}: {e}", f.name))?;
            }
        }
        Avro::Decimal { precision, fixed, .. } => drop(r.decimal(*precision, *fixed)?),
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

/// Appends one value of `avro` to `column` (made by `Column::new` for its type) as it reads it,
/// checking what [`check`] checks: a value that fails may leave part of itself behind, for the caller
/// to cut back (`Column::truncate`). The common leaf types are read here, inlined where a record's
/// fields and a list's items are appended (a call per value cost more than reading most of them);
/// the rest in [`append_other`].
#[inline(always)]
pub fn append(avro: &Avro, r: &mut Reader, column: &mut Column) -> Result<(), DecodeError> {
    match (avro, column) {
        (Avro::Long | Avro::Time(TimeUnit::Micros) | Avro::Timestamp { .. }, Column::Int64(c)) => c.push(r.long()?),
        (Avro::Int | Avro::Date | Avro::Time(TimeUnit::Millis), Column::Int32(c)) => c.push(r.int()?),
        (Avro::String | Avro::DecimalText { .. }, Column::Utf8(c)) => r.string_into(c)?,
        (Avro::Double, Column::Float64(c)) => c.push(r.double()?),
        (Avro::Record(fields), Column::Struct(s)) => append_record(fields, r, s)?,
        (avro, column) => append_other(avro, r, column)?,
    }
    Ok(())
}

/// Appends a value of a type [`append`] does not read itself.
#[inline(never)]
fn append_other(avro: &Avro, r: &mut Reader, column: &mut Column) -> Result<(), DecodeError> {
    match (avro, column) {
        (Avro::Nullable { null_first, inner }, column) => match r.present(*null_first)? {
            true => append(inner, r, column)?,
            false => column.push_null(),
        },
        (Avro::Single(inner), column) => {
            r.single()?;
            append(inner, r, column)?;
        }
        (Avro::Boolean, Column::Boolean(c)) => c.push(r.boolean()?),
        (Avro::Float, Column::Float32(c)) => c.push(r.float()?),
        (Avro::Bytes, Column::Binary(c)) => c.push(r.bytes()?),
        (Avro::Uuid, Column::Utf8(c)) => c.push(r.uuid()?),
        (Avro::Enum(symbols), Column::Utf8(c)) => c.push(r.symbol(symbols)?),
        (Avro::Fixed(size), Column::FixedSize(c)) => c.push(r.take(*size)?)?,
        (Avro::Decimal { precision, fixed, .. }, Column::Decimal128(c)) => c.push(r.decimal(*precision, *fixed)?),
        (Avro::Array(items), Column::List(list)) => append_list(r, min_width(items), list, |r, c| append(items, r, c))?,
        (Avro::Map(values), Column::Map(map)) => {
            append_map(r, 1 + min_width(values), map, |r, c| append(values, r, c))?
        }
        (avro, _) => unreachable!("the column made for {avro:?} is of its Arrow type"),
    }
    Ok(())
}

/// Appends an array (its blocks of items at least `width` bytes wide, each appended by `item`).
#[inline]
pub(super) fn append_list(
    r: &mut Reader,
    width: usize,
    list: &mut List,
    mut item: impl FnMut(&mut Reader, &mut Column) -> Result<(), DecodeError>,
) -> Result<(), DecodeError> {
    r.items(width, |r| item(r, list.items()))?;
    list.close(true);
    Ok(())
}

/// Appends a map (its blocks of entries at least `width` bytes wide: a string key, then a value that
/// `value` appends).
#[inline]
pub(super) fn append_map(
    r: &mut Reader,
    width: usize,
    map: &mut List,
    mut value: impl FnMut(&mut Reader, &mut Column) -> Result<(), DecodeError>,
) -> Result<(), DecodeError> {
    r.items(width, |r| {
        let Column::Struct(entry) = map.items() else { unreachable!("a map's entries are structs") };
        let Column::Utf8(key) = entry.child(0) else { unreachable!("a map's keys are strings") };
        r.string_into(key)?;
        value(r, entry.child(1))?;
        entry.close(true);
        Ok(())
    })?;
    map.close(true);
    Ok(())
}

/// Appends a record's fields to the struct's children, then the row.
pub fn append_record(fields: &[AvroField], r: &mut Reader, s: &mut Struct) -> Result<(), DecodeError> {
    for (i, f) in fields.iter().enumerate() {
        append(&f.avro, r, s.child(i)).map_err(|e| format!("{}: {e}", f.name))?;
    }
    if fields.is_empty() {
        s.child(0).push_null();
    }
    s.close(true);
    Ok(())
}

#[cfg(test)]
mod tests;

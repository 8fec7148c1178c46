//! A value column being built: one typed tree per Arrow type (no downcast per value, as Arrow's boxed
//! builders need), which can be cut back to a row count ([`Column::truncate`]). A decoder appends a
//! value while it reads it, in one pass, and a value found bad part way is undone by cutting the column
//! back to the rows before it.

use std::borrow::Cow;
use std::sync::Arc;

use arrow_array::{make_array, Array, ArrayRef, BinaryArray, ListArray, MapArray, NullArray, StringArray, StructArray};
use arrow_buffer::{ArrowNativeType, BooleanBufferBuilder, Buffer, NullBufferBuilder, OffsetBuffer, ScalarBuffer};
use arrow_data::ArrayData;
use arrow_schema::{ArrowError, DataType, FieldRef, Fields};

/// A column is made with the room its last batch took and 1/`ROOM_TO_SPARE` more (see [`Room`]).
const ROOM_TO_SPARE: usize = 8;
/// At most this room for a column's bytes: a batch is written once its records hold 4 MiB, so a batch
/// that took more held an unusually large value, which should not size the batches after it.
pub const MAX_ROOM_BYTES: usize = (4 << 20) + (4 << 20) / ROOM_TO_SPARE;

/// A column of one Arrow type, as its values are appended.
pub enum Column {
    /// A column of nulls only (the placeholder field of a record without fields).
    Null(usize),
    Boolean(Booleans),
    /// Int32, Date32 and Time32 (the column's type says which).
    Int32(Primitive<i32>),
    /// Int64, Time64, Timestamp and Duration.
    Int64(Primitive<i64>),
    UInt32(Primitive<u32>),
    UInt64(Primitive<u64>),
    Float32(Primitive<f32>),
    Float64(Primitive<f64>),
    Decimal128(Primitive<i128>),
    /// Utf8: strings, or bytes checked once the value they are part of is read ([`Strings::validate`]),
    /// so Arrow need not check them again.
    Utf8(Strings),
    Binary(Bytes),
    FixedSize(FixedSize),
    List(Box<List>),
    /// A map: a list of key-value structs.
    Map(Box<List>),
    Struct(Struct),
}

impl Column {
    /// An empty column of `ty` (the types the value formats map to), with `room` made.
    pub fn new(ty: &DataType, room: &Room) -> Self {
        let rows = room.rows;
        match ty {
            DataType::Null => Column::Null(0),
            DataType::Boolean => Column::Boolean(Booleans {
                values: BooleanBufferBuilder::new(rows),
                nulls: NullBufferBuilder::new(rows),
            }),
            DataType::Int32 | DataType::Date32 | DataType::Time32(_) => Column::Int32(Primitive::new(ty, rows)),
            DataType::Int64 | DataType::Time64(_) | DataType::Timestamp(..) | DataType::Duration(_) => {
                Column::Int64(Primitive::new(ty, rows))
            }
            DataType::UInt32 => Column::UInt32(Primitive::new(ty, rows)),
            DataType::UInt64 => Column::UInt64(Primitive::new(ty, rows)),
            DataType::Float32 => Column::Float32(Primitive::new(ty, rows)),
            DataType::Float64 => Column::Float64(Primitive::new(ty, rows)),
            DataType::Decimal128(..) => Column::Decimal128(Primitive::new(ty, rows)),
            DataType::Utf8 => Column::Utf8(Strings { bytes: Bytes::new(room), valid: 0 }),
            DataType::Binary => Column::Binary(Bytes::new(room)),
            DataType::FixedSizeBinary(size) => {
                let size = usize::try_from(*size).expect("a fixed size is not negative");
                let (values, nulls) = (Vec::with_capacity(room.bytes), NullBufferBuilder::new(rows));
                Column::FixedSize(FixedSize { size, values, nulls })
            }
            DataType::List(item) => Column::List(Box::new(List::new(item.clone(), room))),
            DataType::Map(entries, _) => Column::Map(Box::new(List::new(entries.clone(), room))),
            DataType::Struct(fields) => Column::Struct(Struct::new(fields.clone(), room)),
            other => unreachable!("no value format maps to {other}"),
        }
    }

    /// The rows appended.
    pub fn rows(&self) -> usize {
        match self {
            Column::Null(len) => *len,
            Column::Boolean(c) => c.nulls.len(),
            Column::Int32(c) => c.values.len(),
            Column::Int64(c) => c.values.len(),
            Column::UInt32(c) => c.values.len(),
            Column::UInt64(c) => c.values.len(),
            Column::Float32(c) => c.values.len(),
            Column::Float64(c) => c.values.len(),
            Column::Decimal128(c) => c.values.len(),
            Column::Utf8(Strings { bytes: c, .. }) | Column::Binary(c) => c.offsets.len() - 1,
            Column::FixedSize(c) => c.nulls.len(),
            Column::List(c) | Column::Map(c) => c.offsets.len() - 1,
            Column::Struct(c) => c.len,
        }
    }

    /// The bytes its buffers hold allocated, the columns within it included (for the memory budget).
    pub fn allocated(&self) -> usize {
        match self {
            Column::Null(_) => 0,
            Column::Boolean(c) => c.values.capacity() / 8 + c.nulls.allocated_size(),
            Column::Int32(c) => c.allocated(),
            Column::Int64(c) => c.allocated(),
            Column::UInt32(c) => c.allocated(),
            Column::UInt64(c) => c.allocated(),
            Column::Float32(c) => c.allocated(),
            Column::Float64(c) => c.allocated(),
            Column::Decimal128(c) => c.allocated(),
            Column::Utf8(Strings { bytes: c, .. }) | Column::Binary(c) => {
                c.offsets.capacity() * 4 + c.values.capacity() + c.nulls.allocated_size()
            }
            Column::FixedSize(c) => c.values.capacity() + c.nulls.allocated_size(),
            Column::List(c) | Column::Map(c) => {
                c.offsets.capacity() * 4 + c.nulls.allocated_size() + c.items.allocated()
            }
            Column::Struct(c) => c.allocated(),
        }
    }

    /// The room this column's rows take (see [`Room`]).
    fn room(&self) -> Room {
        let rows = Room::spared(self.rows());
        match self {
            Column::Utf8(Strings { bytes: c, .. }) | Column::Binary(c) => {
                Room { rows, bytes: Room::spared_bytes(c.values.len()), children: Vec::new() }
            }
            Column::FixedSize(c) => Room { rows, bytes: Room::spared_bytes(c.values.len()), children: Vec::new() },
            Column::List(c) | Column::Map(c) => Room { rows, bytes: 0, children: vec![c.items.room()] },
            Column::Struct(c) => c.room(),
            _ => Room::rows(rows),
        }
    }

    /// Appends a null (a struct's children get one too, which the null row hides).
    pub fn push_null(&mut self) {
        match self {
            Column::Null(len) => *len += 1,
            Column::Boolean(c) => {
                c.values.append(false);
                c.nulls.append_null();
            }
            Column::Int32(c) => c.push_null(),
            Column::Int64(c) => c.push_null(),
            Column::UInt32(c) => c.push_null(),
            Column::UInt64(c) => c.push_null(),
            Column::Float32(c) => c.push_null(),
            Column::Float64(c) => c.push_null(),
            Column::Decimal128(c) => c.push_null(),
            Column::Utf8(Strings { bytes: c, .. }) | Column::Binary(c) => {
                c.offsets.push(c.end());
                c.nulls.append_null();
            }
            Column::FixedSize(c) => {
                c.values.resize(c.values.len() + c.size, 0);
                c.nulls.append_null();
            }
            Column::List(c) | Column::Map(c) => c.close(false),
            Column::Struct(c) => c.push_null(),
        }
    }

    /// Checks the strings appended unchecked since the last check, in this column and the columns
    /// within it ([`Strings::validate`]).
    pub fn validate(&mut self) -> Result<(), std::str::Utf8Error> {
        match self {
            Column::Utf8(c) => c.validate(),
            Column::List(c) | Column::Map(c) => c.items.validate(),
            Column::Struct(c) => c.validate(),
            _ => Ok(()),
        }
    }

    /// Cuts the column back to its first `rows` rows (no more than it holds).
    pub fn truncate(&mut self, rows: usize) {
        match self {
            Column::Null(len) => *len = rows,
            Column::Boolean(c) => {
                c.values.truncate(rows);
                c.nulls.truncate(rows);
            }
            Column::Int32(c) => c.truncate(rows),
            Column::Int64(c) => c.truncate(rows),
            Column::UInt32(c) => c.truncate(rows),
            Column::UInt64(c) => c.truncate(rows),
            Column::Float32(c) => c.truncate(rows),
            Column::Float64(c) => c.truncate(rows),
            Column::Decimal128(c) => c.truncate(rows),
            Column::Utf8(c) => c.truncate(rows),
            Column::Binary(c) => c.truncate(rows),
            Column::FixedSize(c) => {
                c.values.truncate(rows * c.size);
                c.nulls.truncate(rows);
            }
            Column::List(c) | Column::Map(c) => {
                c.offsets.truncate(rows + 1);
                c.items.truncate(*c.offsets.last().expect("an offset") as usize);
                c.nulls.truncate(rows);
            }
            Column::Struct(c) => c.truncate(rows),
        }
    }

    /// The column as an Arrow array.
    pub fn finish(self) -> Result<ArrayRef, ArrowError> {
        Ok(match self {
            Column::Null(len) => Arc::new(NullArray::new(len)),
            Column::Boolean(mut c) => {
                let values = c.values.finish();
                array(ArrayData::builder(DataType::Boolean).len(values.len()).add_buffer(values.into_inner()), c.nulls)?
            }
            Column::Int32(c) => c.finish()?,
            Column::Int64(c) => c.finish()?,
            Column::UInt32(c) => c.finish()?,
            Column::UInt64(c) => c.finish()?,
            Column::Float32(c) => c.finish()?,
            Column::Float64(c) => c.finish()?,
            Column::Decimal128(c) => c.finish()?,
            Column::Utf8(mut c) => {
                c.validate().map_err(|e| ArrowError::InvalidArgumentError(format!("a string column: {e}")))?;
                // Checks what `StringArray::try_new` checks but the bytes' UTF-8.
                let binary = c.bytes.finish()?;
                let (offsets, values, nulls) = binary.into_parts();
                // SAFETY: `values` is valid UTF-8 and each offset a character boundary: `validate` just
                // checked every byte not checked before (see `Strings`); the offsets and nulls were just
                // checked by `BinaryArray::try_new`.
                Arc::new(unsafe { StringArray::new_unchecked(offsets, values, nulls) })
            }
            Column::Binary(c) => Arc::new(c.finish()?),
            Column::FixedSize(c) => {
                let size = i32::try_from(c.size).expect("a fixed size fits an i32");
                let data = ArrayData::builder(DataType::FixedSizeBinary(size)).len(c.nulls.len());
                array(data.add_buffer(Buffer::from_vec(c.values)), c.nulls)?
            }
            Column::List(c) => {
                let mut c = *c;
                let offsets = OffsetBuffer::new(ScalarBuffer::from(c.offsets));
                Arc::new(ListArray::try_new(c.field, offsets, c.items.finish()?, c.nulls.finish())?)
            }
            Column::Map(c) => {
                let mut c = *c;
                let offsets = OffsetBuffer::new(ScalarBuffer::from(c.offsets));
                let entries = c.items.finish()?;
                let entries = entries.as_any().downcast_ref::<StructArray>().expect("a map's entries are a struct");
                Arc::new(MapArray::try_new(c.field, offsets, entries.clone(), c.nulls.finish(), false)?)
            }
            Column::Struct(c) => Arc::new(c.finish()?),
        })
    }
}

/// The room to make in a new column: its rows, its values' bytes (of a Utf8, Binary or fixed-size
/// column) and each child's room (a list's items, a struct's fields): what a batch took and an eighth
/// (the next batch's values may be a little longer). Made from the last batch's ([`Struct::room`]), a
/// batch's buffers are allocated once, not grown and copied value by value.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Room {
    rows: usize,
    bytes: usize,
    children: Vec<Room>,
}

impl Room {
    /// The room to make for `taken` rows, bytes or items: an eighth more.
    fn spared(taken: usize) -> usize {
        taken + taken / ROOM_TO_SPARE
    }

    /// The room to make for `taken` bytes of values: an eighth more, at most [`MAX_ROOM_BYTES`].
    pub fn spared_bytes(taken: usize) -> usize {
        Room::spared(taken).min(MAX_ROOM_BYTES)
    }

    /// Room for `rows` rows, in this column and its struct fields alike (no bytes, no list items).
    pub fn rows(rows: usize) -> Self {
        Self { rows, bytes: 0, children: Vec::new() }
    }

    /// Struct field `i`'s room: as many rows as the struct's where it has no room of its own.
    fn child(&self, i: usize) -> Cow<'_, Room> {
        match self.children.get(i) {
            Some(room) => Cow::Borrowed(room),
            None => Cow::Owned(Room::rows(self.rows)),
        }
    }
}

/// An array of `data` and `nulls`, its buffers checked.
fn array(data: arrow_data::ArrayDataBuilder, mut nulls: NullBufferBuilder) -> Result<ArrayRef, ArrowError> {
    Ok(make_array(data.nulls(nulls.finish()).build()?))
}

pub struct Booleans {
    values: BooleanBufferBuilder,
    nulls: NullBufferBuilder,
}

impl Booleans {
    pub fn push(&mut self, value: bool) {
        self.values.append(value);
        self.nulls.append_non_null();
    }
}

/// A column of fixed-width numbers.
pub struct Primitive<T> {
    ty: DataType,
    values: Vec<T>,
    nulls: NullBufferBuilder,
}

impl<T: ArrowNativeType> Primitive<T> {
    fn new(ty: &DataType, rows: usize) -> Self {
        Self { ty: ty.clone(), values: Vec::with_capacity(rows), nulls: NullBufferBuilder::new(rows) }
    }

    #[inline(always)]
    pub fn push(&mut self, value: T) {
        self.values.push(value);
        self.nulls.append_non_null();
    }

    fn push_null(&mut self) {
        self.values.push(T::default());
        self.nulls.append_null();
    }

    fn truncate(&mut self, rows: usize) {
        self.values.truncate(rows);
        self.nulls.truncate(rows);
    }

    fn allocated(&self) -> usize {
        self.values.capacity() * std::mem::size_of::<T>() + self.nulls.allocated_size()
    }

    fn finish(self) -> Result<ArrayRef, ArrowError> {
        array(ArrayData::builder(self.ty).len(self.values.len()).add_buffer(Buffer::from_vec(self.values)), self.nulls)
    }
}

/// Variable-length values: their bytes back to back, and where each ends.
pub struct Bytes {
    offsets: Vec<i32>,
    values: Vec<u8>,
    nulls: NullBufferBuilder,
}

impl Bytes {
    fn new(room: &Room) -> Self {
        let mut offsets = Vec::with_capacity(room.rows + 1);
        offsets.push(0);
        Self { offsets, values: Vec::with_capacity(room.bytes), nulls: NullBufferBuilder::new(room.rows) }
    }

    fn end(&self) -> i32 {
        *self.offsets.last().expect("an offset")
    }

    #[inline(always)]
    pub fn push(&mut self, value: &[u8]) {
        self.values.extend_from_slice(value);
        self.offsets.push(i32::try_from(self.values.len()).expect("a batch's values fit in 2 GiB"));
        self.nulls.append_non_null();
    }

    fn truncate(&mut self, rows: usize) {
        self.offsets.truncate(rows + 1);
        self.values.truncate(self.end() as usize);
        self.nulls.truncate(rows);
    }

    fn finish(mut self) -> Result<BinaryArray, ArrowError> {
        let offsets = OffsetBuffer::new(ScalarBuffer::from(self.offsets));
        BinaryArray::try_new(offsets, Buffer::from_vec(self.values), self.nulls.finish())
    }
}

/// Strings: [`Bytes`] whose first `valid` bytes are known to be UTF-8, `valid` and each row's end
/// within them a character boundary. A decoder appends a value's strings unchecked
/// ([`Strings::push_unchecked`]) and checks them all at once when the value is read
/// ([`Column::validate`]): one check of a run of bytes instead of one per string. Whatever is left
/// unchecked is checked when the column is finished.
pub struct Strings {
    bytes: Bytes,
    valid: usize,
}

impl Strings {
    #[inline]
    pub fn push(&mut self, value: &str) {
        let checked = self.valid == self.bytes.values.len();
        self.bytes.push(value.as_bytes());
        if checked {
            self.valid = self.bytes.values.len();
        }
    }

    /// Appends bytes that are to be [`Strings::validate`]d before they are read as strings.
    #[inline(always)]
    pub fn push_unchecked(&mut self, value: &[u8]) {
        self.bytes.push(value);
    }

    /// Checks the bytes appended since the last check: UTF-8, each row ending at a character boundary.
    /// On an error, the rows since the last check are to be cut back.
    #[inline]
    pub fn validate(&mut self) -> Result<(), std::str::Utf8Error> {
        if self.valid == self.bytes.values.len() {
            return Ok(());
        }
        let tail = &self.bytes.values[self.valid..];
        if !ascii(tail) {
            let text = std::str::from_utf8(tail)?;
            // The rows that end past the bytes checked before (the offsets only grow).
            let offsets = &self.bytes.offsets;
            let first = offsets.partition_point(|&end| end as usize <= self.valid);
            for &end in &offsets[first..] {
                let at = end as usize - self.valid;
                if !text.is_char_boundary(at) {
                    // The bytes up to there end inside a character.
                    return Err(std::str::from_utf8(&tail[..at]).expect_err("not a boundary"));
                }
            }
        }
        self.valid = self.bytes.values.len();
        Ok(())
    }

    fn truncate(&mut self, rows: usize) {
        self.bytes.truncate(rows);
        self.valid = self.valid.min(self.bytes.values.len());
    }
}

/// Whether every byte is ASCII: all of them or'ed together, 8 bytes at a time, then the rest one by
/// one (`<[u8]>::is_ascii` stops early, word by word, and measured three times the instructions here).
fn ascii(bytes: &[u8]) -> bool {
    let (words, rest) = bytes.as_chunks::<8>();
    let word = words.iter().fold(0, |all, w| all | u64::from_ne_bytes(*w));
    let word = rest.iter().fold(word, |all, b| all | u64::from(*b));
    word & 0x8080_8080_8080_8080 == 0
}

pub struct FixedSize {
    size: usize,
    values: Vec<u8>,
    nulls: NullBufferBuilder,
}

impl FixedSize {
    /// Appends a value of the column's size; any other size is refused.
    pub fn push(&mut self, value: &[u8]) -> Result<(), String> {
        if value.len() != self.size {
            return Err(format!("{} bytes where {} are fixed", value.len(), self.size));
        }
        self.values.extend_from_slice(value);
        self.nulls.append_non_null();
        Ok(())
    }
}

/// A list (or a map): where each row's items end in the items' column.
pub struct List {
    field: FieldRef,
    offsets: Vec<i32>,
    nulls: NullBufferBuilder,
    items: Column,
}

impl List {
    fn new(field: FieldRef, room: &Room) -> Self {
        let mut offsets = Vec::with_capacity(room.rows + 1);
        offsets.push(0);
        let items = Column::new(field.data_type(), room.children.first().unwrap_or(&Room::default()));
        Self { field, offsets, nulls: NullBufferBuilder::new(room.rows), items }
    }

    /// The items' column, to append a row's items to (then [`List::close`] ends the row).
    pub fn items(&mut self) -> &mut Column {
        &mut self.items
    }

    /// Ends a row: the items appended since the last (none for a null).
    pub fn close(&mut self, valid: bool) {
        self.offsets.push(i32::try_from(self.items.rows()).expect("a batch's items fit an i32"));
        self.nulls.append(valid);
    }
}

/// A struct: a column per field.
pub struct Struct {
    fields: Fields,
    children: Vec<Column>,
    /// The children that hold strings (at any depth): the ones [`Struct::validate`] checks.
    strings: Vec<usize>,
    nulls: NullBufferBuilder,
    len: usize,
}

impl Struct {
    /// An empty struct of `fields`, with `room` made.
    pub fn new(fields: Fields, room: &Room) -> Self {
        let children = fields.iter().enumerate().map(|(i, f)| Column::new(f.data_type(), &room.child(i))).collect();
        let strings = (0..fields.len()).filter(|i| holds_strings(fields[*i].data_type())).collect();
        Self { fields, children, strings, nulls: NullBufferBuilder::new(room.rows), len: 0 }
    }

    /// The rows appended.
    pub fn rows(&self) -> usize {
        self.len
    }

    /// The room this struct's rows take, to make in the next struct like it.
    pub fn room(&self) -> Room {
        Room { rows: Room::spared(self.len), bytes: 0, children: self.children.iter().map(Column::room).collect() }
    }

    /// Field `i`'s column.
    #[inline]
    pub fn child(&mut self, i: usize) -> &mut Column {
        &mut self.children[i]
    }

    /// Ends a row (its fields appended to every child).
    #[inline]
    pub fn close(&mut self, valid: bool) {
        self.nulls.append(valid);
        self.len += 1;
    }

    /// The bytes its buffers hold allocated (see [`Column::allocated`]).
    pub fn allocated(&self) -> usize {
        self.nulls.allocated_size() + self.children.iter().map(Column::allocated).sum::<usize>()
    }

    /// Appends a null row.
    pub fn push_null(&mut self) {
        self.children.iter_mut().for_each(Column::push_null);
        self.close(false);
    }

    /// Checks the strings appended unchecked since the last check (see [`Column::validate`]).
    pub fn validate(&mut self) -> Result<(), std::str::Utf8Error> {
        self.strings.iter().try_for_each(|i| self.children[*i].validate())
    }

    /// Cuts the struct back to its first `rows` rows.
    pub fn truncate(&mut self, rows: usize) {
        self.children.iter_mut().for_each(|child| child.truncate(rows));
        self.nulls.truncate(rows);
        self.len = rows;
    }

    pub fn finish(mut self) -> Result<StructArray, ArrowError> {
        let columns = self.children.into_iter().map(Column::finish).collect::<Result<Vec<_>, _>>()?;
        StructArray::try_new(self.fields, columns, self.nulls.finish())
    }
}

/// Whether a column of `ty` holds strings, in itself or a column within it.
fn holds_strings(ty: &DataType) -> bool {
    match ty {
        DataType::Utf8 => true,
        DataType::List(item) | DataType::Map(item, _) => holds_strings(item.data_type()),
        DataType::Struct(fields) => fields.iter().any(|f| holds_strings(f.data_type())),
        _ => false,
    }
}

#[cfg(test)]
mod tests;

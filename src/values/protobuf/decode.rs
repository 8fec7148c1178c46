//! Protobuf's binary encoding, decoded straight into Arrow columns in one pass ([`append_message`]):
//! every tag, wire type, length, UTF-8 string, enum number and timestamp is checked as the value is
//! appended, and a value found bad part way is cut back out of the columns, so it never leaves a
//! partial row behind.
//! Fields may come in any order and a singular field more than once (the last wins); repeated scalars
//! packed or not; fields the message lacks are skipped (groups included). A message whose fields come
//! in their declared order, as encoders write them, is read in one pass (`in_order`); any other is
//! read by where each field is found first (`append_any_order`).
//! As it reads, it tells whether the bytes are exactly what `reencode` writes of the row they become
//! ([`Scratch::canonical`]): fields by number, a field without presence left out where it holds its
//! default, packed runs whole, map entries with key and value, the shortest varints, a negative int32
//! or enum in ten bytes, a Timestamp to the microsecond. Such a value need not keep its bytes, and
//! its row need not be encoded back to be compared with them.

use super::arrow::{append_absent, append_default};
use super::reencode::well_known_body;
use super::{Kind, Proto, ProtoField, ProtoMessage};
use crate::values::column::{Column, Struct};
use in_order::in_order;
pub(crate) use in_order::Step;
use reader::Reader;

mod in_order;
mod reader;

/// Why a value does not decode: where, and what was wrong. One pointer wide, so that the decoder's
/// results, made and checked for every field, fit in registers (a `String` sent each through memory).
#[derive(Debug, Clone, PartialEq, Eq)]
#[expect(clippy::box_collection, reason = "a thin pointer: a `Box<str>` is two words")]
pub struct DecodeError(Box<String>);

impl DecodeError {
    /// The same error, said of field `name`.
    #[cold]
    fn within(self, name: &str) -> Self {
        Self(Box::new(format!("{name}: {}", self.0)))
    }
}

impl From<String> for DecodeError {
    #[cold]
    fn from(why: String) -> Self {
        Self(Box::new(why))
    }
}

impl From<&str> for DecodeError {
    #[cold]
    fn from(why: &str) -> Self {
        Self(Box::new(why.to_owned()))
    }
}

impl From<DecodeError> for String {
    fn from(e: DecodeError) -> Self {
        *e.0
    }
}

impl std::ops::Deref for DecodeError {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Messages nested deeper than this are refused (a corrupt or hostile value must not exhaust the stack).
const MAX_DEPTH: usize = 100;

pub(super) const VARINT: u8 = 0;
const FIXED64: u8 = 1;
pub(super) const LEN: u8 = 2;
const START_GROUP: u8 = 3;
const END_GROUP: u8 = 4;
const FIXED32: u8 = 5;

/// The wire type a value of `ty` is written with.
pub(super) fn wire_type(ty: &Proto) -> u8 {
    match ty {
        Proto::Int32
        | Proto::Int64
        | Proto::UInt32
        | Proto::UInt64
        | Proto::SInt32
        | Proto::SInt64
        | Proto::Bool
        | Proto::Enum(_) => VARINT,
        Proto::Double | Proto::Fixed64 | Proto::SFixed64 => FIXED64,
        Proto::Float | Proto::Fixed32 | Proto::SFixed32 => FIXED32,
        Proto::String | Proto::Bytes | Proto::Message(_) | Proto::Timestamp | Proto::Duration | Proto::Wrapper(_) => {
            LEN
        }
        Proto::Opaque => LEN,
    }
}

/// A singular field whose repeats protobuf would merge (a message, or a well-known one).
fn is_message(f: &ProtoField) -> bool {
    matches!(f.kind, Kind::Single | Kind::Optional)
        && matches!(f.ty, Proto::Message(_) | Proto::Timestamp | Proto::Duration | Proto::Wrapper(_) | Proto::Opaque)
}

/// Which fields of a message were seen, a bit each.
struct Once {
    small: u128,
    large: Vec<bool>,
}

impl Once {
    fn new(n: usize) -> Self {
        Self { small: 0, large: if n > 128 { vec![false; n] } else { Vec::new() } }
    }

    /// Whether `i` is seen for the first time.
    fn first(&mut self, i: usize) -> bool {
        if self.large.is_empty() {
            let bit = 1u128 << i;
            let first = self.small & bit == 0;
            self.small |= bit;
            return first;
        }
        !std::mem::replace(&mut self.large[i], true)
    }
}

/// A Timestamp's or Duration's microseconds (`seconds` = 1, `nanos` = 2; nanoseconds below a
/// microsecond are dropped).
fn micros(bytes: &[u8]) -> Result<i64, DecodeError> {
    let (mut seconds, mut nanos) = (0i64, 0i64);
    let mut r = Reader::new(bytes);
    while !r.at_end() {
        match r.tag()? {
            (1, VARINT) => seconds = r.varint()? as i64,
            (2, VARINT) => nanos = i64::from(r.varint()? as i32),
            (n @ (1 | 2), w) => return Err(format!("field {n} of wire type {w}, not a varint").into()),
            (n, w) => r.skip(n, w, 0)?,
        }
    }
    seconds
        .checked_mul(1_000_000)
        .and_then(|m| m.checked_add(nanos / 1000))
        .ok_or_else(|| format!("{seconds} s is beyond what microseconds in 64 bits hold").into())
}

/// One occurrence of a field in a message's bytes.
#[derive(Clone, Copy)]
struct Occurrence {
    /// The field's index in its message.
    index: usize,
    wire: u8,
    /// The value's bytes (a length-delimited one's without its length).
    start: usize,
    end: usize,
}

/// Reusable lists: occurrences, one per nesting depth, and a map's keys (where each is in its message);
/// whether strings are appended unchecked (`append_message` checks them once the message is read);
/// whether messages are read only by where each field is (within a message that was not in order); and
/// whether the message's bytes so far are as `reencode` writes them.
#[derive(Default)]
pub struct Scratch {
    found: Vec<Vec<Occurrence>>,
    keys: Vec<(usize, usize)>,
    unchecked: bool,
    any_order: bool,
    canonical: bool,
}

impl Scratch {
    /// Whether the last message appended is exactly what `reencode` writes of its row (then its row
    /// gives its bytes back); false whenever that is not sure.
    pub fn canonical(&self) -> bool {
        self.canonical
    }
}

/// Appends a message to `s` (a struct of its fields) as its next row, reading and checking it in one
/// pass: every tag, wire type, length, UTF-8 string, enum number, timestamp, map key and oneof. A
/// message that does not decode leaves no row.
pub fn append_message(
    message: &ProtoMessage,
    bytes: &[u8],
    s: &mut Struct,
    scratch: &mut Scratch,
) -> Result<(), DecodeError> {
    let rows = s.rows();
    // Strings are checked together once the message is read: one check of a run of bytes per column
    // costs less than one per string.
    scratch.unchecked = true;
    scratch.canonical = true;
    let mut appended = append_at(message, bytes, s, scratch, 0);
    if appended.is_ok() && s.validate().is_err() {
        // A string that is not UTF-8: read again, each string checked as it comes, to say which.
        s.truncate(rows);
        scratch.unchecked = false;
        appended = append_at(message, bytes, s, scratch, 0).and(Err("a string that is not UTF-8".into()));
    }
    appended.inspect_err(|_| s.truncate(rows))
}

fn append_at(
    message: &ProtoMessage,
    bytes: &[u8],
    s: &mut Struct,
    scratch: &mut Scratch,
    depth: usize,
) -> Result<(), DecodeError> {
    if depth > MAX_DEPTH {
        return Err(format!("messages nested deeper than {MAX_DEPTH}").into());
    }
    // Encoders write fields by number: declared in another order, they are read in another.
    scratch.canonical &= message.reads_canonical;
    if scratch.any_order {
        return append_any_order(message, bytes, s, scratch, depth);
    }
    let rows = s.rows();
    if in_order(message, bytes, s, scratch, depth)? {
        return Ok(());
    }
    scratch.canonical = false;
    // Read again by where each field is, the messages within it too: were they tried in order again, a
    // chain of messages each out of order after its first field would be read 2^depth times.
    s.truncate(rows);
    scratch.any_order = true;
    let appended = append_any_order(message, bytes, s, scratch, depth);
    scratch.any_order = false;
    appended
}

/// Whether two of a map's keys (where each is in `bytes`) are the same.
fn duplicate_key(keys: &mut [(usize, usize)], bytes: &[u8]) -> bool {
    let key = |k: &(usize, usize)| &bytes[k.0..k.1];
    // Keys often come in order (as a sorted map writes them): then none is the same as another.
    if keys.len() < 2 || keys.windows(2).all(|pair| key(&pair[0]) < key(&pair[1])) {
        return false;
    }
    keys.sort_unstable_by(|a, b| key(a).cmp(key(b)));
    keys.windows(2).any(|pair| key(&pair[0]) == key(&pair[1]))
}

/// Appends one occurrence of a repeated field of `ty` (a packed run of scalars, or one item) to its
/// items' column; `packs`: the field is written packed (`ProtoField::packs`).
fn append_items(
    ty: &Proto,
    packs: bool,
    wire: u8,
    value: &[u8],
    items: &mut Column,
    scratch: &mut Scratch,
    depth: usize,
) -> Result<(), DecodeError> {
    let item_wire = wire_type(ty);
    if wire != LEN || item_wire == LEN {
        // One item: encoders write a packed field's in a run.
        scratch.canonical &= !packs;
        return append_value(ty, wire, value, items, scratch, depth);
    }
    // A run: encoders write an unpacked field's items one by one, and no empty run.
    scratch.canonical &= packs && !value.is_empty();
    let mut packed = Reader::new(value);
    while !packed.at_end() {
        let start = packed.pos;
        packed.skip(0, item_wire, depth)?;
        append_value(ty, item_wire, &packed.buf[start..packed.pos], items, scratch, depth)?;
    }
    scratch.canonical &= packed.shortest;
    Ok(())
}

/// Appends a message read in any order: where each field occurs is found first, then each field's
/// occurrences are appended in the order the fields are declared.
fn append_any_order(
    message: &ProtoMessage,
    bytes: &[u8],
    s: &mut Struct,
    scratch: &mut Scratch,
    depth: usize,
) -> Result<(), DecodeError> {
    if scratch.found.len() <= depth {
        scratch.found.resize_with(depth + 1, Vec::new);
    }
    let mut found = std::mem::take(&mut scratch.found[depth]);
    found.clear();
    scan(message, bytes, depth, &mut found)?;
    // Fields usually come in the order they are declared; a stable sort keeps a repeated field's order.
    if !found.is_sorted_by_key(|o| o.index) {
        found.sort_by_key(|o| o.index);
    }
    let mut rest = &found[..];
    for (i, f) in message.fields.iter().enumerate() {
        let n = rest.iter().take_while(|o| o.index == i).count();
        let (mine, next) = rest.split_at(n);
        rest = next;
        append_field(f, bytes, mine, s.child(i), scratch, depth).map_err(|e| e.within(&f.name))?;
    }
    if message.fields.is_empty() {
        s.child(0).push_null();
    }
    scratch.found[depth] = found;
    s.close(true);
    Ok(())
}

/// Where each of the message's fields occurs in its bytes (the fields it lacks read past), checking
/// that a message field comes once and a oneof has one member set.
fn scan(message: &ProtoMessage, bytes: &[u8], depth: usize, found: &mut Vec<Occurrence>) -> Result<(), DecodeError> {
    let mut once = Once::new(message.fields.len());
    // The member of each oneof set so far.
    let mut members: Vec<Option<usize>> = vec![None; message.oneofs];
    let mut r = Reader::new(bytes);
    while !r.at_end() {
        let (number, wire) = r.tag()?;
        let Some(index) = message.index(number) else {
            r.skip(number, wire, depth)?;
            continue;
        };
        let f = &message.fields[index];
        if is_message(f) && !once.first(index) {
            return Err(format!("{}: a message field given twice (merging them is not supported)", f.name).into());
        }
        if let Some(oneof) = f.oneof {
            if *members[oneof].get_or_insert(index) != index {
                return Err(format!("{}: a second member of its oneof is set", f.name).into());
            }
        }
        let value = r.value(number, wire, depth).map_err(|e| e.within(&f.name))?;
        found.push(Occurrence { index, wire, start: r.pos - value.len(), end: r.pos });
    }
    Ok(())
}

fn append_field(
    f: &ProtoField,
    bytes: &[u8],
    found: &[Occurrence],
    column: &mut Column,
    scratch: &mut Scratch,
    depth: usize,
) -> Result<(), DecodeError> {
    let value = |o: &Occurrence| &bytes[o.start..o.end];
    match (&f.kind, found.split_last()) {
        (_, None) => append_absent(f, column),
        (Kind::Single | Kind::Optional, Some((last, earlier))) => {
            // The last occurrence wins; the earlier ones must decode too.
            for o in earlier {
                decode_overridden(&f.ty, o.wire, value(o), column, scratch, depth)?;
            }
            append_value(&f.ty, last.wire, value(last), column, scratch, depth)?
        }
        (Kind::Repeated, _) => {
            let Column::List(list) = column else { unreachable!("a repeated field's column is a list") };
            for o in found {
                append_items(&f.ty, f.packs(), o.wire, value(o), list.items(), scratch, depth)?;
            }
            list.close(true);
        }
        (Kind::Map(key), _) => {
            let Column::Map(map) = column else { unreachable!("a map field's column is a map") };
            let mut keys = std::mem::take(&mut scratch.keys);
            keys.clear();
            for o in found {
                let Column::Struct(entry) = map.items() else { unreachable!("a map's entries are structs") };
                append_entry((key, &f.ty), bytes, o, entry, &mut keys, scratch, depth)?;
            }
            let duplicate = duplicate_key(&mut keys, bytes);
            scratch.keys = keys;
            if duplicate {
                return Err("a map key given twice".into());
            }
            map.close(true);
        }
    }
    Ok(())
}

/// Appends one map entry (occurrence `o` of a map field, its keys of `key` and values of `ty`) to
/// `entry`, and where its key's bytes are in `bytes` to `keys` (none: the entry has no key, the
/// default).
fn append_entry(
    (key, ty): (&Proto, &Proto),
    bytes: &[u8],
    o: &Occurrence,
    entry: &mut Struct,
    keys: &mut Vec<(usize, usize)>,
    scratch: &mut Scratch,
    depth: usize,
) -> Result<(), DecodeError> {
    if o.wire != LEN {
        return Err(format!("a map entry of wire type {}", o.wire).into());
    }
    let mut e = Reader::new(&bytes[o.start..o.end]);
    let at = |e: &Reader, span: &[u8], wire| (wire, o.start + e.pos - span.len(), o.start + e.pos);
    // Encoders write an entry's key, then its value, both whatever they hold, and nothing else.
    let (key_wire, value_wire) = (wire_type(key), wire_type(ty));
    let (mut k, mut v) = (None, None);
    if e.varint() == Ok(8 | u64::from(key_wire)) {
        if let Ok(span) = e.value(1, key_wire, depth) {
            k = Some(at(&e, span, key_wire));
            if e.varint() == Ok(16 | u64::from(value_wire)) {
                if let Ok(span) = e.value(2, value_wire, depth) {
                    v = Some(at(&e, span, value_wire));
                }
            }
        }
    }
    if v.is_none() || !e.at_end() {
        // Read again, field by field.
        (k, v, e) = (None, None, Reader::new(&bytes[o.start..o.end]));
        let mut fields = 0;
        while !e.at_end() {
            let (number, wire) = e.tag()?;
            fields += 1;
            scratch.canonical &= number == fields;
            let span = e.value(number, wire, depth)?;
            let (earlier, ty, child) = match number {
                1 => (k.replace(at(&e, span, wire)), key, 0),
                2 => (v.replace(at(&e, span, wire)), ty, 1),
                _ => continue,
            };
            // The last wins; an earlier one must decode too.
            if let Some((wire, start, end)) = earlier {
                decode_overridden(ty, wire, &bytes[start..end], entry.child(child), scratch, depth)?;
            }
        }
        scratch.canonical &= fields == 2;
    }
    match k {
        Some((wire, start, end)) => append_value(key, wire, &bytes[start..end], entry.child(0), scratch, depth)?,
        None => append_default(key, entry.child(0)),
    }
    match (v, ty) {
        (Some((wire, start, end)), _) => append_value(ty, wire, &bytes[start..end], entry.child(1), scratch, depth)?,
        // An entry without its value has the default: for a message, one without fields set.
        (None, Proto::Message(_) | Proto::Timestamp | Proto::Duration | Proto::Wrapper(_) | Proto::Opaque) => {
            append_value(ty, LEN, &[], entry.child(1), scratch, depth)?
        }
        (None, _) => append_default(ty, entry.child(1)),
    }
    scratch.canonical &= e.shortest;
    entry.close(true);
    keys.push(k.map_or((o.start, o.start), |(_, start, end)| (start, end)));
    Ok(())
}

/// Appends one value of `ty` written with wire type `wire`, whose bytes (a length-delimited one's
/// without its length) are `value`: the most common types here, any other by `append_other`.
#[inline(always)]
fn append_value(
    ty: &Proto,
    wire: u8,
    value: &[u8],
    column: &mut Column,
    scratch: &mut Scratch,
    depth: usize,
) -> Result<(), DecodeError> {
    match (ty, wire, column) {
        (Proto::Int64, VARINT, Column::Int64(c)) => c.push(Reader::new(value).varint()? as i64),
        (Proto::Int32, VARINT, Column::Int32(c)) => c.push(int32(Reader::new(value).varint()?, scratch)),
        (Proto::Double, FIXED64, Column::Float64(c)) => c.push(f64::from_le_bytes(Reader::new(value).fixed()?)),
        (Proto::String, LEN, Column::Utf8(c)) if scratch.unchecked => c.push_unchecked(value),
        (Proto::Message(message), LEN, Column::Struct(s)) => append_at(message, value, s, scratch, depth + 1)?,
        (ty, wire, column) => append_other(ty, wire, value, column, scratch, depth)?,
    }
    Ok(())
}

/// `append_value` of the types it leaves.
#[inline(never)]
fn append_other(
    ty: &Proto,
    wire: u8,
    value: &[u8],
    column: &mut Column,
    scratch: &mut Scratch,
    depth: usize,
) -> Result<(), DecodeError> {
    if wire != wire_type(ty) {
        return Err(format!("wire type {wire}, which the schema's type does not have").into());
    }
    let mut r = Reader::new(value);
    match (ty, column) {
        (Proto::SInt32, Column::Int32(c)) => c.push(unzigzag(uint32(r.varint()?, scratch)) as i32),
        (Proto::SFixed32, Column::Int32(c)) => c.push(i32::from_le_bytes(r.fixed()?)),
        (Proto::SInt64, Column::Int64(c)) => c.push(unzigzag(r.varint()?)),
        (Proto::SFixed64, Column::Int64(c)) => c.push(i64::from_le_bytes(r.fixed()?)),
        (Proto::UInt32, Column::UInt32(c)) => c.push(uint32(r.varint()?, scratch) as u32),
        (Proto::Fixed32, Column::UInt32(c)) => c.push(u32::from_le_bytes(r.fixed()?)),
        (Proto::UInt64, Column::UInt64(c)) => c.push(r.varint()?),
        (Proto::Fixed64, Column::UInt64(c)) => c.push(u64::from_le_bytes(r.fixed()?)),
        (Proto::Float, Column::Float32(c)) => c.push(f32::from_le_bytes(r.fixed()?)),
        (Proto::Bool, Column::Boolean(c)) => {
            let v = r.varint()?;
            scratch.canonical &= v <= 1;
            c.push(v != 0)
        }
        (Proto::Enum(e), Column::Utf8(c)) => {
            let number = int32(r.varint()?, scratch);
            let symbol = e.symbol(number).ok_or_else(|| format!("{number} is not a value of enum {}", e.name))?;
            c.push(symbol)
        }
        (Proto::String, Column::Utf8(c)) => c.push(crate::values::utf8(value)?),
        (Proto::Bytes | Proto::Opaque, Column::Binary(c)) => c.push(value),
        (Proto::Timestamp | Proto::Duration, Column::Int64(c)) => {
            let at = micros(value)?;
            let (body, n) = well_known_body(ty, at);
            scratch.canonical &= body[..n] == *value;
            c.push(at)
        }
        (Proto::Wrapper(inner), column) => {
            let mut last = None;
            while !r.at_end() {
                let (number, wire) = r.tag()?;
                let span = r.value(number, wire, depth)?;
                // Encoders write the wrapped value once, as a field without presence.
                scratch.canonical &= number == 1 && last.is_none() && !default_bytes(wire, span);
                if number == 1 {
                    // The last wins; an earlier one must decode too.
                    if let Some((wire, span)) = last.replace((wire, span)) {
                        decode_overridden(inner, wire, span, column, scratch, depth)?;
                    }
                }
            }
            scratch.canonical &= r.shortest;
            match last {
                Some((wire, v)) => append_value(inner, wire, v, column, scratch, depth)?,
                None => append_default(inner, column),
            }
        }
        (ty, _) => unreachable!("the column made for {ty:?} is of its Arrow type"),
    }
    Ok(())
}

/// Decodes a value that a later one of its field overrides (it must decode too), then cuts it back out
/// of `column`; its strings are checked as they come, as they are not kept to be checked later.
fn decode_overridden(
    ty: &Proto,
    wire: u8,
    value: &[u8],
    column: &mut Column,
    scratch: &mut Scratch,
    depth: usize,
) -> Result<(), DecodeError> {
    let (rows, unchecked) = (column.rows(), std::mem::replace(&mut scratch.unchecked, false));
    let decoded = append_value(ty, wire, value, column, scratch, depth);
    scratch.unchecked = unchecked;
    column.truncate(rows);
    decoded
}

/// An int32's (or enum's) varint as the number it holds; encoders write one below zero in ten bytes,
/// and none beyond 32 bits (cut to them here).
#[inline(always)]
fn int32(v: u64, scratch: &mut Scratch) -> i32 {
    scratch.canonical &= v == i64::from(v as i32) as u64;
    v as i32
}

/// A uint32's (or sint32's) varint, which encoders write in 32 bits.
fn uint32(v: u64, scratch: &mut Scratch) -> u64 {
    scratch.canonical &= v <= u64::from(u32::MAX);
    v
}

/// Whether a value's bytes (of wire type `wire`, without a length) are its type's default, which a
/// field without presence leaves out.
pub(super) fn default_bytes(wire: u8, value: &[u8]) -> bool {
    match wire {
        VARINT => value == [0],
        FIXED64 | FIXED32 => value.iter().all(|b| *b == 0),
        LEN => value.is_empty(),
        _ => false,
    }
}

fn unzigzag(v: u64) -> i64 {
    (v >> 1) as i64 ^ -((v & 1) as i64)
}

#[cfg(test)]
mod tests;

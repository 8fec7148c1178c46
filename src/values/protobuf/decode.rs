//! Protobuf's binary encoding, decoded straight into Arrow builders: a value is first checked from end
//! to end ([`check`]: every tag, wire type, length, UTF-8 string, enum number and timestamp), and only a
//! value that passed is appended ([`append_message`]), so a bad value never leaves a partial row behind.
//! Fields may come in any order and a singular field more than once (the last wins); repeated scalars
//! packed or not; fields the message lacks are skipped (groups included).

use arrow_array::builder::{
    ArrayBuilder, BinaryBuilder, BooleanBuilder, DurationMicrosecondBuilder, Float32Builder, Float64Builder,
    Int32Builder, Int64Builder, NullBuilder, StringBuilder, StructBuilder, TimestampMicrosecondBuilder, UInt32Builder,
    UInt64Builder,
};

use super::arrow::{append_absent, append_default};
use super::{Kind, Proto, ProtoField, ProtoMessage};
use crate::values::arrow::{cast, DynList, DynMap};

/// Why a value does not decode: where, and what was wrong.
pub type DecodeError = String;

/// Messages nested deeper than this are refused (a corrupt or hostile value must not exhaust the stack).
const MAX_DEPTH: usize = 100;

const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;
const START_GROUP: u8 = 3;
const END_GROUP: u8 = 4;
const FIXED32: u8 = 5;

/// The bytes of one message, read front to back.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }

    #[inline]
    fn varint(&mut self) -> Result<u64, DecodeError> {
        // Most varints (tags, lengths, small numbers) are one byte.
        if let Some(&byte) = self.buf.get(self.pos) {
            if byte < 0x80 {
                self.pos += 1;
                return Ok(u64::from(byte));
            }
        }
        self.varint_rest()
    }

    fn varint_rest(&mut self) -> Result<u64, DecodeError> {
        let mut value = 0u64;
        for shift in (0..70).step_by(7) {
            let byte = *self.buf.get(self.pos).ok_or("ends inside a number")?;
            self.pos += 1;
            if shift == 63 && byte > 1 {
                return Err("a number beyond 64 bits".into());
            }
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("a number beyond 64 bits".into())
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self.pos.checked_add(n).filter(|end| *end <= self.buf.len());
        let end = end.ok_or_else(|| format!("ends after {} bytes, {n} more needed", self.buf.len()))?;
        let out = &self.buf[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    fn fixed<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        Ok(self.take(N)?.try_into().expect("N bytes"))
    }

    fn len_delimited(&mut self) -> Result<&'a [u8], DecodeError> {
        let n = self.varint()?;
        self.take(usize::try_from(n).map_err(|_| format!("a length of {n}"))?)
    }

    /// A field's number and wire type.
    #[inline]
    fn tag(&mut self) -> Result<(u32, u8), DecodeError> {
        let tag = self.varint()?;
        let number = u32::try_from(tag >> 3).ok().filter(|n| (1..=536_870_911).contains(n));
        let number = number.ok_or_else(|| format!("a field number of {}", tag >> 3))?;
        Ok((number, (tag & 7) as u8))
    }

    /// A field's value of wire type `wire`: its bytes (a length-delimited one's without its length).
    fn value(&mut self, number: u32, wire: u8, depth: usize) -> Result<&'a [u8], DecodeError> {
        if wire == LEN {
            return self.len_delimited();
        }
        let start = self.pos;
        self.skip(number, wire, depth)?;
        Ok(&self.buf[start..self.pos])
    }

    /// Reads past a field's value of wire type `wire` (a group up to its end).
    fn skip(&mut self, number: u32, wire: u8, depth: usize) -> Result<(), DecodeError> {
        match wire {
            VARINT => drop(self.varint()?),
            FIXED64 => drop(self.take(8)?),
            LEN => drop(self.len_delimited()?),
            FIXED32 => drop(self.take(4)?),
            START_GROUP if depth < MAX_DEPTH => loop {
                match self.tag()? {
                    (n, END_GROUP) if n == number => break,
                    (_, END_GROUP) => return Err(format!("a group {number} ended by another's end")),
                    (n, w) => self.skip(n, w, depth + 1)?,
                }
            },
            START_GROUP => return Err(format!("groups nested deeper than {MAX_DEPTH}")),
            w => return Err(format!("field {number}: wire type {w}")),
        }
        Ok(())
    }
}

/// The wire type a value of `ty` is written with.
fn wire_type(ty: &Proto) -> u8 {
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

/// Checks a whole message: everything [`append_message`] relies on.
pub fn check(message: &ProtoMessage, bytes: &[u8]) -> Result<(), DecodeError> {
    check_message(message, bytes, 0)
}

fn check_message(message: &ProtoMessage, bytes: &[u8], depth: usize) -> Result<(), DecodeError> {
    if depth > MAX_DEPTH {
        return Err(format!("messages nested deeper than {MAX_DEPTH}"));
    }
    let mut once = Once::new(message.fields.len());
    // The member of each oneof set so far.
    let mut members: Vec<Option<usize>> = vec![None; message.oneofs];
    // Each map entry's key (its bytes) with its field's index.
    let mut keys: Vec<(usize, &[u8])> = Vec::new();
    let mut r = Reader::new(bytes);
    while !r.at_end() {
        let (number, wire) = r.tag()?;
        match message.index(number) {
            None => r.skip(number, wire, depth)?,
            Some(i) => {
                let f = &message.fields[i];
                let key = check_field(f, wire, &mut r, depth).map_err(|e| format!("{}: {e}", f.name))?;
                keys.extend(key.map(|k| (i, k)));
                if is_message(f) && !once.first(i) {
                    return Err(format!("{}: a message field given twice (merging them is not supported)", f.name));
                }
                if let Some(oneof) = f.oneof {
                    if *members[oneof].get_or_insert(i) != i {
                        return Err(format!("{}: a second member of its oneof is set", f.name));
                    }
                }
            }
        }
    }
    keys.sort_unstable();
    match keys.windows(2).find(|pair| pair[0] == pair[1]) {
        Some(pair) => Err(format!("{}: a map key given twice", message.fields[pair[0].0].name)),
        None => Ok(()),
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

/// Checks one occurrence of `f`; a map entry's key bytes (empty when it has none).
fn check_field<'a>(
    f: &ProtoField,
    wire: u8,
    r: &mut Reader<'a>,
    depth: usize,
) -> Result<Option<&'a [u8]>, DecodeError> {
    match &f.kind {
        Kind::Map(key) if wire == LEN => {
            let entry = r.len_delimited()?;
            let mut e = Reader::new(entry);
            let mut key_bytes: &[u8] = &[];
            while !e.at_end() {
                match e.tag()? {
                    (1, w) => {
                        let start = e.pos;
                        check_value(key, w, &mut e, depth)?;
                        key_bytes = &entry[start..e.pos];
                    }
                    (2, w) => check_value(&f.ty, w, &mut e, depth)?,
                    (n, w) => e.skip(n, w, depth)?,
                }
            }
            Ok(Some(key_bytes))
        }
        Kind::Map(_) => Err(format!("a map entry of wire type {wire}")),
        Kind::Repeated if wire == LEN && wire_type(&f.ty) != LEN => {
            let mut packed = Reader::new(r.len_delimited()?);
            while !packed.at_end() {
                check_value(&f.ty, wire_type(&f.ty), &mut packed, depth)?;
            }
            Ok(None)
        }
        _ => check_value(&f.ty, wire, r, depth).map(|()| None),
    }
}

fn check_value(ty: &Proto, wire: u8, r: &mut Reader, depth: usize) -> Result<(), DecodeError> {
    if wire != wire_type(ty) {
        return Err(format!("wire type {wire}, which the schema's type does not have"));
    }
    match ty {
        Proto::Int32 | Proto::Int64 | Proto::UInt32 | Proto::UInt64 | Proto::SInt32 | Proto::SInt64 | Proto::Bool => {
            r.varint()?;
        }
        Proto::Enum(e) => {
            let number = r.varint()? as i32;
            if e.symbol(number).is_none() {
                return Err(format!("{number} is not a value of enum {}", e.name));
            }
        }
        Proto::Double | Proto::Fixed64 | Proto::SFixed64 => drop(r.take(8)?),
        Proto::Float | Proto::Fixed32 | Proto::SFixed32 => drop(r.take(4)?),
        Proto::String => {
            crate::values::utf8(r.len_delimited()?)?;
        }
        Proto::Bytes | Proto::Opaque => drop(r.len_delimited()?),
        Proto::Message(message) => check_message(message, r.len_delimited()?, depth + 1)?,
        Proto::Timestamp | Proto::Duration => drop(micros(r.len_delimited()?)?),
        Proto::Wrapper(inner) => {
            let mut w = Reader::new(r.len_delimited()?);
            while !w.at_end() {
                match w.tag()? {
                    (1, wire) => check_value(inner, wire, &mut w, depth)?,
                    (n, wire) => w.skip(n, wire, depth)?,
                }
            }
        }
    }
    Ok(())
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
            (n @ (1 | 2), w) => return Err(format!("field {n} of wire type {w}, not a varint")),
            (n, w) => r.skip(n, w, 0)?,
        }
    }
    seconds
        .checked_mul(1_000_000)
        .and_then(|m| m.checked_add(nanos / 1000))
        .ok_or_else(|| format!("{seconds} s is beyond what microseconds in 64 bits hold"))
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

/// Reusable lists of occurrences, one per nesting depth.
#[derive(Default)]
pub struct Scratch(Vec<Vec<Occurrence>>);

/// Appends a message [`check`] passed to `b`, a struct builder of its fields.
pub fn append_message(
    message: &ProtoMessage,
    bytes: &[u8],
    b: &mut StructBuilder,
    scratch: &mut Scratch,
) -> Result<(), DecodeError> {
    append_at(message, bytes, b, scratch, 0)
}

fn append_at(
    message: &ProtoMessage,
    bytes: &[u8],
    b: &mut StructBuilder,
    scratch: &mut Scratch,
    depth: usize,
) -> Result<(), DecodeError> {
    if scratch.0.len() <= depth {
        scratch.0.resize_with(depth + 1, Vec::new);
    }
    let mut found = std::mem::take(&mut scratch.0[depth]);
    found.clear();
    let mut r = Reader::new(bytes);
    while !r.at_end() {
        let (number, wire) = r.tag()?;
        match message.index(number) {
            None => r.skip(number, wire, depth)?,
            Some(index) => {
                let value = r.value(number, wire, depth)?;
                found.push(Occurrence { index, wire, start: r.pos - value.len(), end: r.pos });
            }
        }
    }
    // Fields usually come in the order they are declared; a stable sort keeps a repeated field's order.
    if !found.is_sorted_by_key(|o| o.index) {
        found.sort_by_key(|o| o.index);
    }
    let mut rest = &found[..];
    for (i, f) in message.fields.iter().enumerate() {
        let n = rest.iter().take_while(|o| o.index == i).count();
        let (mine, next) = rest.split_at(n);
        rest = next;
        append_field(f, bytes, mine, b.field_builders_mut()[i].as_mut(), scratch, depth)?;
    }
    if message.fields.is_empty() {
        cast::<NullBuilder>(b.field_builders_mut()[0].as_mut()).append_null();
    }
    scratch.0[depth] = found;
    b.append(true);
    Ok(())
}

fn append_field(
    f: &ProtoField,
    bytes: &[u8],
    found: &[Occurrence],
    b: &mut dyn ArrayBuilder,
    scratch: &mut Scratch,
    depth: usize,
) -> Result<(), DecodeError> {
    let value = |o: &Occurrence| &bytes[o.start..o.end];
    match (&f.kind, found.last()) {
        (_, None) => append_absent(f, b),
        (Kind::Single | Kind::Optional, Some(last)) => append_value(&f.ty, value(last), b, scratch, depth)?,
        (Kind::Repeated, _) => {
            let list = cast::<DynList>(b);
            for o in found {
                if o.wire == LEN && wire_type(&f.ty) != LEN {
                    let mut packed = Reader::new(value(o));
                    while !packed.at_end() {
                        let start = packed.pos;
                        skip_value(&f.ty, &mut packed)?;
                        append_value(&f.ty, &packed.buf[start..packed.pos], list.values().as_mut(), scratch, depth)?;
                    }
                } else {
                    append_value(&f.ty, value(o), list.values().as_mut(), scratch, depth)?;
                }
            }
            list.append(true);
        }
        (Kind::Map(key), _) => {
            let map = cast::<DynMap>(b);
            for o in found {
                let (mut k, mut v) = (None, None);
                let mut e = Reader::new(value(o));
                while !e.at_end() {
                    let (number, wire) = e.tag()?;
                    let span = e.value(number, wire, depth)?;
                    match number {
                        1 => k = Some(span),
                        2 => v = Some(span),
                        _ => {}
                    }
                }
                match k {
                    Some(k) => append_value(key, k, map.keys().as_mut(), scratch, depth)?,
                    None => append_default(key, map.keys().as_mut()),
                }
                match (v, &f.ty) {
                    (Some(v), _) => append_value(&f.ty, v, map.values().as_mut(), scratch, depth)?,
                    // An entry without its value has the default: for a message, one without fields set.
                    (
                        None,
                        Proto::Message(_) | Proto::Timestamp | Proto::Duration | Proto::Wrapper(_) | Proto::Opaque,
                    ) => append_value(&f.ty, &[], map.values().as_mut(), scratch, depth)?,
                    (None, _) => append_default(&f.ty, map.values().as_mut()),
                }
            }
            map.append(true).map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

/// Reads past one packed value of `ty`.
fn skip_value(ty: &Proto, r: &mut Reader) -> Result<(), DecodeError> {
    r.skip(0, wire_type(ty), 0)
}

/// Appends one value of `ty` whose bytes (a length-delimited one's without its length) are `value`.
fn append_value(
    ty: &Proto,
    value: &[u8],
    b: &mut dyn ArrayBuilder,
    scratch: &mut Scratch,
    depth: usize,
) -> Result<(), DecodeError> {
    let mut r = Reader::new(value);
    match ty {
        Proto::Int32 => cast::<Int32Builder>(b).append_value(r.varint()? as i32),
        Proto::SInt32 => cast::<Int32Builder>(b).append_value(unzigzag(r.varint()?) as i32),
        Proto::SFixed32 => cast::<Int32Builder>(b).append_value(i32::from_le_bytes(r.fixed()?)),
        Proto::Int64 => cast::<Int64Builder>(b).append_value(r.varint()? as i64),
        Proto::SInt64 => cast::<Int64Builder>(b).append_value(unzigzag(r.varint()?)),
        Proto::SFixed64 => cast::<Int64Builder>(b).append_value(i64::from_le_bytes(r.fixed()?)),
        Proto::UInt32 => cast::<UInt32Builder>(b).append_value(r.varint()? as u32),
        Proto::Fixed32 => cast::<UInt32Builder>(b).append_value(u32::from_le_bytes(r.fixed()?)),
        Proto::UInt64 => cast::<UInt64Builder>(b).append_value(r.varint()?),
        Proto::Fixed64 => cast::<UInt64Builder>(b).append_value(u64::from_le_bytes(r.fixed()?)),
        Proto::Double => cast::<Float64Builder>(b).append_value(f64::from_le_bytes(r.fixed()?)),
        Proto::Float => cast::<Float32Builder>(b).append_value(f32::from_le_bytes(r.fixed()?)),
        Proto::Bool => cast::<BooleanBuilder>(b).append_value(r.varint()? != 0),
        Proto::Enum(e) => {
            let number = r.varint()? as i32;
            let symbol = e.symbol(number).ok_or_else(|| format!("{number} is not a value of enum {}", e.name))?;
            cast::<StringBuilder>(b).append_value(symbol)
        }
        Proto::String => {
            let s = crate::values::utf8(value)?;
            cast::<StringBuilder>(b).append_value(s)
        }
        Proto::Bytes | Proto::Opaque => cast::<BinaryBuilder>(b).append_value(value),
        Proto::Message(message) => append_at(message, value, cast::<StructBuilder>(b), scratch, depth + 1)?,
        Proto::Timestamp => cast::<TimestampMicrosecondBuilder>(b).append_value(micros(value)?),
        Proto::Duration => cast::<DurationMicrosecondBuilder>(b).append_value(micros(value)?),
        Proto::Wrapper(inner) => {
            let mut last = None;
            while !r.at_end() {
                let (number, wire) = r.tag()?;
                let span = r.value(number, wire, depth)?;
                if number == 1 {
                    last = Some(span);
                }
            }
            match last {
                Some(v) => append_value(inner, v, b, scratch, depth)?,
                None => append_default(inner, b),
            }
        }
    }
    Ok(())
}

fn unzigzag(v: u64) -> i64 {
    (v >> 1) as i64 ^ -((v & 1) as i64)
}

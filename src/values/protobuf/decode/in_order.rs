//! The common case of a message's bytes: its fields in the order they are declared, read and appended
//! in one pass (no list of where each field is, as a message in any order needs). A field written with
//! the tag encoders give it (its [`Step`]) is read by what it is, at once; any other the general way.

use super::super::arrow::append_absent;
use super::reader::split_tag;
use super::{append_at, append_entry, append_items, append_value, default_bytes, duplicate_key, int32, Occurrence};
use super::{wire_type, DecodeError, Kind, Proto, ProtoField, ProtoMessage, Reader, Scratch, LEN};
use crate::values::column::{Column, Struct};

/// How a field is read when its tag is the one encoders write it with: its number and the wire type of
/// its type (a packed field's: a run).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    tag: u64,
    op: Op,
}

/// What is done with a field's value, its tag as expected: the commonest types read at once (a
/// singular number, double, string or message; a repeated message's item), any other the general way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Int64,
    Int32,
    Double,
    String,
    Message,
    Items,
    Other,
}

impl Step {
    pub fn new(f: &ProtoField) -> Self {
        let wire = if f.packs() || matches!(f.kind, Kind::Map(_)) { LEN } else { wire_type(&f.ty) };
        let op = match (&f.kind, &f.ty) {
            (Kind::Single | Kind::Optional, Proto::Int64) => Op::Int64,
            (Kind::Single | Kind::Optional, Proto::Int32) => Op::Int32,
            (Kind::Single | Kind::Optional, Proto::Double) => Op::Double,
            (Kind::Single | Kind::Optional, Proto::String) => Op::String,
            (Kind::Single | Kind::Optional, Proto::Message(_)) => Op::Message,
            (Kind::Repeated, Proto::Message(_)) => Op::Items,
            _ => Op::Other,
        };
        Self { tag: (u64::from(f.number) << 3) | u64::from(wire), op }
    }
}

/// Appends a message whose fields come in the order they are declared, each singular one at most
/// once and the items of each repeated one back to back (as protobuf's encoders write them), in one
/// pass over its bytes: true. Any other message gives false, leaving part of a row for the caller to
/// cut back (`append_any_order` then reads it); a value that does not decode, why (the first thing
/// wrong in its bytes, where `append_any_order` would say the first wrong tag, if any, first).
pub(super) fn in_order(
    message: &ProtoMessage,
    bytes: &[u8],
    s: &mut Struct,
    scratch: &mut Scratch,
    depth: usize,
) -> Result<bool, DecodeError> {
    if message.oneofs > 64 {
        return Ok(false);
    }
    let steps = &message.steps;
    let (mut r, mut next, mut open, mut oneofs) = (Reader::new(bytes), 0, None, 0u64);
    // The open map field's keys (held here: the messages within it use the scratch's too).
    let mut keys = std::mem::take(&mut scratch.keys);
    while !r.at_end() {
        let tag = r.varint()?;
        // Most often the open field again or the next one declared; any other is looked up.
        let expected = |j: &usize| steps.get(*j).is_some_and(|step| step.tag == tag);
        let i = match open.filter(expected).or_else(|| Some(next).filter(expected)) {
            Some(i) => i,
            None => {
                let (number, wire) = split_tag(tag)?;
                let Some(i) = message.index(number) else {
                    // A field the message lacks, which its row does not give back.
                    scratch.canonical = false;
                    r.skip(number, wire, depth)?;
                    continue;
                };
                i
            }
        };
        let f = &message.fields[i];
        if open != Some(i) {
            // A field begun before (out of order, or a singular one again).
            if i < next {
                return Ok(false);
            }
            if let Some(o) = open.take() {
                close_open(&message.fields[o], bytes, s.child(o), &mut keys)?;
            }
            (next..i).for_each(|j| append_absent(&message.fields[j], s.child(j)));
            // A second member of a oneof.
            if let Some(oneof) = f.oneof {
                let bit = 1u64 << oneof;
                if oneofs & bit != 0 {
                    return Ok(false);
                }
                oneofs |= bit;
            }
            keys.clear();
            next = i + 1;
        } else {
            // A packed field's second run (encoders write one).
            scratch.canonical &= !f.packs();
        }
        let step = steps[i];
        if step.tag == tag && step.op != Op::Other {
            if step.op == Op::Items {
                open = Some(i);
            }
            append_step(step.op, f, &mut r, s.child(i), scratch, depth).map_err(|e| e.within(&f.name))?;
            continue;
        }
        let wire = (tag & 7) as u8;
        let value = r.value(f.number, wire, depth).map_err(|e| e.within(&f.name))?;
        let appended = match (&f.kind, s.child(i)) {
            (Kind::Single | Kind::Optional, column) => {
                // A field without presence holding its default is left out by encoders.
                scratch.canonical &= f.kind == Kind::Optional || !default_bytes(wire, value);
                append_value(&f.ty, wire, value, column, scratch, depth)
            }
            (Kind::Repeated, Column::List(list)) => {
                open = Some(i);
                append_items(&f.ty, f.packs(), wire, value, list.items(), scratch, depth)
            }
            (Kind::Map(key), Column::Map(map)) => {
                open = Some(i);
                let Column::Struct(entry) = map.items() else { unreachable!("a map's entries are structs") };
                let o = Occurrence { index: i, wire, start: r.pos - value.len(), end: r.pos };
                append_entry((key, &f.ty), bytes, &o, entry, &mut keys, scratch, depth)
            }
            (kind, _) => unreachable!("the column made for a {kind:?} field is of its Arrow type"),
        };
        appended.map_err(|e| e.within(&f.name))?;
    }
    if let Some(o) = open {
        close_open(&message.fields[o], bytes, s.child(o), &mut keys)?;
    }
    scratch.canonical &= r.shortest;
    scratch.keys = keys;
    (next..message.fields.len()).for_each(|j| append_absent(&message.fields[j], s.child(j)));
    if message.fields.is_empty() {
        s.child(0).push_null();
    }
    s.close(true);
    Ok(true)
}

/// Reads and appends the value of field `f`, written with the tag its step expects, by what `op` says
/// (not `Op::Other`); a field without presence holding its default is left out by encoders.
#[inline(always)]
fn append_step(
    op: Op,
    f: &ProtoField,
    r: &mut Reader,
    column: &mut Column,
    scratch: &mut Scratch,
    depth: usize,
) -> Result<(), DecodeError> {
    let presence = f.kind == Kind::Optional;
    match (op, column) {
        (Op::Int64, Column::Int64(c)) => {
            let v = r.varint()?;
            scratch.canonical &= presence || v != 0;
            c.push(v as i64);
        }
        (Op::Int32, Column::Int32(c)) => {
            let v = r.varint()?;
            scratch.canonical &= presence || v != 0;
            c.push(int32(v, scratch));
        }
        (Op::Double, Column::Float64(c)) => {
            let v = r.fixed::<8>()?;
            scratch.canonical &= presence || v != [0; 8];
            c.push(f64::from_le_bytes(v));
        }
        (Op::String, Column::Utf8(c)) => {
            let v = r.len_delimited()?;
            scratch.canonical &= presence || !v.is_empty();
            match scratch.unchecked {
                true => c.push_unchecked(v),
                false => c.push(crate::values::utf8(v)?),
            }
        }
        (Op::Message, Column::Struct(s)) => {
            let Proto::Message(message) = &f.ty else { unreachable!("a message field's type is a message") };
            let v = r.len_delimited()?;
            scratch.canonical &= presence || !v.is_empty();
            append_at(message, v, s, scratch, depth + 1)?;
        }
        (Op::Items, Column::List(list)) => {
            let (Proto::Message(message), Column::Struct(s)) = (&f.ty, list.items()) else {
                unreachable!("a repeated message's items are structs")
            };
            append_at(message, r.len_delimited()?, s, scratch, depth + 1)?;
        }
        (op, _) => unreachable!("the column made for a field read by {op:?} is of its Arrow type"),
    }
    Ok(())
}

/// Ends the row of a repeated or map field `f` whose items were appended (a map's `keys`, where each is
/// in `bytes`, must differ).
fn close_open(
    f: &ProtoField,
    bytes: &[u8],
    column: &mut Column,
    keys: &mut [(usize, usize)],
) -> Result<(), DecodeError> {
    match column {
        Column::Map(map) => {
            if duplicate_key(keys, bytes) {
                return Err(format!("{}: a map key given twice", f.name).into());
            }
            map.close(true);
        }
        Column::List(list) => list.close(true),
        _ => unreachable!("{}: only a repeated or map field stays open", f.name),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::column::Room;
    use crate::values::protobuf::arrow::struct_fields;
    use crate::values::protobuf::schema::compile;

    #[test]
    fn only_a_message_in_declared_order_is_read_in_one_pass() {
        let text = r#"syntax = "proto3"; message M { int32 a = 1; repeated string b = 2; map<string, int32> c = 3; }"#;
        let file = compile(text, &[]).unwrap();
        let m = file.message(&[0]).unwrap();
        let read = |bytes: &[u8]| {
            let mut s = Struct::new(struct_fields(m), &Room::rows(1));
            in_order(m, bytes, &mut s, &mut Scratch::default(), 0)
        };
        let (a, b, c) = ([0x08, 1], [0x12, 1, b'x'], [0x1a, 5, 0x0a, 1, b'k', 0x10, 1]);
        assert_eq!(read(&[&a[..], &b, &b, &c].concat()), Ok(true));
        assert_eq!(read(&[&b[..], &c].concat()), Ok(true), "absent fields are no disorder");
        assert_eq!(read(&[&b[..], &a].concat()), Ok(false), "a field before one declared before it");
        assert_eq!(read(&[&a[..], &a].concat()), Ok(false), "a singular field twice: the last wins");
        assert_eq!(read(&[&b[..], &c, &b].concat()), Ok(false), "a repeated field's items apart");
        assert_eq!(read(&[&c[..], &c].concat()), Err("c: a map key given twice".into()));
    }
}

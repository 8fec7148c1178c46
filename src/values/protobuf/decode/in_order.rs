//! The common case of a message's bytes: its fields in the order they are declared, read and appended
//! in one pass (no list of where each field is, as a message in any order needs).

use super::super::arrow::append_absent;
use super::{append_entry, append_items, append_value, default_bytes, duplicate_key, int32, Occurrence, Reader};
use super::{DecodeError, Kind, Proto, ProtoField, ProtoMessage, Scratch, VARINT};
use crate::values::column::{Column, Struct};

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
    let (mut r, mut next, mut open, mut oneofs) = (Reader::new(bytes), 0, None, 0u64);
    // The open map field's keys (held here: the messages within it use the scratch's too).
    let mut keys = std::mem::take(&mut scratch.keys);
    while !r.at_end() {
        let (number, wire) = r.tag()?;
        // Most often the open field again or the next one declared; any other is looked up.
        let numbered = |j: &usize| message.fields.get(*j).is_some_and(|f| f.number == number);
        let found = open.filter(numbered).or_else(|| Some(next).filter(numbered)).or_else(|| message.index(number));
        let Some(i) = found else {
            // A field the message lacks, which its row does not give back.
            scratch.canonical = false;
            r.skip(number, wire, depth)?;
            continue;
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
        // A singular varint number, the commonest field: read once, where it is, not delimited first.
        if wire == VARINT && matches!(f.kind, Kind::Single | Kind::Optional) {
            match (&f.ty, s.child(i)) {
                (Proto::Int64, Column::Int64(c)) => {
                    let v = r.varint().map_err(|e| format!("{}: {e}", f.name))?;
                    scratch.canonical &= v != 0 || f.kind == Kind::Optional;
                    c.push(v as i64);
                    continue;
                }
                (Proto::Int32, Column::Int32(c)) => {
                    let v = r.varint().map_err(|e| format!("{}: {e}", f.name))?;
                    scratch.canonical &= v != 0 || f.kind == Kind::Optional;
                    c.push(int32(v, scratch));
                    continue;
                }
                _ => {}
            }
        }
        let value = r.value(number, wire, depth).map_err(|e| format!("{}: {e}", f.name))?;
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
                append_entry(key, &f.ty, bytes, &o, entry, scratch, depth).map(|key| keys.push(key))
            }
            (kind, _) => unreachable!("the column made for a {kind:?} field is of its Arrow type"),
        };
        appended.map_err(|e| format!("{}: {e}", f.name))?;
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
                return Err(format!("{}: a map key given twice", f.name));
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

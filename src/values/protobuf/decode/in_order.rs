//! The common case of a message's bytes: its fields in the order they are declared, read and appended
//! in one pass (no list of where each field is, as a message in any order needs).

use super::super::arrow::append_absent;
use super::{append_entry, append_items, append_value, duplicate_key, Occurrence, Reader, Scratch};
use super::{DecodeError, Kind, ProtoField, ProtoMessage};
use crate::values::column::{Column, Struct};

/// Appends a message whose fields come in the order they are declared, each singular one at most
/// once and the items of each repeated one back to back (as protobuf's encoders write them), in one
/// pass over its bytes. Any other message, or any error, gives false (leaving part of a row for the
/// caller to cut back): `append_any_order` then reads it, and says what is wrong.
pub(super) fn in_order(
    message: &ProtoMessage,
    bytes: &[u8],
    s: &mut Struct,
    scratch: &mut Scratch,
    depth: usize,
) -> bool {
    if message.oneofs > 64 {
        return false;
    }
    let (mut r, mut next, mut open, mut oneofs) = (Reader::new(bytes), 0, None, 0u64);
    // The open map field's keys (held here: the messages within it use the scratch's too).
    let mut keys = std::mem::take(&mut scratch.keys);
    while !r.at_end() {
        let Ok((number, wire)) = r.tag() else { return false };
        let Some(i) = message.index(number) else {
            match r.skip(number, wire, depth) {
                Ok(()) => continue,
                Err(_) => return false,
            }
        };
        let f = &message.fields[i];
        if open != Some(i) {
            // A field begun before (out of order, or a singular one again).
            if i < next {
                return false;
            }
            if let Some(o) = open.take() {
                if close_open(&message.fields[o], bytes, s.child(o), &mut keys).is_err() {
                    return false;
                }
            }
            (next..i).for_each(|j| append_absent(&message.fields[j], s.child(j)));
            // A second member of a oneof.
            if let Some(oneof) = f.oneof {
                let bit = 1u64 << oneof;
                if oneofs & bit != 0 {
                    return false;
                }
                oneofs |= bit;
            }
            keys.clear();
            next = i + 1;
        }
        let Ok(value) = r.value(number, wire, depth) else { return false };
        let appended = match (&f.kind, s.child(i)) {
            (Kind::Single | Kind::Optional, column) => append_value(&f.ty, wire, value, column, scratch, depth),
            (Kind::Repeated, Column::List(list)) => {
                open = Some(i);
                append_items(&f.ty, wire, value, list.items(), scratch, depth)
            }
            (Kind::Map(key), Column::Map(map)) => {
                open = Some(i);
                let Column::Struct(entry) = map.items() else { unreachable!("a map's entries are structs") };
                let o = Occurrence { index: i, wire, start: r.pos - value.len(), end: r.pos };
                append_entry(key, &f.ty, bytes, &o, entry, scratch, depth).map(|key| keys.push(key))
            }
            (kind, _) => unreachable!("the column made for a {kind:?} field is of its Arrow type"),
        };
        if appended.is_err() {
            return false;
        }
    }
    if let Some(o) = open {
        if close_open(&message.fields[o], bytes, s.child(o), &mut keys).is_err() {
            return false;
        }
    }
    scratch.keys = keys;
    (next..message.fields.len()).for_each(|j| append_absent(&message.fields[j], s.child(j)));
    if message.fields.is_empty() {
        s.child(0).push_null();
    }
    s.close(true);
    true
}

/// Ends the row of a repeated or map field whose items were appended (a map's `keys`, where each is in
/// `bytes`, must differ).
fn close_open(
    f: &ProtoField,
    bytes: &[u8],
    column: &mut Column,
    keys: &mut [(usize, usize)],
) -> Result<(), DecodeError> {
    match column {
        Column::Map(map) => {
            if duplicate_key(keys, bytes) {
                return Err("a map key given twice".into());
            }
            map.close(true);
        }
        Column::List(list) => list.close(true),
        _ => unreachable!("{}: only a repeated or map field stays open", f.name),
    }
    Ok(())
}

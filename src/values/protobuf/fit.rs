//! Which versions of a message a file's message holds: protobuf decodes by field number, so a value
//! written with another version of the message (the same full name) reads under the file's when every
//! field it has is one the file's has, of the same kind and type (an enum with at least its symbols, a
//! message holding its message), whatever the field's name. A version with fields the file's lacks is not held (they would be lost); one that holds
//! the file's whole is a newer version the file can widen to (`widen`).

use super::{Proto, ProtoField, ProtoMessage};

/// Whether values of `writer` read whole under `reader`; else the first field that does not.
pub fn holds(reader: &ProtoMessage, writer: &ProtoMessage) -> Result<(), String> {
    // Another message (a topic of several types) is not another version of this one.
    if reader.name != writer.name {
        return Err(format!("{} is not {}", writer.name, reader.name));
    }
    for w in writer.fields.iter() {
        let r = reader
            .field(w.number)
            .ok_or_else(|| format!("{}: field {} ({}) is not in the file's", writer.name, w.number, w.name))?;
        field_holds(r, w).map_err(|why| format!("{}.{}: {why}", writer.name, w.name))?;
    }
    Ok(())
}

fn field_holds(r: &ProtoField, w: &ProtoField) -> Result<(), String> {
    // An absent field means its default without presence and null with it: the kinds must agree.
    if r.kind != w.kind {
        return Err("its kind changed (implicit or explicit presence, repeated, map)".into());
    }
    type_holds(&r.ty, &w.ty)
}

fn type_holds(r: &Proto, w: &Proto) -> Result<(), String> {
    match (r, w) {
        (Proto::Message(r), Proto::Message(w)) => holds(r, w),
        (Proto::Enum(r), Proto::Enum(w)) => match w.values.iter().find(|v| !r.values.contains(v)) {
            Some((number, symbol)) => Err(format!("enum value {symbol} = {number} is not in the file's")),
            None => Ok(()),
        },
        (r, w) if r == w => Ok(()),
        _ => Err("the type changed".into()),
    }
}

//! Avro schema resolution (the specification's "Schema Resolution"): how a value written with one schema
//! (the writer's) is read as another (the reader's, the file's), so values of compatible versions of a
//! subject share one file. A reader's field the writer lacks takes its default; a writer's field the
//! reader lacks is read past; int, long and float widen (to long, float, double), string reads as
//! bytes; an enum reads into one with more symbols; a value reads into a nullable union of its type.
//!
//! A file keeps every value's data: a writer whose fields the reader lacks is resolvable but lossy
//! ([`Resolution::skips`]), and its values start a file of their own (a newer version becomes the next
//! file's schema, and older versions then resolve into it).

use serde_json::Value;

use super::binary::{append, append_list, append_map, check, min_width, DecodeError, Reader};
use super::reencode::{bytes, long};
use super::{Avro, AvroField};
use crate::values::column::{Column, Struct};

/// How a writer's value is read as the reader's type.
#[derive(Debug, Clone, PartialEq)]
enum Resolved {
    /// The same encoding and Arrow type on both sides.
    Same(Avro),
    /// A writer's primitive read as a wider reader's.
    Widen {
        from: Avro,
        to: Avro,
    },
    /// A writer's nullable union read into the reader's.
    Nullable {
        null_first: bool,
        inner: Box<Resolved>,
    },
    /// A writer's one-branch union: its branch index, then the value.
    Single(Box<Resolved>),
    /// `width`: the fewest bytes a writer's item takes (blocks are bounded as `check` bounded them).
    Array {
        items: Box<Resolved>,
        width: usize,
    },
    Map {
        values: Box<Resolved>,
        width: usize,
    },
    Record(RecordPlan),
}

/// A record read as another: the writer's fields in the writer's order, each into a reader's field
/// (by name) or read past; then the defaults of the reader's fields the writer lacks.
#[derive(Debug, Clone, PartialEq)]
struct RecordPlan {
    /// Per writer field: its type, and the reader field's index and how it is read (None: read past).
    writer: Vec<(Avro, Option<(usize, Resolved)>)>,
    /// The reader's fields the writer lacks: their index, type and default in Avro's binary encoding.
    defaults: Vec<(usize, Avro, Vec<u8>)>,
    /// The reader has no fields (its struct holds the placeholder field).
    empty: bool,
}

/// A writer's top-level record resolved against a reader's.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolution {
    writer: Avro,
    plan: RecordPlan,
    /// The writer's fields the reader lacks (dotted paths): their data would not be in the file.
    pub skips: Vec<String>,
}

impl Resolution {
    /// How values of `writer` are read as `reader`, or why they cannot be.
    pub fn new(writer: &[AvroField], reader: &[AvroField]) -> Result<Self, String> {
        let mut skips = Vec::new();
        let plan = record(writer, reader, "", &mut skips)?;
        Ok(Self { writer: Avro::Record(writer.into()), plan, skips })
    }

    /// Checks a value by the writer's schema from end to end (so a bad one leaves no partial row).
    pub fn check(&self, r: &mut Reader) -> Result<(), DecodeError> {
        check(&self.writer, r)
    }

    /// Appends a value that [`Resolution::check`] passed, as the reader's record, to `s` (nothing, if
    /// it does not decode after all).
    pub fn append(&self, r: &mut Reader, s: &mut Struct) -> Result<(), DecodeError> {
        let rows = s.rows();
        append_record(&self.plan, r, s).inspect_err(|_| s.truncate(rows))
    }
}

fn record(
    writer: &[AvroField],
    reader: &[AvroField],
    path: &str,
    skips: &mut Vec<String>,
) -> Result<RecordPlan, String> {
    let at = |name: &str| if path.is_empty() { name.to_string() } else { format!("{path}.{name}") };
    let mut plan =
        RecordPlan { writer: Vec::with_capacity(writer.len()), defaults: Vec::new(), empty: reader.is_empty() };
    for w in writer {
        let target = match reader.iter().position(|r| r.name == w.name) {
            Some(i) => Some((i, resolve(&w.avro, &reader[i].avro, &at(&w.name), skips)?)),
            None => {
                skips.push(at(&w.name));
                None
            }
        };
        plan.writer.push((w.avro.clone(), target));
    }
    for (i, r) in reader.iter().enumerate().filter(|(_, r)| !writer.iter().any(|w| w.name == r.name)) {
        let bytes = default_bytes(r).map_err(|why| format!("{}: the writer lacks it and {why}", at(&r.name)))?;
        plan.defaults.push((i, r.avro.clone(), bytes));
    }
    Ok(plan)
}

fn resolve(writer: &Avro, reader: &Avro, path: &str, skips: &mut Vec<String>) -> Result<Resolved, String> {
    use Avro::*;
    if writer == reader {
        return Ok(Resolved::Same(writer.clone()));
    }
    Ok(match (writer, reader) {
        (Nullable { null_first, inner }, Nullable { inner: reader, .. }) => {
            Resolved::Nullable { null_first: *null_first, inner: Box::new(resolve(inner, reader, path, skips)?) }
        }
        (Nullable { .. }, _) => return Err(format!("{path}: a null cannot be read as the reader's non-null type")),
        (_, Nullable { inner, .. } | Single(inner)) => resolve(writer, inner, path, skips)?,
        (Single(inner), _) => Resolved::Single(Box::new(resolve(inner, reader, path, skips)?)),
        (Int, Long | Float | Double) | (Long, Float | Double) | (Float, Double) | (String, Bytes) => {
            Resolved::Widen { from: writer.clone(), to: reader.clone() }
        }
        (Enum(w), Enum(r)) => match w.iter().find(|s| !r.contains(s)) {
            // Symbols are written as text: the writer's enum reads as is.
            None => Resolved::Same(writer.clone()),
            Some(symbol) => return Err(format!("{path}: the reader's enum has no symbol {symbol:?}")),
        },
        (Array(w), Array(r)) => Resolved::Array { items: Box::new(resolve(w, r, path, skips)?), width: min_width(w) },
        (Map(w), Map(r)) => Resolved::Map { values: Box::new(resolve(w, r, path, skips)?), width: 1 + min_width(w) },
        (Record(w), Record(r)) => Resolved::Record(record(w, r, path, skips)?),
        _ => return Err(format!("{path}: the writer's {writer:?} cannot be read as the reader's {reader:?}")),
    })
}

fn append_resolved(resolved: &Resolved, r: &mut Reader, column: &mut Column) -> Result<(), DecodeError> {
    match (resolved, column) {
        (Resolved::Same(avro), column) => append(avro, r, column)?,
        (Resolved::Widen { from, to }, column) => widen(from, to, r, column)?,
        (Resolved::Nullable { null_first, inner }, column) => match r.present(*null_first)? {
            true => append_resolved(inner, r, column)?,
            false => column.push_null(),
        },
        (Resolved::Single(inner), column) => {
            r.single()?;
            append_resolved(inner, r, column)?;
        }
        (Resolved::Array { items, width }, Column::List(list)) => {
            append_list(r, *width, list, |r, c| append_resolved(items, r, c))?
        }
        (Resolved::Map { values, width }, Column::Map(map)) => {
            append_map(r, *width, map, |r, c| append_resolved(values, r, c))?
        }
        (Resolved::Record(plan), Column::Struct(s)) => append_record(plan, r, s)?,
        (resolved, _) => unreachable!("the column made for {resolved:?}'s reader type is of its Arrow type"),
    }
    Ok(())
}

fn append_record(plan: &RecordPlan, r: &mut Reader, s: &mut Struct) -> Result<(), DecodeError> {
    for (writer, target) in &plan.writer {
        match target {
            Some((i, resolved)) => append_resolved(resolved, r, s.child(*i))?,
            None => check(writer, r)?,
        }
    }
    for (i, avro, default) in &plan.defaults {
        append(avro, &mut Reader::new(default), s.child(*i))?;
    }
    if plan.empty {
        s.child(0).push_null();
    }
    s.close(true);
    Ok(())
}

/// A promoted value, converted as Java's casts (and Arrow's) convert it: each straight to the wider type.
fn widen(from: &Avro, to: &Avro, r: &mut Reader, column: &mut Column) -> Result<(), DecodeError> {
    match (from, to, column) {
        (Avro::Int, Avro::Long, Column::Int64(c)) => c.push(i64::from(r.int()?)),
        (Avro::Int, Avro::Float, Column::Float32(c)) => c.push(r.int()? as f32),
        (Avro::Int, Avro::Double, Column::Float64(c)) => c.push(f64::from(r.int()?)),
        (Avro::Long, Avro::Float, Column::Float32(c)) => c.push(r.long()? as f32),
        (Avro::Long, Avro::Double, Column::Float64(c)) => c.push(r.long()? as f64),
        (Avro::Float, Avro::Double, Column::Float64(c)) => c.push(f64::from(r.float()?)),
        (Avro::String, Avro::Bytes, Column::Binary(c)) => c.push(r.bytes()?),
        _ => unreachable!("only the promotions `resolve` allows, into their columns"),
    }
    Ok(())
}

/// A field's default in Avro's binary encoding, or why it has none that can be used (a union's default
/// is of its first branch).
pub(super) fn default_bytes(f: &AvroField) -> Result<Vec<u8>, String> {
    let default = f.default.as_ref().ok_or("it has no default")?;
    if let Avro::Nullable { null_first, .. } = f.avro {
        if default.is_null() != null_first {
            return Err(format!("its default {default} is not of the union's first branch"));
        }
    }
    let mut bytes = Vec::new();
    encode(&f.avro, default, &mut bytes).map_err(|why| format!("its default {default} {why}"))?;
    // Decoded as any value is (a decimal's digits, a string's UTF-8), so appending it cannot fail.
    let mut reader = Reader::new(&bytes);
    check(&f.avro, &mut reader).map_err(|why| format!("its default {default} does not decode: {why}"))?;
    Ok(bytes)
}

/// A value in Avro's JSON form (a default, as the schema gives it) in Avro's binary encoding: a union's
/// value is null or its other branch's; bytes and fixed are strings of code points 0–255.
pub(super) fn encode(avro: &Avro, v: &Value, out: &mut Vec<u8>) -> Result<(), String> {
    let wrong = || format!("is not a {avro:?}");
    match avro {
        Avro::Nullable { null_first, .. } if v.is_null() => long(i64::from(!*null_first), out),
        Avro::Nullable { null_first, inner } => {
            long(i64::from(*null_first), out);
            encode(inner, v, out)?;
        }
        Avro::Single(inner) => {
            long(0, out);
            encode(inner, v, out)?;
        }
        Avro::Boolean => out.push(u8::from(v.as_bool().ok_or_else(wrong)?)),
        Avro::Int | Avro::Date | Avro::Time(crate::values::TimeUnit::Millis) => {
            let n = v.as_i64().and_then(|n| i32::try_from(n).ok()).ok_or_else(wrong)?;
            long(i64::from(n), out);
        }
        Avro::Long | Avro::Time(_) | Avro::Timestamp { .. } => long(v.as_i64().ok_or_else(wrong)?, out),
        Avro::Float => out.extend_from_slice(&(v.as_f64().ok_or_else(wrong)? as f32).to_le_bytes()),
        Avro::Double => out.extend_from_slice(&v.as_f64().ok_or_else(wrong)?.to_le_bytes()),
        Avro::String | Avro::Uuid | Avro::DecimalText { .. } => bytes(v.as_str().ok_or_else(wrong)?.as_bytes(), out),
        Avro::Bytes | Avro::Decimal { fixed: None, .. } => bytes(&latin1(v).ok_or_else(wrong)?, out),
        Avro::Fixed(size) | Avro::Decimal { fixed: Some(size), .. } => {
            out.extend_from_slice(&latin1(v).filter(|b| b.len() == *size).ok_or_else(wrong)?);
        }
        Avro::Enum(symbols) => {
            let i = symbols.iter().position(|s| Some(s.as_str()) == v.as_str()).ok_or_else(wrong)?;
            long(i as i64, out);
        }
        Avro::Array(items) => {
            let items_json = v.as_array().ok_or_else(wrong)?;
            if !items_json.is_empty() {
                long(items_json.len() as i64, out);
                items_json.iter().try_for_each(|item| encode(items, item, out))?;
            }
            long(0, out);
        }
        Avro::Map(values) => {
            let entries = v.as_object().ok_or_else(wrong)?;
            if !entries.is_empty() {
                long(entries.len() as i64, out);
                for (key, value) in entries {
                    bytes(key.as_bytes(), out);
                    encode(values, value, out)?;
                }
            }
            long(0, out);
        }
        Avro::Record(fields) => {
            let object = v.as_object().ok_or_else(wrong)?;
            for f in fields.iter() {
                let value = object.get(&f.name).or(f.default.as_ref()).ok_or_else(|| format!("has no {:?}", f.name))?;
                encode(&f.avro, value, out)?;
            }
        }
    }
    Ok(())
}

/// A JSON string of code points 0–255 as bytes (Avro's JSON for bytes and fixed).
fn latin1(v: &Value) -> Option<Vec<u8>> {
    v.as_str()?.chars().map(|c| u8::try_from(u32::from(c)).ok()).collect()
}

#[cfg(test)]
mod tests;

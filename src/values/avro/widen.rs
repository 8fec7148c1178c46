//! Decoded values of one schema as another that holds it whole (a newer version, see `resolve`): the
//! Arrow side of schema resolution, for a file whose schema changes to a newer version after some of its
//! rows were written. Fields keep their columns (widened where the type widens), a field the older
//! schema lacks is its default in every row, and nulls stay where they were.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, ListArray, MapArray, StructArray};

use super::binary::{append, data_type, field, struct_fields, Reader};
use super::resolve::default_bytes;
use super::{Avro, AvroField};
use crate::values::column::{Column, Room};

/// `array` (a struct of `from`'s fields) as a struct of `to`'s.
pub fn widen_record(array: &StructArray, from: &[AvroField], to: &[AvroField]) -> Result<StructArray, String> {
    let mut columns = Vec::with_capacity(to.len().max(1));
    for f in to {
        let column = match from.iter().position(|old| old.name == f.name) {
            Some(i) => widen(array.column(i), &from[i].avro, &f.avro).map_err(|e| format!("{}: {e}", f.name))?,
            None => defaults(f, array.len())?,
        };
        columns.push(column);
    }
    if to.is_empty() {
        return Ok(array.clone());
    }
    StructArray::try_new(struct_fields(to), columns, array.nulls().cloned()).map_err(|e| e.to_string())
}

fn widen(array: &ArrayRef, from: &Avro, to: &Avro) -> Result<ArrayRef, String> {
    if data_type(from) == data_type(to) {
        return Ok(array.clone());
    }
    Ok(match (bare(from), bare(to)) {
        (Avro::Record(from), Avro::Record(to)) => Arc::new(widen_record(array.as_struct(), from, to)?),
        (Avro::Array(from), Avro::Array(to)) => {
            let list = array.as_list::<i32>();
            let items = widen(list.values(), from, to)?;
            let field = Arc::new(field("item", to));
            Arc::new(
                ListArray::try_new(field, list.offsets().clone(), items, list.nulls().cloned())
                    .map_err(|e| e.to_string())?,
            )
        }
        (Avro::Map(old_values), Avro::Map(new_values)) => {
            let map = array.as_map();
            let values = widen(map.values(), old_values, new_values)?;
            let arrow_schema::DataType::Map(entries, sorted) = data_type(to) else { unreachable!("a map's type") };
            let arrow_schema::DataType::Struct(fields) = entries.data_type() else { unreachable!("a map's entries") };
            let pairs = StructArray::try_new(fields.clone(), vec![map.keys().clone(), values], None)
                .map_err(|e| e.to_string())?;
            Arc::new(
                MapArray::try_new(entries, map.offsets().clone(), pairs, map.nulls().cloned(), sorted)
                    .map_err(|e| e.to_string())?,
            )
        }
        // The promotions: int, long and float to wider numbers, string to bytes.
        _ => arrow_cast::cast(array, &data_type(to)).map_err(|e| e.to_string())?,
    })
}

/// A type without its union: the Arrow type is the branch's.
fn bare(avro: &Avro) -> &Avro {
    match avro {
        Avro::Nullable { inner, .. } | Avro::Single(inner) => inner,
        other => other,
    }
}

/// `rows` copies of a field's default.
fn defaults(f: &AvroField, rows: usize) -> Result<ArrayRef, String> {
    let bytes = default_bytes(f).map_err(|e| format!("{}: {e}", f.name))?;
    let mut column = Column::new(&data_type(&f.avro), &Room::rows(rows));
    for _ in 0..rows {
        append(&f.avro, &mut Reader::new(&bytes), &mut column)?;
    }
    column.finish().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests;

//! Rows decoded under one version of a message, as rows of a newer version that holds it whole (see
//! `fit`): each field matched by number (its column renamed if it was), the newer version's fields as
//! protobuf reads them from the older bytes (absent: the default, or null with presence, or empty),
//! nested messages widened the same way, in lists and maps too.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, ListArray, MapArray, StructArray};
use arrow_schema::DataType;

use super::arrow::{append_absent, data_type, field, struct_fields};
use super::{Kind, Proto, ProtoField, ProtoMessage};
use crate::values::column::{Column, Room};

/// `rows` (a struct of `from`'s fields) as a struct of `to`'s.
pub fn widen_message(rows: &StructArray, from: &ProtoMessage, to: &ProtoMessage) -> Result<StructArray, String> {
    if to.fields.is_empty() {
        return Ok(rows.clone());
    }
    let mut columns = Vec::with_capacity(to.fields.len());
    for f in to.fields.iter() {
        columns.push(match from.index(f.number) {
            Some(i) => widen_field(rows.column(i), &from.fields[i], f)?,
            None => absent_column(f, rows.len())?,
        });
    }
    StructArray::try_new(struct_fields(to), columns, rows.nulls().cloned()).map_err(|e| e.to_string())
}

/// A column of `rows` rows in which `f` is absent.
fn absent_column(f: &ProtoField, rows: usize) -> Result<ArrayRef, String> {
    let mut column = Column::new(field(f).data_type(), &Room::rows(rows));
    (0..rows).for_each(|_| append_absent(f, &mut column));
    column.finish().map_err(|e| e.to_string())
}

fn widen_field(column: &ArrayRef, from: &ProtoField, to: &ProtoField) -> Result<ArrayRef, String> {
    if from.ty == to.ty {
        return Ok(column.clone());
    }
    let target = field(to);
    match &to.kind {
        Kind::Single | Kind::Optional => widen_value(column, &from.ty, &to.ty),
        Kind::Repeated => {
            let list = column.as_list::<i32>();
            let DataType::List(item) = target.data_type() else { unreachable!("a repeated field is a list") };
            let values = widen_value(list.values(), &from.ty, &to.ty)?;
            let list = ListArray::try_new(item.clone(), list.offsets().clone(), values, list.nulls().cloned());
            Ok(Arc::new(list.map_err(|e| e.to_string())?))
        }
        Kind::Map(_) => {
            let map = column.as_map();
            let &DataType::Map(ref entries, ordered) = target.data_type() else { unreachable!("a map field is a map") };
            let DataType::Struct(entry_fields) = entries.data_type() else { unreachable!("map entries are structs") };
            let values = widen_value(map.values(), &from.ty, &to.ty)?;
            let entries_array = StructArray::try_new(entry_fields.clone(), vec![map.keys().clone(), values], None)
                .map_err(|e| e.to_string())?;
            let map =
                MapArray::try_new(entries.clone(), map.offsets().clone(), entries_array, map.nulls().cloned(), ordered);
            Ok(Arc::new(map.map_err(|e| e.to_string())?))
        }
    }
}

/// Values of `from` as values of `to`: only a message changes (an enum's symbols are strings either way).
fn widen_value(column: &ArrayRef, from: &Proto, to: &Proto) -> Result<ArrayRef, String> {
    match (from, to) {
        (Proto::Message(from), Proto::Message(to)) => Ok(Arc::new(widen_message(column.as_struct(), from, to)?)),
        _ if column.data_type() == &data_type(to) => Ok(column.clone()),
        _ => Err(format!("a {} column cannot widen to {}", column.data_type(), data_type(to))),
    }
}

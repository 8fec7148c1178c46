//! Decoded rows back to Avro's binary encoding (for `restore` and `verify`): the canonical form, which is
//! what Avro's own encoders write (shortest varints, an array or map in one block, a decimal in its
//! fewest bytes). A value decoded from bytes in that form (`binary::Reader::canonical`) encodes back to
//! those very bytes; the archive keeps the bytes of any other value in `value_raw`.

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Decimal128Type, Float32Type, Float64Type, Int32Type, Int64Type, Time32MillisecondType,
    Time64MicrosecondType, TimestampMicrosecondType, TimestampMillisecondType,
};
use arrow_array::{Array, ArrayRef, ArrowPrimitiveType, PrimitiveArray, StructArray};

use super::binary::fewest_bytes;
use super::{Avro, AvroField};
use crate::values::TimeUnit;

/// Row `row` of `array` (a struct of `fields`) in Avro's binary encoding, appended to `out`.
pub fn encode_record(fields: &[AvroField], array: &StructArray, row: usize, out: &mut Vec<u8>) -> Result<(), String> {
    if fields.is_empty() {
        return Ok(()); // Only the placeholder column, which Avro does not have.
    }
    for (i, f) in fields.iter().enumerate() {
        encode(&f.avro, array.column(i), row, out).map_err(|e| format!("{}: {e}", f.name))?;
    }
    Ok(())
}

fn encode(avro: &Avro, array: &ArrayRef, row: usize, out: &mut Vec<u8>) -> Result<(), String> {
    let bad = || format!("a {} column for {avro:?}", array.data_type());
    match avro {
        Avro::Nullable { null_first, inner } => {
            let present = array.is_valid(row);
            long(i64::from(present == *null_first), out);
            if present {
                encode(inner, array, row, out)?;
            }
        }
        Avro::Single(inner) => {
            long(0, out);
            encode(inner, array, row, out)?;
        }
        Avro::Boolean => out.push(u8::from(array.as_boolean_opt().ok_or_else(bad)?.value(row))),
        Avro::Int => long(i64::from(value::<Int32Type>(array, row).ok_or_else(bad)?), out),
        Avro::Date => long(i64::from(value::<Date32Type>(array, row).ok_or_else(bad)?), out),
        Avro::Time(TimeUnit::Millis) => {
            long(i64::from(value::<Time32MillisecondType>(array, row).ok_or_else(bad)?), out)
        }
        Avro::Long => long(value::<Int64Type>(array, row).ok_or_else(bad)?, out),
        Avro::Time(TimeUnit::Micros) => long(value::<Time64MicrosecondType>(array, row).ok_or_else(bad)?, out),
        Avro::Timestamp { unit: TimeUnit::Millis, .. } => {
            long(value::<TimestampMillisecondType>(array, row).ok_or_else(bad)?, out)
        }
        Avro::Timestamp { unit: TimeUnit::Micros, .. } => {
            long(value::<TimestampMicrosecondType>(array, row).ok_or_else(bad)?, out)
        }
        Avro::Float => out.extend_from_slice(&value::<Float32Type>(array, row).ok_or_else(bad)?.to_le_bytes()),
        Avro::Double => out.extend_from_slice(&value::<Float64Type>(array, row).ok_or_else(bad)?.to_le_bytes()),
        Avro::Bytes => bytes(array.as_binary_opt::<i32>().ok_or_else(bad)?.value(row), out),
        Avro::String | Avro::Uuid | Avro::DecimalText { .. } => {
            bytes(array.as_string_opt::<i32>().ok_or_else(bad)?.value(row).as_bytes(), out)
        }
        Avro::Enum(symbols) => {
            let symbol = array.as_string_opt::<i32>().ok_or_else(bad)?.value(row);
            let i = symbols.iter().position(|s| s == symbol).ok_or_else(|| format!("{symbol:?} is not a symbol"))?;
            long(i as i64, out);
        }
        Avro::Fixed(_) => out.extend_from_slice(array.as_fixed_size_binary_opt().ok_or_else(bad)?.value(row)),
        Avro::Decimal { fixed, .. } => {
            let unscaled = value::<Decimal128Type>(array, row).ok_or_else(bad)?.to_be_bytes();
            match fixed {
                Some(size) => {
                    let pad = if unscaled[0] & 0x80 != 0 { 0xff } else { 0 };
                    out.extend(std::iter::repeat_n(pad, size.saturating_sub(16)));
                    out.extend_from_slice(&unscaled[16usize.saturating_sub(*size)..]);
                }
                None => {
                    let start = (0..15).find(|&i| fewest_bytes(&unscaled[i..])).unwrap_or(15);
                    bytes(&unscaled[start..], out);
                }
            }
        }
        Avro::Array(items) => {
            let list = array.as_list_opt::<i32>().ok_or_else(bad)?;
            let offsets = list.value_offsets();
            let (start, end) = (offsets[row] as usize, offsets[row + 1] as usize);
            if end > start {
                long((end - start) as i64, out);
                (start..end).try_for_each(|i| encode(items, list.values(), i, out))?;
            }
            long(0, out);
        }
        Avro::Map(values) => {
            let map = array.as_map_opt().ok_or_else(bad)?;
            let offsets = map.value_offsets();
            let (start, end) = (offsets[row] as usize, offsets[row + 1] as usize);
            let keys = map.keys().as_string_opt::<i32>().ok_or_else(bad)?;
            if end > start {
                long((end - start) as i64, out);
                for i in start..end {
                    bytes(keys.value(i).as_bytes(), out);
                    encode(values, map.values(), i, out)?;
                }
            }
            long(0, out);
        }
        Avro::Record(fields) => encode_record(fields, array.as_struct_opt().ok_or_else(bad)?, row, out)?,
    }
    Ok(())
}

fn value<T: ArrowPrimitiveType>(array: &ArrayRef, row: usize) -> Option<T::Native> {
    array.as_any().downcast_ref::<PrimitiveArray<T>>().map(|a| a.value(row))
}

/// A zig-zag varint, shortest form.
pub fn long(n: i64, out: &mut Vec<u8>) {
    let mut z = ((n << 1) ^ (n >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// A length, then the bytes.
pub fn bytes(b: &[u8], out: &mut Vec<u8>) {
    long(b.len() as i64, out);
    out.extend_from_slice(b);
}

#[cfg(test)]
mod tests;

//! A data file's column statistics, from its Parquet footer, as a manifest records them by field ID:
//! each column's size, value and null counts, and its smallest and largest value in Iceberg's
//! single-value binary form — what engines prune files by (`WHERE value.customer = 42` reads only the
//! files whose bounds hold 42). Columns inside lists and maps get none; types whose Parquet order is not
//! Iceberg's (unsigned integers, decimals, times) and long strings get counts but no bounds.

use std::collections::BTreeMap;

use parquet::basic::{LogicalType, TimeUnit};
use parquet::file::metadata::{ColumnChunkMetaData, ParquetMetaData};
use parquet::file::statistics::Statistics;
use serde_json::Value;

/// Strings and binaries longer than this get no bounds (Iceberg's own writers truncate theirs to 16).
const MAX_BOUND_BYTES: usize = 16;

/// Per field ID: sizes, counts and bounds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ColumnStats {
    pub sizes: Vec<(i32, u64)>,
    pub values: Vec<(i32, u64)>,
    pub nulls: Vec<(i32, u64)>,
    /// The smallest and largest value.
    pub bounds: Vec<(i32, Vec<u8>, Vec<u8>)>,
}

/// A value compared across row groups.
#[derive(Debug, Clone, PartialEq, PartialOrd)]
enum Bound {
    Int(i64),
    Float(f64),
    Bool(bool),
    Bytes(Vec<u8>),
}

#[derive(Default)]
struct Column {
    size: u64,
    values: u64,
    /// None once a row group has no null count.
    nulls: Option<u64>,
    /// The bounds of the row groups holding values (a row group of nulls only has none, and needs none).
    bounds: Option<(Bound, Bound)>,
    /// A row group holding values had no usable bounds: the file's are unknown.
    unbounded: bool,
    row_groups: usize,
}

/// The statistics of the file of `footer` in a table of `schema` (its columns found by name).
pub fn column_stats(footer: &ParquetMetaData, schema: &Value) -> ColumnStats {
    let mut columns: BTreeMap<i32, (String, Column)> = BTreeMap::new();
    for group in footer.row_groups() {
        for chunk in group.columns() {
            let Some((id, iceberg)) = field_of(schema, chunk.column_path().parts()) else { continue };
            let (_, column) = columns.entry(id).or_insert_with(|| (iceberg.to_string(), Column::default()));
            column.take(chunk, iceberg);
        }
    }
    let mut stats = ColumnStats::default();
    for (id, (iceberg, c)) in columns {
        stats.sizes.push((id, c.size));
        stats.values.push((id, c.values));
        stats.nulls.extend(c.nulls.map(|n| (id, n)));
        if let Some((low, high)) = c.bounds.filter(|_| !c.unbounded) {
            if let (Some(low), Some(high)) = (serialize(&low, &iceberg, true), serialize(&high, &iceberg, false)) {
                stats.bounds.push((id, low, high));
            }
        }
    }
    stats
}

impl Column {
    fn take(&mut self, chunk: &ColumnChunkMetaData, iceberg: &str) {
        let stats = chunk.statistics();
        self.size += chunk.compressed_size().max(0) as u64;
        self.values += chunk.num_values().max(0) as u64;
        let nulls = stats.and_then(Statistics::null_count_opt);
        self.nulls = match self.row_groups {
            0 => nulls,
            _ => self.nulls.zip(nulls).map(|(a, b)| a + b),
        };
        let only_nulls = nulls.is_some_and(|n| i64::try_from(n).is_ok_and(|n| n == chunk.num_values()));
        if !only_nulls {
            match (self.bounds.take(), stats.and_then(|s| bounds(s, chunk, iceberg))) {
                (_, None) => self.unbounded = true,
                (None, new) => self.bounds = new,
                (Some((low, high)), Some((l, h))) => {
                    self.bounds = Some((if l < low { l } else { low }, if h > high { h } else { high }));
                }
            }
        }
        self.row_groups += 1;
    }
}

/// The field ID and Iceberg type of the column at `path`, reached through struct fields only.
fn field_of<'a>(schema: &'a Value, path: &[String]) -> Option<(i32, &'a str)> {
    let mut fields = &schema["fields"];
    let (last, parents) = path.split_last()?;
    for name in parents {
        let field = fields.as_array()?.iter().find(|f| f["name"] == name.as_str())?;
        fields = &field["type"]["fields"];
    }
    let field = fields.as_array()?.iter().find(|f| f["name"] == last.as_str())?;
    Some((field["id"].as_i64()? as i32, field["type"].as_str()?))
}

/// A row group's bounds of a column, in a form that compares as Iceberg orders its type.
fn bounds(stats: &Statistics, chunk: &ColumnChunkMetaData, iceberg: &str) -> Option<(Bound, Bound)> {
    let logical = chunk.column_descr().logical_type_ref();
    if matches!(logical, Some(LogicalType::Integer(int)) if !int.is_signed) {
        return None; // Parquet orders them unsigned, Iceberg's ints are signed.
    }
    let micros = match (iceberg, logical) {
        ("timestamp" | "timestamptz", Some(LogicalType::Timestamp(t))) if t.unit == TimeUnit::MILLIS => 1000,
        ("timestamp" | "timestamptz", Some(LogicalType::Timestamp(t))) if t.unit == TimeUnit::MICROS => 1,
        ("timestamp" | "timestamptz", _) => return None,
        _ => 1,
    };
    let pair = |low: Bound, high: Bound| Some((low, high));
    match stats {
        Statistics::Boolean(s) => pair(Bound::Bool(*s.min_opt()?), Bound::Bool(*s.max_opt()?)),
        Statistics::Int32(s) => pair(Bound::Int(i64::from(*s.min_opt()?)), Bound::Int(i64::from(*s.max_opt()?))),
        Statistics::Int64(s) => {
            pair(Bound::Int(s.min_opt()?.saturating_mul(micros)), Bound::Int(s.max_opt()?.saturating_mul(micros)))
        }
        Statistics::Float(s) => float(f64::from(*s.min_opt()?), f64::from(*s.max_opt()?)),
        Statistics::Double(s) => float(*s.min_opt()?, *s.max_opt()?),
        Statistics::ByteArray(s) if s.max_is_exact() => {
            pair(Bound::Bytes(s.min_opt()?.data().to_vec()), Bound::Bytes(s.max_opt()?.data().to_vec()))
        }
        _ => None,
    }
}

fn float(low: f64, high: f64) -> Option<(Bound, Bound)> {
    (!low.is_nan() && !high.is_nan()).then_some((Bound::Float(low), Bound::Float(high)))
}

/// A bound in Iceberg's single-value binary form for `iceberg`; a `lower` string or binary may be
/// cut short (a prefix is still a lower bound), an upper one may not.
fn serialize(bound: &Bound, iceberg: &str, lower: bool) -> Option<Vec<u8>> {
    Some(match (bound, iceberg) {
        (Bound::Bool(b), "boolean") => vec![u8::from(*b)],
        (Bound::Int(v), "int" | "date") => i32::try_from(*v).ok()?.to_le_bytes().to_vec(),
        (Bound::Int(v), "long" | "timestamp" | "timestamptz") => v.to_le_bytes().to_vec(),
        (Bound::Float(v), "float") => (*v as f32).to_le_bytes().to_vec(),
        (Bound::Float(v), "double") => v.to_le_bytes().to_vec(),
        (Bound::Bytes(b), "string" | "binary") if b.len() <= MAX_BOUND_BYTES => b.clone(),
        (Bound::Bytes(b), "string") if lower => {
            let text = std::str::from_utf8(b).ok()?;
            let cut = (0..=MAX_BOUND_BYTES).rev().find(|i| text.is_char_boundary(*i))?;
            b[..cut].to_vec()
        }
        (Bound::Bytes(b), "binary") if lower => b[..MAX_BOUND_BYTES].to_vec(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests;

//! A table's schema and partition specs in Iceberg's JSON form: the archive's Arrow schema with field
//! IDs (kept by name across versions, new columns numbered after the last), the name mapping that tells
//! readers which Parquet column is which field (the archive's files carry no field IDs), and the specs:
//! 0 by Kafka partition, 1 by Kafka partition and the day or hour of the record timestamp. A file holds
//! one Kafka partition's records, and its files do not hold that number: the table's `partition`
//! column is an identity partition field, which readers fill from each file's partition value.

use arrow_schema::{DataType, Field, Schema, TimeUnit};
use serde_json::{json, Map, Value};
use thiserror::Error;

use super::evolve::promotes;
use crate::archive::time_bucket::BucketWidth;
use crate::table::partition::FilePartition;

/// The first partition field's ID (Iceberg numbers partition fields from 1000).
const FIRST_PARTITION_FIELD_ID: i32 = 1000;
/// The spec by Kafka partition only (files whose records span time partitions, or tables without them).
pub const PARTITION_SPEC_ID: i32 = 0;
/// The spec by record time, with time buckets.
pub const TIME_SPEC_ID: i32 = 1;
/// The column a time-partitioned table is partitioned by.
pub const TIME_COLUMN: &str = "timestamp";
/// The table's column of the Kafka partition, filled from each file's partition value.
pub const PARTITION_COLUMN: &str = "partition";

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SpecError {
    #[error("column {path} was {was} in the table and is {now} now: not a change Iceberg's schema evolution allows; point --iceberg-namespace at a new table")]
    Changed { path: String, was: String, now: String },
    #[error("the table's schema is not one this reads: {0}")]
    Table(String),
}

/// How a partition field's value comes from its source column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transform {
    /// The value itself (the Kafka partition).
    Identity,
    /// The day or hour (since the epoch) of a timestamp.
    Time(BucketWidth),
}

/// A partition field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionField {
    pub field_id: i32,
    pub source_id: i32,
    pub name: String,
    pub transform: Transform,
}

impl PartitionField {
    fn transform(&self) -> &'static str {
        match self.transform {
            Transform::Identity => "identity",
            Transform::Time(BucketWidth::Day) => "day",
            Transform::Time(BucketWidth::Hour) => "hour",
        }
    }

    /// Its value's Avro type in a manifest (a day is a date, as Iceberg's `day` transform gives).
    pub fn avro_type(&self) -> Value {
        match self.transform {
            Transform::Time(BucketWidth::Day) => json!({"type": "int", "logicalType": "date"}),
            Transform::Identity | Transform::Time(BucketWidth::Hour) => json!("int"),
        }
    }

    /// Its value for a file of Kafka partition `partition` whose records' time partition is `time`.
    pub fn value(&self, partition: i32, time: &FilePartition) -> Option<i32> {
        match self.transform {
            Transform::Identity => Some(partition),
            Transform::Time(_) => time.ordinal(),
        }
    }

    pub fn to_json(&self) -> Value {
        json!({"name": self.name, "transform": self.transform(), "source-id": self.source_id, "field-id": self.field_id})
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionSpec {
    pub spec_id: i32,
    pub fields: Vec<PartitionField>,
}

impl PartitionSpec {
    /// By the Kafka partition (the column with field ID `partition_id`) only.
    pub fn by_partition(partition_id: i32) -> Self {
        let field = PartitionField {
            field_id: FIRST_PARTITION_FIELD_ID,
            source_id: partition_id,
            name: PARTITION_COLUMN.into(),
            transform: Transform::Identity,
        };
        Self { spec_id: PARTITION_SPEC_ID, fields: vec![field] }
    }

    /// By the Kafka partition and the `width` of the record timestamp (field ID `time_id`).
    pub fn by_time(partition_id: i32, width: BucketWidth, time_id: i32) -> Self {
        let mut spec = Self::by_partition(partition_id);
        let transform = Transform::Time(width);
        let mut time = PartitionField {
            field_id: FIRST_PARTITION_FIELD_ID + 1,
            source_id: time_id,
            name: String::new(),
            transform,
        };
        time.name = format!("{TIME_COLUMN}_{}", time.transform());
        spec.fields.push(time);
        Self { spec_id: TIME_SPEC_ID, ..spec }
    }

    pub fn to_json(&self) -> Value {
        json!({"spec-id": self.spec_id, "fields": self.fields.iter().map(PartitionField::to_json).collect::<Vec<_>>()})
    }

    /// The partition tuple of a file of Kafka partition `partition` and time partition `time`, as a
    /// manifest records it.
    pub fn partition_record(&self, partition: i32, time: &FilePartition) -> Value {
        let mut record = Map::new();
        for f in &self.fields {
            record.insert(f.name.clone(), f.value(partition, time).map_or(Value::Null, Value::from));
        }
        Value::Object(record)
    }

    /// The highest partition field ID it uses (999 when it has none, as Iceberg counts).
    pub fn last_field_id(&self) -> i32 {
        self.fields.iter().map(|f| f.field_id).max().unwrap_or(FIRST_PARTITION_FIELD_ID - 1)
    }
}

/// The table schema (ID `schema_id`) of `arrow`'s columns: each field keeps the ID it has in `previous`
/// (the table's current schema, by name), a new one takes the next after `last_id`. Columns no table
/// can hold a value of (the placeholder of a file without a value schema) are left out. Returns the
/// schema and the last ID used.
pub fn table_schema(
    arrow: &Schema,
    previous: Option<&Value>,
    last_id: i32,
    schema_id: i32,
) -> Result<(Value, i32), SpecError> {
    let mut ids = Ids { last: last_id };
    let fields =
        struct_fields(arrow.fields().iter().map(|f| f.as_ref()), previous.map(|p| &p["fields"]), "", &mut ids)?;
    Ok((json!({"type": "struct", "schema-id": schema_id, "fields": fields}), ids.last))
}

struct Ids {
    last: i32,
}

impl Ids {
    /// The ID `previous` gives (a field's `key`), else a new one.
    fn id(&mut self, previous: Option<&Value>, key: &str) -> i32 {
        match previous.and_then(|p| p[key].as_i64()) {
            Some(id) => id as i32,
            None => {
                self.last += 1;
                self.last
            }
        }
    }
}

fn struct_fields<'a>(
    fields: impl Iterator<Item = &'a Field>,
    previous: Option<&Value>,
    path: &str,
    ids: &mut Ids,
) -> Result<Vec<Value>, SpecError> {
    let mut out = Vec::new();
    for f in fields {
        let before = previous.and_then(Value::as_array).and_then(|p| p.iter().find(|x| x["name"] == f.name().as_str()));
        let path = if path.is_empty() { f.name().clone() } else { format!("{path}.{}", f.name()) };
        let mark = ids.last;
        let id = ids.id(before, "id");
        let Some(t) = field_type(f.data_type(), before.map(|b| &b["type"]), &path, ids)? else {
            ids.last = mark; // Nothing of it is kept: its IDs are free again.
            continue;
        };
        if let Some(before) = before {
            changed(&path, &before["type"], &t)?;
        }
        out.push(json!({"id": id, "name": f.name(), "required": !f.is_nullable(), "type": t}));
    }
    Ok(out)
}

/// Refuses a field whose type changed other than as Iceberg allows (int to long, float to double, a
/// struct's new fields), either way (an older file's int reads as the table's long).
fn changed(path: &str, was: &Value, now: &Value) -> Result<(), SpecError> {
    let same_kind = match (was, now) {
        (Value::String(_), Value::String(_)) => was == now || promotes(was, now) || promotes(now, was),
        (Value::Object(a), Value::Object(b)) => a.get("type") == b.get("type"),
        _ => false,
    };
    match same_kind {
        true => Ok(()),
        false => Err(SpecError::Changed { path: path.to_string(), was: was.to_string(), now: now.to_string() }),
    }
}

/// A column's Iceberg type, nested IDs taken from `previous`; none for a column no table can hold
/// (unsigned 64-bit integers, durations, times of day in milliseconds, a placeholder of no type): it is
/// left out of the table (readers do not see it; the files keep it), never a reason to stop adding files.
fn field_type(t: &DataType, previous: Option<&Value>, path: &str, ids: &mut Ids) -> Result<Option<Value>, SpecError> {
    Ok(Some(match t {
        DataType::Null => return Ok(None),
        DataType::Boolean => json!("boolean"),
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::UInt8 | DataType::UInt16 => json!("int"),
        DataType::Int64 | DataType::UInt32 => json!("long"),
        DataType::Float32 => json!("float"),
        DataType::Float64 => json!("double"),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => json!("string"),
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => json!("binary"),
        DataType::FixedSizeBinary(n) => json!(format!("fixed[{n}]")),
        DataType::Date32 => json!("date"),
        DataType::Time64(TimeUnit::Microsecond) => json!("time"),
        DataType::Timestamp(TimeUnit::Millisecond | TimeUnit::Microsecond, tz) => {
            json!(if tz.is_some() { "timestamptz" } else { "timestamp" })
        }
        DataType::Decimal128(p, s) if *s >= 0 => json!(format!("decimal({p}, {s})")),
        DataType::Dictionary(_, values) => return field_type(values, previous, path, ids),
        DataType::List(item) | DataType::LargeList(item) => {
            let element_id = ids.id(previous, "element-id");
            let (before, path) = (previous.map(|p| &p["element"]), format!("{path}.element"));
            let Some(element) = field_type(item.data_type(), before, &path, ids)? else { return Ok(None) };
            nested_changed(&path, before, &element)?;
            json!({"type": "list", "element-id": element_id, "element": element, "element-required": !item.is_nullable()})
        }
        DataType::Map(entries, _) => {
            let DataType::Struct(kv) = entries.data_type() else { return Ok(None) };
            let [key, value] = [&kv[0], &kv[1]];
            let key_id = ids.id(previous, "key-id");
            let value_id = ids.id(previous, "value-id");
            let mut part = |f: &Field, name: &str| -> Result<Option<Value>, SpecError> {
                let (before, path) = (previous.map(|p| &p[name]), format!("{path}.{name}"));
                let t = field_type(f.data_type(), before, &path, ids)?;
                t.as_ref().map_or(Ok(()), |t| nested_changed(&path, before, t))?;
                Ok(t)
            };
            let (Some(key_type), Some(value_type)) = (part(key, "key")?, part(value, "value")?) else {
                return Ok(None);
            };
            json!({"type": "map", "key-id": key_id, "key": key_type, "value-id": value_id, "value": value_type,
                   "value-required": !value.is_nullable()})
        }
        DataType::Struct(fields) => {
            let inner = struct_fields(fields.iter().map(|f| f.as_ref()), previous.map(|p| &p["fields"]), path, ids)?;
            if inner.is_empty() {
                return Ok(None);
            }
            json!({"type": "struct", "fields": inner})
        }
        _ => return Ok(None),
    }))
}

/// `changed` for a list's element or a map's key or value (a struct's fields check theirs).
fn nested_changed(path: &str, before: Option<&Value>, now: &Value) -> Result<(), SpecError> {
    match before {
        Some(before) if !before.is_null() => changed(path, before, now),
        _ => Ok(()),
    }
}

/// The name mapping (`schema.name-mapping.default`) of a table schema: each field's ID by its name in
/// the archive's Parquet files (a list's element is `element` or `item`, a map's key and value `key`
/// or `keys` and `value` or `values`, as writers name them).
pub fn name_mapping(schema: &Value) -> Value {
    Value::Array(mapped_fields(&schema["fields"]))
}

fn mapped_fields(fields: &Value) -> Vec<Value> {
    let fields = fields.as_array().map(Vec::as_slice).unwrap_or_default();
    fields.iter().map(|f| mapped(f["id"].clone(), vec![f["name"].clone()], &f["type"])).collect()
}

fn mapped(id: Value, names: Vec<Value>, t: &Value) -> Value {
    let nested: Vec<Value> = match t["type"].as_str() {
        Some("struct") => mapped_fields(&t["fields"]),
        Some("list") => vec![mapped(t["element-id"].clone(), vec![json!("element"), json!("item")], &t["element"])],
        Some("map") => vec![
            mapped(t["key-id"].clone(), vec![json!("key"), json!("keys")], &t["key"]),
            mapped(t["value-id"].clone(), vec![json!("value"), json!("values")], &t["value"]),
        ],
        _ => Vec::new(),
    };
    match nested.is_empty() {
        true => json!({"field-id": id, "names": names}),
        false => json!({"field-id": id, "names": names, "fields": nested}),
    }
}

/// The width of the spec by time of a table whose schema is `schema` and whose specs are `specs` (its
/// metadata's `partition-specs`): the table's own, whatever `--time-buckets` says now (a file's partition
/// value must be the one its spec's transform gives); none when it has no such spec, or one of another
/// shape (files then go under the spec by Kafka partition). A table whose spec by Kafka partition is not
/// the archiver's was not made by it: refused, as no file could be recorded in it correctly.
pub fn time_width(specs: &Value, schema: &Value) -> Result<Option<BucketWidth>, SpecError> {
    let partition = field_id(schema, PARTITION_COLUMN).ok_or_else(|| {
        SpecError::Table(format!("it has no {PARTITION_COLUMN} column (not a table this archiver made)"))
    })?;
    let fields = |id: i32| specs.as_array().into_iter().flatten().find(|s| s["spec-id"] == id).map(|s| &s["fields"]);
    let wanted = |spec: PartitionSpec| Some(spec.to_json()["fields"].clone());
    if fields(PARTITION_SPEC_ID).cloned() != wanted(PartitionSpec::by_partition(partition)) {
        return Err(SpecError::Table(format!(
            "its partition spec {PARTITION_SPEC_ID} is not by the {PARTITION_COLUMN} column alone (not a table this \
             archiver made); point --iceberg-namespace at a table of its own"
        )));
    }
    let Some(time) = field_id(schema, TIME_COLUMN) else { return Ok(None) };
    let by_time = fields(TIME_SPEC_ID).cloned();
    Ok([BucketWidth::Day, BucketWidth::Hour]
        .into_iter()
        .find(|w| by_time == wanted(PartitionSpec::by_time(partition, *w, time))))
}

/// The field ID of the top-level column `name` in a table schema.
pub fn field_id(schema: &Value, name: &str) -> Option<i32> {
    let fields = schema["fields"].as_array()?;
    fields.iter().find(|f| f["name"] == name).and_then(|f| f["id"].as_i64()).map(|id| id as i32)
}

#[cfg(test)]
mod tests;

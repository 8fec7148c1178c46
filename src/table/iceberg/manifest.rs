//! Iceberg's manifests (format version 2): a manifest lists data files added by one snapshot, all of one
//! partition spec; a snapshot's manifest list names its manifests. Both are Avro files whose schemas
//! carry Iceberg's field IDs, as the specification fixes them.

use serde_json::{json, Value};

use super::avro_file::{self, AvroFileError};
use super::merge::WRITER;
use super::spec::PartitionSpec;
use super::stats::ColumnStats;
use crate::table::partition::FilePartition;
use crate::values::avro::value::latin1;

/// A data file as a manifest records it: an archive object, added as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataFile {
    /// Its absolute location (`s3://bucket/key`, `file:///dir/key`).
    pub path: String,
    /// The Kafka partition whose records it holds.
    pub kafka_partition: i32,
    /// Its records' time partition.
    pub partition: FilePartition,
    pub records: u64,
    pub size: u64,
    /// Per column (by field ID), the smallest and largest value in Iceberg's single-value binary form
    /// (taken over `stats`' of the same column).
    pub bounds: Vec<(i32, Vec<u8>, Vec<u8>)>,
    /// Its columns' statistics, from its footer.
    pub stats: ColumnStats,
}

/// A manifest written: where, how long, and the manifest list's entry for it.
#[derive(Debug, Clone, PartialEq)]
pub struct ManifestEntry(pub Value);

/// What a new snapshot's manifests are written with.
#[derive(Debug, Clone, Copy)]
pub struct SnapshotIds {
    pub snapshot_id: i64,
    pub parent: Option<i64>,
    pub sequence_number: i64,
}

const STATUS_ADDED: i32 = 1;
const CONTENT_DATA: i32 = 0;

/// The Avro schema of a manifest's entries for files of `spec`.
fn manifest_schema(spec: &PartitionSpec) -> String {
    let partition_fields: Vec<Value> = spec
        .fields
        .iter()
        .map(|f| json!({"name": f.name, "type": ["null", f.avro_type()], "default": null, "field-id": f.field_id}))
        .collect();
    let map = |name: &str, id: i32, key: i32, value: i32, value_type: &str| {
        json!({"name": name, "type": ["null", {"type": "array", "logicalType": "map", "items": {
            "type": "record", "name": format!("k{key}_v{value}"), "fields": [
                {"name": "key", "type": "int", "field-id": key},
                {"name": "value", "type": value_type, "field-id": value}]}}], "default": null, "field-id": id})
    };
    let list = |name: &str, id: i32, element: i32, item: &str| {
        json!({"name": name, "type": ["null", {"type": "array", "items": item, "element-id": element}],
               "default": null, "field-id": id})
    };
    let optional =
        |name: &str, id: i32, t: &str| json!({"name": name, "type": ["null", t], "default": null, "field-id": id});
    let data_file = json!({"type": "record", "name": "r2", "fields": [
        {"name": "content", "type": "int", "field-id": 134},
        {"name": "file_path", "type": "string", "field-id": 100},
        {"name": "file_format", "type": "string", "field-id": 101},
        {"name": "partition", "type": {"type": "record", "name": "r102", "fields": partition_fields}, "field-id": 102},
        {"name": "record_count", "type": "long", "field-id": 103},
        {"name": "file_size_in_bytes", "type": "long", "field-id": 104},
        map("column_sizes", 108, 117, 118, "long"),
        map("value_counts", 109, 119, 120, "long"),
        map("null_value_counts", 110, 121, 122, "long"),
        map("nan_value_counts", 137, 138, 139, "long"),
        map("lower_bounds", 125, 126, 127, "bytes"),
        map("upper_bounds", 128, 129, 130, "bytes"),
        optional("key_metadata", 131, "bytes"),
        list("split_offsets", 132, 133, "long"),
        list("equality_ids", 135, 136, "int"),
        optional("sort_order_id", 140, "int"),
    ]});
    json!({"type": "record", "name": "manifest_entry", "fields": [
        {"name": "status", "type": "int", "field-id": 0},
        optional("snapshot_id", 1, "long"),
        optional("sequence_number", 3, "long"),
        optional("file_sequence_number", 4, "long"),
        {"name": "data_file", "type": data_file, "field-id": 2},
    ]})
    .to_string()
}

/// The Avro schema of a manifest list's entries.
fn manifest_list_schema() -> String {
    let field = |name: &str, t: &str, id: i32| json!({"name": name, "type": t, "field-id": id});
    let summary = json!({"type": "record", "name": "r508", "fields": [
        {"name": "contains_null", "type": "boolean", "field-id": 509},
        {"name": "contains_nan", "type": ["null", "boolean"], "default": null, "field-id": 518},
        {"name": "lower_bound", "type": ["null", "bytes"], "default": null, "field-id": 510},
        {"name": "upper_bound", "type": ["null", "bytes"], "default": null, "field-id": 511}]});
    json!({"type": "record", "name": "manifest_file", "fields": [
        field("manifest_path", "string", 500),
        field("manifest_length", "long", 501),
        field("partition_spec_id", "int", 502),
        field("content", "int", 517),
        field("sequence_number", "long", 515),
        field("min_sequence_number", "long", 516),
        field("added_snapshot_id", "long", 503),
        field("added_files_count", "int", 504),
        field("existing_files_count", "int", 505),
        field("deleted_files_count", "int", 506),
        field("added_rows_count", "long", 512),
        field("existing_rows_count", "long", 513),
        field("deleted_rows_count", "long", 514),
        {"name": "partitions", "type": ["null", {"type": "array", "items": summary, "element-id": 508}],
         "default": null, "field-id": 507},
        {"name": "key_metadata", "type": ["null", "bytes"], "default": null, "field-id": 519},
    ]})
    .to_string()
}

fn bounds(file: &DataFile, lower: bool) -> Value {
    let footer = file.stats.bounds.iter().filter(|(id, ..)| !file.bounds.iter().any(|(own, ..)| own == id));
    let mut all: Vec<_> = file.bounds.iter().chain(footer).collect();
    all.sort_by_key(|(id, ..)| *id);
    let entries =
        all.into_iter().map(|(id, low, high)| json!({"key": id, "value": latin1(if lower { low } else { high })}));
    Value::Array(entries.collect())
}

fn counts(per_column: &[(i32, u64)]) -> Value {
    Value::Array(per_column.iter().map(|(id, n)| json!({"key": id, "value": n})).collect())
}

/// The manifest of `files` (all of `spec`) added by snapshot `ids`, its bytes; with `schema`, the table
/// schema's JSON, and the entry the manifest list gives it once it is at `path`.
pub fn write_manifest(
    files: &[DataFile],
    spec: &PartitionSpec,
    schema: &Value,
    ids: SnapshotIds,
    sync: [u8; 16],
) -> Result<Vec<u8>, AvroFileError> {
    let entries: Vec<Value> = files
        .iter()
        .map(|f| {
            json!({"status": STATUS_ADDED, "snapshot_id": ids.snapshot_id, "sequence_number": null,
                "file_sequence_number": null, "data_file": {
                    "content": CONTENT_DATA, "file_path": f.path, "file_format": "PARQUET",
                    "partition": spec.partition_record(f.kafka_partition, &f.partition), "record_count": f.records,
                    "file_size_in_bytes": f.size, "column_sizes": counts(&f.stats.sizes),
                    "value_counts": counts(&f.stats.values), "null_value_counts": counts(&f.stats.nulls),
                    "lower_bounds": bounds(f, true), "upper_bounds": bounds(f, false)}})
        })
        .collect();
    write_entries(&entries, spec, schema, sync)
}

/// A manifest of `entries` (manifest entry records, of files of `spec`), its bytes.
pub fn write_entries(
    entries: &[Value],
    spec: &PartitionSpec,
    schema: &Value,
    sync: [u8; 16],
) -> Result<Vec<u8>, AvroFileError> {
    let metadata = [
        ("schema", schema.to_string()),
        ("schema-id", schema["schema-id"].to_string()),
        ("partition-spec", Value::Array(spec.fields.iter().map(|f| f.to_json()).collect()).to_string()),
        ("partition-spec-id", spec.spec_id.to_string()),
        ("format-version", "2".to_string()),
        ("content", "data".to_string()),
        (WRITER.0, WRITER.1.to_string()),
    ]
    .map(|(k, v)| (k.to_string(), v));
    avro_file::write(&manifest_schema(spec), &metadata, entries, sync)
}

/// A manifest's entry records, if the archiver wrote it (none for another writer's: it is not merged).
pub fn read_own_manifest(file: &[u8]) -> Result<Option<Vec<Value>>, AvroFileError> {
    let read = avro_file::read(file)?;
    let own = read.metadata.iter().any(|(k, v)| k == WRITER.0 && v == WRITER.1);
    Ok(own.then_some(read.records))
}

/// The manifest list's entry for a manifest of `files` (of `spec`) written at `path`, `length` bytes.
pub fn list_entry(
    path: &str,
    length: usize,
    files: &[DataFile],
    spec: &PartitionSpec,
    ids: SnapshotIds,
) -> ManifestEntry {
    let rows: u64 = files.iter().map(|f| f.records).sum();
    // Every file of a manifest has a value of each of its spec's fields.
    let summary = |field: &super::spec::PartitionField| {
        let values = || files.iter().filter_map(|f| field.value(f.kafka_partition, &f.partition));
        json!({"contains_null": false, "contains_nan": false,
               "lower_bound": values().min().map(|v| latin1(&v.to_le_bytes())),
               "upper_bound": values().max().map(|v| latin1(&v.to_le_bytes()))})
    };
    let partitions: Vec<Value> = spec.fields.iter().map(summary).collect();
    ManifestEntry(json!({
        "manifest_path": path, "manifest_length": length, "partition_spec_id": spec.spec_id,
        "content": CONTENT_DATA, "sequence_number": ids.sequence_number, "min_sequence_number": ids.sequence_number,
        "added_snapshot_id": ids.snapshot_id, "added_files_count": files.len(), "existing_files_count": 0,
        "deleted_files_count": 0, "added_rows_count": rows, "existing_rows_count": 0, "deleted_rows_count": 0,
        "partitions": partitions, "key_metadata": null}))
}

/// The manifest list of a snapshot: its new manifests' entries first, then its parent's (as read by
/// [`read_manifest_list`]).
pub fn write_manifest_list(
    entries: &[ManifestEntry],
    ids: SnapshotIds,
    sync: [u8; 16],
) -> Result<Vec<u8>, AvroFileError> {
    let mut metadata = vec![("snapshot-id".to_string(), ids.snapshot_id.to_string())];
    if let Some(parent) = ids.parent {
        metadata.push(("parent-snapshot-id".to_string(), parent.to_string()));
    }
    metadata.push(("sequence-number".to_string(), ids.sequence_number.to_string()));
    metadata.push(("format-version".to_string(), "2".to_string()));
    let records: Vec<Value> = entries.iter().map(|e| e.0.clone()).collect();
    avro_file::write(&manifest_list_schema(), &metadata, &records, sync)
}

/// A manifest list's entries, whoever wrote it (each written again by [`write_manifest_list`] as it is).
pub fn read_manifest_list(file: &[u8]) -> Result<Vec<ManifestEntry>, AvroFileError> {
    Ok(avro_file::read(file)?.records.into_iter().map(ManifestEntry).collect())
}

#[cfg(test)]
mod tests;

//! Table metadata (format version 2, Iceberg's JSON): a new table's, and a commit's change to it,
//! applied to the metadata itself by a catalog that keeps metadata files (SQL: the committer writes the
//! next file and swaps the pointer). Fields this does not know are kept as they are: other engines
//! share the table.

use serde_json::{json, Map, Value};

use super::expire::{is_expired, Expired};
use super::spec::{name_mapping, PartitionSpec, SpecError};

/// How many earlier metadata files the metadata log names (Iceberg's default,
/// `write.metadata.previous-versions-max`).
const METADATA_LOG_MAX: usize = 100;
/// The branch readers read.
const MAIN: &str = "main";
/// The property naming each field's Parquet column (the archive's files carry no field IDs).
const NAME_MAPPING: &str = "schema.name-mapping.default";
/// The property saying whether metadata files that fall off the metadata log are deleted.
pub const DELETE_AFTER_COMMIT: &str = "write.metadata.delete-after-commit.enabled";

/// What a new table is made of.
#[derive(Debug, Clone)]
pub struct NewTable<'a> {
    pub uuid: &'a str,
    pub location: &'a str,
    /// The schema (`schema-id` 0) and its last field ID.
    pub schema: (Value, i32),
    /// The specs it has, the default last (spec 0, by Kafka partition, always).
    pub specs: &'a [PartitionSpec],
    pub properties: Vec<(String, String)>,
    pub now_ms: i64,
}

/// A new table's metadata.
pub fn new_table(t: &NewTable) -> Value {
    let (schema, last_column_id) = &t.schema;
    let default_spec = t.specs.last().expect("spec 0 at least");
    let mut properties: Map<String, Value> = t.properties.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
    properties.insert(NAME_MAPPING.into(), json!(name_mapping(schema).to_string()));
    // A metadata file a minute would pile up: those older than the log's 100 are deleted (SQL catalog).
    properties.insert(DELETE_AFTER_COMMIT.into(), json!("true"));
    json!({
        "format-version": 2, "table-uuid": t.uuid, "location": t.location, "last-sequence-number": 0,
        "last-updated-ms": t.now_ms, "last-column-id": last_column_id, "current-schema-id": schema["schema-id"],
        "schemas": [schema], "default-spec-id": default_spec.spec_id,
        "partition-specs": t.specs.iter().map(PartitionSpec::to_json).collect::<Vec<_>>(),
        "last-partition-id": t.specs.iter().map(PartitionSpec::last_field_id).max(),
        "properties": properties, "current-snapshot-id": -1, "snapshots": [], "snapshot-log": [],
        "metadata-log": [], "sort-orders": [{"order-id": 0, "fields": []}], "default-sort-order-id": 0, "refs": {},
    })
}

/// The table's metadata, as far as a commit reads it.
pub struct Base<'a>(pub &'a Value);

impl Base<'_> {
    /// The snapshot readers read (the `main` branch's), if any.
    pub fn snapshot_id(&self) -> Option<i64> {
        let main = self.0["refs"][MAIN]["snapshot-id"].as_i64();
        main.or_else(|| self.0["current-snapshot-id"].as_i64()).filter(|id| *id >= 0)
    }

    pub fn snapshot(&self) -> Option<&Value> {
        let id = self.snapshot_id()?;
        self.0["snapshots"].as_array()?.iter().find(|s| s["snapshot-id"].as_i64() == Some(id))
    }

    pub fn last_sequence_number(&self) -> i64 {
        self.0["last-sequence-number"].as_i64().unwrap_or(0)
    }

    /// When the table last changed (ms since the epoch).
    pub fn last_updated_ms(&self) -> i64 {
        self.0["last-updated-ms"].as_i64().unwrap_or(0)
    }

    pub fn location(&self) -> Option<&str> {
        self.0["location"].as_str()
    }

    pub fn properties(&self) -> impl Iterator<Item = (&str, &str)> {
        let properties = self.0["properties"].as_object().into_iter().flatten();
        properties.filter_map(|(k, v)| Some((k.as_str(), v.as_str()?)))
    }

    /// The current schema and the last field ID assigned.
    pub fn schema(&self) -> Result<(&Value, i32), SpecError> {
        let id = &self.0["current-schema-id"];
        let schemas = self.0["schemas"].as_array().ok_or_else(|| SpecError::Table("it has no schemas".into()))?;
        let schema = schemas.iter().find(|s| &s["schema-id"] == id);
        let schema = schema.ok_or_else(|| SpecError::Table(format!("it has no schema {id}, its current one")))?;
        Ok((schema, self.0["last-column-id"].as_i64().unwrap_or(0) as i32))
    }

    /// The ID a schema added now takes (one past the highest any schema of the table has).
    pub fn next_schema_id(&self) -> i32 {
        let schemas = self.0["schemas"].as_array().into_iter().flatten();
        schemas.filter_map(|s| s["schema-id"].as_i64()).max().map_or(0, |id| id as i32 + 1)
    }

    /// Refuses metadata of another format version than 2.
    pub fn check_version(&self) -> Result<(), SpecError> {
        match self.0["format-version"].as_i64() {
            Some(2) => Ok(()),
            other => Err(SpecError::Table(format!(
                "it is of format version {}, and only version 2 tables are written",
                other.map_or("(none)".to_string(), |v| v.to_string())
            ))),
        }
    }
}

/// What one commit does to a table: a new snapshot (appending its manifests), the properties it
/// sets, a new current schema when its files have columns the table lacked, and the old snapshots it
/// removes (see `expire`).
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub snapshot: Value,
    pub properties: Vec<(String, String)>,
    pub schema: Option<NewSchema>,
    pub expired: Vec<Expired>,
}

/// A schema a commit adds and makes current (see `evolve`).
#[derive(Debug, Clone, PartialEq)]
pub struct NewSchema {
    pub schema: Value,
    pub last_column_id: i32,
}

impl NewSchema {
    /// The name mapping property of the table at this schema (readers map the files' columns by it).
    pub fn name_mapping(&self) -> (String, String) {
        (NAME_MAPPING.to_string(), name_mapping(&self.schema).to_string())
    }
}

/// The snapshot of an append whose manifest list is at `manifest_list`, on top of `base`: `summary`
/// the entries the commit adds to its summary (the positions it moves), beside the counts.
pub fn append_snapshot(
    base: &Base,
    ids: super::manifest::SnapshotIds,
    manifest_list: &str,
    added: (usize, u64, u64),
    summary: &[(String, String)],
    schema_id: i64,
    now_ms: i64,
) -> Value {
    let (files, records, bytes) = added;
    let mut s: Map<String, Value> = Map::new();
    s.insert("operation".into(), json!("append"));
    s.insert("added-data-files".into(), json!(files.to_string()));
    s.insert("added-records".into(), json!(records.to_string()));
    s.insert("added-files-size".into(), json!(bytes.to_string()));
    let parent = base.snapshot().map(|p| &p["summary"]);
    let total = |key: &str, added: u64| -> Option<String> {
        let before = match parent {
            None => 0,
            Some(p) => p[key].as_str()?.parse::<u64>().ok()?,
        };
        Some((before + added).to_string())
    };
    for (key, added) in [("total-data-files", files as u64), ("total-records", records), ("total-files-size", bytes)] {
        if let Some(value) = total(key, added) {
            s.insert(key.into(), json!(value));
        }
    }
    for key in ["total-delete-files", "total-position-deletes", "total-equality-deletes"] {
        if let Some(value) = total(key, 0) {
            s.insert(key.into(), json!(value));
        }
    }
    s.extend(summary.iter().map(|(k, v)| (k.clone(), json!(v))));
    let mut snapshot = json!({
        "snapshot-id": ids.snapshot_id, "sequence-number": ids.sequence_number, "timestamp-ms": now_ms,
        "manifest-list": manifest_list, "summary": s, "schema-id": schema_id,
    });
    if let Some(parent) = ids.parent {
        snapshot["parent-snapshot-id"] = json!(parent);
    }
    snapshot
}

/// The metadata after `change`, made from `base` (read from `base_location`) at `now_ms`.
pub fn apply(base: &Value, base_location: &str, change: &Change, now_ms: i64) -> Value {
    let mut next = base.clone();
    if let Some(new) = &change.schema {
        push(&mut next, "schemas", new.schema.clone());
        next["current-schema-id"] = new.schema["schema-id"].clone();
        next["last-column-id"] = json!(new.last_column_id);
    }
    let snapshot = &change.snapshot;
    push(&mut next, "snapshots", snapshot.clone());
    next["current-snapshot-id"] = snapshot["snapshot-id"].clone();
    next["last-sequence-number"] = snapshot["sequence-number"].clone();
    next["refs"][MAIN] = json!({"snapshot-id": snapshot["snapshot-id"], "type": "branch"});
    push(&mut next, "snapshot-log", json!({"timestamp-ms": now_ms, "snapshot-id": snapshot["snapshot-id"]}));
    let logged = json!({"timestamp-ms": base["last-updated-ms"], "metadata-file": base_location});
    push(&mut next, "metadata-log", logged);
    if let Some(log) = next["metadata-log"].as_array_mut() {
        let excess = log.len().saturating_sub(METADATA_LOG_MAX);
        log.drain(..excess);
    }
    for (key, value) in &change.properties {
        set_property(&mut next, key, value);
    }
    for list in ["snapshots", "snapshot-log"] {
        if let Some(items) = next[list].as_array_mut() {
            items.retain(|s| !is_expired(&change.expired, s));
        }
    }
    next["last-updated-ms"] = json!(now_ms);
    next
}

/// The metadata files `base`'s log names and `next`'s no longer does (it keeps the newest 100).
pub fn dropped_from_log(base: &Value, next: &Value) -> Vec<String> {
    let files = |m: &Value| -> Vec<String> {
        let log = m["metadata-log"].as_array().into_iter().flatten();
        log.filter_map(|e| e["metadata-file"].as_str().map(str::to_string)).collect()
    };
    let kept = files(next);
    files(base).into_iter().filter(|f| !kept.contains(f)).collect()
}

fn push(metadata: &mut Value, key: &str, item: Value) {
    match metadata[key].as_array_mut() {
        Some(items) => items.push(item),
        None => metadata[key] = json!([item]),
    }
}

fn set_property(metadata: &mut Value, key: &str, value: &str) {
    if !metadata["properties"].is_object() {
        metadata["properties"] = json!({});
    }
    metadata["properties"][key] = json!(value);
}

#[cfg(test)]
mod tests;

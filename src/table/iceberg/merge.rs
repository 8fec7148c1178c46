//! Manifest merging, as Iceberg's own appends do it: every commit writes a manifest per partition spec,
//! and the manifest list of each snapshot names every manifest before it, so without merging a table
//! committed to every minute would carry a list of half a million manifests after a year. Once a spec has
//! `MIN_COUNT_TO_MERGE` small manifests (under `TARGET_BYTES`, Iceberg's `commit.manifest.min-count-to-merge`
//! and `commit.manifest.target-size-bytes` defaults), a commit writes their entries into one manifest,
//! as existing files with the sequence numbers they had, and lists that one instead. Only manifests the
//! archiver wrote (their Avro metadata says so) are merged; another engine's stay as they are.

use serde_json::{json, Value};

use super::manifest::{ManifestEntry, SnapshotIds};
use super::spec::PartitionSpec;
use crate::values::avro::value::latin1;

/// The small manifests of a spec a commit waits for before merging them.
pub const MIN_COUNT_TO_MERGE: usize = 100;
/// A manifest this large is not merged again.
pub const TARGET_BYTES: u64 = 8 << 20;
/// The Avro metadata of the manifests the archiver writes.
pub const WRITER: (&str, &str) = ("writer", "kafka-s3-archiver");
/// What the names of the manifests the archiver writes hold (`<uuid>-ksa-m<n>.avro`): a list names
/// them, so they are told apart without reading them (another engine's are never read to merge).
pub const OWN_MANIFEST: &str = "-ksa-m";

const STATUS_EXISTING: i64 = 0;
const STATUS_DELETED: i64 = 2;

/// The manifests of a snapshot's list (its parent's) that a commit merges for spec `spec_id`: the
/// archiver's small data manifests that added or kept files and deleted none, when there are enough.
pub fn to_merge(entries: &[ManifestEntry], spec_id: i32) -> Vec<usize> {
    let small: Vec<usize> = entries
        .iter()
        .enumerate()
        .filter(|(_, e)| {
            let e = &e.0;
            e["partition_spec_id"] == spec_id
                && e["manifest_path"].as_str().is_some_and(|p| p.contains(OWN_MANIFEST))
                && e["content"] == 0
                && e["deleted_files_count"].as_i64() == Some(0)
                && e["manifest_length"].as_u64().is_some_and(|n| n < TARGET_BYTES)
        })
        .map(|(i, _)| i)
        .collect();
    match small.len() >= MIN_COUNT_TO_MERGE {
        true => small,
        false => Vec::new(),
    }
}

/// A manifest's entries (listed as `listed`) as a merged manifest holds them: existing files, with the
/// snapshot and sequence numbers they inherited made explicit; deleted entries left out.
pub fn as_existing(records: Vec<Value>, listed: &ManifestEntry) -> Vec<Value> {
    let (snapshot, sequence) = (&listed.0["added_snapshot_id"], &listed.0["sequence_number"]);
    records
        .into_iter()
        .filter(|r| r["status"].as_i64() != Some(STATUS_DELETED))
        .map(|mut r| {
            r["status"] = json!(STATUS_EXISTING);
            for (key, inherited) in
                [("snapshot_id", snapshot), ("sequence_number", sequence), ("file_sequence_number", sequence)]
            {
                if r[key].is_null() {
                    r[key] = inherited.clone();
                }
            }
            r
        })
        .collect()
}

/// The manifest list's entry for a merged manifest of `records` (existing files of `spec`) written at
/// `path`, `length` bytes, by snapshot `ids`.
pub fn merged_entry(
    path: &str,
    length: usize,
    records: &[Value],
    spec: &PartitionSpec,
    ids: SnapshotIds,
) -> ManifestEntry {
    let rows: i64 = records.iter().filter_map(|r| r["data_file"]["record_count"].as_i64()).sum();
    let min_sequence =
        records.iter().filter_map(|r| r["sequence_number"].as_i64()).min().unwrap_or(ids.sequence_number);
    let summary = |field: &super::spec::PartitionField| {
        let values: Vec<&Value> = records.iter().map(|r| &r["data_file"]["partition"][&field.name]).collect();
        let ints = || values.iter().filter_map(|v| v.as_i64()).map(|v| v as i32);
        json!({"contains_null": values.iter().any(|v| v.is_null()), "contains_nan": false,
               "lower_bound": ints().min().map(|v| latin1(&v.to_le_bytes())),
               "upper_bound": ints().max().map(|v| latin1(&v.to_le_bytes()))})
    };
    ManifestEntry(json!({
        "manifest_path": path, "manifest_length": length, "partition_spec_id": spec.spec_id,
        "content": 0, "sequence_number": ids.sequence_number, "min_sequence_number": min_sequence,
        "added_snapshot_id": ids.snapshot_id, "added_files_count": 0, "existing_files_count": records.len(),
        "deleted_files_count": 0, "added_rows_count": 0, "existing_rows_count": rows, "deleted_rows_count": 0,
        "partitions": spec.fields.iter().map(summary).collect::<Vec<_>>(), "key_metadata": null}))
}

#[cfg(test)]
mod tests;

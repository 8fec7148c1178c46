use serde_json::json;

use super::*;
use crate::archive::time_bucket::BucketWidth;

const IDS: SnapshotIds = SnapshotIds { snapshot_id: 42, parent: Some(41), sequence_number: 3 };

fn file(path: &str, ordinal: Option<i32>) -> DataFile {
    let partition = match ordinal {
        Some(ordinal) => FilePartition::Time { width: BucketWidth::Day, ordinal },
        None => FilePartition::Unpartitioned,
    };
    DataFile {
        path: path.into(),
        kafka_partition: 4,
        partition,
        records: 10,
        size: 1000,
        bounds: vec![(1, 5i64.to_le_bytes().to_vec(), 14i64.to_le_bytes().to_vec())],
        stats: ColumnStats {
            sizes: vec![(1, 80), (3, 900)],
            values: vec![(1, 10), (3, 10)],
            nulls: vec![(3, 2)],
            // The footer's bounds of a column the file has bounds of already are not written twice.
            bounds: vec![(1, vec![0; 8], vec![0; 8]), (3, b"a".to_vec(), b"q".to_vec())],
        },
    }
}

#[test]
fn a_manifest_lists_its_files_as_added_by_its_snapshot() {
    let spec = PartitionSpec::by_time(9, BucketWidth::Day, 2);
    let schema = json!({"type": "struct", "schema-id": 0, "fields": []});
    let files = [file("s3://b/a.parquet", Some(20000)), file("s3://b/b.parquet", Some(20001))];
    let bytes = write_manifest(&files, &spec, &schema, IDS, [9; 16]).unwrap();
    let read = avro_file::read(&bytes).unwrap();
    assert!(read.metadata.contains(&("partition-spec-id".into(), "1".into())));
    assert!(read.metadata.contains(&("format-version".into(), "2".into())));
    let entry = &read.records[0];
    assert_eq!(
        (entry["status"].clone(), entry["snapshot_id"].clone(), entry["sequence_number"].clone()),
        (json!(1), json!(42), json!(null))
    );
    let data = &entry["data_file"];
    assert_eq!(data["file_path"], "s3://b/a.parquet");
    assert_eq!(data["partition"], json!({"partition": 4, "timestamp_day": 20000}));
    assert_eq!((data["record_count"].clone(), data["file_size_in_bytes"].clone()), (json!(10), json!(1000)));
    assert_eq!(data["lower_bounds"], json!([{"key": 1, "value": "\u{5}\0\0\0\0\0\0\0"}, {"key": 3, "value": "a"}]));
    assert_eq!(data["upper_bounds"][1], json!({"key": 3, "value": "q"}));
    assert_eq!(data["column_sizes"], json!([{"key": 1, "value": 80}, {"key": 3, "value": 900}]));
    assert_eq!(data["value_counts"][1], json!({"key": 3, "value": 10}));
    assert_eq!(data["null_value_counts"], json!([{"key": 3, "value": 2}]));
    assert_eq!(read.records[1]["data_file"]["file_path"], "s3://b/b.parquet");

    let entry = list_entry("s3://b/m.avro", bytes.len(), &files, &spec, IDS);
    assert_eq!(entry.0["added_files_count"], 2);
    assert_eq!(entry.0["added_rows_count"], 20);
    assert_eq!(entry.0["partitions"][0]["lower_bound"], json!("\u{4}\0\0\0"));
    assert_eq!(entry.0["partitions"][1]["lower_bound"], json!("\u{20}\u{4e}\0\0"), "20000 as 4 bytes, little-endian");
    assert_eq!(entry.0["partitions"][1]["upper_bound"], json!("\u{21}\u{4e}\0\0"));
}

#[test]
fn a_manifest_list_carries_its_parents_manifests_as_they_were() {
    let spec = PartitionSpec::by_partition(9);
    let first = list_entry("s3://b/m1.avro", 100, &[file("s3://b/a.parquet", None)], &spec, IDS);
    assert_eq!(first.0["partitions"][0]["upper_bound"], json!("\u{4}\0\0\0"));
    let list = write_manifest_list(std::slice::from_ref(&first), IDS, [1; 16]).unwrap();
    let read = avro_file::read(&list).unwrap();
    assert!(read.metadata.contains(&("parent-snapshot-id".into(), "41".into())));
    let entries = read_manifest_list(&list).unwrap();
    assert_eq!(entries, vec![first.clone()]);
    let next = SnapshotIds { snapshot_id: 43, parent: Some(42), sequence_number: 4 };
    let second = list_entry("s3://b/m2.avro", 100, &[file("s3://b/b.parquet", None)], &spec, next);
    let both = write_manifest_list(&[second.clone(), entries[0].clone()], next, [2; 16]).unwrap();
    assert_eq!(read_manifest_list(&both).unwrap(), vec![second, first]);
}

use super::*;
use crate::table::iceberg::manifest::{self, DataFile};
use crate::table::partition::FilePartition;

const IDS: SnapshotIds = SnapshotIds { snapshot_id: 900, parent: Some(899), sequence_number: 120 };

fn listed(spec_id: i32, length: u64, deleted: i64) -> ManifestEntry {
    ManifestEntry(json!({"partition_spec_id": spec_id, "content": 0, "deleted_files_count": deleted,
                         "manifest_length": length, "added_snapshot_id": 7, "sequence_number": 3,
                         "manifest_path": "s3://b/t/metadata/u-ksa-m0.avro"}))
}

#[test]
fn a_spec_s_small_manifests_are_merged_once_there_are_enough() {
    let mut entries: Vec<ManifestEntry> = (0..MIN_COUNT_TO_MERGE - 1).map(|_| listed(0, 4000, 0)).collect();
    entries.push(listed(1, 4000, 0));
    entries.push(listed(0, TARGET_BYTES, 0));
    entries.push(listed(0, 4000, 1));
    let mut foreign = listed(0, 4000, 0);
    foreign.0["manifest_path"] = json!("s3://b/t/metadata/u-m0.avro");
    entries.push(foreign);
    assert_eq!(to_merge(&entries, 0), Vec::<usize>::new(), "99 small ones of the archiver's of spec 0: not yet");
    entries.push(listed(0, 4000, 0));
    let chosen = to_merge(&entries, 0);
    assert_eq!(chosen.len(), MIN_COUNT_TO_MERGE);
    assert!(!chosen.contains(&(MIN_COUNT_TO_MERGE - 1)), "spec 1's");
    assert!(
        !chosen.contains(&MIN_COUNT_TO_MERGE) && !chosen.contains(&(MIN_COUNT_TO_MERGE + 1)),
        "a large one, one with deletes"
    );
    assert!(!chosen.contains(&(MIN_COUNT_TO_MERGE + 2)), "another engine's (or an older archiver's): never read");
}

#[test]
fn merged_entries_are_existing_files_with_the_numbers_they_inherited() {
    let spec = PartitionSpec::by_partition(9);
    let file = |path: &str, p: i32| DataFile {
        path: path.into(),
        kafka_partition: p,
        partition: FilePartition::Unpartitioned,
        records: 10,
        size: 100,
        bounds: vec![],
        stats: Default::default(),
    };
    let schema = json!({"type": "struct", "schema-id": 0, "fields": []});
    let written =
        manifest::write_manifest(&[file("s3://b/a", 2), file("s3://b/b", 5)], &spec, &schema, IDS, [1; 16]).unwrap();
    let records = manifest::read_own_manifest(&written).unwrap().expect("the archiver's own");
    let existing = as_existing(records, &listed(0, 4000, 0));
    assert_eq!(existing.len(), 2);
    assert_eq!(existing[0]["status"], 0);
    assert_eq!(
        (
            existing[0]["snapshot_id"].clone(),
            existing[0]["sequence_number"].clone(),
            existing[0]["file_sequence_number"].clone()
        ),
        (json!(900), json!(3), json!(3)),
        "the snapshot its manifest recorded; the sequence number inherited from the list"
    );
    let entry = merged_entry("s3://b/merged.avro", 1234, &existing, &spec, IDS);
    assert_eq!(
        (entry.0["existing_files_count"].clone(), entry.0["existing_rows_count"].clone()),
        (json!(2), json!(20))
    );
    assert_eq!((entry.0["sequence_number"].clone(), entry.0["min_sequence_number"].clone()), (json!(120), json!(3)));
    assert_eq!(entry.0["partitions"][0]["lower_bound"], json!("\u{2}\0\0\0"));
    assert_eq!(entry.0["partitions"][0]["upper_bound"], json!("\u{5}\0\0\0"));
    let rewritten = manifest::write_entries(&existing, &spec, &schema, [2; 16]).unwrap();
    assert_eq!(manifest::read_own_manifest(&rewritten).unwrap().unwrap(), existing);
}

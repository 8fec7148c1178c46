use serde_json::json;

use super::*;
use crate::archive::time_bucket::BucketWidth;
use crate::table::iceberg::expire::Expired;
use crate::table::iceberg::manifest::SnapshotIds;

fn table() -> Value {
    let schema = json!({"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "offset", "required": true, "type": "long"}]});
    new_table(&NewTable {
        uuid: "u-1",
        location: "s3://b/_tables/kafka/orders",
        schema: (schema, 1),
        specs: &[PartitionSpec::by_partition(2), PartitionSpec::by_time(2, BucketWidth::Day, 1)],
        properties: vec![("kafka-s3-archiver.topic-id".into(), "T".into())],
        now_ms: 1000,
    })
}

#[test]
fn a_new_table_has_no_snapshot_and_both_specs_the_time_one_default() {
    let t = table();
    let base = Base(&t);
    assert_eq!(base.snapshot_id(), None);
    assert!(base.check_version().is_ok());
    assert_eq!((t["default-spec-id"].clone(), t["last-partition-id"].clone()), (json!(1), json!(1001)));
    assert_eq!(base.schema().unwrap().1, 1);
    assert!(base.properties().any(|(k, _)| k == "schema.name-mapping.default"));
    assert!(base.properties().any(|p| p == ("kafka-s3-archiver.topic-id", "T")));
}

fn change(base: &Base, id: i64) -> Change {
    let ids =
        SnapshotIds { snapshot_id: id, parent: base.snapshot_id(), sequence_number: base.last_sequence_number() + 1 };
    let summary = [("kafka-s3-archiver.position.0".to_string(), "30".to_string())];
    let snapshot = append_snapshot(base, ids, "s3://b/list.avro", (2, 30, 5000), &summary, 0, 2000);
    Change { snapshot, properties: summary.to_vec(), schema: None, expired: vec![] }
}

#[test]
fn expired_snapshots_leave_the_snapshots_and_their_log_and_old_metadata_files_leave_the_log() {
    let t = table();
    assert_eq!(Base(&t).0["properties"]["write.metadata.delete-after-commit.enabled"], "true");
    let mut at = t.clone();
    for (i, id) in (7..=110).enumerate() {
        let mut next = change(&Base(&at), id);
        if id == 9 {
            next.expired = vec![Expired { snapshot_id: 7, manifest_list: None }];
        }
        let after = apply(&at, &format!("s3://b/m{i}.json"), &next, 2000 + id);
        // The log holds the newest 100: the 101st commit drops the first file.
        let dropped: Vec<String> = (i >= 100).then(|| format!("s3://b/m{}.json", i - 100)).into_iter().collect();
        assert_eq!(dropped_from_log(&at, &after), dropped, "commit {i}");
        at = after;
    }
    let ids = |list: &str| -> Vec<i64> {
        at[list].as_array().unwrap().iter().map(|s| s["snapshot-id"].as_i64().unwrap()).collect()
    };
    assert_eq!(ids("snapshots")[..2], [8, 9], "7 expired");
    assert_eq!(ids("snapshot-log")[..2], [8, 9]);
}

#[test]
fn an_append_becomes_the_main_snapshot_with_its_counts_positions_and_log() {
    let t = table();
    let base = Base(&t);
    let first = apply(&t, "s3://b/m0.json", &change(&base, 7), 2000);
    let after = Base(&first);
    assert_eq!(after.snapshot_id(), Some(7));
    assert_eq!(after.last_sequence_number(), 1);
    let summary = &after.snapshot().unwrap()["summary"];
    assert_eq!((summary["operation"].clone(), summary["total-records"].clone()), (json!("append"), json!("30")));
    assert_eq!(summary["kafka-s3-archiver.position.0"], "30");
    assert!(after.properties().any(|p| p == ("kafka-s3-archiver.position.0", "30")));
    assert_eq!(first["metadata-log"], json!([{"timestamp-ms": 1000, "metadata-file": "s3://b/m0.json"}]));
    let second = apply(&first, "s3://b/m1.json", &change(&after, 8), 3000);
    let snapshot = Base(&second).snapshot().unwrap().clone();
    assert_eq!((snapshot["parent-snapshot-id"].clone(), snapshot["sequence-number"].clone()), (json!(7), json!(2)));
    assert_eq!(snapshot["summary"]["total-records"], "60");
    assert_eq!(second["snapshots"].as_array().unwrap().len(), 2);
}

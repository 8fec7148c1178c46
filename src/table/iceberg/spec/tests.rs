use std::sync::Arc;

use arrow_schema::{DataType, Field, Fields, Schema};
use serde_json::json;

use super::*;

fn raw() -> Schema {
    let header = Field::new(
        "item",
        DataType::Struct(Fields::from(vec![
            Field::new("key", DataType::Utf8, false),
            Field::new("value", DataType::Binary, true),
        ])),
        false,
    );
    Schema::new(vec![
        Field::new("offset", DataType::Int64, false),
        Field::new("timestamp", DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())), true),
        Field::new("key", DataType::Binary, true),
        Field::new("headers", DataType::List(Arc::new(header)), false),
        Field::new("no_schema", DataType::Null, true),
    ])
}

#[test]
fn the_archive_columns_map_to_iceberg_types_with_ids_and_a_name_mapping() {
    let (schema, last) = table_schema(&raw(), None, 0, 0).unwrap();
    let expected = json!({"type": "struct", "schema-id": 0, "fields": [
        {"id": 1, "name": "offset", "required": true, "type": "long"},
        {"id": 2, "name": "timestamp", "required": false, "type": "timestamptz"},
        {"id": 3, "name": "key", "required": false, "type": "binary"},
        {"id": 4, "name": "headers", "required": true, "type": {"type": "list", "element-id": 5, "element-required": true,
            "element": {"type": "struct", "fields": [
                {"id": 6, "name": "key", "required": true, "type": "string"},
                {"id": 7, "name": "value", "required": false, "type": "binary"}]}}}]});
    assert_eq!((schema.clone(), last), (expected, 7), "the column of no type is left out, its ID not used");
    assert_eq!(field_id(&schema, "timestamp"), Some(2));
    let mapping = name_mapping(&schema);
    assert_eq!(mapping[0], json!({"field-id": 1, "names": ["offset"]}));
    assert_eq!(
        mapping[3],
        json!({"field-id": 4, "names": ["headers"], "fields": [{"field-id": 5, "names": ["element", "item"], "fields": [
            {"field-id": 6, "names": ["key"]}, {"field-id": 7, "names": ["value"]}]}]})
    );
}

#[test]
fn a_later_schema_keeps_each_fields_id_and_numbers_new_ones_after_the_last() {
    let (first, last) = table_schema(&raw(), None, 0, 0).unwrap();
    let mut fields: Vec<Field> = raw().fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.insert(0, Field::new("partition_note", DataType::Utf8, true));
    let (second, last2) = table_schema(&Schema::new(fields), Some(&first), last, 1).unwrap();
    assert_eq!(second["schema-id"], 1);
    assert_eq!(second["fields"][0], json!({"id": 8, "name": "partition_note", "required": false, "type": "string"}));
    assert_eq!(second["fields"].as_array().unwrap()[1..], first["fields"].as_array().unwrap()[..]);
    assert_eq!(last2, 8);
    // int to long is a promotion; binary to string is not.
    let ints = Schema::new(vec![Field::new("n", DataType::Int32, true)]);
    let (with_int, last) = table_schema(&ints, None, 0, 0).unwrap();
    let longs = Schema::new(vec![Field::new("n", DataType::Int64, true)]);
    assert_eq!(table_schema(&longs, Some(&with_int), last, 1).unwrap().0["fields"][0]["id"], 1);
    let strings = Schema::new(vec![Field::new("n", DataType::Utf8, true)]);
    assert!(matches!(table_schema(&strings, Some(&with_int), last, 1), Err(SpecError::Changed { .. })));
}

#[test]
fn a_column_no_table_can_hold_is_left_out_and_a_changed_element_type_is_refused() {
    let list = |t: DataType| DataType::List(Arc::new(Field::new("item", t, true)));
    let schema = Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("n", DataType::UInt64, true),
        Field::new("gaps", list(DataType::Duration(TimeUnit::Microsecond)), true),
        Field::new("tags", list(DataType::Int32), true),
    ]);
    let (table, last) = table_schema(&schema, None, 0, 0).unwrap();
    let names: Vec<&str> = table["fields"].as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["id", "tags"], "a uint64 and a list of durations are left out, not a reason to stop");
    let later = Schema::new(vec![Field::new("tags", list(DataType::Utf8), true)]);
    let refused = table_schema(&later, Some(&table), last, 1).unwrap_err();
    assert!(matches!(&refused, SpecError::Changed { path, .. } if path == "tags.element"), "{refused}");
    let widened = Schema::new(vec![Field::new("tags", list(DataType::Int64), true)]);
    assert!(table_schema(&widened, Some(&table), last, 1).is_ok(), "int to long inside a list");
}

#[test]
fn the_specs_partition_by_kafka_partition_and_the_timestamps_day_or_hour() {
    let spec = PartitionSpec::by_time(9, BucketWidth::Hour, 2);
    assert_eq!(
        spec.to_json(),
        json!({"spec-id": 1, "fields": [
            {"name": "partition", "transform": "identity", "source-id": 9, "field-id": 1000},
            {"name": "timestamp_hour", "transform": "hour", "source-id": 2, "field-id": 1001}]})
    );
    let hour = FilePartition::Time { width: BucketWidth::Hour, ordinal: 7 };
    assert_eq!(spec.partition_record(3, &hour), json!({"partition": 3, "timestamp_hour": 7}));
    assert_eq!(spec.last_field_id(), 1001);
    let by_partition = PartitionSpec::by_partition(9);
    assert_eq!(by_partition.partition_record(3, &FilePartition::Unpartitioned), json!({"partition": 3}));
    assert_eq!(by_partition.last_field_id(), 1000);
}

#[test]
fn the_width_of_a_tables_time_spec_is_the_tables_own_and_a_foreign_spec_is_refused() {
    let schema = json!({"fields": [{"id": 2, "name": "timestamp"}, {"id": 9, "name": "partition"}]});
    let specs = |widths: &[BucketWidth]| {
        let mut all = vec![PartitionSpec::by_partition(9).to_json()];
        all.extend(widths.iter().map(|w| PartitionSpec::by_time(9, *w, 2).to_json()));
        Value::Array(all)
    };
    assert_eq!(time_width(&specs(&[BucketWidth::Day]), &schema), Ok(Some(BucketWidth::Day)));
    assert_eq!(time_width(&specs(&[BucketWidth::Hour]), &schema), Ok(Some(BucketWidth::Hour)));
    assert_eq!(time_width(&specs(&[]), &schema), Ok(None));
    // A spec 1 by another column: files go under spec 0 only.
    let other =
        json!([PartitionSpec::by_partition(9).to_json(), PartitionSpec::by_time(9, BucketWidth::Day, 5).to_json()]);
    assert_eq!(time_width(&other, &schema), Ok(None));
    // Key order in the catalog's JSON does not matter.
    let reordered = json!([{"fields": [{"field-id": 1000, "source-id": 9, "transform": "identity", "name": "partition"}], "spec-id": 0}]);
    assert_eq!(time_width(&reordered, &schema), Ok(None));
    let unpartitioned = json!([{"spec-id": 0, "fields": []}]);
    assert!(matches!(time_width(&unpartitioned, &schema), Err(SpecError::Table(why)) if why.contains("spec 0")));
    let no_partition = json!({"fields": [{"id": 2, "name": "timestamp"}]});
    assert!(time_width(&specs(&[]), &no_partition).is_err());
}

use crate::values::column::{Room, Struct};
use serde_json::json;

use super::*;
use crate::values::avro::binary::append_record;
use crate::values::avro::resolve::{encode, Resolution};
use crate::values::avro::{parse_record, AvroRecord};

const OLD: &str = r#"{"type":"record","name":"R","fields":[
    {"name":"n","type":"int"},
    {"name":"xs","type":{"type":"array","items":"float"}},
    {"name":"m","type":{"type":"map","values":{"type":"record","name":"P","fields":[{"name":"a","type":"int"}]}}},
    {"name":"p","type":["null","P"]},
    {"name":"s","type":"string"}]}"#;

/// OLD widened: int to long, float items to double, a field added in a record inside a map and in a
/// nullable one, a new top-level field, string to bytes.
const NEW: &str = r#"{"type":"record","name":"R","fields":[
    {"name":"n","type":"long"},
    {"name":"xs","type":{"type":"array","items":"double"}},
    {"name":"m","type":{"type":"map","values":{"type":"record","name":"P","fields":[{"name":"a","type":"long"},
        {"name":"b","type":"string","default":"bee"}]}}},
    {"name":"p","type":["null","P"]},
    {"name":"s","type":"bytes"},
    {"name":"t","type":{"type":"array","items":"int"},"default":[1,2]}]}"#;

fn values() -> Vec<Vec<u8>> {
    let old = Avro::Record(parse_record(OLD).unwrap());
    let rows = [
        json!({"n": 1, "xs": [0.5, 1.5], "m": {"k": {"a": 3}}, "p": null, "s": "x"}),
        json!({"n": -2, "xs": [], "m": {}, "p": null, "s": ""}),
    ];
    rows.iter()
        .map(|v| {
            let mut out = Vec::new();
            encode(&old, v, &mut out).unwrap();
            out
        })
        .collect()
}

/// The rows decoded as `old`, a null row between them.
fn decoded(old: &AvroRecord) -> StructArray {
    let mut b = Struct::new(struct_fields(old), &Room::rows(3));
    let values = values();
    append_record(old, &mut Reader::new(&values[0]), &mut b).unwrap();
    b.push_null();
    append_record(old, &mut Reader::new(&values[1]), &mut b).unwrap();
    b.finish().unwrap()
}

#[test]
fn widening_decoded_rows_equals_decoding_them_as_the_newer_schema() {
    let (old, new) = (parse_record(OLD).unwrap(), parse_record(NEW).unwrap());
    let widened = widen_record(&decoded(&old), &old, &new).unwrap();
    widened.to_data().validate_full().unwrap();
    let resolution = Resolution::new(&old, &new).unwrap();
    let mut b = Struct::new(struct_fields(&new), &Room::rows(3));
    let values = values();
    resolution.append(&mut Reader::new(&values[0]), &mut b).unwrap();
    b.push_null();
    resolution.append(&mut Reader::new(&values[1]), &mut b).unwrap();
    let resolved = b.finish().unwrap();
    assert_eq!(widened.data_type(), resolved.data_type());
    assert!(widened.is_null(1), "a null row stays null");
    for i in [0, 2] {
        for c in 0..resolved.num_columns() {
            assert_eq!(
                widened.column(c).slice(i, 1).to_data(),
                resolved.column(c).slice(i, 1).to_data(),
                "row {i}, column {c}"
            );
        }
    }
}

#[test]
fn the_same_schema_keeps_its_columns_and_a_field_without_a_default_is_refused() {
    let old = parse_record(OLD).unwrap();
    let rows = decoded(&old);
    assert_eq!(widen_record(&rows, &old, &old).unwrap(), rows);
    let no_default = r#"{"type":"record","name":"R","fields":[{"name":"n","type":"int"},{"name":"z","type":"int"}]}"#;
    let err = widen_record(&rows, &old, &parse_record(no_default).unwrap()).unwrap_err();
    assert_eq!(err, "z: it has no default");
}

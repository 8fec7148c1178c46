use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int32Type, Int64Type};
use arrow_array::{Array, StructArray};
use serde_json::json;

use super::*;
use crate::values::avro::binary::struct_fields;
use crate::values::avro::{parse_record, AvroRecord};
use crate::values::column::Room;

const V1: &str = r#"{"type":"record","name":"Order","fields":[
    {"name":"id","type":"int"},
    {"name":"status","type":{"type":"enum","name":"Status","symbols":["NEW","PAID"]}},
    {"name":"price","type":"float"},
    {"name":"tags","type":{"type":"array","items":"int"}},
    {"name":"gone","type":"string"}]}"#;

/// V1 evolved compatibly: a field removed, fields added with defaults, types widened, a symbol added.
const V2: &str = r#"{"type":"record","name":"Order","fields":[
    {"name":"note","type":["null","string"],"default":null},
    {"name":"id","type":"long"},
    {"name":"status","type":{"type":"enum","name":"Status","symbols":["NEW","PAID","SENT"]}},
    {"name":"price","type":"double"},
    {"name":"tags","type":{"type":"array","items":"long"}},
    {"name":"qty","type":"int","default":1},
    {"name":"user","type":{"type":"record","name":"U","fields":[
        {"name":"name","type":"string"},{"name":"roles","type":{"type":"array","items":"string"}}]},
     "default":{"name":"anon","roles":["guest"]}},
    {"name":"attrs","type":{"type":"map","values":"long"},"default":{"a":1}}]}"#;

fn schema(text: &str) -> AvroRecord {
    parse_record(text).unwrap()
}

fn encoded(fields: &AvroRecord, value: serde_json::Value) -> Vec<u8> {
    let mut out = Vec::new();
    encode(&Avro::Record(fields.clone()), &value, &mut out).unwrap();
    out
}

/// Values of `writer` read as `reader`'s struct.
fn read(writer: &AvroRecord, reader: &AvroRecord, values: &[Vec<u8>]) -> StructArray {
    let resolution = Resolution::new(writer, reader).unwrap();
    let mut b = Struct::new(struct_fields(reader), &Room::rows(values.len()));
    for v in values {
        resolution.check(&mut Reader::new(v)).unwrap();
        let mut r = Reader::new(v);
        resolution.append(&mut r, &mut b).unwrap();
        assert!(r.at_end(), "the whole value is read");
    }
    b.finish().unwrap()
}

#[test]
fn an_older_writer_reads_into_the_newer_reader_with_defaults_and_widened_types() {
    let (v1, v2) = (schema(V1), schema(V2));
    let value = encoded(&v1, json!({"id": 7, "status": "PAID", "price": 2.5, "tags": [1, 2], "gone": "x"}));
    let resolution = Resolution::new(&v1, &v2).unwrap();
    assert_eq!(resolution.skips, ["gone"], "the removed field is read past");
    let rows = read(&v1, &v2, &[value]);
    let column = |name: &str| rows.column_by_name(name).unwrap().clone();
    assert!(column("note").is_null(0), "a null default");
    assert_eq!(column("id").as_primitive::<Int64Type>().value(0), 7, "int read as long");
    assert_eq!(column("status").as_string::<i32>().value(0), "PAID");
    assert_eq!(column("price").as_primitive::<Float64Type>().value(0), 2.5, "float read as double");
    let tags = column("tags");
    let tags = tags.as_list::<i32>().value(0);
    assert_eq!(tags.as_primitive::<Int64Type>().values(), &[1, 2], "array items widened");
    assert_eq!(column("qty").as_primitive::<Int32Type>().value(0), 1, "a number default");
    let user = column("user");
    let user = user.as_struct();
    assert_eq!(user.column(0).as_string::<i32>().value(0), "anon", "a record default");
    assert_eq!(user.column(1).as_list::<i32>().value(0).as_string::<i32>().value(0), "guest");
    let attrs = column("attrs");
    let attrs = attrs.as_map();
    assert_eq!(attrs.keys().as_string::<i32>().value(0), "a", "a map default");
    assert_eq!(attrs.values().as_primitive::<Int64Type>().value(0), 1);
}

#[test]
fn a_newer_writer_read_as_an_older_reader_names_what_it_would_lose() {
    let (v1, v2) = (schema(V1), schema(V2));
    let older = r#"{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},
        {"name":"price","type":"double"}]}"#;
    let older = schema(older);
    let resolution = Resolution::new(&v2, &older).unwrap();
    assert_eq!(resolution.skips, ["note", "status", "tags", "qty", "user", "attrs"]);
    let value = encoded(
        &v2,
        json!({"note": null, "id": 9, "status": "SENT", "price": 1.5, "tags": [3],
        "qty": 4, "user": {"name": "ann", "roles": []}, "attrs": {"k": 2, "j": 3}}),
    );
    let rows = read(&v2, &older, &[value]);
    assert_eq!(rows.column(0).as_primitive::<Int64Type>().value(0), 9, "fields after skipped ones still read");
    assert_eq!(rows.column(1).as_primitive::<Float64Type>().value(0), 1.5);
    assert!(Resolution::new(&v2, &v1).is_err(), "v1's `gone` has no default");
}

#[test]
fn what_cannot_be_resolved_says_where_and_why() {
    let one = |ty: &str, default: &str| {
        schema(&format!(r#"{{"type":"record","name":"R","fields":[{{"name":"x","type":{ty}{default}}}]}}"#))
    };
    let why = |w: &AvroRecord, r: &AvroRecord| Resolution::new(w, r).unwrap_err();
    assert!(why(&one(r#""string""#, ""), &one(r#""int""#, "")).contains("x: the writer's String"));
    assert!(why(&one(r#"["null","int"]"#, ""), &one(r#""int""#, "")).contains("x: a null cannot be read"));
    let symbols = |s: &str| one(&format!(r#"{{"type":"enum","name":"E","symbols":{s}}}"#), "");
    assert!(why(&symbols(r#"["A","B"]"#), &symbols(r#"["A"]"#)).contains("no symbol \"B\""));
    assert!(why(&one(r#""long""#, ""), &one(r#""int""#, "")).contains("cannot be read"), "no narrowing");
    let empty = schema(r#"{"type":"record","name":"R","fields":[]}"#);
    assert!(
        why(&empty, &one(r#""int""#, "")).contains("x: the writer lacks it and it has no default"),
        "{}",
        why(&empty, &one(r#""int""#, ""))
    );
    assert!(why(&empty, &one(r#""int""#, r#","default":"seven""#)).contains("its default \"seven\""));
    assert!(why(&empty, &one(r#"["null","int"]"#, r#","default":3"#)).contains("not of the union's first branch"));
    // A decimal(2, 0) default of three digits ("\u0003\u00e8" is 1000): refused, not a decode error later.
    let small = r#"{"type":"bytes","logicalType":"decimal","precision":2,"scale":0}"#;
    assert!(why(&empty, &one(small, r#","default":"\u0003\u00e8""#)).contains("does not decode"));
}

#[test]
fn defaults_encode_as_avro_binary() {
    let bytes = |ty: &str, v: serde_json::Value| {
        let fields = schema(&format!(r#"{{"type":"record","name":"R","fields":[{{"name":"x","type":{ty}}}]}}"#));
        let mut out = Vec::new();
        encode(&fields[0].avro, &v, &mut out).map(|()| out)
    };
    assert_eq!(bytes(r#""long""#, json!(-2)).unwrap(), [3]);
    assert_eq!(bytes(r#""bytes""#, json!("\u{00ff}a")).unwrap(), [4, 0xff, b'a'], "code points 0-255");
    assert_eq!(bytes(r#"{"type":"fixed","name":"F","size":2}"#, json!("ab")).unwrap(), b"ab");
    assert!(bytes(r#"{"type":"fixed","name":"F","size":2}"#, json!("abc")).is_err(), "a fixed's size");
    assert_eq!(bytes(r#"["string","null"]"#, json!("a")).unwrap(), [0, 2, b'a'], "the first branch");
    assert_eq!(bytes(r#"{"type":"array","items":"int"}"#, json!([])).unwrap(), [0]);
    assert!(bytes(r#""int""#, json!(1u64 << 40)).is_err(), "an int's range");
    assert_eq!(bytes(r#""double""#, json!(1.5)).unwrap(), 1.5f64.to_le_bytes());
}

#[test]
fn empty_items_in_a_block_read_as_check_bounded_them() {
    let writer = schema(
        r#"{"type":"record","name":"R","fields":[
        {"name":"many","type":{"type":"array","items":{"type":"record","name":"E","fields":[]}}}]}"#,
    );
    let reader = schema(
        r#"{"type":"record","name":"R","fields":[
        {"name":"many","type":{"type":"array","items":{"type":"record","name":"E","fields":[]}}},
        {"name":"n","type":"int","default":0}]}"#,
    );
    // Five empty records take no bytes: more items than bytes left.
    let rows = read(&writer, &reader, &[vec![10, 0]]);
    assert_eq!(rows.column(0).as_list::<i32>().value(0).len(), 5);
}

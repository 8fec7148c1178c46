use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::Array;

use super::*;
use crate::registry::{RegisteredSchema, SchemaCache};
use crate::values::wire::frame;

const V1: &str = r#"{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}"#;
const V2: &str = r#"{"type":"object","properties":{"id":{"type":"integer"},"n":{"type":"string"}},"required":["id"]}"#;

fn columns() -> JsonSchemaColumns {
    let cache = SchemaCache::default();
    let json = |text: &str| RegisteredSchema { schema_type: "JSON".into(), schema: text.into(), references: vec![] };
    cache.insert(SchemaId(1), Ok(json(V1)));
    cache.insert(SchemaId(2), Ok(json(V2)));
    cache.insert(SchemaId(3), Ok(json(r#"{"type":"object","properties":{"id":{"type":"string"}}}"#)));
    cache.insert(SchemaId(4), Ok(json(r#"{"type":"string","format":"uuid"}"#)));
    cache.insert(SchemaId(6), Ok(json(r#"{"type":"array","items":{"type":"integer"}}"#)));
    JsonSchemaColumns::new(Arc::new(JsonSchemaValues { schemas: Arc::new(cache) }))
}

#[test]
fn framed_json_decodes_by_its_schema_keeps_its_bytes_and_an_unheld_version_rolls() {
    let mut c = columns();
    let first = frame(SchemaId(2), br#"{"id":7,"n":"x"}"#);
    assert!(c.push(0, Some(&first), true));
    assert!(c.push(1, Some(&frame(SchemaId(1), br#"{"id":8}"#)), true), "v2 holds v1");
    assert!(c.push(2, Some(b"{\"id\":9}"), true), "not framed: a misfit");
    assert!(c.push(3, Some(&frame(SchemaId(1), br#"{"id":"nine"}"#)), true), "does not fit: a misfit");
    assert!(c.push(4, Some(&frame(SchemaId(5), br#"{"id":1}"#)), true), "not fetched: a misfit");
    assert!(!c.push(5, Some(&frame(SchemaId(3), br#"{"id":"a"}"#)), true), "an unheld schema rolls");
    let [value, raw, error] = c.take(&[0, 1, 2, 3, 4]).unwrap();
    let ids = value.as_struct().column(0).as_primitive::<Int64Type>();
    assert_eq!((ids.value(0), ids.value(1)), (7, 8));
    assert_eq!(raw.as_binary::<i32>().value(0), first.as_slice(), "the header and all");
    let error = error.as_string::<i32>();
    assert!(error.value(2).contains("magic byte"), "{}", error.value(2));
    assert!(error.value(3).contains("value.id"), "{}", error.value(3));
    assert!(error.value(4).contains("schema 5 was not fetched"), "{}", error.value(4));
    assert_eq!(c.stats().misfits, 3);
    assert_eq!(c.stats().schema_ids.iter().copied().collect::<Vec<_>>(), vec![1, 2]);
}

#[test]
fn a_newer_version_adding_a_property_widens_the_file_and_its_rows_are_decoded_again() {
    let mut c = columns();
    assert!(c.push(0, Some(&frame(SchemaId(1), br#"{"id":1}"#)), true));
    let taken = c.take(&[0]).unwrap();
    assert!(!c.widened());
    assert!(c.push(1, Some(&frame(SchemaId(2), br#"{"id":2,"n":"x"}"#)), true), "v2 holds v1: no roll");
    assert!(c.widened(), "the batch taken under v1 is to be re-written");
    let [rewritten, raw, _] = c.rewrite(taken).unwrap();
    let [now, _, _] = c.take(&[1]).unwrap();
    assert_eq!(rewritten.data_type(), now.data_type(), "one schema for the whole file");
    let rewritten = rewritten.as_struct();
    assert_eq!(rewritten.column(0).as_primitive::<Int64Type>().value(0), 1);
    assert!(rewritten.column_by_name("n").unwrap().is_null(0), "v1's row: the added property is null");
    assert_eq!(now.as_struct().column_by_name("n").unwrap().as_string::<i32>().value(0), "x");
    assert_eq!(raw.as_binary::<i32>().value(0), frame(SchemaId(1), br#"{"id":1}"#).as_slice());
    assert!(!c.widened());
    assert!(c.push(2, Some(&frame(SchemaId(1), br#"{"id":3}"#)), true), "v2 still holds v1");
}

/// A value with a property its schema does not declare (JSON Schema allows it) may hold it as another
/// type than a newer version declares: once one has, the file rolls at the newer version instead.
#[test]
fn a_file_holding_an_undeclared_property_rolls_at_a_newer_version_rather_than_widen() {
    let mut c = columns();
    assert!(c.push(0, Some(&frame(SchemaId(1), br#"{"id":1,"n":5}"#)), true), "n is not v1's: ignored");
    assert!(!c.push(1, Some(&frame(SchemaId(2), br#"{"id":2,"n":"x"}"#)), true), "v2 types n otherwise");
    assert!(!c.widened());
}

#[test]
fn a_schema_not_of_objects_types_each_whole_value_as_the_field_value() {
    let mut c = columns();
    let uuid = "0b0c6f3e-6f6c-4a3e-9b1a-2f1d3c4b5a69";
    assert!(c.push(0, Some(&frame(SchemaId(4), format!("{uuid:?}").as_bytes())), true));
    assert!(c.push(1, Some(&frame(SchemaId(4), b"\"not a uuid\"")), true), "does not fit: a misfit");
    assert!(c.push(2, Some(&frame(SchemaId(4), br#"{"value":"0b0c6f3e-6f6c-4a3e-9b1a-2f1d3c4b5a69"}"#)), true));
    assert!(c.push(3, Some(&frame(SchemaId(4), format!("{uuid:?}}} {{\"value\":{uuid:?}").as_bytes())), true));
    assert!(!c.push(4, Some(&frame(SchemaId(1), br#"{"id":1}"#)), true), "a schema of objects rolls");
    let [value, _, error] = c.take(&[0, 1, 2, 3]).unwrap();
    let value = value.as_struct();
    assert_eq!(value.fields().iter().map(|f| f.name().as_str()).collect::<Vec<_>>(), ["value"]);
    assert_eq!(value.column(0).as_string::<i32>().value(0), uuid);
    assert_eq!((value.null_count(), c.stats().misfits), (3, 3));
    let error = error.as_string::<i32>();
    assert!(error.value(1).contains("got \"not a uuid\""), "{}", error.value(1));
    assert!(error.value(2).contains("got {"), "an object is not the string: {}", error.value(2));
    assert!(error.value(3).contains("not JSON"), "no second value slips in: {}", error.value(3));

    let mut arrays = columns();
    assert!(arrays.push(0, Some(&frame(SchemaId(6), b"[1, 2, 3]")), true));
    let [value, _, _] = arrays.take(&[0]).unwrap();
    let list = value.as_struct().column(0).as_list::<i32>().value(0);
    assert_eq!(list.as_primitive::<Int64Type>().values(), &[1, 2, 3]);
}

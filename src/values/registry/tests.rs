use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::Array;

use super::*;
use crate::registry::{RegisteredSchema, RegistryError, SchemaCache};
use crate::values::wire::{frame, SchemaId};

const AVRO: u32 = 1;
const PROTOBUF: u32 = 2;
const JSON: u32 = 3;
const MISSING: u32 = 5;

/// Columns whose schemas are 1 (Avro), 2 (Protobuf), 3 (JSON Schema), each of one `id` field, and 5
/// (missing), in a real cache.
fn columns() -> RegistryColumns {
    let cache = SchemaCache::default();
    let registered = |schema_type: &str, schema: &str| {
        Ok(RegisteredSchema { schema_type: schema_type.into(), schema: schema.into(), references: vec![] })
    };
    cache.insert(
        SchemaId(AVRO),
        registered("AVRO", r#"{"type":"record","name":"R","fields":[{"name":"id","type":"long"}]}"#),
    );
    cache.insert(SchemaId(PROTOBUF), registered("PROTOBUF", r#"syntax = "proto3"; message M { int64 id = 1; }"#));
    let json = r#"{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}"#;
    cache.insert(SchemaId(JSON), registered("JSON", json));
    let missing = RegistryError::NotFound { url: "http://r".into(), id: SchemaId(MISSING) };
    cache.insert(SchemaId(MISSING), Err(missing));
    RegistryColumns::new(Arc::new(RegistryValues::new(Arc::new(cache), false)))
}

/// A value of `id` 7 in the format of schema `id`.
fn value(id: u32) -> Vec<u8> {
    match id {
        AVRO => frame(SchemaId(id), &[14]),
        PROTOBUF => frame(SchemaId(id), &[0, 0x08, 7]),
        _ => frame(SchemaId(id), br#"{"id":7}"#),
    }
}

#[test]
fn each_file_takes_the_type_of_its_first_typed_value_and_the_values_before_it() {
    for ty in [AVRO, PROTOBUF, JSON] {
        let mut c = columns();
        assert!(c.push(0, None, true), "a tombstone waits");
        assert!(c.push(1, Some(b"not framed"), true), "so does a misfit");
        assert!(c.push(2, Some(&value(MISSING)), true));
        assert!(c.fields().is_none(), "no type yet");
        assert!(c.push(3, Some(&value(ty)), true));
        let [typed, raw, error] = c.take(&[0, 1, 2, 3]).unwrap();
        let id = typed.as_struct().column_by_name("id").unwrap().as_primitive::<Int64Type>();
        assert_eq!((typed.len(), id.value(3), typed.null_count()), (4, 7, 3), "schema {ty}");
        assert_eq!(error.null_count(), 2, "schema {ty}: the tombstone and the value fit");
        assert!(raw.as_binary::<i32>().value(1) == b"not framed");
        assert_eq!(c.stats().misfits, 2, "schema {ty}");
        assert_eq!(c.stats().schema_ids.iter().copied().collect::<Vec<_>>(), vec![ty]);
    }
}

#[test]
fn a_value_of_another_type_starts_the_next_file_or_is_a_misfit_of_a_rewritten_one() {
    let mut c = columns();
    assert!(c.push(0, Some(&value(PROTOBUF)), true));
    for other in [AVRO, JSON] {
        assert!(!c.push(1, Some(&value(other)), true), "schema {other} rolls the file");
    }
    assert!(c.push(1, Some(&value(PROTOBUF)), true));
    assert!(c.push(2, Some(&value(AVRO)), false), "a file that cannot roll keeps it");
    let [_, _, error] = c.take(&[0, 1, 2]).unwrap();
    let error = error.as_string::<i32>();
    assert!(error.value(2).contains("its type is AVRO, not PROTOBUF"), "{:?}", error.value(2));
    assert_eq!(c.stats().misfits, 1);
}

/// What `refuses` says of keys before their record's value is pushed: only a value with a schema in a
/// file without one (one of another type is a misfit: keys of two types taking turns must not roll a
/// file at every turn).
#[test]
fn a_first_schema_after_a_file_without_one_is_refused_without_pushing() {
    let mut c = columns();
    assert!(!c.refuses(Some(&value(AVRO))), "the first value chooses");
    assert!(c.push(0, Some(&value(AVRO)), true));
    assert!(!c.refuses(Some(&value(AVRO))) && !c.refuses(None) && !c.refuses(Some(b"x")));
    assert!(!c.refuses(Some(&value(PROTOBUF))) && !c.refuses(Some(&value(JSON))));
    let mut schemaless = columns();
    assert!(schemaless.push(0, None, true));
    schemaless.take(&[0]).unwrap();
    assert!(schemaless.refuses(Some(&value(JSON))) && !schemaless.refuses(Some(&value(MISSING))));
}

/// A batch taken before any value had a usable schema: the file has none, as the formats' own files.
#[test]
fn a_file_whose_first_batch_has_no_typed_value_has_no_schema_and_any_type_rolls_it() {
    let mut c = columns();
    assert!(c.push(0, Some(&value(MISSING)), true));
    let [typed, _, error] = c.take(&[0]).unwrap();
    assert_eq!((typed.null_count(), error.null_count()), (1, 0));
    assert!(c.fields().is_some(), "a placeholder schema");
    for ty in [AVRO, PROTOBUF, JSON] {
        assert!(!c.push(1, Some(&value(ty)), true), "schema {ty} starts the next file");
    }
    assert!(c.push(1, None, true), "a tombstone does not");
}

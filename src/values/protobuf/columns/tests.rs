use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::Array;

use super::*;
use crate::registry::{RegisteredSchema, RegistryError, SchemaCache};
use crate::values::protobuf::indexes::header;
use crate::values::protobuf::tests::encode;
use crate::values::wire::frame;

const V1: &str = r#"syntax = "proto3"; message M { int64 id = 1; Inner inner = 2; } message Inner { string a = 1; }"#;
const V2: &str = r#"syntax = "proto3"; message M { int64 id = 1; Inner inner = 2; string added = 3; } message Inner { string a = 1; }"#;
const CHANGED: &str = r#"syntax = "proto3"; message M { string id = 1; }"#;

/// Columns whose schemas are 1 (V1), 2 (V2), 3 (CHANGED), 4 (Avro), 5 (missing) and 6 (V1 again), in a
/// real cache.
fn columns() -> ProtobufColumns {
    let cache = SchemaCache::default();
    let protobuf =
        |text: &str| RegisteredSchema { schema_type: "PROTOBUF".into(), schema: text.into(), references: vec![] };
    cache.insert(SchemaId(1), Ok(protobuf(V1)));
    cache.insert(SchemaId(2), Ok(protobuf(V2)));
    cache.insert(SchemaId(3), Ok(protobuf(CHANGED)));
    cache.insert(SchemaId(6), Ok(protobuf(V1)));
    let avro = r#"{"type":"record","name":"R","fields":[]}"#;
    cache.insert(
        SchemaId(4),
        Ok(RegisteredSchema { schema_type: "AVRO".into(), schema: avro.into(), references: vec![] }),
    );
    cache.insert(SchemaId(5), Err(RegistryError::NotFound { url: "http://r".into(), id: SchemaId(5) }));
    ProtobufColumns::new(Arc::new(ProtobufValues { schemas: Arc::new(cache), keep_raw: false }))
}

/// A wire-format value of message `M` (indexes `[0]`) of schema `id`.
fn value(id: u32, text: &str, fields: &str) -> Vec<u8> {
    let mut body = header(&[0]);
    body.extend(encode(text, "M", fields));
    frame(SchemaId(id), &body)
}

#[test]
fn values_decode_by_their_message_misfits_keep_their_bytes_and_say_why() {
    let mut c = columns();
    let good = value(1, V1, r#"id: 7 inner { a: "x" }"#);
    let cases: Vec<Option<Vec<u8>>> = vec![
        Some(good.clone()),
        None,
        Some(b"{\"id\":1}".to_vec()),
        Some(value(5, V1, "id: 1")),
        Some(value(4, V1, "id: 1")),
        Some(frame(SchemaId(1), &[0, 0x12, 9])),
        Some(frame(SchemaId(1), &[2, 6, 0x08, 1])),
    ];
    for (i, v) in cases.iter().enumerate() {
        assert!(c.push(i as i64, v.as_deref(), true));
    }
    let [value_col, raw, error] = c.take(&[]).unwrap();
    let typed = value_col.as_struct();
    assert_eq!(typed.column(0).as_primitive::<Int64Type>().value(0), 7);
    assert_eq!(typed.null_count(), 6, "a tombstone and five misfits are null");
    let raw = raw.as_binary::<i32>();
    assert!(raw.is_null(0), "a value its columns give back keeps no bytes");
    assert!(raw.is_null(1), "a tombstone has no bytes");
    let error = error.as_string::<i32>();
    let reasons: Vec<&str> = (2..7).map(|i| error.value(i)).collect();
    assert!(reasons[0].contains("not the Schema Registry's magic byte"), "{reasons:?}");
    assert!(reasons[1].contains("schema 5: the Schema Registry at http://r has no schema 5"), "{reasons:?}");
    assert!(reasons[2].contains("its type is AVRO"), "{reasons:?}");
    assert!(reasons[3].contains("does not decode by schema 1: inner: ends after"), "{reasons:?}");
    assert!(reasons[4].contains("no message at index [3]"), "{reasons:?}");
    assert_eq!(c.stats().misfits, 5);
    assert_eq!(c.stats().schema_ids.iter().copied().collect::<Vec<_>>(), vec![1]);
    let Some(FooterSchema::Protobuf { id: 1, message, indexes, descriptors }) = &c.stats().value_schema else {
        panic!("the footer's schema: {:?}", c.stats().value_schema)
    };
    assert_eq!((message.as_str(), indexes.as_slice()), ("M", &[0][..]));
    let footer = crate::values::protobuf::schema::footer_message(descriptors, message).unwrap();
    assert_eq!(&footer, c.schema.as_ref().map(|s| &s.message).unwrap(), "the footer's message is the file's");
}

/// A value keeps its bytes when its columns would not give them back (an unknown field, another
/// field order, another schema ID of the same message), or with `--keep-raw-value`.
#[test]
fn values_keep_their_bytes_only_where_their_columns_would_not_give_them_back() {
    let same = value(1, V1, r#"id: 7 inner { a: "x" }"#);
    let mut unknown = same.clone();
    unknown.extend([0xf8, 0x07, 1]);
    let mut reordered = frame(SchemaId(1), &[0]);
    reordered.extend(encode(V1, "M", r#"inner { a: "x" }"#));
    reordered.extend(encode(V1, "M", "id: 7"));
    let mut other_id = same.clone();
    other_id[4] = 6;
    let values = [&same, &unknown, &reordered, &other_id];
    let kept = |keep_raw: bool| {
        let mut c = columns();
        c.values = Arc::new(ProtobufValues { schemas: c.values.schemas.clone(), keep_raw });
        for (i, v) in values.iter().enumerate() {
            assert!(c.push(i as i64, Some(v), true));
        }
        let [_, raw, error] = c.take(&[]).unwrap();
        assert_eq!(error.null_count(), 4, "every value fits");
        let raw = raw.as_binary::<i32>();
        (0..4).map(|i| raw.is_valid(i).then(|| raw.value(i).to_vec())).collect::<Vec<_>>()
    };
    let want = |first: bool| {
        [first.then(|| same.clone()), Some(unknown.clone()), Some(reordered.clone()), Some(other_id.clone())]
    };
    assert_eq!(kept(false), want(false));
    assert_eq!(kept(true), want(true), "--keep-raw-value keeps every value's");
}

/// A value is decoded as it is read: one found bad after some of its fields were appended (`id`, then
/// `inner.a` not UTF-8) is cut back out of the columns, and the rows after it are whole.
#[test]
fn a_value_found_bad_part_way_leaves_no_partial_row() {
    let mut c = columns();
    let bad = frame(SchemaId(1), &[0, 0x08, 1, 0x12, 3, 0x0a, 1, 0xff]);
    for (i, v) in [value(1, V1, r#"id: 7 inner { a: "x" }"#), bad, value(1, V1, "id: 8")].iter().enumerate() {
        assert!(c.push(i as i64, Some(v), true));
    }
    let [value_col, _, error] = c.take(&[]).unwrap();
    let typed = value_col.as_struct();
    typed.to_data().validate_full().unwrap();
    let ids = typed.column(0).as_primitive::<Int64Type>();
    assert_eq!((typed.len(), ids.value(0), ids.value(2)), (3, 7, 8));
    assert!(typed.is_null(1));
    let inner = typed.column(1).as_struct();
    assert_eq!(inner.column(0).as_string::<i32>().value(0), "x");
    let why = error.as_string::<i32>().value(1);
    assert!(why.contains("inner: a: a string that is not UTF-8"), "{why}");
}

#[test]
fn a_newer_version_widens_the_file_an_older_one_is_held_and_a_changed_one_rolls() {
    let mut c = columns();
    assert!(c.push(0, Some(&value(1, V1, "id: 1")), true));
    let taken = c.take(&[]).unwrap();
    assert!(!c.widened());
    assert!(c.push(1, Some(&value(2, V2, r#"id: 2 added: "new""#)), true), "v2 holds v1: the file widens");
    assert!(c.widened(), "the batch taken under v1 is to be re-written");
    let [rewritten, _, _] = c.rewrite(taken).unwrap();
    let [now, _, _] = c.take(&[]).unwrap();
    assert_eq!(rewritten.data_type(), now.data_type(), "one schema for the whole file");
    assert_eq!(rewritten.as_struct().column(2).as_string::<i32>().value(0), "", "v1's row: the default");
    assert_eq!(now.as_struct().column(2).as_string::<i32>().value(0), "new");
    assert!(!c.widened());
    assert!(c.push(2, Some(&value(1, V1, "id: 3")), true), "v2 holds v1's values");
    assert!(!c.push(3, Some(&value(3, CHANGED, r#"id: "x""#)), true), "a changed type rolls the file");
    assert!(c.push(3, Some(&value(3, CHANGED, r#"id: "x""#)), false), "unless the file cannot roll");
    let [_, _, error] = c.take(&[]).unwrap();
    assert!(error.as_string::<i32>().value(1).contains("does not hold (M.id: the type changed"));
}

/// A row whose bytes were told canonical under v1 keeps them once the file widens to v2 within its
/// batch: v2's columns would give back other bytes (v2's schema ID).
#[test]
fn a_row_told_canonical_before_a_widening_in_its_batch_keeps_its_bytes() {
    let mut c = columns();
    let (v1, v2) = (value(1, V1, "id: 1"), value(2, V2, r#"id: 2 added: "new""#));
    assert!(c.push(0, Some(&v1), true));
    assert!(!c.batch.keeps(0), "v1's row is told canonical as it is decoded");
    assert!(c.push(1, Some(&v2), true), "v2 holds v1: the file widens");
    let [_, raw, error] = c.take(&[]).unwrap();
    assert_eq!(error.null_count(), 2, "both fit");
    let raw = raw.as_binary::<i32>();
    assert_eq!(raw.value(0), v1, "v1's row keeps its bytes");
    assert!(raw.is_null(1), "v2's row is given back by its columns");
}

/// Columns whose schemas are 1 (`M { int32 a = 1; }`) and 2 (the same, and `double b = 2`).
fn a_then_a_and_b() -> ProtobufColumns {
    let cache = SchemaCache::default();
    let protobuf =
        |text: &str| RegisteredSchema { schema_type: "PROTOBUF".into(), schema: text.into(), references: vec![] };
    cache.insert(SchemaId(1), Ok(protobuf(r#"syntax = "proto3"; message M { int32 a = 1; }"#)));
    cache.insert(SchemaId(2), Ok(protobuf(r#"syntax = "proto3"; message M { int32 a = 1; double b = 2; }"#)));
    ProtobufColumns::new(Arc::new(ProtobufValues { schemas: Arc::new(cache), keep_raw: false }))
}

/// A batch's rows were checked under the file's message: a newer one that would read them otherwise
/// (a field the older lacks, which it skipped unchecked) is not widened to.
#[test]
fn a_newer_version_under_which_the_batch_would_not_decode_is_not_widened_to() {
    let mut c = a_then_a_and_b();
    // Field 2 as a varint: unknown to version 1, a wire type version 2's double does not have.
    assert!(c.push(0, Some(&frame(SchemaId(1), &[0, 0x08, 1, 0x10, 5])), true));
    let v2 = frame(SchemaId(2), &[0, 0x08, 2, 0x11, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f]);
    assert!(!c.push(1, Some(&v2), true), "the file rolls rather than mis-decode its batch");
    let [value, _, error] = c.take(&[]).unwrap();
    assert_eq!((value.len(), error.null_count()), (1, 1), "the batch decodes under version 1");
}

/// A row taken under v1 whose bytes carry a field v1 does not know but v2 does (a service passed it
/// through): re-written under v2 it shows the field's value, as it would had v2 read it first.
#[test]
fn rows_taken_before_a_widening_are_read_again_from_their_bytes() {
    let mut c = columns();
    assert!(c.push(0, Some(&value(1, V1, "id: 1")), true));
    assert!(c.push(1, Some(&value(1, V2, r#"id: 2 added: "passed through""#)), true), "v1 skips field 3");
    let taken = c.take(&[]).unwrap();
    assert_eq!(taken[2].null_count(), 2, "both fit v1");
    assert!(c.push(2, Some(&value(2, V2, r#"id: 3 added: "new""#)), true));
    let [rewritten, raw, _] = c.rewrite(taken).unwrap();
    let added = rewritten.as_struct().column(2).as_string::<i32>();
    assert_eq!((added.value(0), added.value(1)), ("", "passed through"));
    // The first row's bytes were to be given back by v1's columns; under v2's they keep them.
    assert_eq!(raw.as_binary::<i32>().value(0), value(1, V1, "id: 1"), "encoded by v1, byte for byte");
}

/// Should a taken row not decode under the newer message (checked only under its own), the taken rows
/// are widened column by column: the added field shows its default, and nothing fails.
#[test]
fn taken_rows_that_would_not_decode_under_the_newer_message_are_widened_by_column() {
    let mut c = a_then_a_and_b();
    assert!(c.push(0, Some(&frame(SchemaId(1), &[0, 0x08, 1, 0x10, 5])), true), "field 2 as a varint");
    let taken = c.take(&[]).unwrap();
    assert!(c.push(1, Some(&frame(SchemaId(2), &[0, 0x08, 2])), true), "the open batch decodes under v2");
    let [rewritten, raw, error] = c.rewrite(taken).unwrap();
    let b = rewritten.as_struct().column(1).as_primitive::<arrow_array::types::Float64Type>();
    assert_eq!((b.value(0), error.null_count(), raw.len()), (0.0, 1, 1));
}

use std::collections::HashMap;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type};
use arrow_array::Array;

use arrow_schema::DataType;

use super::*;
use crate::values::avro::parse_record;
use crate::values::wire::frame;
use crate::values::{Fetched, SchemaSource};

/// Schemas by ID, and the texts of some.
#[derive(Debug, Default)]
struct Schemas(HashMap<SchemaId, Fetched>, HashMap<SchemaId, Arc<str>>);

impl SchemaSource for Schemas {
    fn avro(&self, id: SchemaId) -> Option<Fetched> {
        self.0.get(&id).cloned()
    }

    fn protobuf(&self, _: SchemaId) -> Option<crate::values::FetchedProtobuf> {
        None
    }

    fn json_schema(&self, _: SchemaId) -> Option<Result<crate::values::ValueSchema, String>> {
        None
    }

    fn text(&self, id: SchemaId) -> Option<Arc<str>> {
        self.1.get(&id).cloned()
    }

    fn schema_type(&self, id: SchemaId) -> Option<crate::values::SchemaType> {
        self.0.get(&id).and_then(|f| f.as_ref().ok()).map(|_| crate::values::SchemaType::Avro)
    }
}

const V1: &str =
    r#"{"type":"record","name":"R","fields":[{"name":"id","type":"long"},{"name":"name","type":"string"}]}"#;
const V2: &str = r#"{"type":"record","name":"R","fields":[{"name":"id","type":"long"}]}"#;

fn columns(keep_raw: bool) -> AvroColumns {
    let mut schemas = Schemas::default();
    schemas.0.insert(SchemaId(1), Ok(parse_record(V1).unwrap()));
    schemas.0.insert(SchemaId(11), Ok(parse_record(V1).unwrap())); // the same schema, registered again
    schemas.0.insert(SchemaId(2), Ok(parse_record(V2).unwrap()));
    schemas.0.insert(SchemaId(3), Err("not found (404)".into()));
    schemas.1.insert(SchemaId(1), Arc::from(V1));
    AvroColumns::new(Arc::new(AvroValues { schemas: Arc::new(schemas), keep_raw, successors: Default::default() }))
}

/// `{"id": id, "name": name}` in schema V1's binary encoding.
fn v1(id: i64, name: &str) -> Vec<u8> {
    let mut out = vec![((id << 1) ^ (id >> 63)) as u8, (name.len() as u8) << 1];
    out.extend_from_slice(name.as_bytes());
    out
}

#[test]
fn values_of_the_files_schema_decode_and_every_other_value_is_kept_raw_with_its_reason() {
    let mut c = columns(false);
    let good = frame(SchemaId(1), &v1(7, "ann"));
    let again = frame(SchemaId(11), &v1(8, "bob"));
    let mut not_utf8 = v1(9, "ok");
    not_utf8[3] = 0xff;
    let cases: Vec<Option<Vec<u8>>> = vec![
        Some(good.clone()),
        None,
        Some(b"{\"id\":1}".to_vec()),
        Some(frame(SchemaId(3), &v1(1, "x"))),
        Some(frame(SchemaId(9), &v1(1, "x"))),
        Some(frame(SchemaId(1), &[14, 20])),
        Some(frame(SchemaId(1), &[v1(1, "x"), vec![0]].concat())),
        Some(again.clone()),
        Some(frame(SchemaId(1), &not_utf8)),
        Some(frame(SchemaId(1), &v1(10, "é"))),
    ];
    for (i, v) in cases.iter().enumerate() {
        assert!(c.push(i as i64, v.as_deref(), true));
    }
    assert!(c.fields().is_some());
    let [value, raw, error] = c.take(&[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]).unwrap();
    let value = value.as_struct();
    assert_eq!(value.len(), 10);
    let ids = value.column(0).as_primitive::<Int64Type>();
    assert_eq!((ids.value(0), ids.value(7), ids.value(9)), (7, 8, 10), "schema 11 is schema 1");
    assert_eq!(value.column(1).as_string::<i32>().value(9), "é");
    let valid: Vec<bool> = (0..10).map(|i| value.is_valid(i)).collect();
    assert_eq!(valid, [true, false, false, false, false, false, false, true, false, true]);
    let error = error.as_string::<i32>();
    let reason = |i| error.value(i).to_string();
    assert!(error.is_null(0) && error.is_null(1) && error.is_null(7));
    assert!(reason(2).contains("not the Schema Registry's magic byte 0"), "{}", reason(2));
    assert_eq!(reason(3), "value: schema 3: not found (404)");
    assert!(reason(4).contains("schema 9 was not fetched"), "{}", reason(4));
    assert!(reason(5).contains("does not decode by schema 1: name: ends after"), "{}", reason(5));
    assert!(reason(6).contains("bytes left after the record"), "{}", reason(6));
    assert!(reason(8).contains("does not decode by schema 1: name: a string that is not UTF-8"), "{}", reason(8));
    let raw = raw.as_binary::<i32>();
    assert!(raw.is_null(0) && raw.is_null(1), "good values and tombstones keep no bytes");
    assert_eq!(raw.value(5), cases[5].as_deref().unwrap(), "a misfit keeps its bytes, header and all");
    assert_eq!(c.stats().misfits, 6);
    assert_eq!(c.stats().schema_ids.iter().copied().collect::<Vec<_>>(), [1, 11]);
}

#[test]
fn a_value_of_another_schema_starts_the_next_file_or_is_kept_raw_by_a_rewrite() {
    let mut c = columns(true);
    assert!(c.push(0, Some(&frame(SchemaId(1), &v1(1, "a"))), true));
    let other = frame(SchemaId(2), &[4]);
    assert!(!c.push(1, Some(&other), true), "another schema: the file must roll");
    assert!(c.push(1, Some(&other), false), "a re-write cannot roll: kept raw");
    let [value, raw, error] = c.take(&[0, 1]).unwrap();
    assert!(value.is_valid(0) && value.is_null(1));
    assert!(error
        .as_string::<i32>()
        .value(1)
        .contains("written with schema 2, which this file's does not hold (name: the writer lacks it"));
    assert!(raw.is_valid(0), "--keep-raw-value keeps every value's bytes");
}

#[test]
fn a_first_batch_without_a_schema_gets_a_placeholder_and_the_next_schema_rolls() {
    let mut c = columns(false);
    assert!(c.fields().is_none());
    assert!(c.push(0, Some(b"plain bytes"), true));
    assert!(c.push(1, None, true));
    let [value, raw, _] = c.take(&[0, 1]).unwrap();
    let [field, _, _] = c.fields().unwrap();
    assert_eq!(field.data_type(), value.data_type(), "the placeholder's field is the column's");
    assert_eq!((value.len(), value.null_count()), (2, 2));
    assert_eq!(raw.as_binary::<i32>().value(0), b"plain bytes");
    assert!(!c.push(2, Some(&frame(SchemaId(1), &v1(1, "a"))), true), "a schema now needs a new file");
}

/// A record with no fields (here nested, and in an array) is a struct Parquet cannot hold: it gets the
/// placeholder field, and the file is written.
#[test]
fn records_without_fields_still_make_a_parquet_file() {
    let schema = r#"{"type":"record","name":"R","fields":[{"name":"id","type":"long"},
        {"name":"empty","type":{"type":"record","name":"E","fields":[]}},
        {"name":"many","type":{"type":"array","items":"E"}}]}"#;
    let mut schemas = Schemas::default();
    schemas.0.insert(SchemaId(4), Ok(parse_record(schema).unwrap()));
    let mut c = AvroColumns::new(Arc::new(AvroValues {
        schemas: Arc::new(schemas),
        keep_raw: false,
        successors: Default::default(),
    }));
    // id 3, the empty record, an array of two empty records.
    assert!(c.push(0, Some(&frame(SchemaId(4), &[6, 4, 0])), true));
    assert!(c.push(1, Some(b"not framed"), true));
    let columns = c.take(&[0, 1]).unwrap();
    let fields: Vec<Field> = c.fields().unwrap().into();
    let schema = Arc::new(arrow_schema::Schema::new(fields));
    let batch = arrow_array::RecordBatch::try_new(schema.clone(), columns.to_vec()).unwrap();
    let mut writer = parquet::arrow::ArrowWriter::try_new(Vec::new(), schema, None).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
    let value = batch.column(0).as_struct();
    assert_eq!(value.column(2).as_list::<i32>().value(0).len(), 2, "two empty records");
}

/// V1 with a field added (with a default): a compatible newer version.
const V3: &str = r#"{"type":"record","name":"R","fields":[{"name":"id","type":"long"},{"name":"name","type":"string"},
    {"name":"tier","type":"int","default":5}]}"#;

#[test]
fn compatible_versions_share_a_file_however_they_interleave() {
    let mut schemas = Schemas::default();
    schemas.0.insert(SchemaId(1), Ok(parse_record(V1).unwrap()));
    schemas.0.insert(SchemaId(3), Ok(parse_record(V3).unwrap()));
    let avro = Arc::new(AvroValues { schemas: Arc::new(schemas), keep_raw: false, successors: Default::default() });
    let old = frame(SchemaId(1), &v1(1, "a"));
    let new = frame(SchemaId(3), &[v1(2, "b"), vec![8]].concat()); // tier 4
    let mut first = AvroColumns::new(avro.clone());
    assert!(first.push(0, Some(&old), true));
    let older = first.take(&[0]).unwrap();
    assert!(first.push(1, Some(&new), true), "a newer version that holds the file's: the file takes it");
    let [field, _, _] = first.fields().unwrap();
    let [widened, _, _] = first.rewrite(older).unwrap();
    assert_eq!(widened.data_type(), field.data_type(), "the rows taken before are widened to it");
    let newer = first.take(&[1]).unwrap();
    assert_eq!(newer[0].data_type(), field.data_type());
    let kept = first.rewrite(newer.clone()).unwrap();
    assert_eq!(kept.map(|c| c.to_data()), newer.map(|c| c.to_data()), "taken under the newer: as they were");
    let mut next = AvroColumns::new(avro.clone());
    // The next file begins with an older value, yet takes the newer version that holds it.
    for (offset, value) in [&old, &new, &old, &new].into_iter().enumerate() {
        assert!(next.push(offset as i64, Some(value), true), "value {offset} shares the file");
    }
    let [value, _, error] = next.take(&[0, 1, 2, 3]).unwrap();
    assert_eq!(error.null_count(), 4, "no misfits");
    let value = value.as_struct();
    let tier: Vec<i32> = value.column_by_name("tier").unwrap().as_primitive::<Int32Type>().values().to_vec();
    assert_eq!(tier, [5, 4, 5, 4], "the older values take the default");
    assert_eq!(next.stats().schema_ids.iter().copied().collect::<Vec<_>>(), [1, 3]);
    let mut rewrite = AvroColumns::new(avro);
    assert!(rewrite.push(0, Some(&new), false));
    assert!(rewrite.push(1, Some(&old), false), "an older version in a file of the newer: no roll");
}

/// With the schema's text (for the footer), a value in Avro's canonical encoding of the file's own ID
/// keeps no bytes: its columns give them back. Any other keeps them: another ID of the same schema, an
/// older version (read by resolution), bytes in another encoding; and, once the file widens, the rows
/// taken before (encoded under their version, which gives them back).
#[test]
fn only_values_their_columns_give_back_exactly_go_without_their_bytes() {
    let mut schemas = Schemas::default();
    for (id, text) in [(1, V1), (11, V1), (3, V3)] {
        schemas.0.insert(SchemaId(id), Ok(parse_record(text).unwrap()));
        schemas.1.insert(SchemaId(id), Arc::from(text));
    }
    let avro = Arc::new(AvroValues { schemas: Arc::new(schemas), keep_raw: false, successors: Default::default() });
    let mut c = AvroColumns::new(avro.clone());
    let padded = frame(SchemaId(1), &[0x82, 0x00, 2, b'p']); // id 1 in two bytes
    let values = [frame(SchemaId(1), &v1(1, "a")), frame(SchemaId(11), &v1(2, "b")), padded];
    for (i, v) in values.iter().enumerate() {
        assert!(c.push(i as i64, Some(v), true));
    }
    let taken = c.take(&[0, 1, 2]).unwrap();
    let raw = taken[1].as_binary::<i32>();
    assert_eq!((raw.is_null(0), raw.value(1), raw.value(2)), (true, &values[1][..], &values[2][..]));
    assert_eq!(c.stats().value_schema, Some(FooterSchema::Avro { id: 1, text: Arc::from(V1) }), "the footer's schema");
    // A newer version: the file widens, and the row that kept no bytes gets them now.
    let newer = frame(SchemaId(3), &[v1(3, "c"), vec![8]].concat());
    assert!(c.push(3, Some(&newer), true));
    let [_, raw, _] = c.rewrite(taken).unwrap();
    assert_eq!(raw.as_binary::<i32>().value(0), &values[0][..], "encoded under version 1: the very bytes");
    let [_, raw, _] = c.take(&[3]).unwrap();
    assert!(raw.is_null(0), "the file's own version, canonical");
    assert_eq!(c.stats().value_schema, Some(FooterSchema::Avro { id: 3, text: Arc::from(V3) }));
    assert!(c.push(4, Some(&values[0]), true));
    let [_, raw, _] = c.take(&[4]).unwrap();
    assert_eq!(raw.as_binary::<i32>().value(0), &values[0][..], "an older version keeps its bytes");
}

/// Versions chain by holding the one before (v1 <- v3 <- v4), but the newest need not hold the first:
/// v4 adds a field with a default and drops the default of the field v3 added. A file begun by a v1
/// value takes v1 then, not v4 (which would refuse its own first value, and a file with no rows cannot
/// roll: the archiver stopped).
#[test]
fn a_new_file_takes_the_newest_version_only_if_it_holds_the_first_value() {
    const V4: &str = r#"{"type":"record","name":"R","fields":[{"name":"id","type":"long"},
        {"name":"name","type":"string"},{"name":"tier","type":"int"},{"name":"extra","type":"string","default":""}]}"#;
    let mut schemas = Schemas::default();
    for (id, text) in [(1, V1), (3, V3), (4, V4)] {
        schemas.0.insert(SchemaId(id), Ok(parse_record(text).unwrap()));
    }
    let avro = Arc::new(AvroValues { schemas: Arc::new(schemas), keep_raw: false, successors: Default::default() });
    let v1_value = frame(SchemaId(1), &v1(1, "a"));
    let v3_value = frame(SchemaId(3), &[v1(2, "b"), vec![8]].concat());
    let v4_value = frame(SchemaId(4), &[v1(3, "c"), vec![8, 2, b'x']].concat());
    let mut file = AvroColumns::new(avro.clone());
    assert!(file.push(0, Some(&v1_value), true));
    assert!(file.push(1, Some(&v3_value), true), "v3 holds v1: the file widens");
    assert!(!file.push(2, Some(&v4_value), true), "v4 holds v3, not v1: the next file");
    let mut next = AvroColumns::new(avro);
    assert!(next.push(0, Some(&v1_value), true));
    let [field, _, _] = next.fields().unwrap();
    let DataType::Struct(fields) = field.data_type() else { panic!("a struct") };
    let names: Vec<&str> = fields.iter().map(|f| f.name().as_str()).collect();
    assert_eq!(names, ["id", "name", "tier"], "v4 does not hold v1: the file is v3's, the newest that does");
    assert!(!next.push(1, Some(&v4_value), true), "and v4's value starts the next file");
}

/// An empty record's value (the schema has no fields) keeps its bytes: its placeholder column gives
/// nothing back.
#[test]
fn a_value_of_a_record_without_fields_keeps_its_bytes() {
    let empty = r#"{"type":"record","name":"E","fields":[]}"#;
    let mut schemas = Schemas::default();
    schemas.0.insert(SchemaId(5), Ok(parse_record(empty).unwrap()));
    schemas.1.insert(SchemaId(5), Arc::from(empty));
    let mut c = AvroColumns::new(Arc::new(AvroValues {
        schemas: Arc::new(schemas),
        keep_raw: false,
        successors: Default::default(),
    }));
    let value = frame(SchemaId(5), &[]);
    assert!(c.push(0, Some(&value), true));
    let [_, raw, error] = c.take(&[0]).unwrap();
    assert!(error.is_null(0));
    assert_eq!(raw.as_binary::<i32>().value(0), &value[..]);
}

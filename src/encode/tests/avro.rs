//! Avro values in Parquet files: a file that widens to a newer version, and every value given back
//! byte for byte.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::Array;

use super::sample_records;
use crate::archive::partition::{OffsetRange, TopicPartition};
use crate::archive::record::Record;
use crate::encode::spool::{Spool, SpoolOptions};
use crate::encode::{decode, parquet, Compression, FileEncoder, FileKind, FileMeta, FileSpec, Format};
use crate::values::wire::{frame, SchemaId};
use crate::values::ValueFormat;

/// Schemas by ID (their texts), for Avro values in tests.
#[derive(Debug)]
struct Schemas(std::collections::HashMap<SchemaId, &'static str>);

impl crate::values::SchemaSource for Schemas {
    fn avro(&self, id: SchemaId) -> Option<crate::values::Fetched> {
        self.0.get(&id).map(|text| crate::values::avro::parse_record(text).map_err(|e| e.to_string()))
    }

    fn protobuf(&self, _: SchemaId) -> Option<crate::values::FetchedProtobuf> {
        None
    }

    fn json_schema(&self, _: SchemaId) -> Option<Result<crate::values::ValueSchema, String>> {
        None
    }

    fn text(&self, id: SchemaId) -> Option<Arc<str>> {
        self.0.get(&id).map(|text| Arc::from(*text))
    }

    fn schema_type(&self, id: SchemaId) -> Option<crate::values::SchemaType> {
        self.0.contains_key(&id).then_some(crate::values::SchemaType::Avro)
    }
}

/// A record at `offset` with value `value` (no key, headers or timestamp).
pub(super) fn record(offset: i64, value: Vec<u8>) -> Record {
    Record { offset, value: Some(value), ..sample_records()[1].clone() }
}

fn zigzag(n: i64) -> u8 {
    ((n << 1) ^ (n >> 63)) as u8
}

/// `records` (one file: none refused) as a Parquet file of Avro values, spooled to disk beyond
/// `threshold` bytes.
fn avro_file(schemas: &[(u32, &'static str)], records: &[Record], threshold: u64) -> bytes::Bytes {
    encode_file(&avro(schemas, false), &ValueFormat::Raw, records, threshold)
}

/// Avro values or keys of `schemas` (keeping every value's bytes with `keep_raw`).
fn avro(schemas: &[(u32, &'static str)], keep_raw: bool) -> ValueFormat {
    let schemas = schemas.iter().map(|(id, text)| (SchemaId(*id), *text)).collect();
    let schemas = Arc::new(Schemas(schemas));
    ValueFormat::Avro(Arc::new(crate::values::AvroValues { schemas, keep_raw, successors: Default::default() }))
}

/// `records` (one file: none refused) as a Parquet file of `values` and `keys`, spooled to disk beyond
/// `threshold` bytes.
pub(super) fn encode_file(
    values: &ValueFormat,
    keys: &ValueFormat,
    records: &[Record],
    threshold: u64,
) -> bytes::Bytes {
    let spec = FileSpec::new(Format::Parquet, Compression::Zstd).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let spool = Spool::new(SpoolOptions { memory_threshold: threshold, dir: dir.path().into(), usage: Arc::default() });
    let mut enc = FileEncoder::with_keys(spec, values, keys, spool).unwrap();
    for r in records {
        assert!(enc.append(r, true).unwrap(), "offset {}: one file", r.offset);
    }
    let meta = FileMeta {
        tp: TopicPartition::new("t", 1).unwrap(),
        range: OffsetRange::new(records[0].offset, records.last().unwrap().offset).unwrap(),
        records: records.len() as u64,
    };
    enc.finish(&meta).unwrap().spool.read_all().unwrap()
}

/// Which rows of a file keep their bytes in `value_raw`.
pub(super) fn kept(data: &bytes::Bytes) -> Vec<bool> {
    let reader = ::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(data.clone()).unwrap();
    let batches = reader.build().unwrap().map(Result::unwrap);
    batches
        .flat_map(|b| {
            b.column_by_name("value_raw").unwrap().as_binary::<i32>().iter().map(|r| r.is_some()).collect::<Vec<_>>()
        })
        .collect()
}

/// Rows of a batch already written, then a value of a newer version: the file takes the newer version
/// and re-writes what it holds (the older rows with the added field's default); in memory and spooled
/// to disk alike.
#[test]
fn a_parquet_file_takes_a_newer_avro_version_whole_after_rows_were_written() {
    let v1 = r#"{"type":"record","name":"R","fields":[{"name":"id","type":"int"}]}"#;
    let v2 = r#"{"type":"record","name":"R","fields":[{"name":"id","type":"long"},
        {"name":"tier","type":"long","default":7}]}"#;
    let old_rows = parquet::BATCH_ROWS as i64 + 10; // a batch written before the newer version comes
    let mut records: Vec<Record> = (0..old_rows).map(|i| record(i, frame(SchemaId(1), &[zigzag(i % 60)]))).collect();
    records.push(record(old_rows, frame(SchemaId(2), &[zigzag(1), zigzag(3)])));
    records.push(record(old_rows + 1, frame(SchemaId(1), &[zigzag(2)])));
    for threshold in [1 << 30, 0] {
        let data = avro_file(&[(1, v1), (2, v2)], &records, threshold);
        let reader = ::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(data.clone()).unwrap();
        let (mut ids, mut tiers) = (Vec::new(), Vec::new());
        for batch in reader.build().unwrap() {
            let batch = batch.unwrap();
            let value = batch.column_by_name("value").unwrap().as_struct();
            ids.extend(value.column_by_name("id").unwrap().as_primitive::<Int64Type>().values().iter().copied());
            tiers.extend(value.column_by_name("tier").unwrap().as_primitive::<Int64Type>().values().iter().copied());
        }
        let want_ids: Vec<i64> = (0..old_rows).map(|i| i % 60).chain([1, 2]).collect();
        assert_eq!(ids, want_ids, "threshold {threshold}");
        let want_tiers: Vec<i64> = (0..old_rows).map(|_| 7).chain([3, 7]).collect();
        assert_eq!(tiers, want_tiers, "threshold {threshold}: the older rows take the default");
        // The bytes come back: v2's row from its columns, v1's kept (v2's columns would not give them).
        let want_raw: Vec<bool> = (0..old_rows).map(|_| true).chain([false, true]).collect();
        assert_eq!(kept(&data), want_raw, "threshold {threshold}");
        let decoded = decode(FileKind::Parquet, data).unwrap();
        assert_eq!((decoded.records, decoded.reencoded), (records.clone(), 0), "threshold {threshold}: byte for byte");
    }
}

/// A newer version whose columns are the same (an enum that gained a symbol, at the front) is a new
/// schema all the same: the rows written under the older one keep their bytes, which its ID and its
/// symbols' order give back, not the newer one's.
#[test]
fn a_newer_version_with_the_same_columns_still_gives_the_older_rows_back() {
    let v1 =
        r#"{"type":"record","name":"R","fields":[{"name":"e","type":{"type":"enum","name":"E","symbols":["A","B"]}}]}"#;
    let v2 = r#"{"type":"record","name":"R","fields":[{"name":"e","type":{"type":"enum","name":"E","symbols":["C","A","B"]}}]}"#;
    let old_rows = parquet::BATCH_ROWS as i64 + 10;
    let mut records: Vec<Record> = (0..old_rows).map(|i| record(i, frame(SchemaId(1), &[zigzag(i % 2)]))).collect();
    records.push(record(old_rows, frame(SchemaId(2), &[zigzag(0)])));
    let data = avro_file(&[(1, v1), (2, v2)], &records, 1 << 30);
    assert_eq!(kept(&data), (0..=old_rows).map(|i| i < old_rows).collect::<Vec<_>>());
    assert_eq!(decode(FileKind::Parquet, data).unwrap().records, records, "byte for byte");
}

/// Values of a record without fields (only the header) come back as they were, not as tombstones.
#[test]
fn values_of_a_record_without_fields_come_back() {
    let empty = r#"{"type":"record","name":"E","fields":[]}"#;
    let records: Vec<Record> = (0..3).map(|i| record(i, frame(SchemaId(9), &[]))).collect();
    let data = avro_file(&[(9, empty)], &records, 1 << 30);
    assert_eq!(decode(FileKind::Parquet, data).unwrap().records, records);
}

/// A file whose first batch had no typed key (keyless records) has no key schema: the first key with
/// one starts the next file rather than be a misfit for the rest of this one; a re-written file, which
/// cannot roll, keeps it as a key misfit.
#[test]
fn a_typed_key_after_a_first_batch_without_one_starts_the_next_file() {
    let k1 = r#"{"type":"record","name":"K","fields":[{"name":"id","type":"int"}]}"#;
    let spec = FileSpec::new(Format::Parquet, Compression::Zstd).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let spool = Spool::new(SpoolOptions { memory_threshold: 1 << 30, dir: dir.path().into(), usage: Arc::default() });
    let mut enc = FileEncoder::with_keys(spec, &ValueFormat::Raw, &avro(&[(1, k1)], true), spool).unwrap();
    let keyless = parquet::BATCH_ROWS as i64;
    for i in 0..keyless {
        assert!(enc.append(&Record { key: None, ..record(i, vec![1]) }, true).unwrap());
    }
    let typed = Record { key: Some(frame(SchemaId(1), &[zigzag(3)])), ..record(keyless, vec![1]) };
    assert!(!enc.append(&typed, true).unwrap(), "the first typed key rolls the file");
    assert!(enc.append(&Record { key: None, ..record(keyless, vec![1]) }, true).unwrap(), "a keyless one does not");
    assert!(enc.append(&typed, false).unwrap(), "taken by a file that cannot roll");
}

/// Typed keys (`--key-format avro`) beside typed values: the key is a struct of the key schema's
/// fields, widened like values when a newer version comes after rows were written; a key that does not
/// fit is a key misfit (its reason in `key_error`), never a roll; every key keeps its bytes in `key_raw`,
/// so the records come back byte for byte; the footer names the keys' schemas.
#[test]
fn typed_keys_are_a_struct_widen_like_values_and_come_back_byte_for_byte() {
    let value = r#"{"type":"record","name":"V","fields":[{"name":"n","type":"int"}]}"#;
    let k1 = r#"{"type":"record","name":"K","fields":[{"name":"id","type":"int"}]}"#;
    let k2 = r#"{"type":"record","name":"K","fields":[{"name":"id","type":"int"},{"name":"region","type":"int","default":4}]}"#;
    let old_rows = parquet::BATCH_ROWS as i64 + 10;
    let keyed = |i: i64, key: Option<Vec<u8>>| Record { key, ..record(i, frame(SchemaId(9), &[zigzag(i % 50)])) };
    let mut records: Vec<Record> =
        (0..old_rows).map(|i| keyed(i, Some(frame(SchemaId(1), &[zigzag(i % 60)])))).collect();
    records.push(keyed(old_rows, Some(frame(SchemaId(2), &[zigzag(5), zigzag(1)]))));
    records.push(keyed(old_rows + 1, Some(b"plain text key".to_vec())));
    records.push(keyed(old_rows + 2, None));
    let schemas = [(1, k1), (2, k2), (9, value)];
    for threshold in [1 << 30, 0] {
        let data = encode_file(&avro(&schemas, false), &avro(&schemas, true), &records, threshold);
        let reader = ::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(data.clone()).unwrap();
        let footer = reader.metadata().file_metadata().key_value_metadata().cloned().unwrap_or_default();
        let kv = |key: &str| footer.iter().find(|kv| kv.key == key).and_then(|kv| kv.value.clone());
        assert_eq!(
            (kv(parquet::KEY_SCHEMA_IDS_KEY), kv(parquet::KEY_MISFITS_KEY)),
            (Some("1,2".into()), Some("1".into()))
        );
        let (mut regions, mut errors, mut raw) = (Vec::new(), Vec::new(), 0);
        for batch in reader.build().unwrap() {
            let batch = batch.unwrap();
            let key = batch.column_by_name("key").unwrap().as_struct();
            let region =
                key.column_by_name("region").expect("widened to k2").as_primitive::<arrow_array::types::Int32Type>();
            regions.extend((0..key.len()).map(|i| (!key.is_null(i)).then(|| region.value(i))));
            errors.extend(
                batch
                    .column_by_name(parquet::KEY_ERROR)
                    .unwrap()
                    .as_string::<i32>()
                    .iter()
                    .map(|e| e.map(str::to_string)),
            );
            raw += batch.column_by_name(parquet::KEY_RAW).unwrap().as_binary::<i32>().iter().flatten().count();
        }
        let want: Vec<Option<i32>> = (0..old_rows).map(|_| Some(4)).chain([Some(1), None, None]).collect();
        assert_eq!(regions, want, "threshold {threshold}: the older keys take the default");
        assert!(
            errors[old_rows as usize + 1].as_deref().is_some_and(|e| e.starts_with("key: ")),
            "{:?}",
            errors.last()
        );
        assert_eq!(raw, records.len() - 1, "every key keeps its bytes");
        let decoded = decode(FileKind::Parquet, data).unwrap();
        assert_eq!(decoded.records, records, "threshold {threshold}: byte for byte");
    }
}

/// A schema that is not a record (a key or value of `"long"` or `"string"`, as Confluent's serializers
/// register for plain keys) is a struct of one field, `value`, and its values come back from it.
#[test]
fn values_of_a_schema_that_is_not_a_record_are_a_struct_of_one_field() {
    let records: Vec<Record> = (0..20).map(|i| record(i, frame(SchemaId(1), &[zigzag(i - 10)]))).collect();
    let data = avro_file(&[(1, r#""long""#)], &records, 1 << 30);
    let reader = ::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(data.clone()).unwrap();
    let batch = reader.build().unwrap().next().unwrap().unwrap();
    let value = batch.column_by_name("value").unwrap().as_struct();
    let column = value.column_by_name(crate::values::avro::NOT_A_RECORD_FIELD).unwrap();
    assert_eq!(column.as_primitive::<Int64Type>().values().to_vec(), (-10..10).collect::<Vec<i64>>());
    assert_eq!(kept(&data), vec![false; 20], "given back from the column");
    assert_eq!(decode(FileKind::Parquet, data).unwrap().records, records, "byte for byte");
}

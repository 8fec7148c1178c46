//! The encoders and decoders, round trip.

use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::archive::record::{Header, TimestampKind};
use crate::encode::spool::SpoolOptions;

fn sample_records() -> Vec<Record> {
    vec![
        Record {
            offset: 5,
            timestamp_ms: Some(1_700_000_000_123),
            timestamp_kind: TimestampKind::CreateTime,
            key: Some(b"user-1".to_vec()),
            value: Some(br#"{"a":1}"#.to_vec()),
            headers: vec![
                Header { key: "trace".into(), value: Some(b"abc".to_vec()) },
                Header { key: "bin".into(), value: Some(vec![0, 255, 128, 10]) },
                Header { key: "null".into(), value: None },
                Header { key: "trace".into(), value: Some(b"dup key".to_vec()) },
                Header { key: b"\xff\xfe-not-utf8".to_vec(), value: Some(b"v".to_vec()) },
                Header { key: b"nul\x00inside".to_vec(), value: None },
            ],
        },
        Record {
            offset: 6,
            timestamp_ms: None,
            timestamp_kind: TimestampKind::NotAvailable,
            key: None,
            value: None,
            headers: vec![],
        },
        Record {
            offset: 9,
            timestamp_ms: Some(0),
            timestamp_kind: TimestampKind::LogAppendTime,
            key: Some(vec![]),
            value: Some((0..=255u8).collect()),
            headers: vec![Header { key: "".into(), value: Some(vec![]) }],
        },
    ]
}

#[test]
fn a_parquet_file_hands_on_its_footer_in_memory_and_from_the_spool_directory() {
    let records = sample_records();
    for threshold in [1 << 30, 0] {
        let dir = tempfile::tempdir().unwrap();
        let config = SpoolOptions { memory_threshold: threshold, dir: dir.path().into(), usage: Arc::default() };
        for (format, compression) in [(Format::Parquet, Compression::Zstd), (Format::Jsonl, Compression::None)] {
            let spec = FileSpec::new(format, compression).unwrap();
            let mut enc = FileEncoder::new(spec, &ValueFormat::Raw, Spool::new(config.clone())).unwrap();
            for r in &records {
                assert!(enc.append(r, true).unwrap());
            }
            let range = OffsetRange::new(records[0].offset, records.last().unwrap().offset).unwrap();
            let meta = FileMeta { tp: TopicPartition::new("t", 1).unwrap(), range, records: records.len() as u64 };
            let finished = enc.finish(&meta).unwrap();
            let Some(footer) = finished.footer else {
                assert_eq!(format, Format::Jsonl, "only JSON lines have no footer");
                continue;
            };
            assert_eq!(footer.file_metadata().num_rows(), records.len() as i64);
            let kv = footer.file_metadata().key_value_metadata().unwrap();
            assert!(kv.iter().any(|k| k.key == "kafka.end_offset" && k.value.as_deref() == Some("9")));
            assert!(footer.row_group(0).column(0).statistics().is_some(), "column statistics for a table");
        }
    }
}

#[test]
fn offsets_values_and_header_values_are_written_without_a_dictionary_and_keys_with_one() {
    // Unique offsets and distinct values (header values too: trace IDs) gain nothing from a dictionary;
    // repeated keys and header names do.
    let records: Vec<Record> = (0..100)
        .map(|i| Record {
            offset: i,
            key: Some(vec![b'k'; 8]),
            value: Some(i.to_le_bytes().repeat(16)),
            ..sample_records()[0].clone()
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let spool = Spool::new(SpoolOptions { memory_threshold: 1 << 30, dir: dir.path().into(), usage: Arc::default() });
    let mut enc =
        FileEncoder::new(FileSpec::new(Format::Parquet, Compression::Zstd).unwrap(), &ValueFormat::Raw, spool).unwrap();
    for r in &records {
        assert!(enc.append(r, true).unwrap());
    }
    let meta =
        FileMeta { tp: TopicPartition::new("t", 1).unwrap(), range: OffsetRange::new(0, 99).unwrap(), records: 100 };
    let footer = enc.finish(&meta).unwrap().footer.expect("a Parquet footer");
    let group = footer.row_group(0);
    let dictionary = |name: &str| {
        let column = group.columns().iter().find(|c| c.column_path().string() == name).expect(name);
        column.dictionary_page_offset().is_some()
    };
    assert_eq!((dictionary("offset"), dictionary("value"), dictionary("key")), (false, false, true));
    assert_eq!((dictionary("headers.list.item.value"), dictionary("headers.list.item.key")), (false, true));
}

fn round_trip(spec: FileSpec, records: &[Record], threshold: u64) -> Vec<Record> {
    round_trip_values(spec, &ValueFormat::Raw, records, threshold).records
}

fn round_trip_values(spec: FileSpec, values: &ValueFormat, records: &[Record], threshold: u64) -> Decoded {
    let dir = tempfile::tempdir().unwrap();
    let spool = Spool::new(SpoolOptions { memory_threshold: threshold, dir: dir.path().into(), usage: Arc::default() });
    let mut enc = FileEncoder::new(spec, values, spool).unwrap();
    for r in records {
        assert!(enc.append(r, true).unwrap());
    }
    let meta = FileMeta {
        tp: TopicPartition::new("t", 1).unwrap(),
        range: OffsetRange::new(records[0].offset, records.last().unwrap().offset).unwrap(),
        records: records.len() as u64,
    };
    let sealed = enc.finish(&meta).unwrap().spool;
    decode(spec.kind(), sealed.read_all().unwrap()).unwrap()
}

#[test]
fn an_inferred_schema_is_fixed_by_the_first_batch_and_new_fields_ask_for_a_new_file() {
    use crate::values::JsonValues;
    let values = ValueFormat::Json(Arc::new(JsonValues { declared: None, keep_raw: false }));
    let dir = tempfile::tempdir().unwrap();
    let spool = Spool::new(SpoolOptions { memory_threshold: 1 << 30, dir: dir.path().into(), usage: Arc::default() });
    let mut enc = FileEncoder::new(FileSpec::new(Format::Parquet, Compression::Zstd).unwrap(), &values, spool).unwrap();
    let record = |offset: i64, json: &str| Record {
        offset,
        value: Some(json.as_bytes().to_vec()),
        ..sample_records()[1].clone()
    };
    // The first batch: its values make the schema, a late field included; a conflicting one is kept raw.
    let mut offset = 0;
    for i in 0..parquet::BATCH_ROWS as i64 {
        let json = match i {
            5 => r#"{"a":"five"}"#.to_string(),
            7 => r#"{"a":7,"b":{"c":true}}"#.to_string(),
            _ => format!(r#"{{"a":{i}}}"#),
        };
        assert!(enc.append(&record(offset, &json), true).unwrap());
        offset += 1;
    }
    // Fixed now: a known shape is taken, a new field is refused while the file may roll.
    assert!(enc.append(&record(offset, r#"{"a":1,"b":{"c":false}}"#), true).unwrap());
    offset += 1;
    assert!(!enc.append(&record(offset, r#"{"a":1,"d":2}"#), true).unwrap());
    assert!(enc.append(&record(offset, r#"{"a":1,"d":2}"#), false).unwrap(), "taken (raw) when it may not roll");
    let meta = FileMeta {
        tp: TopicPartition::new("t", 1).unwrap(),
        range: OffsetRange::new(0, offset).unwrap(),
        records: offset as u64 + 1,
    };
    let finished = enc.finish(&meta).unwrap();
    let stats = finished.values.unwrap();
    assert_eq!(stats.misfits, 2);
    assert_eq!(
        stats.first_misfit.unwrap(),
        (5, "value.a: a string here, a number in earlier records of this file".into())
    );
    let decoded = decode(FileKind::Parquet, finished.spool.read_all().unwrap()).unwrap();
    assert_eq!((decoded.records.len() as i64, decoded.misfits), (offset + 1, 2));
    assert_eq!(decoded.records[7].value.as_deref(), Some(&br#"{"a":7,"b":{"c":true}}"#[..]));
    assert_eq!(decoded.records[5].value.as_deref(), Some(&br#"{"a":"five"}"#[..]), "a misfit's bytes");
}

#[test]
fn typed_json_lines_embed_objects_and_restore_every_value_exactly() {
    use crate::values::{JsonValues, ValueSchema};
    let schema = ValueSchema::from_avro(r#"{"type":"record","name":"V","fields":[{"name":"a","type":"long"}]}"#);
    let json = ValueFormat::Json(Arc::new(JsonValues { declared: Some(schema.unwrap()), keep_raw: false }));
    let mut records = sample_records();
    records[0].value = Some(br#"{ "a": 1, "b": "x" }"#.to_vec());
    records.push(Record { offset: 10, value: Some(b"{\n  \"a\": 2\n}".to_vec()), ..records[1].clone() });
    for compression in [Compression::None, Compression::Gzip, Compression::Zstd] {
        let spec = FileSpec::new(Format::Jsonl, compression).unwrap();
        let decoded = round_trip_values(spec, &json, &records, 1 << 20);
        assert_eq!((decoded.records, decoded.misfits, decoded.reencoded), (records.clone(), 1, 0), "{compression}");
    }
    // The lines: the object as produced; a value spanning lines compacted, its bytes kept; a misfit raw.
    let dir = tempfile::tempdir().unwrap();
    let spool = Spool::new(SpoolOptions { memory_threshold: 1 << 20, dir: dir.path().into(), usage: Arc::default() });
    let spec = FileSpec::new(Format::Jsonl, Compression::None).unwrap();
    let mut enc = FileEncoder::new(spec, &json, spool).unwrap();
    for r in &records {
        assert!(enc.append(r, true).unwrap());
    }
    let meta =
        FileMeta { tp: TopicPartition::new("t", 1).unwrap(), range: OffsetRange::new(5, 10).unwrap(), records: 4 };
    let sealed = enc.finish(&meta).unwrap().spool;
    let text = String::from_utf8(sealed.read_all().unwrap().to_vec()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].contains(r#""value":{ "a": 1, "b": "x" }"#), "{}", lines[0]);
    assert!(!lines[0].contains("value_raw"));
    let misfit: serde_json::Value = serde_json::from_str(lines[2]).unwrap();
    assert_eq!((misfit["value"].is_null(), misfit["value_raw_encoding"].as_str()), (true, Some("base64")));
    assert_eq!(misfit["value_error"], "value: not JSON (expected a value at byte 0)");
    let spanning: serde_json::Value = serde_json::from_str(lines[3]).unwrap();
    assert_eq!((spanning["value"]["a"].as_i64(), spanning["value_raw"].as_str()), (Some(2), Some("{\n  \"a\": 2\n}")));
    let letters = dead_letters(FileKind::Jsonl, sealed.data()).unwrap();
    assert_eq!(letters.iter().map(|l| l.record.clone()).collect::<Vec<_>>(), vec![records[2].clone()]);
}

#[test]
fn typed_parquet_gives_back_raw_bytes_or_reencoded_json() {
    use crate::values::{JsonValues, ValueSchema};
    let schema = ValueSchema::from_avro(
        r#"{"type":"record","name":"V","fields":[{"name":"a","type":"long"},{"name":"b","type":["null","string"]}]}"#,
    )
    .unwrap();
    let json = |keep_raw| ValueFormat::Json(Arc::new(JsonValues { declared: Some(schema.clone()), keep_raw }));
    let mut records = sample_records();
    records[0].value = Some(br#"{ "b": "x",  "a": 1 }"#.to_vec());
    let spec = FileSpec::new(Format::Parquet, Compression::Zstd).unwrap();
    // Keeping every value's bytes: exactly the records archived, the binary value a misfit.
    let kept = round_trip_values(spec, &json(true), &records, 1 << 20);
    assert_eq!((kept.records.clone(), kept.misfits, kept.reencoded), (records.clone(), 1, 0));
    // Without: the fitting value comes back as JSON written from its columns.
    let typed = round_trip_values(spec, &json(false), &records, 1 << 20);
    assert_eq!((typed.misfits, typed.reencoded), (1, 1));
    assert_eq!(typed.records[0].value.as_deref(), Some(&br#"{"a":1,"b":"x"}"#[..]));
    assert_eq!(typed.records[1..], records[1..], "the misfit and the tombstone are exact");
}

fn all_specs() -> Vec<FileSpec> {
    let mut specs = Vec::new();
    for format in [Format::Parquet, Format::Jsonl] {
        for c in [Compression::None, Compression::Zstd, Compression::Gzip, Compression::Snappy] {
            if let Ok(s) = FileSpec::new(format, c) {
                specs.push(s);
            }
        }
    }
    specs
}

#[test]
fn every_format_round_trips_binary_null_and_headers() {
    let records = sample_records();
    for spec in all_specs() {
        assert_eq!(round_trip(spec, &records, 1 << 20), records, "{spec:?}");
        assert_eq!(round_trip(spec, &records, 16), records, "{spec:?} spooled to disk");
    }
}

#[test]
fn jsonl_marks_base64_and_keeps_text_readable() {
    let spec = FileSpec::new(Format::Jsonl, Compression::None).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let spool = Spool::new(SpoolOptions { memory_threshold: 1 << 20, dir: dir.path().into(), usage: Arc::default() });
    let mut enc = FileEncoder::new(spec, &ValueFormat::Raw, spool).unwrap();
    for r in sample_records() {
        assert!(enc.append(&r, true).unwrap());
    }
    let meta =
        FileMeta { tp: TopicPartition::new("t", 1).unwrap(), range: OffsetRange::new(5, 9).unwrap(), records: 3 };
    let text = String::from_utf8(enc.finish(&meta).unwrap().spool.read_all().unwrap().to_vec()).unwrap();
    let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(first["key"], "user-1");
    assert_eq!(first["value"], r#"{"a":1}"#);
    assert!(first.get("key_encoding").is_none());
    assert_eq!(first["headers"][1]["value_encoding"], "base64");
    assert!(first["headers"][1].get("key_encoding").is_none());
    assert_eq!(first["headers"][4]["key"], "//4tbm90LXV0Zjg=", "a name that is not UTF-8, as base64");
    assert_eq!(first["headers"][4]["key_encoding"], "base64");
    assert_eq!(first["headers"][5]["key"], "nul\0inside", "NUL is valid UTF-8, kept as text");
    let third: serde_json::Value = serde_json::from_str(text.lines().nth(2).unwrap()).unwrap();
    assert_eq!(third["value_encoding"], "base64");
}

#[test]
fn jsonl_rejects_snappy() {
    assert!(FileSpec::new(Format::Jsonl, Compression::Snappy).is_err());
    assert_eq!(FileSpec::new(Format::Jsonl, Compression::Zstd).unwrap().kind(), FileKind::JsonlZst);
    assert_eq!(FileSpec::new(Format::Parquet, Compression::Gzip).unwrap().kind(), FileKind::Parquet);
}

/// A Parquet (zstd) encoder spooling under `dir`, with the sample records appended.
fn parquet_with_samples(dir: &std::path::Path) -> (FileEncoder, Vec<Record>) {
    let spec = FileSpec::new(Format::Parquet, Compression::Zstd).unwrap();
    let spool = Spool::new(SpoolOptions { memory_threshold: 1 << 20, dir: dir.into(), usage: Arc::default() });
    let mut enc = FileEncoder::new(spec, &ValueFormat::Raw, spool).unwrap();
    let records = sample_records();
    for r in &records {
        assert!(enc.append(r, true).unwrap());
    }
    (enc, records)
}

#[test]
fn parquet_footer_carries_partition_and_range() {
    let dir = tempfile::tempdir().unwrap();
    let (enc, _) = parquet_with_samples(dir.path());
    let meta =
        FileMeta { tp: TopicPartition::new("t", 1).unwrap(), range: OffsetRange::new(5, 9).unwrap(), records: 3 };
    let data = enc.finish(&meta).unwrap().spool.read_all().unwrap();
    let reader = ::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(data).unwrap();
    let pairs = reader.metadata().file_metadata().key_value_metadata().cloned().unwrap_or_default();
    let kv: std::collections::HashMap<String, String> =
        pairs.into_iter().filter_map(|kv| Some((kv.key, kv.value?))).collect();
    assert_eq!(kv.get("kafka.topic").map(String::as_str), Some("t"));
    assert_eq!(kv.get("kafka.partition").map(String::as_str), Some("1"));
    assert_eq!(kv.get("kafka.start_offset").map(String::as_str), Some("5"));
    assert_eq!(kv.get("kafka.end_offset").map(String::as_str), Some("9"));
    assert_eq!(kv.get("kafka.record_count").map(String::as_str), Some("3"));
}

/// The memory budget counts Arrow builders at their doubling bound, not at the bytes appended.
#[test]
fn parquet_counts_its_builders_at_twice_their_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let (enc, records) = parquet_with_samples(dir.path());
    let payload: u64 = records.iter().map(Record::payload_size).sum();
    assert_eq!(enc.buffered_memory(), 2 * payload);
    assert_eq!(enc.encoded_size(), payload, "the file's size is still estimated by its bytes");
}

/// Typed values' columns count as allocated, not by the values' bytes: sparse JSON (`{}` for a schema
/// of 300 optional numbers) takes ~4,000 times its bytes in columns.
#[test]
fn parquet_counts_decoded_columns_as_allocated() {
    use crate::values::{JsonValues, ValueSchema};
    let fields: Vec<String> = (0..300).map(|i| format!(r#"{{"name":"f{i}","type":["null","long"]}}"#)).collect();
    let schema = format!(r#"{{"type":"record","name":"Sparse","fields":[{}]}}"#, fields.join(","));
    let declared = Some(ValueSchema::from_avro(&schema).unwrap());
    let json = ValueFormat::Json(Arc::new(JsonValues { declared, keep_raw: false }));
    let dir = tempfile::tempdir().unwrap();
    let spool = Spool::new(SpoolOptions { memory_threshold: 1 << 30, dir: dir.path().into(), usage: Arc::default() });
    let mut enc = FileEncoder::new(FileSpec::new(Format::Parquet, Compression::Zstd).unwrap(), &json, spool).unwrap();
    let record =
        Record { offset: 0, key: None, value: Some(b"{}".to_vec()), headers: vec![], ..sample_records()[0].clone() };
    for offset in 0..100 {
        assert!(enc.append(&Record { offset, ..record.clone() }, true).unwrap());
    }
    let payload = 100 * record.payload_size();
    // Measured at the 65th row: 300 columns of at least 65 eight-byte numbers.
    assert!(enc.buffered_memory() > 2 * payload + 300 * 65 * 8, "{} for {payload} bytes", enc.buffered_memory());
}

#[test]
fn parquet_spans_many_batches() {
    let records: Vec<Record> = (0..10_000)
        .map(|i| Record {
            offset: i,
            timestamp_ms: Some(i),
            timestamp_kind: TimestampKind::CreateTime,
            key: Some(i.to_string().into_bytes()),
            value: Some(vec![(i % 251) as u8; 300]),
            headers: vec![],
        })
        .collect();
    let spec = FileSpec::new(Format::Parquet, Compression::Zstd).unwrap();
    assert_eq!(round_trip(spec, &records, 64 * 1024), records);
}

fn arb_record() -> impl Strategy<Value = Record> {
    let bytes = proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40));
    let name = prop_oneof!["[a-z]{0,5}".prop_map(String::into_bytes), proptest::collection::vec(any::<u8>(), 0..6)];
    let header = (name, proptest::option::of(proptest::collection::vec(any::<u8>(), 0..10)))
        .prop_map(|(key, value)| Header { key, value });
    (
        0i64..1000,
        proptest::option::of(0i64..4_000_000_000_000),
        bytes.clone(),
        bytes,
        proptest::collection::vec(header, 0..4),
    )
        .prop_map(|(offset, ts, key, value, headers)| Record {
            offset,
            timestamp_ms: ts,
            timestamp_kind: if ts.is_some() { TimestampKind::CreateTime } else { TimestampKind::NotAvailable },
            key,
            value,
            headers,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn arbitrary_records_round_trip(mut records in proptest::collection::vec(arb_record(), 1..30), idx in 0usize..7) {
        for (i, r) in records.iter_mut().enumerate() {
            r.offset = i as i64 * 3;
        }
        let spec = all_specs()[idx % all_specs().len()];
        prop_assert_eq!(round_trip(spec, &records, 256), records);
    }
}

/// A Parquet file whose values never gave a schema (all misfits or tombstones: nothing to infer from)
/// is still written: Parquet has no empty struct, so `value` holds one placeholder field of nulls, and
/// the misfits' bytes come back whole.
#[test]
fn a_file_whose_values_give_no_schema_is_written_with_a_placeholder() {
    let inferred = ValueFormat::Json(Arc::new(crate::values::JsonValues { declared: None, keep_raw: false }));
    let spec = FileSpec::new(Format::Parquet, Compression::Zstd).unwrap();
    let records: Vec<Record> = (0..3)
        .map(|i| Record { offset: i, value: (i != 1).then(|| b"not json".to_vec()), ..sample_records()[0].clone() })
        .collect();
    let decoded = round_trip_values(spec, &inferred, &records, 1 << 20);
    assert_eq!(decoded.misfits, 2);
    let values: Vec<Option<Vec<u8>>> = decoded.records.into_iter().map(|r| r.value).collect();
    assert_eq!(values, [Some(b"not json".to_vec()), None, Some(b"not json".to_vec())]);
}

mod avro;
mod protobuf;

#[test]
fn a_parquet_file_rolled_by_size_with_the_defaults_stays_in_memory() {
    // A file rolls when the next record would take its estimated size past --roll-bytes; whatever its
    // footer and the rows still in builders come to, a file of that size is uploaded from memory.
    use crate::config::{DEFAULT_ROLL_BYTES, DEFAULT_SPOOL_MEMORY_THRESHOLD};
    use crate::encode::roll::{Now, OpenFileStats, RollPolicy};
    let dir = tempfile::tempdir().unwrap();
    let threshold = DEFAULT_SPOOL_MEMORY_THRESHOLD.bytes();
    let spool = Spool::new(SpoolOptions { memory_threshold: threshold, dir: dir.path().into(), usage: Arc::default() });
    let mut enc =
        FileEncoder::new(FileSpec::new(Format::Parquet, Compression::Zstd).unwrap(), &ValueFormat::Raw, spool).unwrap();
    let max_age = std::time::Duration::MAX;
    let policy = RollPolicy { max_records: u64::MAX, max_bytes: DEFAULT_ROLL_BYTES.bytes(), max_age, schedule: None };
    let opened = Now { mono: std::time::Instant::now(), wall_ms: 0 };
    let mut offset = 0;
    loop {
        let value: Vec<u8> = (0..1024).map(|_| fastrand::u8(..)).collect();
        let record = Record { offset, value: Some(value), ..sample_records()[0].clone() };
        let stats = OpenFileStats { records: offset as u64, bytes: enc.encoded_size(), opened };
        if policy.before_append(&stats, record.payload_size()).is_some() {
            break;
        }
        assert!(enc.append(&record, false).unwrap());
        offset += 1;
    }
    let range = OffsetRange::new(0, offset - 1).unwrap();
    let meta = FileMeta { tp: TopicPartition::new("t", 1).unwrap(), range, records: offset as u64 };
    let sealed = enc.finish(&meta).unwrap().spool;
    assert!(sealed.len() > DEFAULT_ROLL_BYTES.bytes() - (1 << 20), "{} bytes: a file of the roll size", sealed.len());
    assert!(matches!(sealed.data(), SpoolData::Memory(_)), "{} bytes went to disk", sealed.len());
}

/// Shrinking writes the buffered rows as a row group, compressed into the spool, and frees the
/// buffers; it does not when the row group's metadata would take more than it frees; a file takes at
/// most `MAX_SHRUNK_ROW_GROUPS` that way, and reads back whole.
#[test]
fn shrinking_a_parquet_file_writes_row_groups_up_to_its_most() {
    let dir = tempfile::tempdir().unwrap();
    let (mut enc, mut records) = parquet_with_samples(dir.path());
    assert_eq!(enc.shrinkable(), 0, "a few small records take less than a row group's metadata");
    let sample = records[0].clone();
    let large = |offset| Record { offset, value: Some(vec![b'x'; 10_000]), ..sample.clone() };
    records.push(large(10));
    assert!(enc.append(&records[3], true).unwrap());
    assert!(enc.shrinkable() > 0);
    assert!(enc.shrink().unwrap());
    let metadata = 8 * parquet::ROW_GROUP_METADATA_PER_COLUMN;
    assert_eq!(enc.buffered_memory(), metadata, "the buffers are written and freed, the row group's metadata kept");
    assert_eq!((enc.shrinkable(), enc.shrink().unwrap()), (0, false), "nothing left to write");
    for offset in 11..11 + 2 * parquet::MAX_SHRUNK_ROW_GROUPS as i64 {
        records.push(large(offset));
        assert!(enc.append(records.last().unwrap(), true).unwrap());
        let shrunk = enc.shrink().unwrap();
        assert_eq!(shrunk, offset < 10 + parquet::MAX_SHRUNK_ROW_GROUPS as i64, "at offset {offset}");
    }
    let range = OffsetRange::new(5, records.last().unwrap().offset).unwrap();
    let meta = FileMeta { tp: TopicPartition::new("t", 1).unwrap(), range, records: records.len() as u64 };
    let finished = enc.finish(&meta).unwrap();
    let row_groups = finished.footer.as_ref().unwrap().num_row_groups();
    assert_eq!(row_groups, parquet::MAX_SHRUNK_ROW_GROUPS + 1, "the most, and the rest when sealed");
    let decoded = decode(FileKind::Parquet, finished.spool.read_all().unwrap()).unwrap();
    assert_eq!(decoded.records, records);
}

/// An inferred value schema is decided by a file's first batch: shrinking does not cut it short, and
/// goes on once the batch is written.
#[test]
fn shrinking_waits_for_an_inferred_schemas_first_batch() {
    use crate::values::JsonValues;
    let values = ValueFormat::Json(Arc::new(JsonValues { declared: None, keep_raw: false }));
    let dir = tempfile::tempdir().unwrap();
    let spool = Spool::new(SpoolOptions { memory_threshold: 1 << 30, dir: dir.path().into(), usage: Arc::default() });
    let mut enc = FileEncoder::new(FileSpec::new(Format::Parquet, Compression::Zstd).unwrap(), &values, spool).unwrap();
    let record = |offset| Record { offset, value: Some(br#"{"a":1}"#.to_vec()), ..sample_records()[1].clone() };
    assert!(enc.append(&record(0), true).unwrap());
    assert_eq!((enc.shrinkable(), enc.shrink().unwrap()), (0, false));
    for offset in 1..=parquet::BATCH_ROWS as i64 {
        assert!(enc.append(&record(offset), true).unwrap());
    }
    assert!(enc.shrink().unwrap(), "the first batch is written: the next rows may be");
}

/// JSON lines shrink by compressing their pending lines as a block of their own.
#[test]
fn shrinking_json_lines_compresses_the_pending_block() {
    let dir = tempfile::tempdir().unwrap();
    let mut enc = raw_encoder(dir.path(), Format::Jsonl);
    let records = sample_records();
    assert!(enc.append(&records[0], true).unwrap());
    assert!(enc.shrink().unwrap());
    assert_eq!(enc.buffered_memory(), 0);
    assert!(!enc.shrink().unwrap());
    for r in &records[1..] {
        assert!(enc.append(r, true).unwrap());
    }
    let meta =
        FileMeta { tp: TopicPartition::new("t", 1).unwrap(), range: OffsetRange::new(5, 9).unwrap(), records: 3 };
    let sealed = enc.finish(&meta).unwrap().spool;
    assert_eq!(decode(FileKind::JsonlZst, sealed.read_all().unwrap()).unwrap().records, records);
}

/// A batch leaves the raw value column room for the next, at most a batch and an eighth, which the
/// budget counts and a shrink gives back, also when the batch filled its row group and left no rows to
/// write.
#[test]
fn parquet_counts_the_room_a_batch_leaves_and_a_shrink_gives_it_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut enc = raw_encoder(dir.path(), Format::Parquet);
    // Incompressible, so that the row group is full once the batch is written.
    let mut state = 7u64;
    let value: Vec<u8> = (0..17 << 20).map(|_| (xorshift(&mut state) >> 56) as u8).collect();
    let large = Record { value: Some(value), ..sample_records()[0].clone() };
    assert!(enc.append(&large, true).unwrap(), "a batch, and a row group, of one record");
    let room = (4 << 20) * 9 / 8;
    let metadata = 8 * parquet::ROW_GROUP_METADATA_PER_COLUMN;
    let behind = enc.buffered_memory();
    assert!(behind >= room + (17 << 20), "the room, and the batch until it is written: {behind}");
    assert_eq!(enc.shrinkable(), behind - metadata, "a shrink would wait for the batch");
    let waited = std::time::Instant::now();
    while !enc.settle_written().unwrap() {
        assert!(waited.elapsed() < std::time::Duration::from_secs(30), "the batch was never written");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert_eq!(enc.shrinkable(), room, "no rows to write: the room is what a shrink frees");
    let counted = enc.buffered_memory();
    assert!(enc.shrink().unwrap());
    assert_eq!(counted - enc.buffered_memory(), room);
    assert_eq!(enc.buffered_memory(), metadata, "the row group full and written, the room given back");
    assert_eq!((enc.shrinkable(), enc.shrink().unwrap()), (0, false));
}

/// A full batch is written behind (on an encoding thread): until the file takes it back, it counts in
/// the file's size and memory as it did in the builders, then by what the writer holds (here, pages
/// compressed); taken back without waiting once written. The file's records come out in order.
#[test]
fn parquet_counts_a_batch_written_behind_until_it_is_taken_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut enc = raw_encoder(dir.path(), Format::Parquet);
    // A batch ends at its 4,096th record (under 4 MiB).
    let record = |offset| Record { offset, value: Some(vec![b'a'; 900]), ..sample_records()[0].clone() };
    let records: Vec<Record> = (0..2 * parquet::BATCH_ROWS as i64 + 3).map(record).collect();
    let (first, rest) = records.split_at(parquet::BATCH_ROWS - 1);
    for r in first {
        assert!(enc.append(r, true).unwrap());
    }
    let (size, memory) = (enc.encoded_size(), enc.buffered_memory());
    assert!(size > first.len() as u64 * 900, "every record so far in the builders: {size}");
    assert!(enc.append(&rest[0], true).unwrap(), "the batch's last record: the batch goes behind");
    let behind = (enc.encoded_size(), enc.buffered_memory());
    assert!(behind.0 >= size, "its records' bytes count: {} < {size}", behind.0);
    assert!(behind.1 >= memory, "its memory counts: {} < {memory}", behind.1);
    let waited = std::time::Instant::now();
    while !enc.settle_written().unwrap() {
        assert!(waited.elapsed() < std::time::Duration::from_secs(30), "the batch was never written");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let written = (enc.encoded_size(), enc.buffered_memory());
    assert!(written.0 < behind.0 / 2 && written.1 < behind.1 / 2, "by the writer now: {written:?} {behind:?}");
    assert!(!enc.settle_written().unwrap(), "nothing is behind any more");
    let (second, last) = rest[1..].split_at(parquet::BATCH_ROWS);
    for r in second {
        assert!(enc.append(r, true).unwrap());
    }
    // The second batch behind counts at the ratio the first came to (not by its ~3.9 MB of records), so
    // the file rolls by size where it would once it is written.
    let estimated = enc.encoded_size();
    while !enc.settle_written().unwrap() {
        assert!(waited.elapsed() < std::time::Duration::from_secs(30), "the batch was never written");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let measured = enc.encoded_size();
    assert!(estimated <= 2 * measured && measured <= 2 * estimated, "estimated {estimated}, then {measured}");
    for r in last {
        assert!(enc.append(r, true).unwrap());
    }
    let meta = FileMeta {
        tp: TopicPartition::new("t", 1).unwrap(),
        range: OffsetRange::new(0, records.len() as i64 - 1).unwrap(),
        records: records.len() as u64,
    };
    let sealed = enc.finish(&meta).unwrap().spool;
    assert_eq!(decode(FileKind::Parquet, sealed.read_all().unwrap()).unwrap().records, records);
}

/// A batch behind counts at the ratio the file's records came to so far, at most at its records' bytes
/// (a file whose first rows were written alone, shrunk for the budget, carries its columns' fixed costs
/// on them: counting its next batch at that ratio would roll it early by size).
#[test]
fn a_batch_behind_counts_at_the_files_ratio_at_most_at_its_bytes() {
    assert_eq!(parquet::at_ratio(4000, 1000, 4000), 1000, "compressed four to one");
    assert_eq!(parquet::at_ratio(4000, 20_000, 5000), 4000, "fixed costs on a few rows: the bytes at most");
    assert_eq!(parquet::at_ratio(4000, 0, 0), 4000, "nothing taken yet: the bytes");
    assert_eq!(parquet::at_ratio(u64::MAX, u64::MAX, 1), u64::MAX, "no overflow");
}

fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// An encoder of raw keys and values, zstd-compressed, whose spool stays in memory.
fn raw_encoder(dir: &std::path::Path, format: Format) -> FileEncoder {
    let spool = Spool::new(SpoolOptions { memory_threshold: 1 << 30, dir: dir.into(), usage: Arc::default() });
    FileEncoder::new(FileSpec::new(format, Compression::Zstd).unwrap(), &ValueFormat::Raw, spool).unwrap()
}

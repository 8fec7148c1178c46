//! Protobuf values in Parquet files: the values whose columns give them back keep no bytes, and every
//! value comes back byte for byte, also from a file that widened to a newer version.

use std::sync::Arc;

use super::avro::{encode_file, kept, record};
use crate::encode::{decode, parquet, FileKind};
use crate::registry::{RegisteredSchema, SchemaCache};
use crate::values::protobuf::indexes::header;
use crate::values::protobuf::tests::encode;
use crate::values::wire::{frame, SchemaId};
use crate::values::{ProtobufValues, ValueFormat};

const V1: &str = r#"syntax = "proto3"; package p;
    message Outer { message M { int64 id = 1; repeated string tags = 2; map<string, int32> n = 3; } }"#;
const V2: &str = r#"syntax = "proto3"; package p;
    message Outer { message M { int64 id = 1; repeated string tags = 2; map<string, int32> n = 3; bool added = 4; } }"#;

/// Protobuf values of schemas 1 (V1) and 2 (V2).
fn protobuf() -> ValueFormat {
    let cache = SchemaCache::default();
    for (id, text) in [(1, V1), (2, V2)] {
        let schema = RegisteredSchema { schema_type: "PROTOBUF".into(), schema: text.into(), references: vec![] };
        cache.insert(SchemaId(id), Ok(schema));
    }
    ValueFormat::Protobuf(Arc::new(ProtobufValues { schemas: Arc::new(cache), keep_raw: false }))
}

/// A value of the nested message `p.Outer.M` (indexes `[0, 0]`) of schema `id`.
fn value(id: u32, text: &str, fields: &str) -> Vec<u8> {
    let mut body = header(&[0, 0]);
    body.extend(encode(text, "p.Outer.M", fields));
    frame(SchemaId(id), &body)
}

/// A file of values its columns give back (none keeps bytes), one with an unknown field (it keeps
/// them) and a tombstone, in memory and spooled to disk: every value comes back byte for byte, the
/// message's indexes (`[0, 0]`) and schema ID with it.
#[test]
fn values_that_keep_no_bytes_come_back_byte_for_byte() {
    let mut records: Vec<_> = (0..300)
        // A map value of 0 would be left out of its entry by prost-reflect, which encodes the test values.
        .map(|i| record(i, value(1, V1, &format!(r#"id: {i} tags: ["a", "{i}"] n {{ key: "k" value: {} }}"#, i + 1))))
        .collect();
    let mut unknown = value(1, V1, "id: 1");
    unknown.extend([0xf8, 0x07, 1]);
    records[7].value = Some(unknown);
    records[9].value = None;
    for threshold in [1 << 30, 0] {
        let data = encode_file(&protobuf(), &ValueFormat::Raw, &records, threshold);
        let kept = kept(&data);
        assert_eq!(kept.iter().filter(|k| **k).count(), 1, "threshold {threshold}: only the unknown field's");
        assert!(kept[7]);
        assert_eq!(decode(FileKind::Parquet, data).unwrap().records, records, "threshold {threshold}");
    }
}

/// Rows written under version 1, then a value of version 2, which holds it: the file widens, and the
/// rows written before keep their bytes now (encoded back by version 1), so they still come back byte
/// for byte; the newer version's values keep none.
#[test]
fn rows_written_before_the_file_widens_keep_their_bytes_and_come_back() {
    let old = parquet::BATCH_ROWS as i64 + 10;
    let mut records: Vec<_> = (0..old).map(|i| record(i, value(1, V1, &format!("id: {i}")))).collect();
    records.push(record(old, value(2, V2, "id: -1 added: true")));
    records.push(record(old + 1, value(1, V1, r#"tags: ["x"]"#)));
    for threshold in [1 << 30, 0] {
        let data = encode_file(&protobuf(), &ValueFormat::Raw, &records, threshold);
        let kept = kept(&data);
        let want: Vec<bool> = (0..old).map(|_| true).chain([false, true]).collect();
        assert_eq!(kept, want, "threshold {threshold}: version 1's rows keep their bytes");
        assert_eq!(decode(FileKind::Parquet, data).unwrap().records, records, "threshold {threshold}");
    }
}

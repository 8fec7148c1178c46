//! Avro object container files, the form of Iceberg's manifests and manifest lists: a header (magic,
//! key-value metadata holding the writer's schema, a sync marker), then blocks of records. Written with
//! the `null` codec (manifests are small and read whole); read with `null`, `deflate` (Iceberg's Java
//! default) or `zstandard`, as other writers of the table may choose.

use std::io::Read;

use serde_json::Value;
use thiserror::Error;

use crate::values::avro::binary::Reader;
use crate::values::avro::reencode::{bytes, long};
use crate::values::avro::value::{decode, decode_record, encode_record};
use crate::values::avro::{parse_record, Avro};

const MAGIC: &[u8; 4] = b"Obj\x01";

#[derive(Debug, Error, PartialEq, Eq)]
pub enum AvroFileError {
    #[error("not an Avro object container file (no magic bytes)")]
    NotAvro,
    #[error("the Avro file is damaged: {0}")]
    Damaged(String),
    #[error("the Avro file's codec {0:?} is not one this reads (null, deflate, zstandard)")]
    Codec(String),
    #[error("the Avro file's schema is not usable: {0}")]
    Schema(String),
    #[error("a record does not fit the Avro file's schema: {0}")]
    Record(String),
}

/// A file's metadata (other than the schema and codec) and records, in Avro's JSON form.
#[derive(Debug, Clone, PartialEq)]
pub struct AvroFile {
    pub metadata: Vec<(String, String)>,
    pub records: Vec<Value>,
}

/// `records` (Avro's JSON form of records of `schema`, a record schema's JSON text) in one block, with
/// `metadata` in the header and `sync` as the marker.
pub fn write(
    schema: &str,
    metadata: &[(String, String)],
    records: &[Value],
    sync: [u8; 16],
) -> Result<Vec<u8>, AvroFileError> {
    let fields = parse_record(schema).map_err(|e| AvroFileError::Schema(e.to_string()))?;
    let mut out = header(schema, "null", metadata, sync);
    if !records.is_empty() {
        let mut block = Vec::new();
        for record in records {
            encode_record(&fields, record, &mut block).map_err(AvroFileError::Record)?;
        }
        long(records.len() as i64, &mut out);
        bytes(&block, &mut out);
        out.extend_from_slice(&sync);
    }
    Ok(out)
}

/// A file's header: its schema, codec and other `metadata`, and the sync marker.
fn header(schema: &str, codec: &str, metadata: &[(String, String)], sync: [u8; 16]) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    let own = [("avro.schema", schema), ("avro.codec", codec)];
    let all: Vec<(&str, &str)> =
        own.into_iter().chain(metadata.iter().map(|(k, v)| (k.as_str(), v.as_str()))).collect();
    long(all.len() as i64, &mut out);
    for (key, value) in all {
        bytes(key.as_bytes(), &mut out);
        bytes(value.as_bytes(), &mut out);
    }
    long(0, &mut out);
    out.extend_from_slice(&sync);
    out
}

/// Every record of a file, by the writer's schema in its header.
pub fn read(file: &[u8]) -> Result<AvroFile, AvroFileError> {
    let damaged = AvroFileError::Damaged;
    let rest = file.strip_prefix(MAGIC.as_slice()).ok_or(AvroFileError::NotAvro)?;
    let mut r = Reader::new(rest);
    let header = decode(&Avro::Map(Box::new(Avro::Bytes)), &mut r).map_err(damaged)?;
    let mut metadata: Vec<(String, String)> = Vec::new();
    let (mut schema, mut codec) = (None, "null".to_string());
    for (key, value) in header.as_object().into_iter().flatten() {
        let text: String = value.as_str().unwrap_or_default().to_string();
        let text = String::from_utf8(text.chars().map(|c| c as u8).collect()).map_err(|e| damaged(e.to_string()))?;
        match key.as_str() {
            "avro.schema" => schema = Some(text),
            "avro.codec" => codec = text,
            _ => metadata.push((key.clone(), text)),
        }
    }
    let schema = schema.ok_or_else(|| damaged("its header has no avro.schema".into()))?;
    let fields = parse_record(&schema).map_err(|e| AvroFileError::Schema(e.to_string()))?;
    let body = &rest[r.position()..];
    let sync = body.get(..16).ok_or_else(|| damaged("it ends inside its header".into()))?;
    let mut at = 16;
    let mut records = Vec::new();
    while at < body.len() {
        let mut r = Reader::new(&body[at..]);
        let count = block_number(&mut r)?;
        let size = block_number(&mut r)?;
        let start = at + r.position();
        let end = start.checked_add(size).filter(|end| end + 16 <= body.len());
        let end = end.ok_or_else(|| damaged(format!("a block of {size} bytes runs past the file's end")))?;
        if &body[end..end + 16] != sync {
            return Err(damaged("a block does not end with the file's sync marker".into()));
        }
        let data = decompress(&codec, &body[start..end])?;
        let mut r = Reader::new(&data);
        for _ in 0..count {
            records.push(decode_record(&fields, &mut r).map_err(AvroFileError::Record)?);
        }
        at = end + 16;
    }
    Ok(AvroFile { metadata, records })
}

fn block_number(r: &mut Reader) -> Result<usize, AvroFileError> {
    let n = decode(&Avro::Long, r).map_err(AvroFileError::Damaged)?;
    n.as_u64().map(|n| n as usize).ok_or_else(|| AvroFileError::Damaged(format!("a block count or size of {n}")))
}

fn decompress(codec: &str, data: &[u8]) -> Result<Vec<u8>, AvroFileError> {
    let damaged = |e: std::io::Error| AvroFileError::Damaged(format!("a {codec} block does not decompress: {e}"));
    match codec {
        "null" => Ok(data.to_vec()),
        "deflate" => {
            let mut out = Vec::new();
            flate2::read::DeflateDecoder::new(data).read_to_end(&mut out).map_err(damaged)?;
            Ok(out)
        }
        "zstandard" => zstd::decode_all(data).map_err(damaged),
        other => Err(AvroFileError::Codec(other.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SCHEMA: &str = r#"{"type": "record", "name": "r", "fields": [
        {"name": "path", "type": "string"}, {"name": "n", "type": ["null", "long"]}]}"#;

    #[test]
    fn records_and_metadata_read_back_as_written() {
        let records = vec![json!({"path": "a", "n": 1}), json!({"path": "b", "n": null})];
        let metadata = vec![("format-version".to_string(), "2".to_string())];
        let file = write(SCHEMA, &metadata, &records, [7; 16]).unwrap();
        assert_eq!(read(&file).unwrap(), AvroFile { metadata, records });
        let empty = write(SCHEMA, &[], &[], [0; 16]).unwrap();
        assert_eq!(read(&empty).unwrap().records, Vec::<Value>::new());
    }

    #[test]
    fn a_deflated_block_from_another_writer_is_read() {
        let mut block = Vec::new();
        encode_record(&parse_record(SCHEMA).unwrap(), &json!({"path": "x", "n": 5}), &mut block).unwrap();
        let mut deflated = Vec::new();
        let mut encoder = flate2::write::DeflateEncoder::new(&mut deflated, flate2::Compression::default());
        std::io::Write::write_all(&mut encoder, &block).unwrap();
        encoder.finish().unwrap();
        let mut file = header(SCHEMA, "deflate", &[], [1; 16]);
        long(1, &mut file);
        bytes(&deflated, &mut file);
        file.extend_from_slice(&[1; 16]);
        assert_eq!(read(&file).unwrap().records, vec![json!({"path": "x", "n": 5})]);
    }

    #[test]
    fn a_damaged_file_is_refused() {
        let file = write(SCHEMA, &[], &[json!({"path": "a", "n": 1})], [3; 16]).unwrap();
        assert_eq!(read(b"PAR1"), Err(AvroFileError::NotAvro));
        assert!(matches!(read(&file[..file.len() - 3]), Err(AvroFileError::Damaged(_))));
        let mut wrong_sync = file.clone();
        let last = wrong_sync.len() - 1;
        wrong_sync[last] ^= 1;
        assert!(matches!(read(&wrong_sync), Err(AvroFileError::Damaged(_))));
    }
}

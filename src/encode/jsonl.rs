//! JSON lines: one object per record. Keys, values, header names and header values are UTF-8 text where
//! they are valid UTF-8, base64 otherwise, with `<field>_encoding: "base64"` marking the latter. With typed
//! values, `value` is the record's JSON object, and `value_raw`/`value_error` are as in Parquet.

use std::io::{BufRead, BufReader, Read, Write};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde::{Deserialize, Serialize};

use super::{Compression, DeadLetter, EncodeError};
use crate::archive::record::{Header, Record, TimestampKind};
use crate::encode::spool::{SealedSpool, Spool};
use crate::values::columns::ValueStats;
use crate::values::line::{LineValue, LineValues, TypedLine};
use crate::values::ValueFormat;

#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Encoding {
    Base64,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonHeader {
    key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    key_encoding: Option<Encoding>,
    value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    value_encoding: Option<Encoding>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonRecord {
    /// Only in `restore --to-stdout` output (archived files say it in their name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    topic: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    partition: Option<i32>,
    offset: i64,
    timestamp: Option<i64>,
    timestamp_type: String,
    key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    key_encoding: Option<Encoding>,
    value: Option<LineValue>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    value_encoding: Option<Encoding>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    value_raw: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    value_raw_encoding: Option<Encoding>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    value_error: Option<String>,
    headers: Vec<JsonHeader>,
}

fn to_text(bytes: Option<&[u8]>) -> (Option<String>, Option<Encoding>) {
    match bytes {
        None => (None, None),
        Some(b) => match std::str::from_utf8(b) {
            Ok(s) => (Some(s.to_string()), None),
            Err(_) => (Some(B64.encode(b)), Some(Encoding::Base64)),
        },
    }
}

fn from_text(text: Option<String>, enc: Option<Encoding>) -> Result<Option<Vec<u8>>, String> {
    match (text, enc) {
        (None, _) => Ok(None),
        (Some(t), None) => Ok(Some(t.into_bytes())),
        (Some(t), Some(Encoding::Base64)) => B64.decode(t).map(Some).map_err(|e| format!("bad base64: {e}")),
    }
}

/// Lines are compressed in blocks of about this many bytes, each an independent gzip member or zstd
/// frame (a concatenation every reader takes as one stream). An open file holds one block, not a
/// compressor of its own with its window and tables (about 1 MiB for zstd): a thousand open files
/// cost a thousand blocks, counted in the memory budget.
const BLOCK_BYTES: usize = 128 * 1024;
/// zstd's level for JSON lines (its default).
const ZSTD_LEVEL: i32 = 3;

thread_local! {
    /// One zstd compressor per thread, shared by every open file encoded on it.
    static ZSTD: std::cell::RefCell<Option<zstd::bulk::Compressor<'static>>> = const { std::cell::RefCell::new(None) };
}

fn zstd_frame(block: &[u8]) -> std::io::Result<Vec<u8>> {
    ZSTD.with(|cell| {
        let mut slot = cell.borrow_mut();
        let compressor = match slot.as_mut() {
            Some(c) => c,
            None => {
                let mut c = zstd::bulk::Compressor::new(ZSTD_LEVEL)?;
                c.include_contentsize(true)?;
                slot.insert(c)
            }
        };
        compressor.compress(block)
    })
}

pub struct JsonlEncoder {
    compression: Compression,
    spool: Spool,
    /// Lines not yet compressed into the spool.
    block: Vec<u8>,
    values: Option<LineValues>,
}

impl JsonlEncoder {
    pub fn new(compression: Compression, values: &ValueFormat, spool: Spool) -> Result<Self, EncodeError> {
        if compression == Compression::Snappy {
            return Err(EncodeError::UnsupportedCompression {
                format: super::Format::Jsonl,
                compression,
                hint: "use zstd, gzip or none for JSON lines",
            });
        }
        let values = values.json().map(|json| LineValues::new(json.clone()));
        Ok(Self { compression, spool, block: Vec::new(), values })
    }

    pub fn append(&mut self, r: &Record) -> Result<(), EncodeError> {
        let typed = match (&mut self.values, r.value.as_deref()) {
            (Some(values), Some(bytes)) => Some(values.line(r.offset, bytes)),
            _ => None,
        };
        write_typed_line(r, None, typed, &mut self.block)?;
        // Uncompressed lines go straight to the spool.
        if self.block.len() >= BLOCK_BYTES || self.compression == Compression::None {
            self.flush_block()?;
        }
        Ok(())
    }

    /// Writes the pending lines to the spool, compressed as one gzip member or zstd frame.
    fn flush_block(&mut self) -> Result<(), EncodeError> {
        if self.block.is_empty() {
            return Ok(());
        }
        match self.compression {
            Compression::Gzip => {
                let mut gz = flate2::write::GzEncoder::new(&mut self.spool, flate2::Compression::default());
                gz.write_all(&self.block)?;
                gz.finish()?;
            }
            Compression::Zstd => self.spool.write_all(&zstd_frame(&self.block)?)?,
            Compression::None | Compression::Snappy => self.spool.write_all(&self.block)?,
        }
        // Released, not kept for the next block: a thousand open files would otherwise each hold a
        // block's capacity (up to twice its size, more after a large record) for as long as they are open.
        self.block = Vec::new();
        Ok(())
    }

    /// What the pending lines hold, which `shrink` compresses into the spool.
    pub fn shrinkable(&self) -> u64 {
        self.buffered_memory()
    }

    /// Compresses the pending lines into the spool now (a block of their own); whether there were any.
    pub fn shrink(&mut self) -> Result<bool, EncodeError> {
        let pending = !self.block.is_empty();
        self.flush_block()?;
        Ok(pending)
    }

    /// The file's size so far, its pending lines counted uncompressed.
    pub fn encoded_size(&self) -> u64 {
        self.spool.len() + self.block.len() as u64
    }

    pub fn buffered_memory(&self) -> u64 {
        self.block.capacity() as u64
    }

    /// What the file holds, as the budget counts it: its spool's bytes and its pending lines.
    pub fn held(&self) -> u64 {
        self.spool.len() + self.buffered_memory()
    }

    pub fn value_stats(&self) -> Option<&ValueStats> {
        self.values.as_ref().map(|v| &v.stats)
    }

    pub fn finish(mut self) -> Result<SealedSpool, EncodeError> {
        self.flush_block()?;
        Ok(self.spool.seal()?)
    }
}

/// Appends one record as a JSON line (with its topic and partition when given) to `out`.
pub fn write_line(r: &Record, source: Option<(&str, i32)>, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    write_typed_line(r, source, None, out)
}

/// Appends one record as a JSON line, its value typed as `typed` says (`None`: as text).
fn write_typed_line(
    r: &Record,
    source: Option<(&str, i32)>,
    typed: Option<TypedLine>,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let (key, key_encoding) = to_text(r.key.as_deref());
    let (value, value_encoding, raw, error) = match typed {
        None => {
            let (text, encoding) = to_text(r.value.as_deref());
            (text.map(LineValue::Text), encoding, (None, None), None)
        }
        Some(t) => {
            let raw = if t.raw { to_text(r.value.as_deref()) } else { (None, None) };
            (t.value.map(LineValue::Json), None, raw, t.error)
        }
    };
    let headers = r
        .headers
        .iter()
        .map(|h| {
            let (key, key_encoding) = to_text(Some(&h.key));
            let (value, value_encoding) = to_text(h.value.as_deref());
            JsonHeader { key: key.unwrap_or_default(), key_encoding, value, value_encoding }
        })
        .collect();
    let json = JsonRecord {
        topic: source.map(|(t, _)| t.to_string()),
        partition: source.map(|(_, p)| p),
        offset: r.offset,
        timestamp: r.timestamp_ms,
        timestamp_type: r.timestamp_kind.as_str().to_string(),
        key,
        key_encoding,
        value,
        value_encoding,
        value_raw: raw.0,
        value_raw_encoding: raw.1,
        value_error: error,
        headers,
    };
    serde_json::to_writer(&mut *out, &json).map_err(std::io::Error::from)?;
    out.push(b'\n');
    Ok(())
}

pub fn decode(reader: impl Read) -> Result<(Vec<Record>, u64), EncodeError> {
    let mut out = Vec::new();
    let mut misfits = 0;
    for_each_line(reader, |record, error| {
        misfits += u64::from(error.is_some());
        out.push(record);
    })?;
    Ok((out, misfits))
}

/// The records whose value did not fit the value schema, and why.
pub fn dead_letters(reader: impl Read) -> Result<Vec<DeadLetter>, EncodeError> {
    let mut out = Vec::new();
    for_each_line(reader, |record, error| {
        if let Some(error) = error {
            out.push(DeadLetter { record, error });
        }
    })?;
    Ok(out)
}

/// Each line's record (its value's bytes: raw, text, or the embedded JSON) and misfit reason.
fn for_each_line(reader: impl Read, mut each: impl FnMut(Record, Option<String>)) -> Result<(), EncodeError> {
    for (i, line) in BufReader::new(reader).lines().enumerate() {
        let line = line?;
        let bad = |why: String| EncodeError::BadJsonLine { line: i + 1, why };
        let j: JsonRecord = serde_json::from_str(&line).map_err(|e| bad(e.to_string()))?;
        let timestamp_kind = TimestampKind::parse(&j.timestamp_type)
            .ok_or_else(|| bad(format!("timestamp_type {:?}", j.timestamp_type)))?;
        let headers = j
            .headers
            .into_iter()
            .map(|h| {
                let key = from_text(Some(h.key), h.key_encoding)?.unwrap_or_default();
                Ok(Header { key, value: from_text(h.value, h.value_encoding)? })
            })
            .collect::<Result<Vec<_>, String>>()
            .map_err(bad)?;
        let value = match (j.value_raw, j.value) {
            (Some(raw), _) => Some(from_text(Some(raw), j.value_raw_encoding).map_err(bad)?.unwrap_or_default()),
            (None, None) => None,
            (None, Some(LineValue::Text(text))) => from_text(Some(text), j.value_encoding).map_err(bad)?,
            (None, Some(LineValue::Json(raw))) => Some(raw.get().as_bytes().to_vec()),
        };
        let record = Record {
            offset: j.offset,
            timestamp_ms: j.timestamp,
            timestamp_kind,
            key: from_text(j.key, j.key_encoding).map_err(bad)?,
            value,
            headers,
        };
        each(record, j.value_error);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::encode::spool::SpoolOptions;

    fn record(i: i64) -> Record {
        let value = format!(r#"{{"order":{i},"note":"{}"}}"#, "x".repeat((i % 500) as usize)).into_bytes();
        Record {
            offset: i,
            timestamp_ms: Some(1_700_000_000_000 + i),
            timestamp_kind: TimestampKind::CreateTime,
            key: Some(format!("k{}", i % 7).into_bytes()),
            value: Some(value),
            headers: vec![Header { key: "seq".into(), value: Some(i.to_string().into_bytes()) }],
        }
    }

    /// A file of many blocks is many gzip members or zstd frames, which read back as one stream; the
    /// encoder never holds more than about one block.
    #[test]
    fn a_file_of_many_blocks_reads_back_whole() {
        let records: Vec<Record> = (0..3_000).map(record).collect();
        for compression in [Compression::Gzip, Compression::Zstd, Compression::None] {
            let dir = tempfile::tempdir().unwrap();
            let spool =
                Spool::new(SpoolOptions { memory_threshold: 1 << 30, dir: dir.path().into(), usage: Arc::default() });
            let mut enc = JsonlEncoder::new(compression, &ValueFormat::Raw, spool).unwrap();
            let mut most_held = 0;
            for r in &records {
                enc.append(r).unwrap();
                most_held = most_held.max(enc.buffered_memory());
            }
            assert!(most_held <= 2 * BLOCK_BYTES as u64, "{compression:?}: held {most_held}");
            let data = enc.finish().unwrap().read_all().unwrap();
            let decoded = match compression {
                Compression::Gzip => decode(flate2::read::MultiGzDecoder::new(&data[..])).unwrap().0,
                Compression::Zstd => decode(zstd::stream::read::Decoder::new(&data[..]).unwrap()).unwrap().0,
                _ => decode(&data[..]).unwrap().0,
            };
            assert_eq!(decoded, records, "{compression:?}");
            // Several blocks: several gzip members (each starts 1f 8b 08) or zstd frames (28 b5 2f fd).
            let magic: &[u8] = match compression {
                Compression::Gzip => &[0x1f, 0x8b, 0x08],
                Compression::Zstd => &[0x28, 0xb5, 0x2f, 0xfd],
                _ => continue,
            };
            let frames = data.windows(magic.len()).filter(|w| *w == magic).count();
            assert!(frames >= 5, "{compression:?}: {frames} frames in {} bytes", data.len());
        }
    }

    /// A compressed block's memory is released, not kept for the next one: an open file between blocks
    /// holds only the lines since (a thousand open files held a block's capacity each).
    #[test]
    fn a_compressed_block_gives_its_memory_back() {
        let dir = tempfile::tempdir().unwrap();
        let spool =
            Spool::new(SpoolOptions { memory_threshold: 1 << 30, dir: dir.path().into(), usage: Arc::default() });
        let mut enc = JsonlEncoder::new(Compression::Zstd, &ValueFormat::Raw, spool).unwrap();
        let held: Vec<u64> = (0..3_000)
            .map(|i| {
                enc.append(&record(i)).unwrap();
                enc.buffered_memory()
            })
            .collect();
        let released = held.windows(2).filter(|w| w[0] >= BLOCK_BYTES as u64 / 2 && w[1] == 0).count();
        assert!(released >= 5, "blocks compressed and released: {released}");
    }
}

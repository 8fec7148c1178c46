//! JSON lines: one object per record. Keys, values and header values are UTF-8 text where they are
//! valid UTF-8, base64 otherwise, with `<field>_encoding: "base64"` marking the latter.

use std::io::{BufRead, BufReader, Read, Write};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde::{Deserialize, Serialize};

use super::{Compression, EncodeError};
use crate::core::record::{Header, Record, TimestampKind};
use crate::core::spool::{SealedSpool, Spool};

#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Encoding {
    Base64,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonHeader {
    key: String,
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
    value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    value_encoding: Option<Encoding>,
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

enum Sink {
    Plain(Spool),
    Gzip(flate2::write::GzEncoder<Spool>),
    Zstd(zstd::stream::write::Encoder<'static, Spool>),
}

impl Sink {
    fn writer(&mut self) -> &mut dyn Write {
        match self {
            Sink::Plain(s) => s,
            Sink::Gzip(g) => g,
            Sink::Zstd(z) => z,
        }
    }

    fn spool(&self) -> &Spool {
        match self {
            Sink::Plain(s) => s,
            Sink::Gzip(g) => g.get_ref(),
            Sink::Zstd(z) => z.get_ref(),
        }
    }
}

pub struct JsonlEncoder {
    sink: Sink,
    line: Vec<u8>,
}

impl JsonlEncoder {
    pub fn new(compression: Compression, spool: Spool) -> Result<Self, EncodeError> {
        let sink = match compression {
            Compression::None => Sink::Plain(spool),
            Compression::Gzip => Sink::Gzip(flate2::write::GzEncoder::new(spool, flate2::Compression::default())),
            Compression::Zstd => Sink::Zstd(zstd::stream::write::Encoder::new(spool, 3)?),
            Compression::Snappy => {
                return Err(EncodeError::UnsupportedCompression {
                    format: super::Format::Jsonl,
                    compression,
                    hint: "use zstd, gzip or none for JSON lines",
                })
            }
        };
        Ok(Self { sink, line: Vec::with_capacity(1024) })
    }

    pub fn append(&mut self, r: &Record) -> Result<(), EncodeError> {
        self.line.clear();
        write_line(r, None, &mut self.line)?;
        self.sink.writer().write_all(&self.line)?;
        Ok(())
    }

    pub fn encoded_size(&self) -> u64 {
        self.sink.spool().len()
    }

    pub fn buffered_memory(&self) -> u64 {
        self.line.capacity() as u64
    }

    pub fn finish(self) -> Result<SealedSpool, EncodeError> {
        let spool = match self.sink {
            Sink::Plain(s) => s,
            Sink::Gzip(g) => g.finish()?,
            Sink::Zstd(z) => z.finish()?,
        };
        Ok(spool.seal()?)
    }
}

/// Appends one record as a JSON line (with its topic and partition when given) to `out`.
pub fn write_line(r: &Record, source: Option<(&str, i32)>, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    let (key, key_encoding) = to_text(r.key.as_deref());
    let (value, value_encoding) = to_text(r.value.as_deref());
    let headers = r
        .headers
        .iter()
        .map(|h| {
            let (value, value_encoding) = to_text(h.value.as_deref());
            JsonHeader { key: h.key.clone(), value, value_encoding }
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
        headers,
    };
    serde_json::to_writer(&mut *out, &json).map_err(std::io::Error::from)?;
    out.push(b'\n');
    Ok(())
}

pub fn decode(reader: impl Read) -> Result<Vec<Record>, EncodeError> {
    let mut out = Vec::new();
    for (i, line) in BufReader::new(reader).lines().enumerate() {
        let line = line?;
        let bad = |why: String| EncodeError::BadJsonLine { line: i + 1, why };
        let j: JsonRecord = serde_json::from_str(&line).map_err(|e| bad(e.to_string()))?;
        let timestamp_kind = TimestampKind::parse(&j.timestamp_type)
            .ok_or_else(|| bad(format!("timestamp_type {:?}", j.timestamp_type)))?;
        let headers = j
            .headers
            .into_iter()
            .map(|h| Ok(Header { key: h.key, value: from_text(h.value, h.value_encoding)? }))
            .collect::<Result<Vec<_>, String>>()
            .map_err(bad)?;
        out.push(Record {
            offset: j.offset,
            timestamp_ms: j.timestamp,
            timestamp_kind,
            key: from_text(j.key, j.key_encoding).map_err(bad)?,
            value: from_text(j.value, j.value_encoding).map_err(bad)?,
            headers,
        });
    }
    Ok(out)
}

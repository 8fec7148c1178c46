//! Confluent's wire format, which Schema Registry serializers write: a zero magic byte, the schema's ID
//! (4 bytes, big-endian), then the value in the schema's format.

use std::fmt;

/// A schema's ID in the Schema Registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SchemaId(pub u32);

impl fmt::Display for SchemaId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

const MAGIC: u8 = 0;

/// Why a payload is not in the wire format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("{0} bytes, shorter than the Schema Registry's 5-byte header (magic byte 0, schema ID)")]
    Short(usize),
    #[error("starts with byte {0}, not the Schema Registry's magic byte 0 (not written by a registry serializer)")]
    NoMagic(u8),
}

/// The schema ID a payload names, and the value after the header.
pub fn split(payload: &[u8]) -> Result<(SchemaId, &[u8]), WireError> {
    match payload {
        [MAGIC, a, b, c, d, rest @ ..] => Ok((SchemaId(u32::from_be_bytes([*a, *b, *c, *d])), rest)),
        [first, ..] if *first != MAGIC => Err(WireError::NoMagic(*first)),
        short => Err(WireError::Short(short.len())),
    }
}

/// The payload of a value `body` written with schema `id` (what a serializer writes).
pub fn frame(id: SchemaId, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(5 + body.len());
    out.push(MAGIC);
    out.extend_from_slice(&id.0.to_be_bytes());
    out.extend_from_slice(body);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_the_header_from_the_value_and_says_what_is_not_framed() {
        assert_eq!(split(&[0, 0, 0, 1, 2, 9, 9]), Ok((SchemaId(258), &[9u8, 9][..])));
        assert_eq!(split(&frame(SchemaId(7), b"x")), Ok((SchemaId(7), &b"x"[..])));
        assert_eq!(split(&[0, 0, 0, 0, 5]), Ok((SchemaId(5), &[][..])), "an empty value is fine");
        assert_eq!(split(b"{\"a\":1}"), Err(WireError::NoMagic(b'{')));
        assert_eq!(split(&[0, 0, 1]), Err(WireError::Short(3)));
        assert_eq!(split(&[]), Err(WireError::Short(0)));
    }
}

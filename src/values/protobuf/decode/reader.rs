//! The bytes of one message, read front to back: varints (noting any not in its fewest bytes), tags,
//! lengths, and values of each wire type.

use crate::values::bytes;

use super::{DecodeError, END_GROUP, FIXED32, FIXED64, LEN, MAX_DEPTH, START_GROUP, VARINT};

/// The bytes of one message, read front to back.
pub(super) struct Reader<'a> {
    pub(super) buf: &'a [u8],
    pub(super) pos: usize,
    /// Whether every varint read so far was in its fewest bytes.
    pub(super) shortest: bool,
}

impl<'a> Reader<'a> {
    pub(super) fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0, shortest: true }
    }

    pub(super) fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }

    #[inline]
    pub(super) fn varint(&mut self) -> Result<u64, DecodeError> {
        // Most varints (tags, lengths, small numbers) are one byte.
        if let Some(&byte) = self.buf.get(self.pos) {
            if byte < 0x80 {
                self.pos += 1;
                return Ok(u64::from(byte));
            }
        }
        self.varint_rest()
    }

    fn varint_rest(&mut self) -> Result<u64, DecodeError> {
        let first = *self.buf.get(self.pos).ok_or("ends inside a number")?;
        self.pos += 1;
        let (value, shortest) = bytes::varint_rest(self.buf, &mut self.pos, first)?;
        self.shortest &= shortest;
        Ok(value)
    }

    #[inline(always)]
    pub(super) fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        bytes::take(self.buf, &mut self.pos, n).ok_or_else(|| bytes::missing(self.buf.len(), n).into())
    }

    #[inline(always)]
    pub(super) fn fixed<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        Ok(self.take(N)?.try_into().expect("N bytes"))
    }

    #[inline]
    pub(super) fn len_delimited(&mut self) -> Result<&'a [u8], DecodeError> {
        let n = self.varint()?;
        self.take(usize::try_from(n).map_err(|_| format!("a length of {n}"))?)
    }

    /// A field's number and wire type.
    #[inline]
    pub(super) fn tag(&mut self) -> Result<(u32, u8), DecodeError> {
        split_tag(self.varint()?)
    }

    /// A field's value of wire type `wire`: its bytes (a length-delimited one's without its length).
    #[inline(always)]
    pub(super) fn value(&mut self, number: u32, wire: u8, depth: usize) -> Result<&'a [u8], DecodeError> {
        let start = self.pos;
        match wire {
            LEN => return self.len_delimited(),
            VARINT => drop(self.varint()?),
            FIXED64 => drop(self.take(8)?),
            FIXED32 => drop(self.take(4)?),
            _ => self.skip(number, wire, depth)?,
        }
        Ok(&self.buf[start..self.pos])
    }

    /// Reads past a field's value of wire type `wire` (a group up to its end).
    pub(super) fn skip(&mut self, number: u32, wire: u8, depth: usize) -> Result<(), DecodeError> {
        match wire {
            VARINT => drop(self.varint()?),
            FIXED64 => drop(self.take(8)?),
            LEN => drop(self.len_delimited()?),
            FIXED32 => drop(self.take(4)?),
            START_GROUP if depth < MAX_DEPTH => loop {
                match self.tag()? {
                    (n, END_GROUP) if n == number => break,
                    (_, END_GROUP) => return Err(format!("a group {number} ended by another's end").into()),
                    (n, w) => self.skip(n, w, depth + 1)?,
                }
            },
            START_GROUP => return Err(format!("groups nested deeper than {MAX_DEPTH}").into()),
            w => return Err(format!("field {number}: wire type {w}").into()),
        }
        Ok(())
    }
}

/// A tag's field number and wire type.
#[inline]
pub(super) fn split_tag(tag: u64) -> Result<(u32, u8), DecodeError> {
    let number = u32::try_from(tag >> 3).ok().filter(|n| (1..=536_870_911).contains(n));
    let number = number.ok_or_else(|| format!("a field number of {}", tag >> 3))?;
    Ok((number, (tag & 7) as u8))
}

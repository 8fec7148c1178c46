//! A value's bytes read front to back, as the Avro and Protobuf decoders both read them: a run of
//! bytes, and the rest of a varint (7 bits a byte, low first; Avro's longs zig-zag it after).

/// The `n` bytes at `*pos` of `buf`, `*pos` moved past them, if they are all there (else see
/// [`missing`]).
#[inline(always)]
pub(crate) fn take<'a>(buf: &'a [u8], pos: &mut usize, n: usize) -> Option<&'a [u8]> {
    let end = pos.checked_add(n).filter(|end| *end <= buf.len())?;
    let out = &buf[*pos..end];
    *pos = end;
    Some(out)
}

/// Why `n` more bytes are not in a value of `len` bytes.
#[cold]
pub(crate) fn missing(len: usize, n: usize) -> String {
    format!("ends after {len} bytes, {n} more needed")
}

/// A varint whose first byte, `first`, was read and says more follow: its value, read on from `*pos`
/// (at most 10 bytes in all, the tenth holding only bit 63), and whether it was in its fewest bytes
/// (a last byte of zero after others is not).
pub(crate) fn varint_rest(buf: &[u8], pos: &mut usize, first: u8) -> Result<(u64, bool), &'static str> {
    let mut value = u64::from(first & 0x7f);
    let mut shift = 7;
    loop {
        let byte = *buf.get(*pos).ok_or("ends inside a number")?;
        *pos += 1;
        if shift == 63 && byte > 1 {
            return Err("a number beyond 64 bits");
        }
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok((value, byte != 0));
        }
        shift += 7;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_varint_after_its_first_byte_and_says_whether_it_was_shortest() {
        let rest = |bytes: &[u8]| {
            let mut pos = 1;
            varint_rest(bytes, &mut pos, bytes[0]).map(|(v, shortest)| (v, shortest, pos))
        };
        assert_eq!(rest(&[0xac, 0x02]), Ok((300, true, 2)));
        assert_eq!(rest(&[0x81, 0x80, 0x00]), Ok((1, false, 3)), "padded with a zero byte");
        let max = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert_eq!(rest(&max), Ok((u64::MAX, true, 10)));
        let beyond = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
        assert_eq!(rest(&beyond), Err("a number beyond 64 bits"));
        assert_eq!(rest(&[0x80]), Err("ends inside a number"));
    }

    #[test]
    fn takes_a_run_of_bytes_or_says_how_many_are_missing() {
        let mut pos = 1;
        assert_eq!(take(b"abcd", &mut pos, 2), Some(&b"bc"[..]));
        assert_eq!(pos, 3);
        assert_eq!((take(b"abcd", &mut pos, 2), pos), (None, 3));
        assert_eq!((take(b"abcd", &mut pos, usize::MAX), pos), (None, 3));
        assert_eq!(missing(4, 2), "ends after 4 bytes, 2 more needed");
    }
}

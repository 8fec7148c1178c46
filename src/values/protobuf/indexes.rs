//! The message indexes of Confluent's Protobuf wire format: after the schema ID, which message of the
//! schema's file the value is — a count, then that many indexes (the top-level message's, then each
//! nested one's), all zig-zag varints; a count of 0 stands for `[0]`, the file's first message.

/// More nesting than any schema has: a corrupt count must not allocate.
const MAX_DEPTH: usize = 64;

/// The message indexes at the start of `body`, and the message's bytes after them.
pub fn split(body: &[u8]) -> Result<(Vec<i32>, &[u8]), String> {
    let mut pos = 0;
    let count = zigzag(body, &mut pos)?;
    if count == 0 {
        return Ok((vec![0], &body[pos..]));
    }
    let count = usize::try_from(count).ok().filter(|n| *n <= MAX_DEPTH);
    let count = count.ok_or_else(|| "message indexes: a count that is negative or beyond 64".to_string())?;
    let mut indexes = Vec::with_capacity(count);
    for _ in 0..count {
        let index = zigzag(body, &mut pos)?;
        indexes.push(i32::try_from(index).map_err(|_| format!("message indexes: index {index} is out of range"))?);
    }
    Ok((indexes, &body[pos..]))
}

/// The header of a value of the message at `indexes`, as Confluent's serializers write it after the
/// schema ID (`[0]` as a single 0).
pub fn header(indexes: &[i32]) -> Vec<u8> {
    let mut out = Vec::new();
    if indexes == [0] {
        out.push(0);
        return out;
    }
    let mut put = |v: i64| {
        let mut z = ((v << 1) ^ (v >> 63)) as u64;
        while z >= 0x80 {
            out.push((z as u8) | 0x80);
            z >>= 7;
        }
        out.push(z as u8);
    };
    put(indexes.len() as i64);
    indexes.iter().for_each(|i| put(i64::from(*i)));
    out
}

fn zigzag(buf: &[u8], pos: &mut usize) -> Result<i64, String> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *buf.get(*pos).ok_or("message indexes: the value ends inside them")?;
        *pos += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok((value >> 1) as i64 ^ -((value & 1) as i64));
        }
    }
    Err("message indexes: a number beyond 64 bits".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_first_message_shorthand_nested_paths_and_refuses_corrupt_counts() {
        assert_eq!(split(&[0, 9, 9]), Ok((vec![0], &[9u8, 9][..])), "0 stands for [0]");
        // [1, 2]: count 2 (zig-zag 4), indexes 1 (2) and 2 (4).
        assert_eq!(split(&[4, 2, 4, 7]), Ok((vec![1, 2], &[7u8][..])));
        assert_eq!(split(&header(&[1, 2])), Ok((vec![1, 2], &[][..])));
        assert_eq!(split(&header(&[0])), Ok((vec![0], &[][..])));
        assert_eq!(split(&header(&[3])), Ok((vec![3], &[][..])));
        assert!(split(&[]).unwrap_err().contains("ends inside"));
        assert!(split(&[1]).unwrap_err().contains("negative"), "zig-zag 1 is -1");
        assert!(split(&[0xfe, 0x01]).unwrap_err().contains("beyond 64"), "127 indexes");
        assert!(split(&[4, 2]).unwrap_err().contains("ends inside"));
    }
}

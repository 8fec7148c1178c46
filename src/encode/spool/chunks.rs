//! A file's bytes in memory as a list of chunks. Written, they are never moved: a growing `Vec` copies
//! all it holds at each doubling and touches up to twice its pages; read and uploaded, they are handed
//! on as they lie.

use std::io::{self, Read};

use bytes::Bytes;
use parquet::file::reader::{ChunkReader, Length};

/// The size of a full chunk. A file's first chunk grows by doubling up to it (so a small file holds
/// little); every later chunk is allocated at this size at once.
pub const CHUNK: usize = 1 << 20;

/// Bytes being written: the full chunks and the one being filled.
#[derive(Debug, Default)]
pub struct ChunkWriter {
    full: Vec<Bytes>,
    full_len: usize,
    current: Vec<u8>,
}

impl ChunkWriter {
    pub fn len(&self) -> usize {
        self.full_len + self.current.len()
    }

    /// The bytes allocated.
    pub fn capacity(&self) -> usize {
        self.full_len + self.current.capacity()
    }

    /// How many more bytes would be allocated to write `more`.
    pub fn growth(&self, more: usize) -> usize {
        let needed = self.len() + more;
        if needed <= self.capacity() {
            0
        } else if needed <= CHUNK {
            needed.max(2 * self.current.capacity()).min(CHUNK) - self.capacity()
        } else {
            needed.next_multiple_of(CHUNK) - self.capacity()
        }
    }

    pub fn write(&mut self, mut buf: &[u8]) {
        while !buf.is_empty() {
            if self.current.len() == CHUNK {
                self.full_len += CHUNK;
                self.full.push(Bytes::from(std::mem::take(&mut self.current)));
            }
            let n = (CHUNK - self.current.len()).min(buf.len());
            let needed = self.current.len() + n;
            if needed > self.current.capacity() {
                let size =
                    if self.full.is_empty() { needed.max(2 * self.current.capacity()).min(CHUNK) } else { CHUNK };
                self.current.reserve_exact(size - self.current.len());
            }
            self.current.extend_from_slice(&buf[..n]);
            buf = &buf[n..];
        }
    }

    /// The chunks written so far, in order.
    pub fn parts(&self) -> impl Iterator<Item = &[u8]> {
        self.full.iter().map(|b| b.as_ref()).chain(std::iter::once(self.current.as_slice()))
    }

    /// Ends writing, giving back the last chunk's spare capacity.
    pub fn finish(mut self) -> Chunks {
        let len = self.len();
        if !self.current.is_empty() {
            self.current.shrink_to_fit();
            self.full.push(Bytes::from(self.current));
        }
        Chunks { parts: self.full, len }
    }
}

/// Bytes in memory as chunks, cheap to clone and to slice.
#[derive(Debug, Clone)]
pub struct Chunks {
    parts: Vec<Bytes>,
    len: usize,
}

impl From<Bytes> for Chunks {
    fn from(bytes: Bytes) -> Self {
        let len = bytes.len();
        Self { parts: if len == 0 { Vec::new() } else { vec![bytes] }, len }
    }
}

impl Chunks {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn parts(&self) -> &[Bytes] {
        &self.parts
    }

    /// `len` bytes from `offset` (panics past the end, as slicing does).
    pub fn slice(&self, offset: usize, len: usize) -> Chunks {
        assert!(self.holds(offset, len), "{offset}+{len} is past the end of {} bytes", self.len);
        let mut parts = Vec::new();
        let (mut skip, mut left) = (offset, len);
        for part in &self.parts {
            if left == 0 {
                break;
            }
            if skip >= part.len() {
                skip -= part.len();
                continue;
            }
            let take = (part.len() - skip).min(left);
            parts.push(part.slice(skip..skip + take));
            (skip, left) = (0, left - take);
        }
        Chunks { parts, len }
    }

    /// Whether `len` bytes from `offset` are within these.
    fn holds(&self, offset: usize, len: usize) -> bool {
        offset.checked_add(len).is_some_and(|end| end <= self.len)
    }

    /// A read past the end is an error of the file being read, not a panic.
    fn check(&self, start: u64, length: usize) -> parquet::errors::Result<()> {
        match usize::try_from(start) {
            Ok(start) if self.holds(start, length) => Ok(()),
            _ => Err(parquet::errors::ParquetError::EOF(format!("{start}+{length} is past {} bytes", self.len))),
        }
    }

    /// The bytes in one piece: the chunk itself if there is one, else a copy.
    pub fn to_bytes(&self) -> Bytes {
        match self.parts.as_slice() {
            [] => Bytes::new(),
            [one] => one.clone(),
            parts => Bytes::from(parts.concat()),
        }
    }

    /// The CRC32 (ISO-HDLC, as S3's `ChecksumCRC32`) of `len` bytes from `offset`.
    pub fn crc32(&self, offset: usize, len: usize) -> u32 {
        let mut hasher = crc32fast::Hasher::new();
        self.slice(offset, len).parts.iter().for_each(|part| hasher.update(part));
        hasher.finalize()
    }

    /// Reads the bytes from `offset` to the end.
    pub fn reader(&self, offset: usize) -> ChunksReader {
        let rest = self.slice(offset, self.len - offset);
        ChunksReader { parts: rest.parts.into_iter() }
    }
}

/// Reads [`Chunks`] in order.
#[derive(Debug)]
pub struct ChunksReader {
    parts: std::vec::IntoIter<Bytes>,
}

impl Read for ChunksReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let Some(part) = self.parts.as_mut_slice().first_mut() else { return Ok(0) };
        let n = part.len().min(buf.len());
        buf[..n].copy_from_slice(&part.split_to(n));
        if part.is_empty() {
            self.parts.next();
        }
        Ok(n)
    }
}

impl Length for Chunks {
    fn len(&self) -> u64 {
        self.len as u64
    }
}

impl ChunkReader for Chunks {
    type T = ChunksReader;

    fn get_read(&self, start: u64) -> parquet::errors::Result<ChunksReader> {
        self.check(start, 0)?;
        Ok(self.reader(start as usize))
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        self.check(start, length)?;
        Ok(self.slice(start as usize, length).to_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(pieces: &[usize]) -> (ChunkWriter, Vec<u8>) {
        let (mut w, mut all) = (ChunkWriter::default(), Vec::new());
        for (i, &n) in pieces.iter().enumerate() {
            let piece: Vec<u8> = (0..n).map(|j| (i * 7 + j) as u8).collect();
            w.write(&piece);
            all.extend_from_slice(&piece);
        }
        (w, all)
    }

    #[test]
    fn large_writes_fill_whole_chunks_without_moving_them_and_small_files_stay_small() {
        let (w, all) = written(&[100, 3 * CHUNK, CHUNK / 2, 10]);
        assert_eq!((w.len(), w.full.len()), (all.len(), 3));
        assert_eq!(w.capacity(), 4 * CHUNK, "the fourth chunk allocated at once");
        let first = w.full[0].as_ptr();
        let chunks = w.finish();
        assert_eq!(chunks.parts()[0].as_ptr(), first, "a full chunk is handed on where it was written");
        assert_eq!(chunks.parts().iter().map(|p| p.len()).collect::<Vec<_>>(), [CHUNK, CHUNK, CHUNK, CHUNK / 2 + 110]);
        assert_eq!(chunks.to_bytes().as_ref(), all.as_slice());
        let (small, _) = written(&[100, 60]);
        assert_eq!((small.len(), small.capacity()), (160, 200), "a small file's chunk grows by doubling");
    }

    #[test]
    fn growth_tells_what_a_write_would_allocate() {
        for pieces in [&[][..], &[100], &[CHUNK], &[CHUNK + 5], &[3 * CHUNK / 4, 1]] {
            for more in [0, 1, 100, CHUNK / 2, CHUNK, 3 * CHUNK + 17] {
                let (mut w, _) = written(pieces);
                let before = w.capacity();
                let predicted = w.growth(more);
                w.write(&vec![0; more]);
                assert_eq!(w.capacity() - before, predicted, "{pieces:?} then {more}");
            }
        }
    }

    #[test]
    fn slices_reads_and_checksums_agree_with_the_bytes_at_every_boundary() {
        let (w, all) = written(&[CHUNK - 3, 7, CHUNK, 5]);
        let chunks = w.finish();
        for (offset, len) in
            [(0, all.len()), (CHUNK - 4, 8), (CHUNK, CHUNK), (all.len() - 1, 1), (5, 0), (all.len(), 0)]
        {
            let part = chunks.slice(offset, len);
            let want = &all[offset..offset + len];
            assert_eq!(part.to_bytes().as_ref(), want, "slice {offset}+{len}");
            assert_eq!(chunks.crc32(offset, len), crc32fast::hash(want));
            assert_eq!(chunks.get_bytes(offset as u64, len).unwrap().as_ref(), want);
            let mut read = Vec::new();
            let mut reader = chunks.reader(offset);
            let mut buf = [0u8; 1000];
            loop {
                let n = reader.read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                read.extend_from_slice(&buf[..n]);
            }
            assert_eq!(read, &all[offset..], "read from {offset}");
        }
        assert!(chunks.get_read(all.len() as u64 + 1).is_err() && chunks.get_bytes(5, usize::MAX).is_err());
    }
}

//! Where an encoded file waits until it is sealed and uploaded: memory while it fits (its threshold,
//! and the spools' limit together), else a file in the spool directory. The final object name holds the end offset, known only at roll, and S3
//! has no rename, so the whole file is spooled and uploaded once under its final name.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parquet::file::reader::{ChunkReader, Length};

mod chunks;

use chunks::ChunkWriter;
pub use chunks::{Chunks, ChunksReader, CHUNK};

/// Bytes held in memory and on disk by every spool of the process, against the global budgets.
#[derive(Debug)]
pub struct SpoolUsage {
    memory: AtomicU64,
    disk: AtomicU64,
    /// What the spools may hold in memory together: a spool whose growth would pass it moves to disk.
    memory_limit: u64,
    /// Spools moved from memory to disk so far.
    moved_to_disk: AtomicU64,
}

impl Default for SpoolUsage {
    /// No limit on the spools' memory together (each still moves to disk past its threshold).
    fn default() -> Self {
        Self::with_memory_limit(u64::MAX)
    }
}

impl SpoolUsage {
    pub fn with_memory_limit(memory_limit: u64) -> Self {
        Self { memory: AtomicU64::new(0), disk: AtomicU64::new(0), memory_limit, moved_to_disk: AtomicU64::new(0) }
    }

    /// How many spools moved from memory to disk so far (past their threshold or the limit).
    pub fn moved_to_disk(&self) -> u64 {
        self.moved_to_disk.load(Ordering::Relaxed)
    }

    pub fn memory(&self) -> u64 {
        self.memory.load(Ordering::Relaxed)
    }

    pub fn disk(&self) -> u64 {
        self.disk.load(Ordering::Relaxed)
    }

    fn add(&self, on_disk: bool, n: u64) {
        let counter = if on_disk { &self.disk } else { &self.memory };
        counter.fetch_add(n, Ordering::Relaxed);
    }

    fn sub(&self, on_disk: bool, n: u64) {
        let counter = if on_disk { &self.disk } else { &self.memory };
        counter.fetch_sub(n, Ordering::Relaxed);
    }
}

/// How spools are made.
#[derive(Debug, Clone)]
pub struct SpoolOptions {
    /// Beyond this many bytes a spool moves to a file in `dir` (and before, if the spools in memory
    /// together would pass their limit, `SpoolUsage::with_memory_limit`).
    pub memory_threshold: u64,
    pub dir: PathBuf,
    pub usage: Arc<SpoolUsage>,
}

impl SpoolOptions {
    /// Removes spool files left by processes that are gone (their data was never acknowledged, so the
    /// records will be read again from Kafka), and makes sure the directory exists. Files of a live
    /// process sharing the directory are left alone.
    pub fn prepare_dir(&self) -> io::Result<()> {
        fs::create_dir_all(&self.dir)?;
        remove_files_of_dead_processes(&self.dir, &host_name(), ".spool")
    }
}

/// A temporary file name no other process, here or on another host sharing the directory, uses:
/// `<host>~<pid>~<random>-<seq><suffix>`.
pub fn temp_name(host: &str, seq: u64, suffix: &str) -> String {
    format!("{host}~{}~{:016x}-{seq}{suffix}", std::process::id(), fastrand::u64(..))
}

/// This host's name, as temporary file names carry it.
pub fn host_name() -> String {
    let host = fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_string()).unwrap_or_default();
    let host: String = host.chars().filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')).collect();
    if host.is_empty() {
        "unknown-host".into()
    } else {
        host
    }
}

/// Removes the files in `dir` named by [`temp_name`] on this host (`host`) whose process is gone. Files
/// of other hosts sharing the directory are left alone: their processes cannot be seen from here.
pub fn remove_files_of_dead_processes(dir: &Path, host: &str, suffix: &str) -> io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(stem) = name.strip_suffix(suffix) else { continue };
        let mut parts = stem.split('~');
        let (Some(file_host), Some(pid)) = (parts.next(), parts.next().and_then(|p| p.parse::<u32>().ok())) else {
            continue;
        };
        if file_host == host && !Path::new(&format!("/proc/{pid}")).exists() {
            fs::remove_file(entry.path())?;
        }
    }
    Ok(())
}

/// Removes the files in `dir` ending in `suffix` last modified more than `older_than` ago, whoever wrote
/// them (for a directory other hosts write to as well).
pub fn remove_files_older_than(dir: &Path, suffix: &str, older_than: std::time::Duration) -> io::Result<Vec<PathBuf>> {
    let mut removed = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let stale = entry.metadata()?.modified()?.elapsed().is_ok_and(|age| age > older_than);
        if stale && entry.file_name().to_string_lossy().ends_with(suffix) {
            fs::remove_file(entry.path())?;
            removed.push(entry.path());
        }
    }
    Ok(removed)
}

static SPOOL_SEQ: AtomicU64 = AtomicU64::new(0);

enum Storage {
    Memory(ChunkWriter),
    Disk { path: PathBuf, file: BufWriter<File> },
}

/// An open spool: `Write` it, then [`Spool::seal`] it.
pub struct Spool {
    config: SpoolOptions,
    storage: Storage,
    len: u64,
    /// What the usage counts for this spool: in memory its chunks' capacity (up to a chunk more than its
    /// length; a first chunk grows by doubling), on disk its length.
    counted: u64,
}

impl Spool {
    pub fn new(config: SpoolOptions) -> Self {
        Self { config, storage: Storage::Memory(ChunkWriter::default()), len: 0, counted: 0 }
    }

    /// A new, empty spool made as this one was.
    pub fn sibling(&self) -> Self {
        Self::new(self.config.clone())
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn on_disk(&self) -> bool {
        matches!(self.storage, Storage::Disk { .. })
    }

    fn move_to_disk(&mut self) -> io::Result<()> {
        let Storage::Memory(buf) = &mut self.storage else { return Ok(()) };
        let name = temp_name(&host_name(), SPOOL_SEQ.fetch_add(1, Ordering::Relaxed), ".spool");
        let path = self.config.dir.join(name);
        let mut file = BufWriter::with_capacity(
            256 * 1024,
            OpenOptions::new().create_new(true).read(true).write(true).open(&path)?,
        );
        for part in buf.parts() {
            file.write_all(part)?;
        }
        let moved = buf.len() as u64;
        self.config.usage.sub(false, self.counted);
        self.config.usage.add(true, moved);
        self.counted = moved;
        self.config.usage.moved_to_disk.fetch_add(1, Ordering::Relaxed);
        self.storage = Storage::Disk { path, file };
        Ok(())
    }

    /// Ends writing; the result is what gets uploaded.
    pub fn seal(mut self) -> io::Result<SealedSpool> {
        let len = self.len;
        let usage = self.config.usage.clone();
        let storage = std::mem::replace(&mut self.storage, Storage::Memory(ChunkWriter::default()));
        let mut counted = std::mem::take(&mut self.counted);
        self.len = 0;
        let data = match storage {
            Storage::Memory(buf) => {
                // Sealed files wait for their upload: without their last chunk's spare capacity.
                let chunks = buf.finish();
                usage.sub(false, counted - chunks.len() as u64);
                counted = chunks.len() as u64;
                SpoolData::Memory(chunks)
            }
            Storage::Disk { path, file } => {
                // Written through to the page cache, never synced: after a crash the records are read
                // from Kafka again and the spool file is removed.
                file.into_inner().map_err(|e| e.into_error())?;
                SpoolData::Disk(path)
            }
        };
        Ok(SealedSpool { data, len, counted, usage })
    }

    /// Whether `more` bytes no longer fit in memory: past this spool's threshold, or, once it holds a
    /// chunk, the chunks they need would take the spools in memory together past their limit. A smaller
    /// spool stays (a file on disk costs a write buffer and a descriptor the budget does not see): it
    /// counts against the budget, which rolls the largest files early or holds records back.
    fn outgrows_memory(&self, more: usize) -> bool {
        let Storage::Memory(mem) = &self.storage else { return false };
        if (mem.len() + more) as u64 > self.config.memory_threshold {
            return true;
        }
        let growth = mem.growth(more);
        let usage = &self.config.usage;
        mem.len() >= CHUNK && growth > 0 && usage.memory().saturating_add(growth as u64) > usage.memory_limit
    }
}

impl Write for Spool {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.outgrows_memory(buf.len()) {
            self.move_to_disk()?;
        }
        let counted = match &mut self.storage {
            Storage::Memory(mem) => {
                mem.write(buf);
                mem.capacity() as u64
            }
            Storage::Disk { file, .. } => {
                file.write_all(buf)?;
                self.counted + buf.len() as u64
            }
        };
        self.len += buf.len() as u64;
        self.config.usage.add(self.on_disk(), counted - self.counted);
        self.counted = counted;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.storage {
            Storage::Memory(_) => Ok(()),
            Storage::Disk { file, .. } => file.flush(),
        }
    }
}

impl Drop for Spool {
    fn drop(&mut self) {
        self.config.usage.sub(self.on_disk(), self.counted);
        if let Storage::Disk { path, .. } = &self.storage {
            let _ = fs::remove_file(path);
        }
    }
}

/// The bytes of a sealed spool.
#[derive(Debug, Clone)]
pub enum SpoolData {
    Memory(Chunks),
    Disk(PathBuf),
}

impl SpoolData {
    /// Bytes in memory, in one piece.
    pub fn memory(bytes: impl Into<bytes::Bytes>) -> Self {
        SpoolData::Memory(Chunks::from(bytes.into()))
    }

    /// The CRC32 (ISO-HDLC, as S3's `ChecksumCRC32`) of `len` bytes from `offset`.
    pub fn crc32(&self, offset: u64, len: u64) -> io::Result<u32> {
        match self {
            SpoolData::Memory(chunks) => Ok(chunks.crc32(offset as usize, len as usize)),
            SpoolData::Disk(path) => {
                let mut file = File::open(path)?;
                file.seek(SeekFrom::Start(offset))?;
                let mut hasher = crc32fast::Hasher::new();
                let mut buf = vec![0u8; 256 * 1024];
                let mut left = len;
                while left > 0 {
                    let want = left.min(buf.len() as u64) as usize;
                    let n = file.read(&mut buf[..want])?;
                    if n == 0 {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            format!("{} is short", path.display()),
                        ));
                    }
                    hasher.update(&buf[..n]);
                    left -= n as u64;
                }
                Ok(hasher.finalize())
            }
        }
    }
}

/// A finished file waiting for upload. Dropping it frees its budget and deletes its spool file.
#[derive(Debug)]
pub struct SealedSpool {
    data: SpoolData,
    len: u64,
    /// What the usage counts for it (see `Spool::counted`).
    counted: u64,
    usage: Arc<SpoolUsage>,
}

impl SealedSpool {
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn data(&self) -> &SpoolData {
        &self.data
    }

    /// The file's bytes for Parquet's reader: in memory, or read from the spool file as needed.
    pub fn reader(&self) -> io::Result<SpoolReader> {
        Ok(match &self.data {
            SpoolData::Memory(chunks) => SpoolReader::Memory(chunks.clone()),
            SpoolData::Disk(path) => SpoolReader::Disk(File::open(path)?),
        })
    }

    /// Reads the whole file into memory (for decoding in checks; uploads stream from disk).
    pub fn read_all(&self) -> io::Result<bytes::Bytes> {
        match &self.data {
            SpoolData::Memory(chunks) => Ok(chunks.to_bytes()),
            SpoolData::Disk(path) => Ok(fs::read(path)?.into()),
        }
    }
}

/// A sealed spool's bytes as Parquet reads them (see [`SealedSpool::reader`]).
pub enum SpoolReader {
    Memory(Chunks),
    Disk(File),
}

impl Length for SpoolReader {
    fn len(&self) -> u64 {
        match self {
            SpoolReader::Memory(b) => Length::len(b),
            SpoolReader::Disk(f) => Length::len(f),
        }
    }
}

impl ChunkReader for SpoolReader {
    type T = Box<dyn Read + Send>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        Ok(match self {
            SpoolReader::Memory(b) => Box::new(b.get_read(start)?),
            SpoolReader::Disk(f) => Box::new(f.get_read(start)?),
        })
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<bytes::Bytes> {
        match self {
            SpoolReader::Memory(b) => b.get_bytes(start, length),
            SpoolReader::Disk(f) => f.get_bytes(start, length),
        }
    }
}

impl Drop for SealedSpool {
    fn drop(&mut self) {
        let on_disk = matches!(self.data, SpoolData::Disk(_));
        self.usage.sub(on_disk, self.counted);
        if let SpoolData::Disk(path) = &self.data {
            let _ = fs::remove_file(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(dir: &Path, threshold: u64) -> SpoolOptions {
        SpoolOptions { memory_threshold: threshold, dir: dir.to_path_buf(), usage: Arc::default() }
    }

    #[test]
    fn memory_is_counted_as_allocated_and_sealed_spools_give_back_their_spare_capacity() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = config(dir.path(), 1 << 20);
        let mut s = Spool::new(cfg.clone());
        s.write_all(&[1; 600]).unwrap();
        s.write_all(&[2; 10]).unwrap();
        let counted = cfg.usage.memory();
        assert!(counted >= 1200, "the buffer doubled to hold 610 bytes, and counts so: {counted}");
        let sealed = s.seal().unwrap();
        assert_eq!((sealed.len(), cfg.usage.memory()), (610, 610));
        drop(sealed);
        assert_eq!(cfg.usage.memory(), 0);
    }

    #[test]
    fn small_spools_stay_in_memory_and_count_against_the_memory_budget() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = config(dir.path(), 100);
        let mut s = Spool::new(cfg.clone());
        s.write_all(&[1; 60]).unwrap();
        assert!(!s.on_disk());
        assert_eq!((cfg.usage.memory(), cfg.usage.disk()), (60, 0));
        let sealed = s.seal().unwrap();
        assert!(matches!(sealed.data(), SpoolData::Memory(_)));
        assert_eq!(sealed.read_all().unwrap().as_ref(), &[1; 60]);
        assert_eq!(cfg.usage.memory(), 60);
        drop(sealed);
        assert_eq!(cfg.usage.memory(), 0);
    }

    #[test]
    fn spools_of_a_chunk_or_more_move_to_disk_when_together_they_would_pass_the_memory_limit() {
        let dir = tempfile::tempdir().unwrap();
        let usage = Arc::new(SpoolUsage::with_memory_limit(5 * CHUNK as u64 / 2));
        let cfg = SpoolOptions { memory_threshold: 1 << 30, dir: dir.path().into(), usage: usage.clone() };
        let [mut a, mut b, mut small] = [(); 3].map(|()| Spool::new(cfg.clone()));
        a.write_all(&vec![1; CHUNK]).unwrap();
        b.write_all(&vec![2; CHUNK]).unwrap();
        small.write_all(&vec![3; CHUNK / 2]).unwrap();
        assert_eq!(usage.memory(), 5 * CHUNK as u64 / 2, "two and a half chunks fit the limit");
        small.write_all(&[3]).unwrap();
        assert!(!small.on_disk(), "a spool under a chunk stays, over the limit: the budget sees it");
        assert_eq!(usage.memory(), 3 * CHUNK as u64);
        a.write_all(&[4]).unwrap();
        assert!(a.on_disk(), "a's second chunk would take the spools past the limit");
        assert_eq!((usage.memory(), usage.disk()), (2 * CHUNK as u64, CHUNK as u64 + 1));
        drop(small);
        b.write_all(&[5]).unwrap();
        assert!(!b.on_disk(), "b's second chunk fits once the small spool is gone");
        assert_eq!(usage.moved_to_disk(), 1, "one spool moved to disk");
        let sealed = a.seal().unwrap();
        assert_eq!(&sealed.read_all().unwrap()[CHUNK - 2..], &[1, 1, 4]);
        assert_eq!(usage.disk(), CHUNK as u64 + 1);
    }

    #[test]
    fn large_spools_move_to_disk_and_clean_up() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = config(dir.path(), 100);
        let mut s = Spool::new(cfg.clone());
        s.write_all(&[7; 80]).unwrap();
        s.write_all(&[8; 80]).unwrap();
        assert!(s.on_disk());
        assert_eq!((cfg.usage.memory(), cfg.usage.disk(), cfg.usage.moved_to_disk()), (0, 160, 1));
        let sealed = s.seal().unwrap();
        let SpoolData::Disk(path) = sealed.data().clone() else { panic!("expected a spool file") };
        let data = sealed.read_all().unwrap();
        assert_eq!(&data[..80], &[7; 80]);
        assert_eq!(&data[80..], &[8; 80]);
        drop(sealed);
        assert!(!path.exists());
        assert_eq!(cfg.usage.disk(), 0);
    }

    #[test]
    fn checksums_of_any_range_agree_in_memory_and_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        let bytes: Vec<u8> = (0..600_000u32).map(|i| (i * 7 % 251) as u8).chain(*b"123456789").collect();
        let on_disk = {
            let mut s = Spool::new(config(dir.path(), 100));
            s.write_all(&bytes).unwrap();
            s.seal().unwrap()
        };
        let in_memory = SpoolData::memory(bytes.clone());
        // The standard CRC-32 check value of "123456789".
        assert_eq!(in_memory.crc32(600_000, 9).unwrap(), 0xCBF4_3926);
        for (offset, len) in [(0, 600_009), (600_000, 9), (1, 300_000), (262_144, 262_145), (5, 0)] {
            assert_eq!(
                on_disk.data().crc32(offset, len).unwrap(),
                in_memory.crc32(offset, len).unwrap(),
                "{offset}+{len}"
            );
        }
        assert_eq!(on_disk.data().crc32(600_000, 10).unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn dropping_an_open_spool_frees_everything() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = config(dir.path(), 10);
        let mut s = Spool::new(cfg.clone());
        s.write_all(&[0; 50]).unwrap();
        drop(s);
        assert_eq!((cfg.usage.memory(), cfg.usage.disk()), (0, 0));
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn prepare_dir_removes_only_this_hosts_spools_of_dead_processes() {
        let dir = tempfile::tempdir().unwrap();
        let here = host_name();
        let dead = format!("{here}~{}~00-4.spool", u32::MAX);
        let alive = format!("{here}~1~00-4.spool");
        let other_host = format!("another-host~{}~00-4.spool", u32::MAX);
        for name in [&dead, &alive, &other_host, &"keep.txt".to_string()] {
            fs::write(dir.path().join(name), b"x").unwrap();
        }
        config(dir.path(), 10).prepare_dir().unwrap();
        let mut names: Vec<String> =
            fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        let mut want = vec![alive, other_host, "keep.txt".to_string()];
        want.sort();
        assert_eq!(names, want, "the dead process's spool of this host goes; others stay");
    }

    #[test]
    fn temp_names_differ_even_for_one_pid_and_sequence() {
        assert_ne!(temp_name("h", 1, ".tmp"), temp_name("h", 1, ".tmp"));
        assert!(temp_name("h", 7, ".tmp").starts_with(&format!("h~{}~", std::process::id())));
    }
}

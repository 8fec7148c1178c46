//! A local directory as an object store: for the embedded demo and for users who archive to disk.
//! Objects appear atomically: written to a temporary file, synced, then hard-linked under the final
//! name (which fails if the name exists, giving put-if-absent without a race). Durably: the file, its
//! name in its folder, and every folder created for it in its parent are synced before the put
//! returns, so after a power loss an object (a claim of the next file, say) never survives one that
//! was durable before it.
//!
//! The file work runs on a blocking thread, which dropping the put's future cannot stop; so the future
//! carries a gate: once it is dropped (an aborted upload), the link is never made, and the drop waits
//! for a link already under way. When an aborted put's task has ended, nothing of it appears any more.

use std::collections::HashSet;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;

use super::{ObjectStore, PutOutcome, StoreError};
use crate::archive::keys::{ListPage, ListRequest};
use crate::encode::spool::{host_name, remove_files_older_than, temp_name, SpoolData};

const TMP_DIR: &str = ".ksa-tmp";
static TMP_SEQ: AtomicU64 = AtomicU64::new(0);

#[derive(Debug, Clone)]
pub struct LocalStore {
    root: PathBuf,
    /// Names this host in temporary file names (the directory may be shared by several hosts).
    host: String,
    /// Folders this process has made durable in their parents (see `create_folders`).
    durable: Arc<Mutex<HashSet<PathBuf>>>,
}

impl LocalStore {
    /// Opens (creating it if needed) an archive directory.
    pub fn new(root: impl Into<PathBuf>) -> Result<Self, StoreError> {
        let root = root.into();
        let tmp = root.join(TMP_DIR);
        fs::create_dir_all(&tmp).map_err(|e| StoreError::Permanent {
            what: format!("cannot prepare archive directory {}: {e}", root.display()),
            fix: "check that the path is writable by this user".into(),
        })?;
        Ok(Self { root, host: host_name(), durable: Arc::default() })
    }

    /// Removes temporary files older than `older_than` that crashed writers left behind (the local
    /// counterpart of stale multipart uploads). By age only: the directory may be shared by other hosts,
    /// whose processes cannot be checked from here. Returns the files removed.
    pub fn remove_stale_temp_files(&self, older_than: std::time::Duration) -> Result<Vec<PathBuf>, StoreError> {
        let tmp = self.root.join(TMP_DIR);
        remove_files_older_than(&tmp, ".tmp", older_than).map_err(|e| io_err("clean", &tmp, e))
    }

    fn path_of(&self, key: &str) -> Result<PathBuf, StoreError> {
        let bad = key.is_empty()
            || key.starts_with('/')
            || key.split('/').any(|seg| seg.is_empty() || seg == "." || seg == ".." || seg == TMP_DIR);
        if bad {
            return Err(StoreError::Permanent {
                what: format!("key {key:?} cannot be stored in a directory"),
                fix: "keys must be relative paths without empty, '.' or '..' segments".into(),
            });
        }
        Ok(self.root.join(key))
    }
}

fn io_err(op: &str, path: &Path, e: io::Error) -> StoreError {
    match e.kind() {
        io::ErrorKind::NotFound => StoreError::NotFound(path.display().to_string()),
        io::ErrorKind::PermissionDenied => StoreError::Permanent {
            what: format!("{op} {}: permission denied", path.display()),
            fix: "check the archive directory's permissions".into(),
        },
        _ => StoreError::Transient(format!("{op} {}: {e}", path.display())),
    }
}

/// Whether the put's future is gone (its upload was aborted): then its object must not appear. Locked
/// across the link, so a drop waits for a link already under way.
#[derive(Clone, Default)]
struct Gate(Arc<Mutex<bool>>);

/// Closes the gate when the put's future is dropped, finished or not.
struct CloseOnDrop(Gate);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        *self.0 .0.lock().unwrap_or_else(|e| e.into_inner()) = true;
    }
}

fn put_blocking(store: &LocalStore, path: &Path, data: &SpoolData, gate: &Gate) -> Result<PutOutcome, StoreError> {
    let (root, host) = (&store.root, &store.host);
    if path.exists() {
        return Ok(PutOutcome::AlreadyExists);
    }
    let parent = path.parent().expect("keys have a parent folder");
    create_folders(parent, root, &store.durable, &mut sync_folder).map_err(|e| io_err("create folder", parent, e))?;
    let tmp = root.join(TMP_DIR).join(temp_name(host, TMP_SEQ.fetch_add(1, Ordering::Relaxed), ".tmp"));
    // A new file, never an existing one: a clash of names fails instead of mixing two writers' bytes.
    let mut f =
        fs::OpenOptions::new().write(true).create_new(true).open(&tmp).map_err(|e| io_err("create", &tmp, e))?;
    let result = (|| {
        match data {
            SpoolData::Memory(chunks) => {
                for part in chunks.parts() {
                    f.write_all(part).map_err(|e| io_err("write", &tmp, e))?;
                }
            }
            SpoolData::Disk(src) => {
                let mut from = fs::File::open(src).map_err(|e| io_err("open", src, e))?;
                io::copy(&mut from, &mut f).map_err(|e| io_err("copy to", &tmp, e))?;
            }
        }
        f.sync_all().map_err(|e| io_err("sync", &tmp, e))?;
        let closed = gate.0.lock().unwrap_or_else(|e| e.into_inner());
        if *closed {
            return Err(StoreError::Transient(format!("the upload of {} was abandoned", path.display())));
        }
        let linked = fs::hard_link(&tmp, path);
        drop(closed);
        match linked {
            Ok(()) => {
                sync_folder(parent).map_err(|e| io_err("sync", parent, e))?;
                Ok(PutOutcome::Created)
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(PutOutcome::AlreadyExists),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                // Its folder was removed from outside since this process made it: made again on the retry.
                store.durable.lock().unwrap_or_else(|e| e.into_inner()).clear();
                Err(StoreError::Transient(format!("link {}: its folder was removed meanwhile", path.display())))
            }
            Err(e) => Err(io_err("link", path, e)),
        }
    })();
    let _ = fs::remove_file(&tmp);
    result
}

/// Makes the names in `folder` durable.
fn sync_folder(folder: &Path) -> io::Result<()> {
    fs::File::open(folder)?.sync_all()
}

/// Creates `folder` (below `root`) and the folders above it that are missing, and makes each durable
/// in its parent (`create_dir_all` syncs nothing: a new folder, and everything in it, could be gone
/// after a power loss while a later object in an older folder survives). A folder another writer
/// created (another thread or process, which may not have synced it yet) is synced here too, once per
/// process: `durable` holds the folders done.
fn create_folders(
    folder: &Path,
    root: &Path,
    durable: &Mutex<HashSet<PathBuf>>,
    sync: &mut impl FnMut(&Path) -> io::Result<()>,
) -> io::Result<()> {
    if folder == root || durable.lock().unwrap_or_else(|e| e.into_inner()).contains(folder) {
        return Ok(());
    }
    let parent = folder.parent().ok_or_else(|| io::Error::other("no folder to create it in"))?;
    create_folders(parent, root, durable, sync)?;
    match fs::create_dir(folder) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
        _ => sync(parent)?,
    }
    let mut durable = durable.lock().unwrap_or_else(|e| e.into_inner());
    // Bounded (time-bucket folders come every hour): forgetting costs a sync more, nothing else.
    if durable.len() >= DURABLE_FOLDERS_KEPT {
        durable.clear();
    }
    durable.insert(folder.to_path_buf());
    Ok(())
}

/// How many folders `create_folders` remembers as durable at most.
const DURABLE_FOLDERS_KEPT: usize = 10_000;

/// Every file below `dir`, as keys relative to `root`.
fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) -> io::Result<()> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            if path != root.join(TMP_DIR) {
                walk(root, &path, out)?;
            }
        } else if let Ok(rel) = path.strip_prefix(root) {
            if let Some(s) = rel.to_str() {
                out.push(s.to_string());
            }
        }
    }
    Ok(())
}

fn list_blocking(root: &Path, req: &ListRequest, max_keys: usize) -> Result<ListPage, StoreError> {
    // Walk only the deepest folder the prefix names; filter the rest by string comparison.
    let base = match req.prefix.rfind('/') {
        Some(i) => root.join(&req.prefix[..i]),
        None => root.to_path_buf(),
    };
    let mut keys = Vec::new();
    walk(root, &base, &mut keys).map_err(|e| io_err("list", &base, e))?;
    keys.retain(|k| k.starts_with(&req.prefix) && req.start_after.as_ref().is_none_or(|sa| k > sa));
    keys.sort_unstable();
    let truncated = keys.len() > max_keys;
    keys.truncate(max_keys);
    Ok(ListPage { keys, truncated })
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(f).await.map_err(|e| StoreError::Transient(format!("local store task failed: {e}")))?
}

#[async_trait]
impl ObjectStore for LocalStore {
    fn describe(&self) -> String {
        format!("file://{}", self.root.display())
    }

    async fn put_if_absent(&self, key: &str, data: &SpoolData, _len: u64) -> Result<PutOutcome, StoreError> {
        let path = self.path_of(key)?;
        let (store, data) = (self.clone(), data.clone());
        let gate = Gate::default();
        let _close = CloseOnDrop(gate.clone());
        blocking(move || put_blocking(&store, &path, &data, &gate)).await
    }

    async fn list(&self, req: &ListRequest, max_keys: usize) -> Result<ListPage, StoreError> {
        let root = self.root.clone();
        let req = req.clone();
        blocking(move || list_blocking(&root, &req, max_keys)).await
    }

    async fn get(&self, key: &str) -> Result<Bytes, StoreError> {
        let path = self.path_of(key)?;
        let key = key.to_string();
        blocking(move || match fs::read(&path) {
            Ok(b) => Ok(Bytes::from(b)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Err(StoreError::NotFound(key)),
            Err(e) => Err(io_err("read", &path, e)),
        })
        .await
    }

    async fn get_range(&self, key: &str, range: std::ops::Range<u64>) -> Result<Bytes, StoreError> {
        use std::io::{Read, Seek};
        let path = self.path_of(key)?;
        let key = key.to_string();
        blocking(move || {
            let mut file = match fs::File::open(&path) {
                Ok(file) => file,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(StoreError::NotFound(key)),
                Err(e) => return Err(io_err("open", &path, e)),
            };
            let mut out = vec![0; (range.end - range.start) as usize];
            file.seek(io::SeekFrom::Start(range.start))
                .and_then(|_| file.read_exact(&mut out))
                .map_err(|e| io_err("read", &path, e))?;
            Ok(Bytes::from(out))
        })
        .await
    }

    async fn head(&self, key: &str) -> Result<Option<u64>, StoreError> {
        let path = self.path_of(key)?;
        blocking(move || match fs::metadata(&path) {
            Ok(m) if m.is_file() => Ok(Some(m.len())),
            Ok(_) => Ok(None),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_err("stat", &path, e)),
        })
        .await
    }

    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        let path = self.path_of(key)?;
        blocking(move || match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_err("delete", &path, e)),
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_folder_created_for_an_object_is_synced_into_its_parent() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir(root.join("topic=t")).unwrap();
        let (durable, mut synced) = (Mutex::default(), Vec::new());
        let mut sync = |p: &Path| {
            synced.push(p.strip_prefix(root).unwrap().display().to_string());
            sync_folder(p)
        };
        let folder = root.join("topic=t/dt=2026-12-01/hour=10/partition=0");
        create_folders(&folder, root, &durable, &mut sync).unwrap();
        assert!(folder.is_dir());
        // topic=t was there already (another writer may not have synced it): synced into the root too.
        assert_eq!(synced, vec!["", "topic=t", "topic=t/dt=2026-12-01", "topic=t/dt=2026-12-01/hour=10"]);
        synced.clear();
        let mut sync = |p: &Path| {
            synced.push(p.strip_prefix(root).unwrap().display().to_string());
            sync_folder(p)
        };
        create_folders(&folder, root, &durable, &mut sync).unwrap();
        create_folders(&root.join("topic=t/dt=2026-12-01/hour=11"), root, &durable, &mut sync).unwrap();
        assert_eq!(synced, vec!["topic=t/dt=2026-12-01"], "only the new folder, once");
    }
}

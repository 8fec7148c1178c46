//! Google Cloud Storage and Azure Blob Storage as archives, through the object_store crate: its
//! credential chains, listing, reads and deletes. The writes that carry the guarantees are ours, on its
//! HTTP client and credentials, because object_store has no conditional create of a large object: on
//! GCS a JSON API upload with `ifGenerationMatch=0` (one request, or a resumable upload in chunks,
//! checked again when the last chunk lands); on Azure a Put Blob, or Put Block ×N then Put Block List,
//! with `If-None-Match: *`. Both make a large object visible whole or not at all, and what a crash
//! leaves (a resumable session, uncommitted blocks) is invisible and expires by itself within a week,
//! so there is nothing to sweep.

mod azure;
mod errors;
mod gcs;
mod options;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use object_store::list::{PaginatedListOptions, PaginatedListStore};
use object_store::path::Path;
use object_store::{GetOptions, ObjectStoreExt, PutPayload};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::{ObjectStore, PutOutcome, StoreError};
use crate::archive::keys::{ListPage, ListRequest};
use crate::encode::spool::SpoolData;

pub use self::azure::connect_azure;
use self::errors::{classify, Op};
pub use self::gcs::connect_gcs;
use self::options::account_of_endpoint;
pub use self::options::{
    parse_connection_string, AzureCredentials, AzureOptions, ConnectionString, GcsOptions, AZURITE_ACCOUNT,
    AZURITE_ACCOUNT_KEY,
};

/// An object_store backend that lists one page at a time (GCS's and Azure's do).
trait Backend: object_store::ObjectStore + PaginatedListStore {}
impl<T: object_store::ObjectStore + PaginatedListStore> Backend for T {}

/// The conditional create of one backend (a small object in one request, a large one in parts).
#[async_trait]
trait CreateIfAbsent: Send + Sync {
    async fn create(&self, key: &str, data: &SpoolData, len: u64) -> Result<PutOutcome, StoreError>;
}

/// An archive on Google Cloud Storage or Azure Blob Storage.
pub struct CloudStore {
    backend: Arc<dyn Backend>,
    writer: Box<dyn CreateIfAbsent>,
    /// `gs://bucket` or `az://container`, with the account and the endpoint, for messages.
    describe: String,
}

/// `key` as object_store's path (our keys always parse; a foreign one may not).
fn path(op: Op, key: &str, describe: &str) -> Result<Path, StoreError> {
    Path::parse(key).map_err(|e| StoreError::Permanent {
        what: format!("{op} {key:?} on {describe}: {e}"),
        fix: "object keys must not have empty segments or control characters".into(),
    })
}

/// The object's size, or `None` when it does not exist.
async fn size(backend: &dyn object_store::ObjectStore, key: &str, describe: &str) -> Result<Option<u64>, StoreError> {
    match backend.head(&path(Op::Head, key, describe)?).await {
        Ok(meta) => Ok(Some(meta.size)),
        Err(object_store::Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(classify(Op::Head, key, describe, e)),
    }
}

/// object_store retries a failed request itself (5xx, connection errors, timeouts of reads) a few
/// times within a minute; the archiver's own retries go on from there, so an outage is waited out at
/// the archiver's pace and shows in its logs and metrics.
fn retry_config() -> object_store::RetryConfig {
    object_store::RetryConfig { max_retries: 3, retry_timeout: REQUEST_RETRY_TIMEOUT, ..Default::default() }
}

/// Connections time out, and so does a response that stops coming (no byte for a minute); how long a
/// request that sends a body may take is `deadline`'s.
fn client_options(endpoint: Option<&str>) -> object_store::ClientOptions {
    object_store::ClientOptions::new()
        .with_timeout_disabled()
        .with_read_timeout(READ_TIMEOUT)
        .with_connect_timeout(CONNECT_TIMEOUT)
        .with_allow_http(endpoint.is_some_and(|e| e.starts_with("http://")))
}

const REQUEST_RETRY_TIMEOUT: Duration = Duration::from_secs(60);
const READ_TIMEOUT: Duration = Duration::from_secs(60);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The slowest upload taken for a live one: a request sending `len` bytes may take a minute plus the
/// time to send them at this rate.
const SLOWEST_UPLOAD_BYTES_PER_SEC: u64 = 128 << 10;

/// How long a request sending `len` bytes may take.
fn deadline(len: u64) -> Duration {
    READ_TIMEOUT + Duration::from_secs(len / SLOWEST_UPLOAD_BYTES_PER_SEC)
}

/// `request` (sending `len` bytes), given up as a transient failure once past its deadline.
async fn within<T>(
    len: u64,
    what: impl FnOnce() -> String,
    request: impl std::future::Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    let limit = deadline(len);
    match tokio::time::timeout(limit, request).await {
        Ok(answer) => answer,
        Err(_) => Err(StoreError::Transient(format!("{} took longer than {limit:?}", what()))),
    }
}

/// A response's status, headers and body text.
type Answer = (u16, http::HeaderMap, String);

/// Sends one of our own requests (sending `len` bytes) within its deadline; a failure to get an
/// answer is transient.
async fn exchange(
    http: &object_store::client::HttpClient,
    request: object_store::client::HttpRequest,
    len: u64,
    key: &str,
    describe: &str,
) -> Result<Answer, StoreError> {
    let transient = |e: &dyn std::fmt::Display| StoreError::Transient(format!("writing {key} on {describe}: {e}"));
    let answer = async {
        let response = http.execute(request).await.map_err(|e| transient(&e))?;
        let (parts, body) = response.into_parts();
        let body = body.bytes().await.map_err(|e| transient(&e))?;
        Ok((parts.status.as_u16(), parts.headers, String::from_utf8_lossy(&body).into_owned()))
    };
    within(len, || format!("writing {key} on {describe}"), answer).await
}

/// Request bodies. object_store's HTTP client sends a body from memory (the S3 client streams a spool
/// file), so the parts of files spooled to disk are read into memory: across the store at most
/// `max(2, --upload-concurrency) × --upload-part-size` bytes at once, each part's share held until its
/// request has ended. Files still in memory are sent from there, as they are.
struct Bodies {
    kib: Arc<Semaphore>,
    total_kib: u32,
}

/// A part of a file, and its share of the memory while it is sent.
struct Body {
    payload: PutPayload,
    _held: Option<OwnedSemaphorePermit>,
}

impl Bodies {
    fn new(part_size: u64, concurrency: usize) -> Self {
        let total_kib = (part_size * concurrency.max(2) as u64).div_ceil(1024).min(u32::MAX as u64 >> 3) as u32;
        Self { kib: Arc::new(Semaphore::new(total_kib as usize)), total_kib }
    }

    /// `len` bytes of `data` from `offset` (a spool file is read on a blocking thread).
    async fn read(&self, data: &SpoolData, offset: u64, len: u64) -> Result<Body, StoreError> {
        let path = match data {
            SpoolData::Memory(chunks) => {
                let part = chunks.slice(offset as usize, len as usize);
                return Ok(Body { payload: part.parts().iter().cloned().collect(), _held: None });
            }
            SpoolData::Disk(path) => path.clone(),
        };
        let share = len.div_ceil(1024).min(self.total_kib as u64) as u32;
        let held = self.kib.clone().acquire_many_owned(share).await.expect("the semaphore is never closed");
        let bytes = tokio::task::spawn_blocking(move || {
            use std::io::{Read, Seek, SeekFrom};
            let mut file = std::fs::File::open(&path)?;
            file.seek(SeekFrom::Start(offset))?;
            let mut buf = vec![0u8; len as usize];
            file.read_exact(&mut buf)?;
            Ok::<_, std::io::Error>(Bytes::from(buf))
        })
        .await
        .map_err(|e| StoreError::Transient(format!("reading a spool file: {e}")))?
        .map_err(|e| StoreError::Transient(format!("reading a spool file: {e}")))?;
        Ok(Body { payload: bytes.into(), _held: Some(held) })
    }
}

#[async_trait]
impl ObjectStore for CloudStore {
    fn describe(&self) -> String {
        self.describe.clone()
    }

    async fn put_if_absent(&self, key: &str, data: &SpoolData, len: u64) -> Result<PutOutcome, StoreError> {
        self.writer.create(key, data, len).await
    }

    /// One page: the backend's pages are followed until one holds a key after `start_after` (a server
    /// that ignores the start key still gives the right keys, only more slowly), and capped at
    /// `max_keys` (an emulator may ignore it).
    async fn list(&self, req: &ListRequest, max_keys: usize) -> Result<ListPage, StoreError> {
        let prefix = (!req.prefix.is_empty()).then_some(req.prefix.as_str());
        let mut page_token = None;
        loop {
            let opts = PaginatedListOptions {
                offset: req.start_after.clone(),
                max_keys: Some(max_keys),
                page_token: page_token.take(),
                ..Default::default()
            };
            let page = self
                .backend
                .list_paginated(prefix, opts)
                .await
                .map_err(|e| classify(Op::List, &req.prefix, &self.describe, e))?;
            let mut keys: Vec<String> = page
                .result
                .objects
                .into_iter()
                .map(|o| o.location.to_string())
                .filter(|k| k.starts_with(&req.prefix) && req.start_after.as_ref().is_none_or(|s| k > s))
                .collect();
            keys.sort_unstable();
            let more_here = keys.len() > max_keys;
            keys.truncate(max_keys);
            match page.page_token {
                Some(token) if keys.is_empty() => page_token = Some(token),
                next => return Ok(ListPage { keys, truncated: more_here || next.is_some() }),
            }
        }
    }

    async fn get(&self, key: &str) -> Result<Bytes, StoreError> {
        let path = path(Op::Get, key, &self.describe)?;
        let read = async { self.backend.get_opts(&path, GetOptions::default()).await?.bytes().await };
        read.await.map_err(|e| classify(Op::Get, key, &self.describe, e))
    }

    async fn get_range(&self, key: &str, range: std::ops::Range<u64>) -> Result<Bytes, StoreError> {
        let path = path(Op::Get, key, &self.describe)?;
        let bytes = self.backend.get_range(&path, range.clone()).await;
        let bytes = bytes.map_err(|e| classify(Op::Get, key, &self.describe, e))?;
        if bytes.len() as u64 != range.end - range.start {
            return Err(StoreError::Permanent {
                what: format!("{key} on {} gave {} bytes for the range {range:?}", self.describe, bytes.len()),
                fix: "it changed since it was listed; run verify".into(),
            });
        }
        Ok(bytes)
    }

    async fn head(&self, key: &str) -> Result<Option<u64>, StoreError> {
        size(self.backend.as_ref(), key, &self.describe).await
    }

    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        let path = path(Op::Delete, key, &self.describe)?;
        match self.backend.delete(&path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(classify(Op::Delete, key, &self.describe, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;
    use crate::encode::spool::{Spool, SpoolOptions, CHUNK};

    #[tokio::test]
    async fn parts_of_spooled_files_in_memory_stay_within_the_budget() {
        let data: Vec<u8> = (0..3072u32).map(|i| i as u8).collect();
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(&data).unwrap();
        let spooled = SpoolData::Disk(file.path().to_path_buf());
        // 1 KiB parts, 2 at once.
        let bodies = Bodies::new(1024, 1);
        let first = bodies.read(&spooled, 0, 1024).await.unwrap();
        let second = bodies.read(&spooled, 1024, 1024).await.unwrap();
        let third = bodies.read(&spooled, 2048, 1024);
        futures::pin_mut!(third);
        assert!(futures::poll!(&mut third).is_pending(), "a third part waits for memory");
        drop(first);
        assert_eq!(Bytes::from(third.await.unwrap().payload).as_ref(), &data[2048..]);
        assert_eq!(Bytes::from(second.payload).as_ref(), &data[1024..2048]);
        // A file still in memory is sent from there, its chunks as they lie: it takes no share.
        let mut chunks =
            Spool::new(SpoolOptions { memory_threshold: 1 << 30, dir: ".".into(), usage: Default::default() });
        chunks.write_all(&[7; 2 * CHUNK + 5]).unwrap();
        let in_memory = chunks.seal().unwrap();
        let body = bodies.read(in_memory.data(), CHUNK as u64 - 1, CHUNK as u64 + 2).await.unwrap();
        assert!(body._held.is_none());
        assert_eq!(body.payload.as_ref().iter().map(|b| b.len()).collect::<Vec<_>>(), [1, CHUNK, 1]);
    }
}

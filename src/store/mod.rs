//! Object stores: the small surface the archiver needs (put-if-absent, list, get, head, delete), with
//! S3, Google Cloud Storage, Azure Blob Storage and local-directory implementations that behave the
//! same (one conformance suite runs against each).

pub mod cloud;
mod local;
mod open;
mod options;
mod s3;
mod s3_body;
pub mod s3_errors;
pub mod stale;

use async_trait::async_trait;
use bytes::Bytes;
use thiserror::Error;

pub use self::local::LocalStore;
pub use self::open::{open, Role, StoreOptions, DEFAULT_ABORT_STALE_UPLOADS_AFTER};
pub use self::options::{ObjectOptions, Sse, StorageClass};
pub use self::s3::{
    S3Options, S3Store, DEFAULT_ATTEMPT_TIMEOUT, DEFAULT_MAX_REQUESTS, DEFAULT_PART_CONCURRENCY, DEFAULT_PART_SIZE,
    MIN_PART_SIZE,
};
use crate::archive::keys::{ListPage, ListRequest};
use crate::encode::spool::SpoolData;

#[derive(Debug, Error)]
pub enum StoreError {
    #[error("object {0:?} does not exist")]
    NotFound(String),
    /// Retrying will not help: the operator must fix something (bucket, credentials, permissions).
    #[error("{what}. {fix}")]
    Permanent { what: String, fix: String },
    /// A retry may succeed: network errors, timeouts, throttling, 5xx.
    #[error("{0}")]
    Transient(String),
}

impl StoreError {
    pub fn is_transient(&self) -> bool {
        matches!(self, StoreError::Transient(_))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutOutcome {
    Created,
    /// An object already has this key (a 412 on `If-None-Match: *`). Keys name exact offset ranges,
    /// so it holds the same records: for the archiver this is success.
    AlreadyExists,
}

#[async_trait]
pub trait ObjectStore: Send + Sync {
    /// Where this store writes, for messages (`s3://bucket`, `file:///dir`).
    fn describe(&self) -> String;

    /// Creates `key` with `data` unless an object with that key exists. Atomic: readers see the whole
    /// object or nothing.
    async fn put_if_absent(&self, key: &str, data: &SpoolData, len: u64) -> Result<PutOutcome, StoreError>;

    /// One page (at most `max_keys`) of keys under `req.prefix`, after `req.start_after`, in key order.
    async fn list(&self, req: &ListRequest, max_keys: usize) -> Result<ListPage, StoreError>;

    async fn get(&self, key: &str) -> Result<Bytes, StoreError>;

    /// The bytes `range` of an object (a Parquet footer, say), which must lie within it. Stores that
    /// can read a range override this; here the whole object is read.
    async fn get_range(&self, key: &str, range: std::ops::Range<u64>) -> Result<Bytes, StoreError> {
        let all = self.get(key).await?;
        let (start, end) = (range.start as usize, range.end as usize);
        all.get(start..end).map(|_| all.slice(start..end)).ok_or_else(|| StoreError::Permanent {
            what: format!("{key} has {} bytes, not the range {start}..{end}", all.len()),
            fix: "it changed since it was listed; run verify".into(),
        })
    }

    /// The object's size, or `None` when it does not exist.
    async fn head(&self, key: &str) -> Result<Option<u64>, StoreError>;

    async fn delete(&self, key: &str) -> Result<(), StoreError>;
}

/// Lists every key under `prefix`, following pages.
pub async fn list_all(store: &dyn ObjectStore, prefix: &str) -> Result<Vec<String>, StoreError> {
    list_all_counting(store, prefix).await.map(|(keys, _)| keys)
}

/// Lists every key under `prefix`, following pages; also returns how many requests it took.
pub async fn list_all_counting(store: &dyn ObjectStore, prefix: &str) -> Result<(Vec<String>, u64), StoreError> {
    list_between(store, ListRequest { prefix: prefix.to_string(), start_after: None }, None).await
}

/// Lists the keys `req` asks for, following pages, up to and including `through` (all when `None`);
/// also returns how many requests it took.
pub async fn list_between(
    store: &dyn ObjectStore,
    mut req: ListRequest,
    through: Option<&str>,
) -> Result<(Vec<String>, u64), StoreError> {
    let mut out = Vec::new();
    let mut requests = 0;
    loop {
        let page = store.list(&req, 1000).await?;
        requests += 1;
        let last = page.keys.last().cloned();
        out.extend(page.keys.into_iter().filter(|k| through.is_none_or(|t| k.as_str() <= t)));
        let more = page.truncated && through.is_none_or(|t| last.as_deref().is_some_and(|l| l < t));
        match (more, last) {
            (true, Some(last)) => req.start_after = Some(last),
            _ => return Ok((out, requests)),
        }
    }
}

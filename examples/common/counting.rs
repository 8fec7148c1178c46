//! A store that counts the requests made through it, by kind (for the examples that measure cost).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use kafka_s3_archiver::archive::keys::{ListPage, ListRequest};
use kafka_s3_archiver::encode::spool::SpoolData;
use kafka_s3_archiver::store::{ObjectStore, PutOutcome, StoreError};

pub struct Counting {
    pub inner: Arc<dyn ObjectStore>,
    pub lists: AtomicU64,
    /// Whole and ranged GETs.
    pub gets: AtomicU64,
    pub puts: AtomicU64,
    /// HEADs and DELETEs.
    pub others: AtomicU64,
}

impl Counting {
    pub fn new(inner: Arc<dyn ObjectStore>) -> Self {
        let zero = AtomicU64::new;
        Self { inner, lists: zero(0), gets: zero(0), puts: zero(0), others: zero(0) }
    }

    /// LISTs, GETs, PUTs and others so far.
    pub fn counts(&self) -> [u64; 4] {
        [&self.lists, &self.gets, &self.puts, &self.others].map(|c| c.load(Ordering::Relaxed))
    }
}

#[async_trait]
impl ObjectStore for Counting {
    fn describe(&self) -> String {
        self.inner.describe()
    }

    async fn put_if_absent(&self, key: &str, data: &SpoolData, len: u64) -> Result<PutOutcome, StoreError> {
        self.puts.fetch_add(1, Ordering::Relaxed);
        self.inner.put_if_absent(key, data, len).await
    }

    async fn list(&self, req: &ListRequest, max_keys: usize) -> Result<ListPage, StoreError> {
        self.lists.fetch_add(1, Ordering::Relaxed);
        self.inner.list(req, max_keys).await
    }

    async fn get(&self, key: &str) -> Result<Bytes, StoreError> {
        self.gets.fetch_add(1, Ordering::Relaxed);
        self.inner.get(key).await
    }

    async fn get_range(&self, key: &str, range: std::ops::Range<u64>) -> Result<Bytes, StoreError> {
        self.gets.fetch_add(1, Ordering::Relaxed);
        self.inner.get_range(key, range).await
    }

    async fn head(&self, key: &str) -> Result<Option<u64>, StoreError> {
        self.others.fetch_add(1, Ordering::Relaxed);
        self.inner.head(key).await
    }

    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        self.others.fetch_add(1, Ordering::Relaxed);
        self.inner.delete(key).await
    }
}

//! One retry policy for every store request: transient errors (`StoreError::Transient`) are tried
//! again with backoff (`backoff`), as often as the caller's `Patience` allows, counted and logged;
//! permanent ones are returned at once.

mod backoff;

use std::ops::Deref;

use async_trait::async_trait;
use bytes::Bytes;
use prometheus::{IntCounter, IntGauge};
use tracing::warn;

pub use self::backoff::Backoff;
use crate::archive::keys::{ListPage, ListRequest};
use crate::encode::spool::SpoolData;
use crate::store::{ObjectStore, PutOutcome, StoreError};

/// How often a failing request is tried: for as long as it takes (the archiver's recoveries: a store
/// brownout must not crash-loop a fleet), or a few times (a command that a user waits for).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Patience {
    Forever,
    Attempts(u32),
}

impl Patience {
    pub fn attempts(self) -> u32 {
        match self {
            Patience::Forever => u32::MAX,
            Patience::Attempts(n) => n,
        }
    }
}

/// Metrics a retried request reports to: its retry counter, and whether the store answers.
pub type Watch<'a> = Option<(&'a IntCounter, &'a IntGauge)>;

/// Runs `op` until it succeeds, fails permanently, or failed transiently `attempts` times.
pub async fn with_retries<T, F, Fut>(attempts: u32, what: &str, watch: Watch<'_>, mut op: F) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, StoreError>>,
{
    let mut attempt: u32 = 0;
    loop {
        let result = op().await;
        if let Some((_, up)) = watch {
            up.set(i64::from(!result.as_ref().is_err_and(StoreError::is_transient)));
        }
        match result {
            Err(e) if e.is_transient() && attempt.saturating_add(1) < attempts => {
                back_off(what, &e, attempt, watch).await;
                attempt = attempt.saturating_add(1);
            }
            other => return other,
        }
    }
}

/// After attempt `attempt` (from 0) of `what` failed transiently with `error`: counts a retry, says so,
/// and waits the backoff before the next.
pub async fn back_off(what: &str, error: impl std::fmt::Display, attempt: u32, watch: Watch<'_>) {
    if let Some((retries, _)) = watch {
        retries.inc();
    }
    warn!("{what}: request failed (attempt {}): {error}; retrying", attempt + 1);
    tokio::time::sleep(Backoff::default().delay(attempt, fastrand::f64())).await;
}

/// A store (behind a reference or an `Arc`) whose every request is retried as [`with_retries`] does:
/// what commands that read an archive (`verify`, `restore`) and listings that page through a folder
/// use, so a transient error (a throttled or dropped request) costs a retry, not the whole run.
pub struct Retrying<S> {
    inner: S,
    attempts: u32,
    watch: Option<(IntCounter, IntGauge)>,
}

impl<S> Retrying<S>
where
    S: Deref + Send + Sync,
    S::Target: ObjectStore,
{
    /// `inner`, each request tried as `patience` allows, reporting to `watch` (counters are shared
    /// handles: cloning one moves the same series).
    pub fn new(inner: S, patience: Patience, watch: Watch<'_>) -> Self {
        let watch = watch.map(|(retries, up)| (retries.clone(), up.clone()));
        Self { inner, attempts: patience.attempts(), watch }
    }

    fn watch(&self) -> Watch<'_> {
        self.watch.as_ref().map(|(retries, up)| (retries, up))
    }
}

#[async_trait]
impl<S> ObjectStore for Retrying<S>
where
    S: Deref + Send + Sync,
    S::Target: ObjectStore,
{
    fn describe(&self) -> String {
        self.inner.describe()
    }

    async fn put_if_absent(&self, key: &str, data: &SpoolData, len: u64) -> Result<PutOutcome, StoreError> {
        with_retries(self.attempts, key, self.watch(), || self.inner.put_if_absent(key, data, len)).await
    }

    async fn list(&self, req: &ListRequest, max_keys: usize) -> Result<ListPage, StoreError> {
        with_retries(self.attempts, "listing the archive", self.watch(), || self.inner.list(req, max_keys)).await
    }

    async fn get(&self, key: &str) -> Result<Bytes, StoreError> {
        with_retries(self.attempts, key, self.watch(), || self.inner.get(key)).await
    }

    async fn head(&self, key: &str) -> Result<Option<u64>, StoreError> {
        with_retries(self.attempts, key, self.watch(), || self.inner.head(key)).await
    }

    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        with_retries(self.attempts, key, self.watch(), || self.inner.delete(key)).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;
    use crate::store::LocalStore;

    /// A store whose first `failures` reads fail transiently.
    struct Flaky {
        inner: LocalStore,
        failures: AtomicU32,
    }

    #[async_trait]
    impl ObjectStore for Flaky {
        fn describe(&self) -> String {
            self.inner.describe()
        }
        async fn put_if_absent(&self, key: &str, data: &SpoolData, len: u64) -> Result<PutOutcome, StoreError> {
            self.inner.put_if_absent(key, data, len).await
        }
        async fn list(&self, req: &ListRequest, max_keys: usize) -> Result<ListPage, StoreError> {
            self.inner.list(req, max_keys).await
        }
        async fn get(&self, key: &str) -> Result<Bytes, StoreError> {
            if self.failures.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok() {
                return Err(StoreError::Transient("503 SlowDown".into()));
            }
            self.inner.get(key).await
        }
        async fn head(&self, key: &str) -> Result<Option<u64>, StoreError> {
            self.inner.head(key).await
        }
        async fn delete(&self, key: &str) -> Result<(), StoreError> {
            self.inner.delete(key).await
        }
    }

    #[tokio::test]
    async fn a_read_is_tried_again_as_patience_allows() {
        let dir = tempfile::tempdir().unwrap();
        let inner = LocalStore::new(dir.path()).unwrap();
        inner.put_if_absent("k", &SpoolData::memory(Bytes::from_static(b"v")), 1).await.unwrap();
        let flaky = Flaky { inner, failures: AtomicU32::new(2) };
        let retries = IntCounter::new("r", "r").unwrap();
        let up = IntGauge::new("u", "u").unwrap();
        let store = Retrying::new(&flaky, Patience::Attempts(3), Some((&retries, &up)));
        assert_eq!(store.get("k").await.unwrap().as_ref(), b"v");
        assert_eq!((retries.get(), up.get()), (2, 1));
        flaky.failures.store(3, Ordering::SeqCst);
        assert!(store.get("k").await.unwrap_err().is_transient(), "three failures exhaust three attempts");
        assert_eq!(up.get(), 0, "the store is reported down");
    }
}

//! One retry policy for every store request: transient errors (`StoreError::Transient`) are tried
//! again with backoff (`backoff`), as often as the caller's `Patience` allows, counted and logged;
//! permanent ones are returned at once.

mod backoff;

use prometheus::{IntCounter, IntGauge};
use tracing::warn;

pub use self::backoff::Backoff;
use crate::store::StoreError;

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
    let backoff = Backoff::default();
    let mut attempt: u32 = 0;
    loop {
        let result = op().await;
        if let Some((_, up)) = watch {
            up.set(i64::from(!result.as_ref().is_err_and(StoreError::is_transient)));
        }
        match result {
            Err(e) if e.is_transient() && attempt.saturating_add(1) < attempts => {
                if let Some((retries, _)) = watch {
                    retries.inc();
                }
                warn!("{what}: request failed (attempt {}): {e}; retrying", attempt + 1);
                tokio::time::sleep(backoff.delay(attempt, fastrand::f64())).await;
                attempt = attempt.saturating_add(1);
            }
            other => return other,
        }
    }
}

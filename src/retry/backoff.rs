//! Retry delays: exponential, capped, with equal jitter (half the delay fixed, half drawn). The random
//! draw is passed in.

use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub base: Duration,
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self { base: Duration::from_millis(200), max: Duration::from_secs(30) }
    }
}

impl Backoff {
    /// The delay before retry number `attempt` (0-based); `jitter` is a uniform draw from [0, 1).
    pub fn delay(&self, attempt: u32, jitter: f64) -> Duration {
        let ceiling = self.base.saturating_mul(1u32 << attempt.min(20)).min(self.max);
        // Equal jitter: never less than half the ceiling, so retries do not hammer a struggling store.
        ceiling.mul_f64(0.5 + 0.5 * jitter.clamp(0.0, 1.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_exponentially_then_caps() {
        let b = Backoff { base: Duration::from_millis(100), max: Duration::from_secs(5) };
        assert_eq!(b.delay(0, 1.0), Duration::from_millis(100));
        assert_eq!(b.delay(3, 1.0), Duration::from_millis(800));
        assert_eq!(b.delay(10, 1.0), Duration::from_secs(5));
        assert_eq!(b.delay(u32::MAX, 1.0), Duration::from_secs(5));
    }

    #[test]
    fn jitter_stays_within_half_to_full() {
        let b = Backoff::default();
        assert_eq!(b.delay(2, 0.0), Duration::from_millis(400));
        assert_eq!(b.delay(2, 0.5), Duration::from_millis(600));
        assert!(b.delay(2, 0.999) <= Duration::from_millis(800));
    }
}

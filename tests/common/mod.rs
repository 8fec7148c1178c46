//! Helpers for the integration tests: the services started by `localstack/test.sh` (`kafka`, `s3`,
//! `cloud`: the GCS and Azure emulators),
//! archiver processes (`process`) and the checks of what they archived (`checks`).
#![allow(dead_code, unused_imports)] // each test binary uses a different subset

pub mod checks;
pub mod cloud;
pub mod kafka;
pub mod process;
pub mod s3;
pub mod s3_proxy;

use std::sync::atomic::{AtomicU32, Ordering};

pub use self::checks::*;
pub use self::cloud::*;
pub use self::kafka::*;
pub use self::process::*;
pub use self::s3::*;

pub fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: run the tests with ./localstack/test.sh, which starts Apache Kafka and LocalStack S3 and sets it")
    })
}

/// A name no other test (or earlier run against the same services) uses.
pub fn unique(name: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    format!("{name}-{}-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed), nanos % 100_000)
}

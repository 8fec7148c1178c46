//! Stores for the tests: S3 on the test server, or a directory.

use kafka_s3_archiver::archive::destination::Destination;
use kafka_s3_archiver::archive::object_key::Prefix;
use kafka_s3_archiver::store::{self, ObjectStore, Role, S3Options, S3Store, StoreOptions};
use std::sync::Arc;
use std::time::Duration;

use super::{env, unique};

pub fn s3_endpoint() -> String {
    env("KSA_TEST_S3_ENDPOINT")
}

pub fn s3_settings(part_size: u64) -> S3Options {
    S3Options::new(Some(s3_endpoint()), Some("us-east-1".into()))
        .uploads(part_size, 3)
        .attempt_timeout(Duration::from_secs(30))
}

/// A store on a new bucket.
pub async fn s3_store_with(bucket: &str, part_size: u64) -> S3Store {
    let store = S3Store::connect(bucket, s3_settings(part_size)).await;
    store.client().create_bucket().bucket(bucket).send().await.expect("create bucket");
    store
}

/// An archive destination for a test: a fresh bucket or a fresh directory.
pub enum TestDest {
    S3 { bucket: String },
    File { dir: tempfile::TempDir },
}

impl TestDest {
    pub async fn s3() -> Self {
        let bucket = unique("ksa").to_lowercase();
        s3_store_with(&bucket, 8 << 20).await;
        TestDest::S3 { bucket }
    }

    pub fn file() -> Self {
        TestDest::File { dir: tempfile::tempdir().expect("tempdir") }
    }

    pub fn url(&self) -> String {
        match self {
            TestDest::S3 { bucket } => format!("s3://{bucket}/archive"),
            TestDest::File { dir } => format!("file://{}", dir.path().display()),
        }
    }

    pub fn prefix(&self) -> Prefix {
        match self {
            TestDest::S3 { .. } => Prefix::new("archive"),
            TestDest::File { .. } => Prefix::default(),
        }
    }

    pub async fn store(&self) -> Arc<dyn ObjectStore> {
        let settings = StoreOptions { s3: s3_settings(8 << 20), ..StoreOptions::reading(None, None) };
        let dest: Destination = self.url().parse().expect("a test destination");
        store::open(&dest, &settings, Role::Inspect).await.expect("the test store")
    }
}

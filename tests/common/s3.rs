//! Stores for the tests: S3 on the test server, GCS and Azure Blob on their emulators, or a directory.

use kafka_s3_archiver::archive::destination::Destination;
use kafka_s3_archiver::archive::object_key::Prefix;
use kafka_s3_archiver::store::{self, ObjectStore, Role, S3Options, S3Store, StoreOptions};
use std::sync::Arc;
use std::time::Duration;

use super::cloud::{
    azure_endpoint, azure_flags, azure_options, create_azure_container, create_gcs_bucket, gcs_endpoint, gcs_flags,
    gcs_options,
};
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

/// An archive destination for a test: a fresh bucket, container or directory.
pub enum TestDest {
    S3 { bucket: String },
    Gcs { bucket: String },
    Azure { container: String },
    File { dir: tempfile::TempDir },
}

impl TestDest {
    pub async fn s3() -> Self {
        let bucket = unique("ksa").to_lowercase();
        s3_store_with(&bucket, 8 << 20).await;
        TestDest::S3 { bucket }
    }

    pub async fn gcs() -> Self {
        let bucket = unique("ksa").to_lowercase();
        create_gcs_bucket(&bucket).await;
        TestDest::Gcs { bucket }
    }

    pub async fn azure() -> Self {
        let container = unique("ksa").to_lowercase();
        create_azure_container(&container).await;
        TestDest::Azure { container }
    }

    pub fn file() -> Self {
        TestDest::File { dir: tempfile::tempdir().expect("tempdir") }
    }

    pub fn url(&self) -> String {
        match self {
            TestDest::S3 { bucket } => format!("s3://{bucket}/archive"),
            TestDest::Gcs { bucket } => format!("gs://{bucket}/archive"),
            TestDest::Azure { container } => format!("az://{container}/archive"),
            TestDest::File { dir } => format!("file://{}", dir.path().display()),
        }
    }

    /// The flags that reach this destination's server (the emulators' endpoints and credentials).
    pub fn flags(&self) -> Vec<String> {
        match self {
            TestDest::S3 { .. } => vec!["--s3-endpoint".into(), s3_endpoint()],
            TestDest::Gcs { .. } => gcs_flags(&gcs_endpoint()),
            TestDest::Azure { .. } => azure_flags(&azure_endpoint()),
            TestDest::File { .. } => Vec::new(),
        }
    }

    pub fn prefix(&self) -> Prefix {
        match self {
            TestDest::File { .. } => Prefix::default(),
            _ => Prefix::new("archive"),
        }
    }

    pub async fn store(&self) -> Arc<dyn ObjectStore> {
        let settings = StoreOptions {
            s3: s3_settings(8 << 20),
            gcs: gcs_options(),
            azure: azure_options(),
            ..StoreOptions::reading(None, None)
        };
        let dest: Destination = self.url().parse().expect("a test destination");
        store::open(&dest, &settings, Role::Inspect).await.expect("the test store")
    }
}

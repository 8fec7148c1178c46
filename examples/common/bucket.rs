//! A new bucket on the test services' S3 (`KSA_TEST_S3_ENDPOINT`), for the examples that measure cost.

use std::sync::Arc;

use kafka_s3_archiver::store::{ObjectStore, S3Options, S3Store};

/// A new bucket named `name-<pid>`; `script` is what sets the services up, named when they are not.
pub async fn new_bucket(name: &str, script: &str) -> Arc<dyn ObjectStore> {
    let endpoint = std::env::var("KSA_TEST_S3_ENDPOINT")
        .unwrap_or_else(|_| panic!("KSA_TEST_S3_ENDPOINT is not set: run through {script}"));
    let bucket = format!("{name}-{}", std::process::id());
    let store = S3Store::connect(&bucket, S3Options::new(Some(endpoint), Some("us-east-1".into()))).await;
    store.client().create_bucket().bucket(&bucket).send().await.expect("create bucket");
    Arc::new(store)
}

//! What the archiver asks of S3 for every object it writes (`--s3-sse`, `--s3-sse-kms-key-id`,
//! `--s3-storage-class`, `--s3-expected-bucket-owner`), read back with HEAD from the S3 test server:
//! data objects, claims and multipart uploads alike. The S3 test servers do not check the bucket
//! owner, so a proxy in front of them checks the header and answers 403 as AWS does. And how many
//! requests go out at once (`--s3-max-requests`).

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_s3::types::{ServerSideEncryption, StorageClass as S3Class};
use common::s3_proxy::{Fault, S3Proxy};
use common::*;
use kafka_s3_archiver::commands::demo::generate::produce;
use kafka_s3_archiver::encode::spool::SpoolData;
use kafka_s3_archiver::store::{list_all, ObjectOptions, ObjectStore, S3Store, Sse, StorageClass};

const OWNER: &str = "111122223333";

async fn head(store: &S3Store, bucket: &str, key: &str) -> (Option<ServerSideEncryption>, Option<S3Class>) {
    let out = store.client().head_object().bucket(bucket).key(key).send().await.expect("HEAD");
    (out.server_side_encryption().cloned(), out.storage_class().cloned())
}

/// A proxy that answers 403 AccessDenied, as AWS does, to a request whose expected owner is not
/// `owner`, and remembers the requests that did not say which owner they expect.
fn owner_checking_proxy(proxy: &S3Proxy, owner: &'static str) -> Arc<Mutex<Vec<String>>> {
    let unchecked = Arc::new(Mutex::new(Vec::new()));
    let seen = unchecked.clone();
    proxy.set_rule(move |req| match req.expected_owner.as_deref() {
        Some(o) if o == owner => Fault::Pass,
        Some(_) => Fault::Status(403, "AccessDenied"),
        None => {
            seen.lock().unwrap().push(format!("{:?} {}", req.kind, req.key));
            Fault::Pass
        }
    });
    unchecked
}

#[tokio::test(flavor = "multi_thread")]
async fn data_objects_and_claims_are_encrypted_in_the_storage_class_and_owner_asked_for() {
    let dest = TestDest::s3().await;
    let TestDest::S3 { bucket } = &dest else { unreachable!() };
    let topic = unique("sse");
    create_topic(&topic, 2).await;
    let produced = produce(&brokers(), &topic, 2, 0..400, 100).await.expect("produce");
    let proxy = S3Proxy::start(&s3_endpoint()).await;
    let unchecked = owner_checking_proxy(&proxy, OWNER);
    let spool = tempfile::tempdir().unwrap();
    let mut args = through(archiver_args(&dest, &unique("g"), &topic, 50, spool.path()), &proxy.url);
    args.extend(
        ["--s3-sse", "AES256", "--s3-storage-class", "STANDARD_IA", "--s3-expected-bucket-owner", OWNER]
            .map(String::from),
    );
    let mut archiver = ArchiverProcess::spawn("sse", &args);
    let store = dest.store().await;
    wait_archived(store.as_ref(), &dest.prefix(), &topic, &last_offsets(&produced), &mut [&mut archiver]).await;
    assert!(archiver.terminate().success());
    let log = archiver.log_text();
    assert!(log.contains("object uploaded") && !log.contains('\u{1b}'), "log files carry no colour codes:\n{log}");

    let s3 = S3Store::connect(bucket, s3_settings(8 << 20)).await;
    let data = list_all(store.as_ref(), &dest.prefix().topic_folder(&topic)).await.unwrap();
    let claims = list_all(store.as_ref(), &dest.prefix().claims_topic_folder(&topic)).await.unwrap();
    assert!(data.len() >= 8 && claims.len() >= data.len(), "{data:?} {claims:?}");
    for key in data.iter().chain(&claims) {
        let (sse, class) = head(&s3, bucket, key).await;
        assert_eq!(sse, Some(ServerSideEncryption::Aes256), "{key}");
        assert_eq!(class, Some(S3Class::StandardIa), "{key}");
    }
    println!("{} data objects and {} claims: AES256, STANDARD_IA", data.len(), claims.len());
    assert_eq!(unchecked.lock().unwrap().clone(), Vec::<String>::new(), "requests without the expected owner");
    assert!(proxy.counts().requests.values().sum::<u64>() > 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bucket_of_another_owner_stops_the_archiver_and_says_so() {
    let dest = TestDest::s3().await;
    let proxy = S3Proxy::start(&s3_endpoint()).await;
    owner_checking_proxy(&proxy, OWNER);
    let spool = tempfile::tempdir().unwrap();
    let mut args = through(archiver_args(&dest, &unique("g"), "whatever", 10, spool.path()), &proxy.url);
    args.extend(["--s3-expected-bucket-owner", "444455556666"].map(String::from));
    let mut archiver = ArchiverProcess::spawn("owner", &args);
    assert!(!archiver.wait_exit(Duration::from_secs(30)).await.success());
    let log = archiver.log_text();
    let line = log.lines().find(|l| l.starts_with("error")).unwrap_or_else(|| panic!("no error line:\n{log}"));
    println!("another owner -> {line}");
    assert!(line.contains("444455556666") && line.contains("--s3-expected-bucket-owner"), "{line}");
}

/// Multipart uploads carry the options too, and SSE-KMS names its key.
#[tokio::test(flavor = "multi_thread")]
async fn multipart_uploads_carry_the_options_and_kms_names_its_key() {
    let bucket = unique("ksa").to_lowercase();
    s3_store_with(&bucket, 5 << 20).await;
    let options = ObjectOptions {
        sse: Some(Sse::Kms { key_id: Some("alias/archive".into()) }),
        storage_class: Some(StorageClass::parse("GLACIER_IR").unwrap()),
        expected_bucket_owner: None,
    };
    let store = S3Store::connect(&bucket, s3_settings(5 << 20).objects(options)).await;
    let mut sizes = BTreeMap::new();
    for (key, len) in [("big", 11u64 << 20), ("small", 100)] {
        let body = SpoolData::memory(vec![7u8; len as usize]);
        store.put_if_absent(key, &body, len).await.expect("put");
        sizes.insert(key, len);
    }
    for key in ["big", "small"] {
        let out = store.client().head_object().bucket(&bucket).key(key).send().await.expect("HEAD");
        assert_eq!(out.content_length(), Some(sizes[key] as i64));
        assert_eq!(out.server_side_encryption(), Some(&ServerSideEncryption::AwsKms), "{key}");
        assert!(
            out.ssekms_key_id().is_some_and(|id| id.ends_with("alias/archive")),
            "{key}: {:?}",
            out.ssekms_key_id()
        );
        // A multipart upload has a multi-part ETag ("...-3"): the big one went up in three parts.
        assert_eq!(out.e_tag().is_some_and(|t| t.trim_matches('"').ends_with("-3")), key == "big", "{key}");
        assert_eq!(out.storage_class(), Some(&S3Class::GlacierIr), "{key}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn no_more_requests_than_the_limit_are_in_flight_at_once() {
    let bucket = unique("ksa").to_lowercase();
    s3_store_with(&bucket, 8 << 20).await;
    let proxy = S3Proxy::start(&s3_endpoint()).await;
    // Slow answers, so that concurrent requests overlap at the proxy.
    proxy.set_rule(|_| Fault::StallResponse(Duration::from_millis(300)));
    let put_many = |limit: Option<usize>, run: &'static str| {
        let settings = kafka_s3_archiver::store::S3Options::new(Some(proxy.url.clone()), Some("us-east-1".into()));
        let settings = match limit {
            Some(n) => settings.max_requests(n),
            None => settings,
        };
        let bucket = bucket.clone();
        async move {
            let store = S3Store::connect(bucket, settings).await;
            let body = SpoolData::memory(vec![1u8; 100]);
            let puts = (0..12).map(|i| {
                let (store, body) = (&store, &body);
                async move { store.put_if_absent(&format!("{run}/{i}"), body, 100).await.expect("put") }
            });
            futures::future::join_all(puts).await;
        }
    };
    put_many(Some(3), "limited").await;
    assert_eq!(proxy.counts().max_in_flight, 3, "at most 3 requests at once, and the 12 puts overlapped");
    // The same puts under the default limit (64) all go out together: the proxy does see concurrency.
    put_many(None, "default").await;
    assert_eq!(proxy.counts().max_in_flight, 12);
}

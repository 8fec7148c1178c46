//! One conformance suite for every ObjectStore: the local directory, S3 (LocalStack or moto), Google
//! Cloud Storage (fake-gcs-server) and Azure Blob Storage (Azurite).

mod common;

use std::io::Write;

use bytes::Bytes;
use common::*;
use kafka_s3_archiver::archive::keys::ListRequest;
use kafka_s3_archiver::encode::spool::{Spool, SpoolData, SpoolOptions, SpoolUsage, CHUNK};
use kafka_s3_archiver::store::{list_all, LocalStore, ObjectStore, PutOutcome, StoreError};

fn mem(b: &[u8]) -> SpoolData {
    SpoolData::memory(Bytes::copy_from_slice(b))
}

async fn conformance(store: &dyn ObjectStore, large: usize) {
    // put-if-absent creates once and never overwrites.
    assert_eq!(store.put_if_absent("a/b/one", &mem(b"first"), 5).await.unwrap(), PutOutcome::Created);
    assert_eq!(store.put_if_absent("a/b/one", &mem(b"second"), 6).await.unwrap(), PutOutcome::AlreadyExists);
    assert_eq!(store.get("a/b/one").await.unwrap(), Bytes::from_static(b"first"));
    assert_eq!(store.head("a/b/one").await.unwrap(), Some(5));
    assert_eq!(store.head("a/b/missing").await.unwrap(), None);
    assert!(matches!(store.get("a/b/missing").await, Err(StoreError::NotFound(_))));
    assert_eq!(store.put_if_absent("a/b/empty", &mem(b""), 0).await.unwrap(), PutOutcome::Created);
    assert_eq!(store.get("a/b/empty").await.unwrap().len(), 0);

    // Listing: prefix, key order, StartAfter, pages.
    for i in (0..25).rev() {
        let key = format!("list/p/{i:03}");
        store.put_if_absent(&key, &mem(key.as_bytes()), key.len() as u64).await.unwrap();
    }
    store.put_if_absent("list/pq/x", &mem(b"x"), 1).await.unwrap();
    store.put_if_absent("lisT/p/x", &mem(b"x"), 1).await.unwrap();
    let page = store.list(&ListRequest { prefix: "list/p/".into(), start_after: None }, 10).await.unwrap();
    assert!(page.truncated);
    assert_eq!(page.keys, (0..10).map(|i| format!("list/p/{i:03}")).collect::<Vec<_>>());
    let page = store
        .list(&ListRequest { prefix: "list/p/".into(), start_after: Some("list/p/019".into()) }, 10)
        .await
        .unwrap();
    assert!(!page.truncated);
    assert_eq!(page.keys, (20..25).map(|i| format!("list/p/{i:03}")).collect::<Vec<_>>());
    let page =
        store.list(&ListRequest { prefix: "list/p/".into(), start_after: Some("list/p/01".into()) }, 2).await.unwrap();
    assert_eq!(page.keys, vec!["list/p/010".to_string(), "list/p/011".to_string()]);
    assert_eq!(list_all(store, "list/p/").await.unwrap().len(), 25);
    assert_eq!(list_all(store, "list/p").await.unwrap().len(), 26);
    assert!(list_all(store, "nothing/").await.unwrap().is_empty());

    // A large object from a spool file (multipart on S3) arrives whole, and is not overwritten either.
    let mut file = tempfile::NamedTempFile::new().unwrap();
    let data: Vec<u8> = (0..large).map(|i| (i * 7 % 251) as u8).collect();
    file.write_all(&data).unwrap();
    let spooled = SpoolData::Disk(file.path().to_path_buf());
    assert_eq!(store.put_if_absent("big/object", &spooled, large as u64).await.unwrap(), PutOutcome::Created);
    assert_eq!(store.put_if_absent("big/object", &spooled, large as u64).await.unwrap(), PutOutcome::AlreadyExists);
    assert_eq!(store.get("big/object").await.unwrap().as_ref(), &data[..]);
    // A range of it (a Parquet footer is read so): exactly those bytes, the last ones too.
    let (from, to) = (large as u64 - 1000, large as u64);
    assert_eq!(store.get_range("big/object", from..to).await.unwrap().as_ref(), &data[from as usize..]);
    assert_eq!(store.get_range("big/object", 7..9).await.unwrap().as_ref(), &data[7..9]);
    assert!(matches!(store.get_range("a/b/missing", 0..1).await, Err(StoreError::NotFound(_))));
    // The same from memory, where a spool holds it as chunks that the parts (or the one request) span.
    let usage = std::sync::Arc::new(SpoolUsage::default());
    let mut spool = Spool::new(SpoolOptions { memory_threshold: 1 << 30, dir: ".".into(), usage });
    spool.write_all(&data).unwrap();
    let in_memory = spool.seal().unwrap();
    assert!(matches!(in_memory.data(), SpoolData::Memory(chunks) if chunks.parts().len() == large.div_ceil(CHUNK)));
    assert_eq!(store.put_if_absent("big/chunks", in_memory.data(), large as u64).await.unwrap(), PutOutcome::Created);
    assert_eq!(store.get("big/chunks").await.unwrap().as_ref(), &data[..]);

    // Delete is idempotent.
    store.delete("a/b/one").await.unwrap();
    store.delete("a/b/one").await.unwrap();
    assert_eq!(store.head("a/b/one").await.unwrap(), None);
}

/// A large upload that fails midway (its spool file ends early: the first parts went up, a later one
/// cannot be read) leaves nothing visible — on S3 the multipart upload is aborted, on GCS a resumable
/// session and on Azure uncommitted blocks stay behind, invisible — and the next attempt creates the
/// object whole.
async fn a_failed_large_upload_leaves_nothing(store: &dyn ObjectStore, large: usize) {
    let data: Vec<u8> = (0..large).map(|i| (i * 13 % 251) as u8).collect();
    let mut short = tempfile::NamedTempFile::new().unwrap();
    short.write_all(&data[..large * 2 / 3]).unwrap();
    let key = "big/failed-midway";
    let err = store.put_if_absent(key, &SpoolData::Disk(short.path().into()), large as u64).await.unwrap_err();
    println!("{}: a large upload failing midway: {err}", store.describe());
    assert_eq!(store.head(key).await.unwrap(), None);
    assert!(!list_all(store, "big/").await.unwrap().iter().any(|k| k == key));
    let mut whole = tempfile::NamedTempFile::new().unwrap();
    whole.write_all(&data).unwrap();
    let again = store.put_if_absent(key, &SpoolData::Disk(whole.path().into()), large as u64).await.unwrap();
    assert_eq!(again, PutOutcome::Created);
    assert_eq!(store.get(key).await.unwrap().as_ref(), &data[..]);
}

/// Two writers of one large object at once (a zombie and the next owner re-writing its claimed range,
/// with other bytes): one creates it, the other finds it there, and the object is one writer's whole
/// (Azure's per-upload block IDs keep their uncommitted blocks apart). `one_wins`: the store refuses the
/// second completion — LocalStack lets two racing CompleteMultipartUploads with `If-None-Match: *` both
/// succeed (the last one's object stays, whole), where S3 refuses one: there only the object is checked.
async fn two_writers_of_a_large_object_never_mix(store: &dyn ObjectStore, large: usize, one_wins: bool) {
    for round in 0..3 {
        let (mut a, mut b) = (tempfile::NamedTempFile::new().unwrap(), tempfile::NamedTempFile::new().unwrap());
        let bytes_a: Vec<u8> = (0..large).map(|i| (i % 251) as u8).collect();
        let bytes_b: Vec<u8> = (0..large).map(|i| (i % 241) as u8 ^ 0x5a).collect();
        a.write_all(&bytes_a).unwrap();
        b.write_all(&bytes_b).unwrap();
        let key = format!("big/raced-{round}");
        let (data_a, data_b) = (SpoolData::Disk(a.path().into()), SpoolData::Disk(b.path().into()));
        let (first, second) = tokio::join!(
            store.put_if_absent(&key, &data_a, large as u64),
            store.put_if_absent(&key, &data_b, large as u64)
        );
        let mut outcomes = [first.unwrap(), second.unwrap()];
        outcomes.sort_by_key(|o| *o == PutOutcome::Created);
        println!("{} round {round}: {outcomes:?}", store.describe());
        if one_wins {
            assert_eq!(outcomes, [PutOutcome::AlreadyExists, PutOutcome::Created], "round {round}");
        }
        let stored = store.get(&key).await.unwrap();
        assert!(stored.as_ref() == &bytes_a[..] || stored.as_ref() == &bytes_b[..], "round {round}: a mix");
    }
}

#[tokio::test]
async fn local_store_conforms() {
    let dir = tempfile::tempdir().unwrap();
    let store = kafka_s3_archiver::store::LocalStore::new(dir.path()).unwrap();
    conformance(&store, 3 << 20).await;
    // Temporary files never show up as objects. The directory may be shared by several hosts: another
    // host's temporary file (an upload in flight there) stays, one a crash left long ago goes.
    assert!(list_all(&store, "").await.unwrap().iter().all(|k| !k.contains(".ksa-tmp")));
    let tmp = dir.path().join(".ksa-tmp");
    let in_flight = tmp.join("other-host~1~00-7.tmp");
    let leftover = tmp.join("other-host~1~01-8.tmp");
    for f in [&in_flight, &leftover] {
        std::fs::write(f, b"half an object").unwrap();
    }
    let two_days_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(48 * 3600);
    std::fs::File::options().write(true).open(&leftover).unwrap().set_modified(two_days_ago).unwrap();
    let removed = store.remove_stale_temp_files(std::time::Duration::from_secs(24 * 3600)).unwrap();
    assert_eq!(removed, vec![leftover.clone()]);
    assert!(in_flight.exists() && !leftover.exists());
    // Its own uploads never write into another writer's temporary file.
    let body = SpoolData::memory(bytes::Bytes::from_static(b"ours"));
    assert_eq!(store.put_if_absent("x/y/new", &body, 4).await.unwrap(), PutOutcome::Created);
    assert_eq!(std::fs::read(&in_flight).unwrap(), b"half an object");
}

/// An aborted upload to a directory never appears later: the link of a put whose future was dropped is
/// not made (the blocking thread writing the file cannot be stopped, so the store gates the link).
#[tokio::test(flavor = "multi_thread")]
async fn a_local_put_aborted_midway_never_appears_later() {
    let dir = tempfile::tempdir().unwrap();
    let store = std::sync::Arc::new(LocalStore::new(dir.path()).unwrap());
    // Large enough that writing and syncing it takes a while.
    let len = 256usize << 20;
    let data = SpoolData::memory(Bytes::from(vec![7u8; len]));
    let key = "t/partition=0/big";
    let putting = {
        let store = store.clone();
        tokio::spawn(async move { store.put_if_absent(key, &data, len as u64).await })
    };
    let tmp = dir.path().join(".ksa-tmp");
    let started = std::time::Instant::now();
    while std::fs::read_dir(&tmp).unwrap().next().is_none() {
        assert!(started.elapsed() < std::time::Duration::from_secs(10), "the put never started writing");
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    putting.abort();
    let _ = putting.await;
    let at_abort = store.head(key).await.unwrap().is_some();
    // Wait for the blocking thread to finish (it removes its temporary file), then look again.
    while std::fs::read_dir(&tmp).unwrap().next().is_some() {
        assert!(started.elapsed() < std::time::Duration::from_secs(60), "the temporary file stayed");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    println!("linked before the abort ended: {at_abort}");
    assert_eq!(store.head(key).await.unwrap().is_some(), at_abort, "the object appeared after the abort ended");
}

#[tokio::test]
async fn s3_store_conforms() {
    let bucket = unique("conf").to_lowercase();
    let store = s3_store_with(&bucket, 5 << 20).await;
    // 12 MiB with 5 MiB parts: a three-part multipart upload.
    conformance(&store, 12 << 20).await;
    a_failed_large_upload_leaves_nothing(&store, 12 << 20).await;
    two_writers_of_a_large_object_never_mix(&store, 12 << 20, false).await;
}

fn settings(part_size: u64) -> kafka_s3_archiver::store::StoreOptions {
    kafka_s3_archiver::store::StoreOptions {
        s3: s3_settings(part_size),
        gcs: gcs_options(),
        azure: azure_options(),
        ..kafka_s3_archiver::store::StoreOptions::reading(None, None)
    }
}

async fn open(dest: &str, part_size: u64) -> std::sync::Arc<dyn ObjectStore> {
    use kafka_s3_archiver::store::{open, Role};
    open(&dest.parse().unwrap(), &settings(part_size), Role::Archive).await.unwrap()
}

#[tokio::test]
async fn gcs_store_conforms() {
    let bucket = unique("conf").to_lowercase();
    create_gcs_bucket(&bucket).await;
    // 12 MiB with 5 MiB parts: a resumable upload in three chunks.
    let store = open(&format!("gs://{bucket}"), 5 << 20).await;
    conformance(store.as_ref(), 12 << 20).await;
    a_failed_large_upload_leaves_nothing(store.as_ref(), 12 << 20).await;
    two_writers_of_a_large_object_never_mix(store.as_ref(), 12 << 20, true).await;
}

#[tokio::test]
async fn azure_store_conforms() {
    let container = unique("conf").to_lowercase();
    create_azure_container(&container).await;
    // 12 MiB with 5 MiB parts: three blocks and a block list.
    let store = open(&format!("az://{container}"), 5 << 20).await;
    conformance(store.as_ref(), 12 << 20).await;
    a_failed_large_upload_leaves_nothing(store.as_ref(), 12 << 20).await;
    two_writers_of_a_large_object_never_mix(store.as_ref(), 12 << 20, true).await;
}

/// A missing bucket or container is the operator's to fix, and the error names it. (fake-gcs-server
/// answers an XML listing of a missing bucket with a 500, where GCS answers 404: only its put is
/// checked.)
#[tokio::test]
async fn gcs_and_azure_missing_buckets_are_permanent_errors_naming_them() {
    for dest in ["gs://no-such-bucket-here", "az://no-such-container-here"] {
        let store = open(dest, 8 << 20).await;
        let mut errors = vec![store.put_if_absent("k", &mem(b"x"), 1).await.unwrap_err()];
        if dest.starts_with("az://") {
            errors.push(store.list(&ListRequest { prefix: "p/".into(), start_after: None }, 10).await.unwrap_err());
        }
        for err in errors {
            assert!(!err.is_transient(), "{dest}: {err}");
            assert!(err.to_string().contains("create the bucket or container"), "{dest}: {err}");
        }
    }
}

/// A foreign object whose name object_store cannot take (an empty segment) fails a listing for good,
/// saying what to do, rather than being retried forever.
#[tokio::test]
async fn a_foreign_name_object_store_cannot_list_is_a_permanent_error() {
    let bucket = unique("odd").to_lowercase();
    create_gcs_bucket(&bucket).await;
    put_gcs_object(&bucket, "arch/topic=t/partition=0//stray", b"x").await;
    let store = open(&format!("gs://{bucket}"), 8 << 20).await;
    let err = store.list(&ListRequest { prefix: "arch/".into(), start_after: None }, 10).await.unwrap_err();
    println!("{err}");
    assert!(!err.is_transient() && err.to_string().contains("rename or remove it"), "{err}");
}

#[tokio::test]
async fn s3_missing_bucket_is_a_permanent_error_naming_the_bucket() {
    let store = kafka_s3_archiver::store::S3Store::connect("no-such-bucket-here", s3_settings(8 << 20)).await;
    let err = store.put_if_absent("k", &mem(b"x"), 1).await.unwrap_err();
    assert!(!err.is_transient(), "{err}");
    assert!(err.to_string().contains("no-such-bucket-here"), "{err}");
}

/// Multipart uploads left by a crash are invisible; ours (and only ours) are aborted once pending for
/// longer than the threshold by the store's clock and by the store's own sightings (the first sweep takes
/// note: moto dates every upload 2010, which alone would abort live uploads).
#[tokio::test]
async fn s3_stale_multipart_uploads_of_ours_are_aborted() {
    use kafka_s3_archiver::archive::object_key::Prefix;
    let bucket = unique("stale").to_lowercase();
    let store = s3_store_with(&bucket, 5 << 20).await;
    let ours = "arch/topic=t/partition=0/t+0+00000000000000000000+00000000000000000009.parquet";
    let foreign = "arch/exports/report.csv";
    for key in [ours, foreign] {
        store.client().create_multipart_upload().bucket(&bucket).key(key).send().await.unwrap();
    }
    let pending = || async {
        let out = store.client().list_multipart_uploads().bucket(&bucket).send().await.unwrap();
        let mut keys: Vec<String> = out.uploads().iter().filter_map(|u| u.key().map(str::to_string)).collect();
        keys.sort();
        keys
    };
    let prefix = Prefix::new("arch");
    let aborted = store.abort_stale_uploads(&prefix, std::time::Duration::from_secs(3600)).await.unwrap();
    assert!(aborted.is_empty(), "fresh uploads may still be completing: {aborted:?}");
    assert_eq!(pending().await.len(), 2);
    let aborted = store.abort_stale_uploads(&prefix, std::time::Duration::ZERO).await.unwrap();
    assert_eq!(aborted, vec![ours.to_string()]);
    assert_eq!(pending().await, vec![foreign.to_string()]);
}

/// Recovery's search for a partition's end (`StartAfter` probes instead of paging) on the S3 server's
/// real listing: 2,100 claims and data objects in one partition, no commit hint, with and without the
/// log end.
#[tokio::test(flavor = "multi_thread")]
async fn s3_recovery_finds_the_end_of_a_large_partition_in_a_few_requests() {
    use kafka_s3_archiver::archive::object_key::Prefix;
    use kafka_s3_archiver::archive::partition::{OffsetRange, TopicPartition};
    use kafka_s3_archiver::commands::demo::generate::write_synthetic_archive;
    use kafka_s3_archiver::recovery::tail::{find_tail, TailHints};
    use kafka_s3_archiver::recovery::Tail;
    use kafka_s3_archiver::retry::Patience;
    let bucket = unique("tail").to_lowercase();
    let store = s3_store_with(&bucket, 5 << 20).await;
    let (prefix, tp) = (Prefix::new("arch"), TopicPartition::new("t", 0).unwrap());
    const FILES: i64 = 2100;
    let objects = (0..FILES).map(|i| (tp.clone(), OffsetRange::new(i * 100, i * 100 + 99).unwrap()));
    write_synthetic_archive(&store, &prefix, objects, 32).await.unwrap();
    for log_end in [Some(FILES * 100), None] {
        let hints = TailHints { commit: None, log_end };
        let found = find_tail(&store, &prefix, &tp, hints, true, Patience::Attempts(3), None).await.unwrap();
        assert_eq!(found.tail, Tail::Complete { next: FILES * 100 }, "log end {log_end:?}");
        println!("{FILES} files, log end {log_end:?}: {} list requests", found.list_requests);
        assert!(found.list_requests <= 12, "{} list requests", found.list_requests);
    }
}

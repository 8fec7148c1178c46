//! Zombies and late uploads (tansu + LocalStack, archiver binaries): an instance stalled past the
//! session timeout that wakes up with buffered files, and an upload that reaches S3 20 s after its
//! client gave up. With claims, the archive ends with no overlapping object and no missing record;
//! without claims (`--claims false`), the late upload leaves an overlap that `verify` reports.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::s3_proxy::{Fault, Kind, S3Proxy};
use common::*;
use kafka_s3_archiver::commands::demo::generate::produce;
use kafka_s3_archiver::commands::verify::audit::Problem;
use kafka_s3_archiver::store::cloud::AZURITE_ACCOUNT;

/// Archiver A's uploads go through a proxy that holds every data PUT of partition 0's first file for
/// 20 s; A is killed while they are held. B (a new group: no commits) archives the partition, then the
/// held PUTs reach S3.
async fn late_upload(
    dest: TestDest,
    claims: bool,
) -> (TestDest, String, BTreeMap<i32, Vec<kafka_s3_archiver::archive::record::Record>>) {
    let topic = unique("late");
    create_topic(&topic, 1).await;
    let produced = produce(&brokers(), &topic, 1, 0..250, 100).await.unwrap();
    let proxy = match &dest {
        TestDest::Gcs { .. } => S3Proxy::start_as_upstream(&gcs_endpoint()).await,
        TestDest::Azure { .. } => {
            S3Proxy::start_as_upstream(azure_endpoint().trim_end_matches(&format!("/{AZURITE_ACCOUNT}"))).await
        }
        _ => S3Proxy::start(&s3_endpoint()).await,
    };
    let first_file = format!("+{:020}+", 0);
    proxy.set_rule(move |req| {
        if req.kind == Kind::PutData && req.key.contains(&first_file) {
            Fault::Hold(Duration::from_secs(20))
        } else {
            Fault::Pass
        }
    });
    let spool = tempfile::tempdir().unwrap();
    let args_a = through(archiver_args(&dest, &unique("ga"), &topic, 100, spool.path()), &proxy.url);
    let args_a = set_flag(set_flag(args_a, "--s3-attempt-timeout", "2s"), "--claims", &claims.to_string());
    let mut a = ArchiverProcess::spawn("late-a", &args_a);
    let started = Instant::now();
    while proxy.counts().faults.is_empty() {
        a.assert_running();
        assert!(started.elapsed() < Duration::from_secs(60), "A never uploaded its first file; log:\n{}", a.log_text());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    a.kill_hard();
    let held_at = Instant::now();

    let args_b =
        set_flag(archiver_args(&dest, &unique("gb"), &topic, 70, spool.path()), "--claims", &claims.to_string());
    let mut b = ArchiverProcess::spawn("late-b", &args_b);
    let store = dest.store().await;
    wait_archived(store.as_ref(), &dest.prefix(), &topic, &last_offsets(&produced), &mut [&mut b]).await;
    assert!(held_at.elapsed() < Duration::from_secs(20), "B should finish before the held upload lands");
    while proxy.counts().forwarded_late == 0 {
        assert!(held_at.elapsed() < Duration::from_secs(40), "the held upload was never forwarded");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(b.terminate().success(), "B failed; log:\n{}", b.log_text());
    let counts = proxy.counts();
    println!(
        "late upload (claims {claims}): requests {:?}, faults {:?}, forwarded late {}",
        counts.requests, counts.faults, counts.forwarded_late
    );
    if claims {
        assert!(
            b.log_text().contains("re-writing exactly that range"),
            "B should re-write A's claimed range; log:\n{}",
            b.log_text()
        );
    }
    drop(counts);
    (dest, topic, produced)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_late_upload_cannot_overlap_with_claims() {
    let (dest, topic, produced) = late_upload(TestDest::s3().await, true).await;
    assert_exactly_once(&dest, &topic, &produced).await;
}

/// The same on GCS (the held request is a JSON API upload) and Azure (a Put Blob).
#[tokio::test(flavor = "multi_thread")]
async fn gcs_a_late_upload_cannot_overlap_with_claims() {
    let (dest, topic, produced) = late_upload(TestDest::gcs().await, true).await;
    assert_exactly_once(&dest, &topic, &produced).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn azure_a_late_upload_cannot_overlap_with_claims() {
    let (dest, topic, produced) = late_upload(TestDest::azure().await, true).await;
    assert_exactly_once(&dest, &topic, &produced).await;
}

/// The same scenario without claims: the failure the claims prevent, and `verify` names it.
#[tokio::test(flavor = "multi_thread")]
async fn without_claims_a_late_upload_overlaps_and_verify_reports_it() {
    let (dest, topic, _) = late_upload(TestDest::s3().await, false).await;
    let report = verify_deep(&dest, &topic).await;
    assert!(report.partitions[0].problems.iter().any(|p| matches!(p, Problem::Overlap { .. })), "{}", report.table());
}

/// A is stopped (SIGSTOP) past the session timeout while its uploads wait on slow S3 answers, with
/// more files sealed behind them; B takes its partitions and archives everything; then A continues
/// (SIGCONT) with its stale files.
#[tokio::test(flavor = "multi_thread")]
async fn a_stalled_instance_wakes_up_without_overlapping() {
    let topic = unique("stall");
    create_topic(&topic, 2).await;
    let group = unique("g");
    let dest = TestDest::s3().await;
    let proxy = S3Proxy::start(&s3_endpoint()).await;
    proxy.set_rule(
        |req| if req.kind == Kind::PutData { Fault::StallResponse(Duration::from_secs(4)) } else { Fault::Pass },
    );
    let spool = tempfile::tempdir().unwrap();
    let mut a = ArchiverProcess::spawn(
        "stall-a",
        &through(archiver_args(&dest, &group, &topic, 100, spool.path()), &proxy.url),
    );
    wait_log(&mut a, "recovered position from the archive").await;
    let produced = produce(&brokers(), &topic, 2, 0..600, 100).await.unwrap();
    // A's first uploads are stored but answered late; its next files are sealed behind them.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    signal(a.pid(), "STOP");

    let mut b = ArchiverProcess::spawn("stall-b", &archiver_args(&dest, &group, &topic, 70, spool.path()));
    let store = dest.store().await;
    wait_archived(store.as_ref(), &dest.prefix(), &topic, &last_offsets(&produced), &mut [&mut b]).await;
    signal(a.pid(), "CONT");
    // A loses the claim race with its stale files, or learns first that its partitions are gone.
    let started = Instant::now();
    while !a.log_text().contains("partitions revoked") {
        assert!(started.elapsed() < Duration::from_secs(30), "A was never revoked; log:\n{}", a.log_text());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Give A time to act on whatever it still holds.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let lost = a.log_text().matches("another writer claimed this start").count();
    println!("the stalled instance lost {lost} claim races after SIGCONT; proxy saw {:?}", proxy.counts().requests);
    assert!(a.terminate().success(), "A failed; log:\n{}", a.log_text());
    assert!(b.terminate().success(), "B failed; log:\n{}", b.log_text());
    assert_exactly_once(&dest, &topic, &produced).await;
}

/// What claims cost: S3 requests per archived object for the same archive, with and without claims.
#[tokio::test(flavor = "multi_thread")]
async fn claims_cost_one_small_put_per_object() {
    let topic = unique("cost");
    create_topic(&topic, 2).await;
    let produced = produce(&brokers(), &topic, 2, 0..2000, 100).await.unwrap();
    let mut per_object = Vec::new();
    for claims in [false, true] {
        let dest = TestDest::s3().await;
        let proxy = S3Proxy::start(&s3_endpoint()).await;
        let spool = tempfile::tempdir().unwrap();
        let args = through(archiver_args(&dest, &unique("gc"), &topic, 100, spool.path()), &proxy.url);
        let mut a = ArchiverProcess::spawn("cost", &set_flag(args, "--claims", &claims.to_string()));
        let store = dest.store().await;
        wait_archived(store.as_ref(), &dest.prefix(), &topic, &last_offsets(&produced), &mut [&mut a]).await;
        assert!(a.terminate().success(), "{}", a.log_text());
        let requests = proxy.counts().requests.clone();
        let objects = 20.0;
        let get = |k| *requests.get(&k).unwrap_or(&0) as f64;
        println!(
            "claims {claims}: {objects} objects; per object: {:.2} data PUT, {:.2} claim PUT, {:.2} GET; per run: {} LIST (2 partitions recovered), {:?}",
            get(Kind::PutData) / objects,
            get(Kind::PutClaim) / objects,
            get(Kind::Get) / objects,
            get(Kind::List),
            requests
        );
        // Plus the start-up probe's two PUTs of one key (conditional writes proven before archiving).
        assert_eq!(get(Kind::PutData), objects + 2.0);
        assert_eq!(get(Kind::PutClaim), if claims { objects } else { 0.0 });
        per_object.push(requests.values().sum::<u64>() as f64 / objects);
        if claims {
            assert_exactly_once(&dest, &topic, &produced).await;
        } else {
            let report = verify_deep(&dest, &topic).await;
            assert!(report.is_clean(), "{}", report.table());
        }
    }
    println!(
        "S3 requests per object, all kinds: without claims {:.2}, with claims {:.2}",
        per_object[0], per_object[1]
    );
}

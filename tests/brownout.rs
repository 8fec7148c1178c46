//! An S3 brownout (503 SlowDown) at start-up and during recovery, as a fleet meets it (Apache Kafka,
//! the S3 test server behind a fault-injecting proxy, the binary): an instance started during the
//! outage waits for the store instead of exiting; recoveries retry for as long as it takes, with
//! `/readyz` answering 503 and saying why, while the instances stay in the group and a rebalance (a
//! second instance joining) is answered; once the store is back everything is archived exactly once.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::s3_proxy::{Fault, Kind, S3Proxy};
use common::*;
use kafka_s3_archiver::commands::demo::generate::produce;

/// What the store does, in phases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outage {
    /// Every request answers 503.
    Total,
    /// Recovery's listings (of the partitions' folders) answer 503; everything else passes.
    Listings,
    Over,
}

#[tokio::test(flavor = "multi_thread")]
async fn an_s3_brownout_at_start_and_during_recovery_is_waited_out() {
    let topic = unique("brownout");
    create_topic(&topic, 4).await;
    let produced = produce(&brokers(), &topic, 4, 0..800, 100).await.expect("produce");
    let dest = TestDest::s3().await;
    let proxy = S3Proxy::start(&s3_endpoint()).await;
    let outage = Arc::new(Mutex::new(Outage::Total));
    let phase = outage.clone();
    proxy.set_rule(move |req| match *phase.lock().unwrap() {
        Outage::Total => Fault::Status(503, "SlowDown"),
        Outage::Listings if req.kind == Kind::List && req.query.contains("topic=") => Fault::Status(503, "SlowDown"),
        _ => Fault::Pass,
    });
    let group = unique("g");
    let spool = tempfile::tempdir().unwrap();
    let (addr_a, addr_b) = (free_addr(), free_addr());
    let args = |addr: &str| {
        let mut args = through(archiver_args(&dest, &group, &topic, 50, spool.path()), &proxy.url);
        args.extend(["--metrics-addr".into(), addr.to_string()]);
        args
    };
    let mut a = ArchiverProcess::spawn("brownout-a", &args(&addr_a));

    // Start-up during a total outage: it waits for the store, saying so.
    wait_log(&mut a, "does not answer at start-up").await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    a.assert_running();

    // The store answers again, but not to recovery's listings: longer than the old give-up (8 tries,
    // at most 26 s of back-off) and than the assign callback's wait (2 s).
    *outage.lock().unwrap() = Outage::Listings;
    wait_log(&mut a, "recovering positions from the archive").await;
    let started = Instant::now();
    let mut said_why = false;
    let mut b: Option<ArchiverProcess> = None;
    while started.elapsed() < Duration::from_secs(35) {
        a.assert_running();
        if let Some(b) = b.as_mut() {
            b.assert_running();
        }
        let (status, body) = http_get(&addr_a, "/readyz");
        if status == 503 && body.contains("recoveries in progress") && body.contains("failing") {
            said_why = true;
        }
        if b.is_none() && started.elapsed() > Duration::from_secs(12) {
            // A second instance joins: the first is asked to give up partitions it is still recovering.
            b = Some(ArchiverProcess::spawn("brownout-b", &args(&addr_b)));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let mut b = b.expect("the second instance started");
    assert!(said_why, "/readyz never said why it was not ready");
    let log = a.log_text();
    assert!(log.contains("recovery is taking longer than"), "{log}");
    assert!(log.contains("partitions revoked"), "the first instance was never asked to give partitions up:\n{log}");

    // The store is back: both instances start their partitions and archive everything exactly once.
    *outage.lock().unwrap() = Outage::Over;
    let store = dest.store().await;
    wait_archived(store.as_ref(), &dest.prefix(), &topic, &last_offsets(&produced), &mut [&mut a, &mut b]).await;
    for addr in [&addr_a, &addr_b] {
        let ready = Instant::now();
        while http_get(addr, "/readyz").0 != 200 {
            assert!(ready.elapsed() < Duration::from_secs(30), "{addr} never became ready again");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    // The second instance leaves: the partitions it took, which the first had paused while they were
    // being recovered, come back to the first, which must fetch them (its pause outlives the revoke).
    assert!(b.terminate().success());
    let mut produced = produced;
    kafka_s3_archiver::commands::demo::generate::merge(
        &mut produced,
        produce(&brokers(), &topic, 4, 800..1200, 100).await.expect("produce"),
    );
    wait_archived(store.as_ref(), &dest.prefix(), &topic, &last_offsets(&produced), &mut [&mut a]).await;
    assert!(a.terminate().success());
    assert_exactly_once(&dest, &topic, &produced).await;
    println!("proxy: {:?}", proxy.counts().faults);
}

/// S3's answer to conditional writes that race (409 ConditionalRequestConflict, which AWS documents
/// as retryable) is tried again: at start-up's probe, on claims, on data objects, and on
/// CompleteMultipartUpload (whose upload is then started again). Nothing stops, and everything is
/// archived exactly once.
#[tokio::test(flavor = "multi_thread")]
async fn conditional_write_conflicts_are_retried() {
    let topic = unique("conflict");
    create_topic(&topic, 2).await;
    // 25 kB values in 500-record files of uncompressed JSON lines: 12.5 MB, uploaded in 5 MiB parts.
    let produced = produce(&brokers(), &topic, 2, 0..1200, 25_000).await.expect("produce");
    let dest = TestDest::s3().await;
    let proxy = S3Proxy::start(&s3_endpoint()).await;
    // The first two conditional writes of each kind answer 409.
    let conflicts: Arc<Mutex<std::collections::BTreeMap<&'static str, u32>>> = Arc::default();
    let counted = conflicts.clone();
    proxy.set_rule(move |req| {
        let complete =
            req.kind == Kind::Multipart && req.query.contains("uploadId=") && !req.query.contains("partNumber=");
        let kind = match req.kind {
            Kind::PutData if req.key.contains("/_probe/") => "probe",
            Kind::PutClaim => "claim",
            Kind::PutData => "data",
            Kind::Multipart if complete => "complete",
            _ => return Fault::Pass,
        };
        let mut counted = counted.lock().unwrap();
        let n = counted.entry(kind).or_default();
        *n += 1;
        if *n <= 2 {
            Fault::Status(409, "ConditionalRequestConflict")
        } else {
            Fault::Pass
        }
    });
    let spool = tempfile::tempdir().unwrap();
    let args = through(archiver_args(&dest, &unique("g"), &topic, 500, spool.path()), &proxy.url);
    let args = set_flag(args, "--upload-part-size", "5MiB");
    let args = set_flag(set_flag(args, "--format", "jsonl"), "--compression", "none");
    let mut archiver = ArchiverProcess::spawn("conflicts", &args);
    let store = dest.store().await;
    wait_archived(store.as_ref(), &dest.prefix(), &topic, &last_offsets(&produced), &mut [&mut archiver]).await;
    assert!(archiver.terminate().success(), "{}", archiver.log_text());
    assert_exactly_once(&dest, &topic, &produced).await;
    let conflicts = conflicts.lock().unwrap().clone();
    println!("conditional writes per kind (the first two answered 409): {conflicts:?}");
    for kind in ["probe", "claim", "data", "complete"] {
        assert!(conflicts.get(kind).is_some_and(|n| *n > 2), "no {kind} went through after its 409s: {conflicts:?}");
    }
}

//! The chaos suite: three archiver processes share one group while a producer writes throughout; every
//! few seconds one is SIGKILLed and restarted (sometimes under a new group id, so its commits are lost
//! and two groups race for the same partitions); all S3 traffic goes through a proxy that injects 503
//! SlowDown, 500, connection resets, answers stalled past the client timeout, and answers dropped after
//! the object was stored. Afterwards an independent read of the objects must find every produced
//! record exactly once, bytes equal, and `verify --deep` nothing wrong. The test prints its figures.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::s3_proxy::{Fault, S3Proxy};
use common::*;
use kafka_s3_archiver::commands::demo::generate::{merge, produce};

const PARTITIONS: i32 = 4;
const CHAOS: Duration = Duration::from_secs(45);
/// On the GCS and Azure emulators.
const SHORT_CHAOS: Duration = Duration::from_secs(20);
/// Share of S3 requests that meet a fault while the chaos lasts.
const FAULT_RATE: f64 = 0.12;

fn random_fault() -> Fault {
    match fastrand::u32(0..100) {
        0..30 => Fault::Status(503, "SlowDown"),
        30..50 => Fault::Status(500, "InternalError"),
        50..70 => Fault::Reset,
        70..85 => Fault::StallResponse(Duration::from_secs(3)),
        _ => Fault::DropResponse,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn kills_rebalances_lost_commits_and_s3_faults_lose_nothing_and_duplicate_nothing() {
    chaos(TestDest::s3().await, &s3_endpoint(), CHAOS).await;
}

/// The same on Google Cloud Storage's emulator, shorter.
#[tokio::test(flavor = "multi_thread")]
async fn gcs_kills_rebalances_lost_commits_and_faults_lose_nothing_and_duplicate_nothing() {
    chaos(TestDest::gcs().await, &gcs_endpoint(), SHORT_CHAOS).await;
}

/// The same on Azure Blob Storage's emulator, shorter.
#[tokio::test(flavor = "multi_thread")]
async fn azure_kills_rebalances_lost_commits_and_faults_lose_nothing_and_duplicate_nothing() {
    chaos(TestDest::azure().await, &azure_endpoint(), SHORT_CHAOS).await;
}

async fn chaos(dest: TestDest, endpoint: &str, chaos_for: Duration) {
    let seed = fastrand::u64(..);
    fastrand::seed(seed);
    println!("chaos seed {seed} on {}", dest.url());
    let topic = unique("chaos");
    create_topic(&topic, PARTITIONS).await;
    let proxy = match dest {
        TestDest::S3 { .. } => S3Proxy::start(endpoint).await,
        _ => S3Proxy::start_as_upstream(endpoint_root(endpoint)).await,
    };
    proxy.set_rule(|_| if fastrand::f64() < FAULT_RATE { random_fault() } else { Fault::Pass });
    let spool = tempfile::tempdir().unwrap();
    let group = unique("chaos-g");
    // Instances restarted under a new group roll at other offsets, so that a race between two groups
    // for a partition would show as overlapping objects.
    let args = |group: &str, roll_records: u64| {
        let a = through(archiver_args(&dest, group, &topic, roll_records, spool.path()), &proxy.url);
        set_flag(set_flag(a, "--s3-attempt-timeout", "2s"), "--revoke-timeout", "5s")
    };
    let mut procs: Vec<ArchiverProcess> =
        (0..3).map(|i| ArchiverProcess::spawn(&format!("chaos-{i}"), &args(&group, 150))).collect();

    // The producer writes throughout, in small batches.
    let producer_topic = topic.clone();
    let producer = tokio::spawn(async move {
        let mut produced = BTreeMap::new();
        let started = Instant::now();
        let mut next = 0;
        while started.elapsed() < chaos_for {
            merge(
                &mut produced,
                produce(&brokers(), &producer_topic, PARTITIONS, next..next + 400, 200).await.unwrap(),
            );
            next += 400;
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        produced
    });

    let (mut kills, mut new_groups) = (0, 0);
    let (mut claims_lost, mut rewrites) = (0, 0);
    let mut tally = |log: String| {
        claims_lost += log.matches("another writer claimed this start").count();
        rewrites += log.matches("re-writing exactly that range").count();
    };
    let started = Instant::now();
    while started.elapsed() < chaos_for {
        tokio::time::sleep(Duration::from_millis(fastrand::u64(3000..6000))).await;
        let victim = fastrand::usize(0..procs.len());
        procs[victim].kill_hard();
        tally(procs[victim].log_text());
        kills += 1;
        let (group, roll_records) = if fastrand::u32(0..3) == 0 {
            new_groups += 1;
            (unique("chaos-lost-commits"), 97)
        } else {
            (group.clone(), 150)
        };
        procs[victim] = ArchiverProcess::spawn(&format!("chaos-{victim}-{kills}"), &args(&group, roll_records));
    }
    let produced = producer.await.unwrap();
    let faults: BTreeMap<&str, u64> = proxy.counts().faults.clone();
    let requests: BTreeMap<_, u64> = proxy.counts().requests.clone();

    // Calm: no more faults; the survivors finish, then stop gracefully.
    proxy.pass_all();
    let store = dest.store().await;
    let mut refs: Vec<&mut ArchiverProcess> = procs.iter_mut().collect();
    wait_archived(store.as_ref(), &dest.prefix(), &topic, &last_offsets(&produced), &mut refs).await;
    for p in procs.iter_mut() {
        assert!(p.terminate().success(), "an archiver failed; log:\n{}", p.log_text());
        tally(p.log_text());
    }

    let contents =
        kafka_s3_archiver::commands::demo::check::read_topic(store.as_ref(), &dest.prefix(), &topic).await.unwrap();
    let c = kafka_s3_archiver::commands::demo::check::compare(&produced, &contents);
    let objects: usize = contents.partitions.values().map(|p| p.objects.len()).sum();
    println!(
        "chaos figures: {} records produced on {PARTITIONS} partitions in {:?}; {kills} SIGKILLs and restarts ({new_groups} under a \
         new group id); S3 requests {requests:?}; faults injected {faults:?}; {objects} objects; claims lost by zombies/racers \
         {claims_lost}, claimed ranges re-written {rewrites}; duplicates {}, missing {}, different {}",
        c.expected, chaos_for, c.duplicates, c.missing, c.different
    );
    assert!(c.is_exact(), "archive differs from what was produced: {c:?}");
    assert!(faults.values().sum::<u64>() > 20, "too few faults injected to mean anything: {faults:?}");
    assert_exactly_once(&dest, &topic, &produced).await;
}

/// `http://host:port` of an endpoint that may carry a path (Azurite's account).
fn endpoint_root(endpoint: &str) -> &str {
    let after_scheme = endpoint.find("://").map_or(0, |i| i + 3);
    endpoint[after_scheme..].find('/').map_or(endpoint, |i| &endpoint[..after_scheme + i])
}

//! A fleet restarted on a large archive: a topic of P partitions whose archive already holds N objects
//! and N claims per partition (written straight to S3, as the archiver names them: one record each),
//! and one more record per partition in the log. A fleet of archiver processes starts under a NEW group
//! (no commits: every partition's position comes from searching its claims, bounded by its log end),
//! and is timed until every partition has recovered and until every partition's next record is durable
//! (`--roll-records 1`: fetched, claimed, uploaded). Then the fleet is stopped (SIGTERM: it uploads and
//! commits), one more record per partition is produced, and the same fleet restarts under the SAME
//! group (commit hints). Request counts come from the instances' `/metrics`.
//!
//! Usage (services from localstack/with-services.sh):
//!   localstack/bench-fleet.sh [partitions] [objects] [instances] [s3|dir]
//! `dir` archives to a local directory instead of LocalStack, whose listings slow down with the number of
//! keys in the bucket (~0.7 s per LIST at a few hundred thousand keys): it isolates the archiver's and
//! Kafka's part, and the request counts say what S3 would be asked.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kafka_s3_archiver::archive::object_key::Prefix;
use kafka_s3_archiver::archive::partition::{OffsetRange, TopicPartition};
use kafka_s3_archiver::commands::demo::generate::{generated, produce_records, write_synthetic_archive};
use kafka_s3_archiver::store::{LocalStore, ObjectStore, S3Options, S3Store};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::ClientConfig;

/// PUTs in flight while writing the archive.
const WRITERS: usize = 64;

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set: run this through localstack/bench-fleet.sh"))
}

/// One archiver process and the port of its `/metrics`.
struct Instance {
    child: Child,
    port: u16,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn spawn(topic: &str, group: &str, dest: &[String], i: usize) -> Instance {
    let exe = std::env::current_exe().unwrap().parent().unwrap().parent().unwrap().join("kafka-s3-archiver");
    let port = free_port();
    let log = std::fs::File::create(std::env::temp_dir().join(format!("fleet-{}-{group}-{i}.log", std::process::id())))
        .unwrap();
    let child = Command::new(&exe)
        .args(["run", "--brokers", &env("KSA_TEST_BROKERS"), "--group", group, "--topic", topic])
        .args(dest)
        .args(["--roll-records", "1"])
        .args(["--metrics-addr", &format!("127.0.0.1:{port}")])
        .args(["--kafka", "session.timeout.ms=6000", "--kafka", "heartbeat.interval.ms=1000"])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {}: {e} (build it first)", exe.display()));
    Instance { child, port }
}

/// The instance's metrics: plain counters by name, and `archived_offset` by partition.
fn scrape(port: u16) -> Option<(BTreeMap<String, f64>, BTreeMap<i32, i64>)> {
    let mut conn = TcpStream::connect(("127.0.0.1", port)).ok()?;
    conn.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n").ok()?;
    let mut text = String::new();
    conn.read_to_string(&mut text).ok()?;
    let (mut plain, mut archived) = (BTreeMap::new(), BTreeMap::new());
    for line in text.lines().filter(|l| l.starts_with("ksa_")) {
        let (name, value) = line.rsplit_once(' ')?;
        if let Some(labels) = name.strip_prefix("ksa_archived_offset{") {
            let partition = labels.split("partition=\"").nth(1)?.split('"').next()?.parse().ok()?;
            archived.insert(partition, value.parse().ok()?);
        } else if !name.contains('{') {
            plain.insert(name.to_string(), value.parse().ok()?);
        }
    }
    Some((plain, archived))
}

/// Starts the fleet and times it until every partition has archived offset `through`.
fn timed_start(
    fleet: &mut Vec<Instance>,
    n: usize,
    spawn_one: impl Fn(usize) -> Instance,
    partitions: i32,
    through: i64,
) {
    let t0 = Instant::now();
    fleet.extend((0..n).map(spawn_one));
    let (mut recovered_at, mut half_at) = (None, None);
    loop {
        std::thread::sleep(Duration::from_millis(200));
        for instance in fleet.iter_mut() {
            assert!(instance.child.try_wait().unwrap().is_none(), "an archiver exited: see its log in the temp dir");
        }
        let scraped: Vec<_> = fleet.iter().filter_map(|i| scrape(i.port)).collect();
        let sum = |name: &str| scraped.iter().map(|(p, _)| p.get(name).copied().unwrap_or(0.0)).sum::<f64>();
        let mut archived: BTreeMap<i32, i64> = BTreeMap::new();
        for (_, a) in &scraped {
            for (p, o) in a {
                archived.entry(*p).and_modify(|x| *x = (*x).max(*o)).or_insert(*o);
            }
        }
        let (recoveries, in_progress) = (sum("ksa_recoveries_total"), sum("ksa_recoveries_in_progress"));
        if recovered_at.is_none() && recoveries >= f64::from(partitions) && in_progress == 0.0 {
            recovered_at = Some(t0.elapsed().as_secs_f64());
        }
        let done = archived.values().filter(|o| **o >= through).count();
        if half_at.is_none() && 2 * done >= partitions as usize {
            half_at = Some(t0.elapsed().as_secs_f64());
        }
        if done == partitions as usize {
            println!(
                "| {:.1} | {:.1} | {:.1} | {} | {} | {} | {:.0} |",
                recovered_at.unwrap_or(f64::NAN),
                half_at.unwrap_or(f64::NAN),
                t0.elapsed().as_secs_f64(),
                recoveries,
                sum("ksa_rebalances_total"),
                sum("ksa_recovery_list_requests_total"),
                sum("ksa_recovery_seconds_sum") / recoveries.max(1.0) * 1000.0,
            );
            return;
        }
        assert!(t0.elapsed() < Duration::from_secs(1800), "not every partition archived within 30 minutes");
    }
}

/// SIGTERM to each (they upload and commit), then waits for them.
fn stop(fleet: &mut Vec<Instance>) {
    for i in fleet.iter() {
        Command::new("kill").arg(i.child.id().to_string()).status().unwrap();
    }
    for mut i in fleet.drain(..) {
        assert!(i.child.wait().unwrap().success(), "an archiver did not stop cleanly");
    }
}

/// The archive's store, and the archiver's arguments naming it (prefix `arch`).
async fn destination(kind: &str, dir: &std::path::Path) -> (Box<dyn ObjectStore>, Vec<String>) {
    if kind == "dir" {
        let store = LocalStore::new(dir).unwrap();
        return (Box::new(store), vec!["--dest".into(), format!("file://{}/arch", dir.display())]);
    }
    let endpoint = env("KSA_TEST_S3_ENDPOINT");
    let bucket = format!("fleet-{}", std::process::id());
    let store = S3Store::connect(&bucket, S3Options::new(Some(endpoint.clone()), Some("us-east-1".into()))).await;
    store.client().create_bucket().bucket(&bucket).send().await.expect("create bucket");
    (Box::new(store), vec!["--dest".into(), format!("s3://{bucket}/arch"), "--s3-endpoint".into(), endpoint])
}

#[tokio::main]
async fn main() {
    let arg = |n: usize, default: i64| std::env::args().nth(n).map_or(default, |a| a.parse().expect("a number"));
    let (partitions, objects, instances) = (arg(1, 1000) as i32, arg(2, 1000), arg(3, 3) as usize);
    let brokers = env("KSA_TEST_BROKERS");
    let topic = format!("fleet-{}", std::process::id());
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", &brokers).create().unwrap();
    let new = NewTopic::new(&topic, partitions, TopicReplication::Fixed(1));
    admin.create_topics(&[new], &AdminOptions::new()).await.unwrap();
    // Offsets 0..objects are archived below; offset `objects` is the next record of every partition.
    let records = partitions as usize * (objects as usize + 1);
    produce_records(&brokers, &topic, partitions, 0..records, |i| generated(i, 16)).await.unwrap();

    let dir = tempfile::tempdir().unwrap();
    let (store, dest) = destination(&std::env::args().nth(4).unwrap_or_else(|| "s3".into()), dir.path()).await;
    let prefix = Prefix::new("arch");
    let started = Instant::now();
    let ranges = (0..partitions).flat_map(|p| {
        let tp = TopicPartition::new(&topic, p).expect("partition");
        (0..objects).map(move |o| (tp.clone(), OffsetRange::new(o, o).expect("range")))
    });
    let puts = write_synthetic_archive(store.as_ref(), &prefix, ranges, WRITERS).await.expect("write the archive");
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{partitions} partitions x {objects} objects and claims written in {secs:.0}s ({:.0} PUTs/s); \
         {records} records in the log; {instances} instances",
        puts as f64 / secs
    );

    let group = format!("fleet-{}", std::process::id());
    let spawn_one = |i| spawn(&topic, &group, &dest, i);
    println!(
        "\n| restart | s to all recovered | s to half the partitions' next record durable | s to every partition's \
         next record durable | recoveries | rebalances | recovery LISTs | mean ms per recovery |\n|---|---|---|---|---|---|---|---|"
    );
    let mut fleet = Vec::new();
    print!("| new group (no commits) ");
    timed_start(&mut fleet, instances, spawn_one, partitions, objects);
    stop(&mut fleet);
    produce_records(&brokers, &topic, partitions, records..records + partitions as usize, |i| generated(i, 16))
        .await
        .unwrap();
    print!("| same group (commit hints) ");
    timed_start(&mut fleet, instances, spawn_one, partitions, objects + 1);
    stop(&mut fleet);
}

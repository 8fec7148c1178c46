//! Throughput benchmark of `run` against real services (start them with `localstack/bench.sh`).
//!
//! Produces N records of about 1 KiB to a topic of 4 partitions (or as many as asked), then measures, in the same run:
//! 1. a plain rdkafka consumer that discards records (the ceiling the broker allows), and
//! 2. the archiver binary archiving the topic to a local directory (the pipeline without S3's costs)
//!    and to S3, each from start until the archive holds every record, with its CPU seconds (user +
//!    system, from /proc) and its peak RSS (VmHWM).
//!
//! Usage: cargo run --example throughput -- [records] [value-bytes] [partitions] [max-buffer-bytes]

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kafka_s3_archiver::check::archived_ends;
use kafka_s3_archiver::core::object_key::Prefix;
use kafka_s3_archiver::generate::produce;
use kafka_s3_archiver::store::{LocalStore, ObjectStore, S3Settings, S3Store};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::Message;

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set: run this through localstack/bench.sh"))
}

/// CPU seconds (user + system) a process has used so far, from /proc (`self` or a pid).
fn cpu_seconds(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces): utime and stime are the 12th and 13th.
    let fields: Vec<&str> = stat.rsplit_once(')').map_or("", |(_, rest)| rest).split_whitespace().collect();
    let ticks: f64 = fields.get(11..13).map_or(0.0, |f| f.iter().filter_map(|v| v.parse::<f64>().ok()).sum());
    ticks / 100.0 // USER_HZ
}

/// CPU seconds per thread name of a process (threads of one name summed), busiest first.
fn thread_cpu(pid: u32) -> Vec<(String, f64)> {
    let mut by_name: BTreeMap<String, f64> = BTreeMap::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten() {
        let tid = task.file_name().to_string_lossy().into_owned();
        let name = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default().trim().to_string();
        *by_name.entry(name).or_default() += cpu_seconds(&format!("{pid}/task/{tid}"));
    }
    let mut threads: Vec<(String, f64)> = by_name.into_iter().collect();
    threads.sort_by(|a, b| b.1.total_cmp(&a.1));
    threads
}

fn peak_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmHWM:")).map(str::to_string))
        .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let records: usize = args.next().map_or(100_000, |a| a.parse().expect("records"));
    let value_size: usize = args.next().map_or(1024, |a| a.parse().expect("value bytes"));
    let partitions: i32 = args.next().map_or(4, |a| a.parse().expect("partitions"));
    // The archiver's memory budget (`--max-buffer-bytes`), e.g. 64MiB; its default when not given.
    let budget: Option<String> = args.next();
    let brokers = env("KSA_TEST_BROKERS");
    let topic = format!("bench-{}", std::process::id());

    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", &brokers).create().unwrap();
    admin
        .create_topics(&[NewTopic::new(&topic, partitions, TopicReplication::Fixed(1))], &AdminOptions::new())
        .await
        .unwrap();
    let started = Instant::now();
    let produced = produce(&brokers, &topic, partitions, 0..records, value_size).await.expect("produce");
    let payload_bytes: u64 = produced
        .values()
        .flatten()
        .map(|r| (r.value.as_ref().map_or(0, Vec::len) + r.key.as_ref().map_or(0, Vec::len)) as u64)
        .sum();
    let mb = payload_bytes as f64 / 1e6;
    println!("produced {records} records ({mb:.1} MB of keys+values) in {:.1}s", started.elapsed().as_secs_f64());
    let last: BTreeMap<i32, i64> = produced.iter().map(|(p, r)| (*p, r.last().unwrap().offset)).collect();

    let cpu_before = cpu_seconds("self");
    let (plain, join) = plain_consumer(&brokers, &topic, records);
    let plain_cpu = cpu_seconds("self") - cpu_before;
    println!(
        "plain rdkafka consumer (discard): {:.0} records/s, {:.1} MB/s ({plain:.1}s from first record, join took {join:.1}s), \
         {plain_cpu:.1} CPU s ({:.1} per GB)",
        records as f64 / plain,
        mb / plain,
        plain_cpu / (mb / 1000.0),
    );
    for target in [Target::Directory, Target::S3] {
        let run = archiver(&brokers, &topic, &last, target, budget.as_deref()).await;
        report(target, &run, records, mb);
    }
}

/// Where the archiver writes: a local directory isolates the pipeline from S3's costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Directory,
    S3,
}

fn report(target: Target, run: &ArchiverRun, records: usize, mb: f64) {
    let to = match target {
        Target::Directory => "a local directory",
        Target::S3 => "S3",
    };
    println!(
        "archiver to {to}: {:.0} records/s, {:.1} MB/s ({:.1}s from partitions recovered to all objects listed, incl. \
         the last file's 1s roll-age; join took {:.1}s), {:.1} CPU s ({:.1} per GB), peak RSS {:.0} MiB, exit {}",
        records as f64 / run.seconds,
        mb / run.seconds,
        run.seconds,
        run.join_seconds,
        run.cpu_seconds,
        run.cpu_seconds / (mb / 1000.0),
        run.peak_rss_kib as f64 / 1024.0,
        run.status
    );
    let busiest: Vec<String> = run.threads.iter().take(5).map(|(name, s)| format!("{name} {s:.1}s")).collect();
    println!("  CPU by thread: {}", busiest.join(", "));
    println!("  files by roll reason: {:?}; fetch paused {} times", run.rolls, run.paused);
}

/// A plain rdkafka consumer that discards `records` records of `topic`: seconds from its first record
/// to the last, and how long joining the group took.
fn plain_consumer(brokers: &str, topic: &str, records: usize) -> (f64, f64) {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", format!("bench-plain-{}", std::process::id()))
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .set("session.timeout.ms", "3000")
        .create()
        .unwrap();
    consumer.subscribe(&[topic]).unwrap();
    let mut seen = 0usize;
    let mut first_at = None;
    let t0 = Instant::now();
    while seen < records {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
            first_at.get_or_insert_with(Instant::now);
            std::hint::black_box(m.payload());
            seen += 1;
        }
        assert!(t0.elapsed() < Duration::from_secs(600), "plain consumer stalled at {seen}");
    }
    let plain = first_at.unwrap().elapsed().as_secs_f64();
    (plain, t0.elapsed().as_secs_f64() - plain)
}

struct ArchiverRun {
    /// From partitions recovered to every record's object listed.
    seconds: f64,
    join_seconds: f64,
    /// CPU seconds of the whole process, start to exit.
    cpu_seconds: f64,
    /// CPU seconds by thread name, busiest first.
    threads: Vec<(String, f64)>,
    /// Files uploaded by roll reason (records, bytes, age, budget, flush...).
    rolls: BTreeMap<String, u32>,
    /// Times the consumer paused fetching because the pipeline was behind.
    paused: usize,
    peak_rss_kib: u64,
    status: std::process::ExitStatus,
}

/// The archiver binary, as a process, archiving `topic` to a new S3 bucket until every partition's
/// `last` offset is archived.
async fn archiver(
    brokers: &str,
    topic: &str,
    last: &BTreeMap<i32, i64>,
    target: Target,
    budget: Option<&str>,
) -> ArchiverRun {
    let spool = tempfile::tempdir().unwrap();
    let (store, dest): (Box<dyn ObjectStore>, Vec<String>) = match target {
        Target::S3 => {
            let endpoint = env("KSA_TEST_S3_ENDPOINT");
            let bucket = format!("bench-{}", std::process::id());
            let store =
                S3Store::connect(S3Settings::new(&bucket, Some(endpoint.clone()), Some("us-east-1".into()))).await;
            store.client().create_bucket().bucket(&bucket).send().await.unwrap();
            (Box::new(store), vec!["--dest".into(), format!("s3://{bucket}/bench"), "--s3-endpoint".into(), endpoint])
        }
        Target::Directory => {
            let dir = spool.path().join("archive");
            let store = LocalStore::new(&dir).unwrap();
            (Box::new(store), vec!["--dest".into(), format!("file://{}/bench", dir.display())])
        }
    };
    let exe = std::env::current_exe().unwrap().parent().unwrap().parent().unwrap().join("kafka-s3-archiver");
    let log_path = spool.path().join("archiver.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut child = Command::new(&exe)
        .args(["run", "--brokers", brokers, "--group", &format!("bench-archiver-{}-{target:?}", std::process::id())])
        .args(["--topic", topic])
        .args(&dest)
        .args(budget.map(|b| ["--max-buffer-bytes", b]).into_iter().flatten())
        .args(["--roll-bytes", "16MiB", "--roll-age", "1s"])
        .args(["--kafka", "session.timeout.ms=3000", "--kafka", "heartbeat.interval.ms=500"])
        .arg("--spool-dir")
        .arg(spool.path().join("spool"))
        .env("RUST_LOG", "info,librdkafka=warn")
        .stdin(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {}: {e} (build it first: cargo build)", exe.display()));
    let launched = Instant::now();
    // Consumption starts once the assigned partitions are recovered: time from there, like the plain
    // consumer is timed from its first record.
    while !std::fs::read_to_string(&log_path).unwrap_or_default().contains("recovered position from the archive") {
        assert!(launched.elapsed() < Duration::from_secs(60), "archiver never got partitions");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let t0 = Instant::now();
    let prefix = Prefix::new("bench");
    let mut peak = 0;
    loop {
        peak = peak.max(peak_rss_kib(child.id()));
        let ends = archived_ends(store.as_ref(), &prefix, topic).await.unwrap();
        if last.iter().all(|(p, o)| ends.get(p).is_some_and(|e| e >= o)) {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(900), "archiver did not finish");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let seconds = t0.elapsed().as_secs_f64();
    peak = peak.max(peak_rss_kib(child.id()));
    let cpu = cpu_seconds(&child.id().to_string());
    let threads = thread_cpu(child.id());
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let status = child.wait().unwrap();
    let join_seconds = launched.elapsed().as_secs_f64() - seconds;
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    let mut rolls: BTreeMap<String, u32> = BTreeMap::new();
    for reason in log.lines().filter(|l| l.contains("object uploaded")).filter_map(|l| l.split("reason=").nth(1)) {
        *rolls.entry(reason.split_whitespace().next().unwrap_or("").trim_matches('"').to_string()).or_default() += 1;
    }
    let paused = log.matches("pausing fetch").count();
    ArchiverRun { seconds, join_seconds, cpu_seconds: cpu, threads, rolls, paused, peak_rss_kib: peak, status }
}

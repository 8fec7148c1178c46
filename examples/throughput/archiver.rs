//! The archiver binary, as a process, archiving the bench topic until every record is in the archive.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_s3_archiver::archive::object_key::Prefix;
use kafka_s3_archiver::commands::demo::check::archived_ends;
use kafka_s3_archiver::store::{LocalStore, ObjectStore, S3Options, S3Store};
use kafka_s3_archiver::table::catalog::sql::SqlCatalog;
use kafka_s3_archiver::table::catalog::{Catalog, TableIdent};

use crate::measure::{self, cpu_seconds, peak_rss_kib, thread_cpu, MachineCpu};
use crate::registry::Typed;
use crate::{env, Bench, Row, Values};

/// Where the archiver writes, and in which format: a local directory isolates the pipeline from S3's costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Directory,
    S3,
    S3JsonLines,
    /// To S3, each file also committed to the topic's Iceberg table (a SQLite catalog, a commit a
    /// second); timed, as the others, until the archive holds every record, then until the table does.
    S3Table,
    /// To S3, values decoded by `--value-format avro` or `protobuf` through the test Schema Registry.
    S3Typed(Typed),
}

impl Target {
    pub fn describe(self) -> &'static str {
        match self {
            Target::Directory => "run to a local directory",
            Target::S3 => "run to S3",
            Target::S3JsonLines => "run to S3, JSON lines",
            Target::S3Table => "run to S3 with its Iceberg table, 1s commits",
            Target::S3Typed(Typed::Avro) => "run to S3, --value-format avro",
            Target::S3Typed(Typed::Protobuf) => "run to S3, --value-format protobuf",
        }
    }
}

pub struct ArchiverRun {
    /// From the process's start to every record's object durable: what a user sees.
    pub seconds: f64,
    /// From its partitions recovered (start-up, group join and recovery done) to the same.
    pub steady_seconds: f64,
    /// From its partitions recovered to its pipeline having taken every record (decoded and encoded, the
    /// last files not yet rolled: they roll by age within a second): the rate it keeps up with.
    pub taken_seconds: Option<f64>,
    /// CPU seconds of the whole process, from its start until every record is archived (read before it
    /// is stopped).
    pub cpu_seconds: f64,
    /// What the machine's cores did over the same time (the broker and the S3 server share them).
    pub machine: String,
    /// CPU seconds by thread name, busiest first.
    pub threads: Vec<(String, f64)>,
    /// Files uploaded by roll reason (records, bytes, age, budget, flush...).
    pub rolls: BTreeMap<String, u32>,
    /// Times the consumer paused fetching because the pipeline was behind.
    pub paused: usize,
    /// Files written to the spool directory rather than kept in memory (from the summary at exit).
    pub spooled_to_disk: Option<u64>,
    /// Times an open file was shrunk for the budget (from the summary at exit).
    pub shrinks: Option<u64>,
    /// Seconds the pipeline held records back for room in its budget (from the summary at exit).
    pub held_back: Option<f64>,
    pub peak_rss_kib: u64,
    /// With a table: from every record archived until the table held them all.
    pub table_lag: Option<f64>,
    /// From the process's start to its first object durable.
    pub first_durable: f64,
    pub status: std::process::ExitStatus,
    /// Where its log was kept.
    pub log: PathBuf,
}

impl ArchiverRun {
    /// The run's line of the results table.
    pub fn row(&self, target: Target, values: Values) -> Row {
        Row {
            contender: target.describe().into(),
            values,
            seconds: self.seconds,
            steady_seconds: Some(self.steady_seconds),
            taken_seconds: self.taken_seconds,
            cpu_seconds: self.cpu_seconds,
            peak_rss_kib: Some(self.peak_rss_kib),
        }
    }

    pub fn details(&self) -> String {
        let table =
            self.table_lag.map_or(String::new(), |lag| format!("; the table held every record {lag:.1}s later"));
        let busiest: Vec<String> = self.threads.iter().take(5).map(|(name, s)| format!("{name} {s:.1}s")).collect();
        format!(
            "{:.1}s from start to all objects durable (incl. the last file's 1s roll-age), {:.1}s of them from \
             partitions recovered, every record taken {} after those, the first durable {:.1}s from start{table}; exit {}; {}; CPU by thread: {}; files by roll reason: {:?}; fetch paused {} \
             times; files spooled to disk {}; shrinks {}; held back for room {}s; log {}",
            self.seconds,
            self.steady_seconds,
            self.taken_seconds.map_or("?".into(), |s| format!("{s:.1}s")),
            self.first_durable,
            self.status,
            self.machine,
            busiest.join(", "),
            self.rolls,
            self.paused,
            self.spooled_to_disk.map_or("?".into(), |n| n.to_string()),
            self.shrinks.map_or("?".into(), |n| n.to_string()),
            self.held_back.map_or("?".into(), |s| format!("{s:.1}")),
            self.log.display()
        )
    }
}

/// The bucket an S3 target archives to.
pub fn bucket(bench: &Bench, target: Target) -> String {
    let target = format!("{target:?}").replace('(', "-").replace(')', "");
    format!("bench-{}-{}-{target}", std::process::id(), bench.values.name()).to_lowercase()
}

/// Where `target` lives: a store to watch and the archiver's `--dest` arguments.
async fn destination(bench: &Bench, target: Target, dir: &std::path::Path) -> (Arc<dyn ObjectStore>, Vec<String>) {
    match target {
        Target::S3 | Target::S3JsonLines | Target::S3Typed(_) | Target::S3Table => {
            let endpoint = env("KSA_TEST_S3_ENDPOINT");
            let bucket = bucket(bench, target);
            let store =
                S3Store::connect(&bucket, S3Options::new(Some(endpoint.clone()), Some("us-east-1".into()))).await;
            store.client().create_bucket().bucket(&bucket).send().await.unwrap();
            let mut args = vec!["--dest".into(), format!("s3://{bucket}/bench"), "--s3-endpoint".into(), endpoint];
            if target == Target::S3JsonLines {
                args.extend(["--format".into(), "jsonl".into()]);
            }
            if target == Target::S3Table {
                let catalog = format!("sqlite://{}", dir.join("catalog.db").display());
                args.extend(
                    ["--table", "iceberg", "--iceberg-catalog", &catalog, "--table-commit-interval", "1s"]
                        .map(String::from),
                );
            }
            if let Target::S3Typed(typed) = target {
                let registry = env("KSA_TEST_SCHEMA_REGISTRY");
                args.extend(["--value-format", typed.name(), "--schema-registry-url", &registry].map(String::from));
            }
            (Arc::new(store), args)
        }
        Target::Directory => {
            let dir = dir.join("archive");
            let store = LocalStore::new(&dir).unwrap();
            (Arc::new(store), vec!["--dest".into(), format!("file://{}/bench", dir.display())])
        }
    }
}

/// Runs the archiver binary on the bench topic until every partition's `last` offset is archived.
pub async fn archiver(bench: &Bench, target: Target) -> ArchiverRun {
    let spool = tempfile::tempdir().unwrap();
    let (store, dest) = destination(bench, target, spool.path()).await;
    let exe = std::env::current_exe().unwrap().parent().unwrap().parent().unwrap().join("kafka-s3-archiver");
    let log_path =
        std::env::temp_dir().join(format!("bench-{}-{}-{target:?}.log", std::process::id(), bench.values.name()));
    let log = std::fs::File::create(&log_path).unwrap();
    let group = format!("bench-archiver-{}-{target:?}", std::process::id());
    let metrics = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let machine_at_launch = MachineCpu::now();
    let mut child = Command::new(&exe)
        .args(["run", "--brokers", &bench.brokers, "--group", &group, "--topic", &bench.topic])
        .args(&dest)
        .args(bench.budget.iter().flat_map(|b| ["--max-buffer-bytes", b]))
        .args(["--roll-bytes", "16MiB", "--roll-age", "1s"])
        .args(["--metrics-addr", &metrics.to_string()])
        .args(bench.archiver_args.split_whitespace())
        .args(["--kafka", "session.timeout.ms=3000", "--kafka", "heartbeat.interval.ms=500"])
        .arg("--spool-dir")
        .arg(spool.path().join("spool"))
        .env("RUST_LOG", "info,librdkafka=warn")
        .stdin(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {}: {e} (build it first: cargo build)", exe.display()));
    let launched = Instant::now();
    // Consumption starts once the assigned partitions are recovered: the steady rate is timed from there,
    // as the plain consumer's is from its first record; what a user sees, from the start.
    while !std::fs::read_to_string(&log_path).unwrap_or_default().contains("recovered position from the archive") {
        assert!(
            launched.elapsed() < Duration::from_secs(60),
            "archiver never got partitions: see {}",
            log_path.display()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let t0 = Instant::now();
    let catalog = spool.path().join("catalog.db");
    let run = (child.id(), metrics);
    let watched = watch(bench, target, (store, &catalog), run, &log_path, (launched, t0)).await;
    let steady_seconds = watched.archived;
    let seconds = steady_seconds + (t0 - launched).as_secs_f64();
    let peak = watched.peak_rss_kib.max(peak_rss_kib(child.id()));
    let cpu = cpu_seconds(&child.id().to_string());
    let machine = MachineCpu::now().since(machine_at_launch, cpu);
    let threads = thread_cpu(child.id());
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let status = child.wait().unwrap();
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    let mut rolls: BTreeMap<String, u32> = BTreeMap::new();
    for reason in log.lines().filter(|l| l.contains("object uploaded")).filter_map(|l| l.split("reason=").nth(1)) {
        *rolls.entry(reason.split_whitespace().next().unwrap_or("").trim_matches('"').to_string()).or_default() += 1;
    }
    let paused = log.matches("pausing fetch").count();
    let spooled_to_disk = exit_figure(&log, "files spooled to disk ");
    let shrinks = exit_figure(&log, "shrinks ");
    let held_back = exit_figure(&log, "held back for room ");
    ArchiverRun {
        seconds,
        steady_seconds,
        taken_seconds: watched.taken,
        cpu_seconds: cpu,
        machine,
        threads,
        rolls,
        paused,
        spooled_to_disk,
        shrinks,
        held_back,
        peak_rss_kib: peak,
        table_lag: watched.table_lag,
        first_durable: watched.first_durable,
        status,
        log: log_path,
    }
}

/// What watching a run told.
struct Watched {
    /// From its partitions recovered until every record was durable.
    archived: f64,
    /// From its partitions recovered until its pipeline had taken every record (its metrics said so).
    taken: Option<f64>,
    /// From its start until its first object was durable.
    first_durable: f64,
    /// With a table: from every record durable until the table held them all.
    table_lag: Option<f64>,
    peak_rss_kib: u64,
}

/// Watches the archiver process `pid` until every record is durable (and in the table, with one),
/// following its log: an object is logged once it is durable. Listing the store instead would take the
/// store's CPU from the run; one listing at the end checks it. Its metrics tell when its pipeline has
/// taken every record. `(launched, t0)`: when the process started and when its partitions were recovered.
async fn watch(
    bench: &Bench,
    target: Target,
    (store, catalog): (Arc<dyn ObjectStore>, &std::path::Path),
    (pid, metrics): (u32, std::net::SocketAddr),
    log_path: &std::path::Path,
    (launched, t0): (Instant, Instant),
) -> Watched {
    let table = (target == Target::S3Table)
        .then(|| SqlCatalog::sqlite(catalog, "default", store.clone()).expect("the catalog"));
    let mut uploads = UploadLog::open(log_path);
    let (mut peak_rss_kib, mut polls) = (0, 0u32);
    let (mut archived, mut first_durable, mut taken) = (None, None, None);
    loop {
        // Every other poll: scraping the metrics costs the archiver a little CPU.
        if taken.is_none()
            && polls.is_multiple_of(2)
            && records_taken(metrics).is_some_and(|n| n >= bench.records as u64)
        {
            taken = Some(t0.elapsed().as_secs_f64());
        }
        if polls.is_multiple_of(5) {
            peak_rss_kib = peak_rss_kib.max(measure::peak_rss_kib(pid));
        }
        polls += 1;
        uploads.read_new();
        if first_durable.is_none() && uploads.any {
            first_durable = Some(launched.elapsed().as_secs_f64());
        }
        if archived.is_none() && bench.last.iter().all(|(p, o)| uploads.ends.get(p).is_some_and(|e| e >= o)) {
            archived = Some(t0.elapsed().as_secs_f64());
            let ends = archived_ends(store.as_ref(), &Prefix::new("bench"), &bench.topic).await.unwrap();
            let listed = bench.last.iter().all(|(p, o)| ends.get(p).is_some_and(|e| e >= o));
            assert!(listed, "the log says every record is archived, the listing does not: see {}", log_path.display());
        }
        if let Some(archived) = archived {
            let table_lag = match &table {
                Some(catalog) if !in_table(catalog, bench).await => None,
                Some(_) => Some(Some(t0.elapsed().as_secs_f64() - archived)),
                None => Some(None),
            };
            if let Some(table_lag) = table_lag {
                let first_durable = first_durable.expect("an object durable");
                return Watched { archived, taken, first_durable, table_lag, peak_rss_kib };
            }
        }
        assert!(t0.elapsed() < Duration::from_secs(900), "archiver did not finish: see {}", log_path.display());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The records the archiver's pipeline has taken so far, by its metrics at `addr`.
fn records_taken(addr: std::net::SocketAddr) -> Option<u64> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    stream.write_all(b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    response.lines().find_map(|l| l.strip_prefix("ksa_records_consumed_total ")).and_then(|n| n.trim().parse().ok())
}

/// Whether the bench topic's table records every partition's position past its last offset.
async fn in_table(catalog: &dyn Catalog, bench: &Bench) -> bool {
    let name = bench.topic.replace(|c: char| !c.is_ascii_alphanumeric() && c != '_', "_");
    let ident = TableIdent { namespace: "kafka".into(), name };
    let Ok(Some(table)) = catalog.load(&ident).await else { return false };
    bench.last.iter().all(|(p, last)| {
        let position = &table.metadata["properties"][format!("kafka-s3-archiver.position.{p}")];
        position.as_str().and_then(|v| v.parse::<i64>().ok()).is_some_and(|v| v > *last)
    })
}

/// The figure after `label` in the summary the archiver logs at exit.
fn exit_figure<T: std::str::FromStr>(log: &str, label: &str) -> Option<T> {
    let (_, rest) = log.rsplit_once(label)?;
    rest.split(|c: char| !c.is_ascii_digit() && c != '.').next()?.parse().ok()
}

/// The archiver's log, followed as it grows: the highest offset of each partition's durable objects.
struct UploadLog {
    file: std::fs::File,
    /// Read, from the start of the last line, which may be incomplete.
    partial: Vec<u8>,
    ends: BTreeMap<i32, i64>,
    /// Whether any object was durable yet.
    any: bool,
}

impl UploadLog {
    fn open(path: &std::path::Path) -> Self {
        let file = std::fs::File::open(path).unwrap();
        Self { file, partial: Vec::new(), ends: BTreeMap::new(), any: false }
    }

    fn read_new(&mut self) {
        use std::io::Read;
        self.file.read_to_end(&mut self.partial).unwrap();
        let Some(complete) = self.partial.iter().rposition(|b| *b == b'\n') else { return };
        let lines = String::from_utf8_lossy(&self.partial[..complete]);
        for line in lines.lines().filter(|l| l.contains("object uploaded")) {
            let (partition, end) = uploaded_range_end(line).expect("an uploaded object's key in its log line");
            let at = self.ends.entry(partition).or_insert(end);
            *at = (*at).max(end);
            self.any = true;
        }
        self.partial.drain(..=complete);
    }
}

/// The partition and last offset of the object an "object uploaded" line names
/// (`key=".../<topic>+<partition>+<start>+<end>.<ext>"`).
fn uploaded_range_end(line: &str) -> Option<(i32, i64)> {
    let key = line.split("key=\"").nth(1)?.split('"').next()?;
    let name = key.rsplit('/').next()?;
    let mut fields = name.rsplitn(4, '+');
    let end = fields.next()?.split('.').next()?.parse().ok()?;
    let _start = fields.next()?;
    Some((fields.next()?.parse().ok()?, end))
}

//! The peers, side by side on the bench's topic and S3: each `localstack/peers/<name>/run.sh` installs its
//! peer (not timed), runs it on the topic from its start until every record is durable, checks every
//! record is there exactly once, and prints what it took as its last line (`PEER {json}`).

use std::path::Path;
use std::process::{Command, Stdio};

use crate::{Bench, Row};

/// How a peer's line in the results table begins.
pub const PEER: &str = "peer: ";

/// The peers run by default (KSA_BENCH_PEERS names others, or none).
const DEFAULT_PEERS: &str = "flink-filesink kafka-connect-iceberg";

/// Runs each peer asked for on the bench's topic.
pub fn peers(bench: &Bench) -> Vec<Row> {
    let chosen = std::env::var("KSA_BENCH_PEERS").unwrap_or_else(|_| DEFAULT_PEERS.into());
    chosen.split_whitespace().map(|name| peer(bench, name)).collect()
}

fn peer(bench: &Bench, name: &str) -> Row {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("localstack/peers").join(name).join("run.sh");
    let work = tempfile::tempdir().unwrap();
    let bucket = format!("bench-{}-{}-{name}", std::process::id(), bench.values.name());
    let log_path =
        std::env::temp_dir().join(format!("bench-{}-{}-{name}.log", std::process::id(), bench.values.name()));
    let out = Command::new(&script)
        .args([&bench.topic, &bench.partitions.to_string(), &bench.records.to_string(), &bucket])
        .arg(work.path())
        .stdin(Stdio::null())
        .stderr(std::fs::File::create(&log_path).unwrap())
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", script.display()));
    if !out.status.success() {
        // Kept: the peer's own logs are in it.
        let work = work.keep();
        panic!("peer {name} failed ({}): see {} and {}", out.status, log_path.display(), work.display());
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().last().and_then(|l| l.strip_prefix("PEER "));
    let line = line.unwrap_or_else(|| panic!("peer {name} printed no PEER line: see {}", log_path.display()));
    let result: serde_json::Value = serde_json::from_str(line).expect("the peer's PEER line");
    assert_eq!(result["records"].as_u64(), Some(bench.records as u64), "peer {name} checked another count");
    let number = |field: &str| result[field].as_f64().unwrap_or_else(|| panic!("peer {name}: no {field}"));
    let row = Row {
        contender: format!("{PEER}{}", result["contender"].as_str().expect("the peer's name")),
        values: bench.values,
        seconds: number("seconds"),
        steady_seconds: None,
        taken_seconds: None,
        cpu_seconds: number("cpu_seconds"),
        peak_rss_kib: Some(number("peak_rss_kib") as u64),
    };
    println!(
        "{} ({}): {:.1}s from its start to every record durable, its first commit at {:.1}s; log {}",
        row.contender,
        bench.values.name(),
        row.seconds,
        number("first_commit_seconds"),
        log_path.display()
    );
    row
}

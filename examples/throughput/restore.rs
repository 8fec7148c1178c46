//! `restore` of the bench topic's S3 archive into a new topic, as a process, timed from start to exit;
//! then once more into the same topic, where every record is already there: the first run's summary
//! tells it so, so it neither reads the target back nor fetches an object.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::archiver::{bucket, Target};
use crate::measure::{children_cpu_seconds, peak_rss_kib};
use crate::{create_topic, env, Bench, Row};

/// The restores' lines in the results table.
pub const RESTORE: &str = "`restore` from S3 into a new topic";
pub const RESTORE_AGAIN: &str = "`restore` again: every record already there";

pub async fn restore_twice(bench: &Bench) -> [Row; 2] {
    let to_topic = format!("{}-restored", bench.topic);
    create_topic(&bench.brokers, &to_topic, bench.partitions).await;
    [restore(bench, &to_topic, RESTORE).await, restore(bench, &to_topic, RESTORE_AGAIN).await]
}

async fn restore(bench: &Bench, to_topic: &str, contender: &str) -> Row {
    let exe = std::env::current_exe().unwrap().parent().unwrap().parent().unwrap().join("kafka-s3-archiver");
    let log_path =
        std::env::temp_dir().join(format!("bench-{}-{}-restore.log", std::process::id(), bench.values.name()));
    let _ = std::fs::remove_file(&log_path);
    let cpu_before = children_cpu_seconds();
    let t0 = Instant::now();
    let mut child = Command::new(&exe)
        .args(["restore", "--dest", &format!("s3://{}/bench", bucket(bench, Target::S3))])
        .args(["--s3-endpoint", &env("KSA_TEST_S3_ENDPOINT"), "--topic", &bench.topic])
        .args(["--to-topic", to_topic, "--brokers", &bench.brokers])
        .env("RUST_LOG", "info,librdkafka=warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log_path).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {}: {e}", exe.display()));
    let mut peak = 0;
    let status = loop {
        peak = peak.max(peak_rss_kib(child.id()));
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(t0.elapsed() < Duration::from_secs(900), "restore did not finish: see {}", log_path.display());
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let seconds = t0.elapsed().as_secs_f64();
    assert!(status.success(), "restore failed: see {}", log_path.display());
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    let summary = log.lines().rev().find(|l| l.contains("restored")).unwrap_or("");
    println!("{contender} ({}): {seconds:.1}s; {summary}", bench.values.name());
    Row {
        contender: contender.into(),
        values: bench.values,
        seconds,
        steady_seconds: None,
        taken_seconds: None,
        cpu_seconds: children_cpu_seconds() - cpu_before,
        peak_rss_kib: Some(peak),
    }
}

//! Metrics, health and logs while `run` runs (tansu + LocalStack, the binary): the counters move while
//! archiving and agree with the archive; `/healthz` and `/readyz` answer; JSON logs have one line per
//! object uploaded and per recovery, and never a record's payload.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::*;
use kafka_s3_archiver::commands::demo::generate::produce;
use kafka_s3_archiver::store::list_all;

/// Metric samples by name with labels, e.g. `ksa_archived_offset{partition="0",topic="t"}`.
fn samples(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.rsplit_once(' ').and_then(|(name, v)| v.parse().ok().map(|v| (name.to_string(), v))))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_move_and_agree_with_the_archive() {
    let topic = unique("metrics");
    create_topic(&topic, 2).await;
    let dest = TestDest::s3().await;
    let spool = tempfile::tempdir().unwrap();
    let addr = free_addr();
    let group = unique("g");
    let mut args = archiver_args(&dest, &group, &topic, 200, spool.path());
    args.splice(0..0, ["--log-format".to_string(), "json".to_string()]);
    args.extend(["--metrics-addr".into(), addr.clone()]);
    let mut archiver = ArchiverProcess::spawn("metrics", &args);
    let started = Instant::now();
    while get_ready(&addr) != 200 {
        archiver.assert_running();
        assert!(started.elapsed() < Duration::from_secs(30), "not ready in 30 s; log:\n{}", archiver.log_text());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(http_get(&addr, "/healthz").0, 200);
    let before = samples(&http_get(&addr, "/metrics").1);
    assert_eq!(before["ksa_records_archived_total"], 0.0);

    let produced = produce(&brokers(), &topic, 2, 0..1200, 100).await.unwrap();
    let store = dest.store().await;
    wait_archived(store.as_ref(), &dest.prefix(), &topic, &last_offsets(&produced), &mut [&mut archiver]).await;
    // The uploader counts right after the upload returns: wait for the last one to be counted.
    let started = Instant::now();
    let after = loop {
        let (status, text) = http_get(&addr, "/metrics");
        assert_eq!(status, 200);
        let after = samples(&text);
        if after["ksa_records_archived_total"] >= 1200.0 || started.elapsed() > Duration::from_secs(10) {
            break after;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let objects = list_all(store.as_ref(), &dest.prefix().topic_folder(&topic)).await.unwrap().len() as f64;
    assert_eq!(after["ksa_records_archived_total"], 1200.0);
    assert_eq!(after["ksa_records_consumed_total"], 1200.0);
    assert_eq!(after["ksa_objects_uploaded_total"], objects);
    assert_eq!(after["ksa_claims_created_total"], objects);
    assert_eq!(after["ksa_upload_seconds_count"], objects);
    assert_eq!(after["ksa_recoveries_total"], 2.0);
    for (p, last) in last_offsets(&produced) {
        assert_eq!(after[&format!("ksa_archived_offset{{partition=\"{p}\",topic=\"{topic}\"}}")], last as f64);
    }
    assert_eq!(after["ksa_store_up"], 1.0);
    // Log end and lag come from librdkafka's statistics, every 5 s. (tansu's high watermark can be
    // wrong, so only their presence is checked here; the mock-cluster status test checks figures.)
    let lag = format!("ksa_unarchived_records{{partition=\"0\",topic=\"{topic}\"}}");
    let started = Instant::now();
    while !samples(&http_get(&addr, "/metrics").1).contains_key(&lag) {
        assert!(started.elapsed() < Duration::from_secs(15), "no {lag} within 15 s");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(after["ksa_rebalances_total"] >= 1.0);
    assert_eq!(http_get(&addr, "/readyz").0, 200);

    // A second instance joins and takes a partition: none of its series stay behind here.
    let spool_2 = tempfile::tempdir().unwrap();
    let mut second = ArchiverProcess::spawn("metrics-2", &archiver_args(&dest, &group, &topic, 200, spool_2.path()));
    let per_partition = |samples: &BTreeMap<String, f64>, name: &str| {
        (0..2).filter(|p| samples.contains_key(&format!("{name}{{partition=\"{p}\",topic=\"{topic}\"}}"))).count()
    };
    let started = Instant::now();
    loop {
        let now = samples(&http_get(&addr, "/metrics").1);
        let (archived, lag) =
            (per_partition(&now, "ksa_archived_offset"), per_partition(&now, "ksa_unarchived_records"));
        if now["ksa_assigned_partitions"] == 1.0 && archived == 1 && lag <= 1 {
            break;
        }
        second.assert_running();
        assert!(started.elapsed() < Duration::from_secs(60), "series of partitions it no longer has: {now:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(archiver.terminate().success());
    assert!(second.terminate().success());

    // JSON logs: one line per object and per recovery with their figures; never a payload.
    let log = archiver.log_text();
    let lines: Vec<serde_json::Value> = log.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let uploads: Vec<&serde_json::Value> =
        lines.iter().filter(|l| l["fields"]["message"] == "object uploaded").collect();
    assert_eq!(uploads.len() as f64, objects, "{log}");
    for u in &uploads {
        for field in ["key", "records", "bytes", "ms"] {
            assert!(!u["fields"][field].is_null(), "{field} missing in {u}");
        }
    }
    let recoveries = lines.iter().filter(|l| l["fields"]["message"] == "recovered position from the archive").count();
    assert_eq!(recoveries, 2);
    assert!(!log.contains("\"order\":"), "a record value reached the log");
}

fn get_ready(addr: &str) -> u16 {
    std::net::TcpStream::connect(addr).map(|_| http_get(addr, "/readyz").0).unwrap_or(0)
}

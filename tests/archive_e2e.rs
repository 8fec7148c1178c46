//! End-to-end: the archiver binary against Apache Kafka and S3 (LocalStack or moto), Google Cloud
//! Storage (fake-gcs-server), Azure Blob Storage (Azurite) or a local directory. Every scenario ends
//! with an independent read of the archive: every produced record exactly once, bytes equal.

mod common;

use common::*;
use kafka_s3_archiver::commands::demo::generate::{merge, produce};

/// Four partitions archived and shut down gracefully (SIGTERM uploads what is buffered, exit 0).
async fn archives_every_partition(dest: TestDest, extra: &[&str]) {
    let topic = unique("four");
    create_topic(&topic, 4).await;
    let produced = produce(&brokers(), &topic, 4, 0..4_000, 200).await.expect("produce");
    let spool = tempfile::tempdir().unwrap();
    let mut args = archiver_args(&dest, &unique("g"), &topic, 700, spool.path());
    args.extend(extra.iter().map(|s| s.to_string()));
    let mut archiver = ArchiverProcess::spawn("four", &args);
    let store = dest.store().await;
    wait_archived(store.as_ref(), &dest.prefix(), &topic, &last_offsets(&produced), &mut [&mut archiver]).await;
    let status = archiver.terminate();
    assert!(status.success(), "exit {status}; log:\n{}", archiver.log_text());
    assert!(archiver.log_text().contains("object uploaded"));
    assert_exactly_once(&dest, &topic, &produced).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn s3_archives_every_partition() {
    archives_every_partition(TestDest::s3().await, &[]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn file_archives_every_partition_as_jsonl() {
    archives_every_partition(TestDest::file(), &["--format", "jsonl", "--compression", "zstd"]).await;
}

/// SIGKILL mid-stream, then a restart under a NEW group id (Kafka's committed offsets are gone): the
/// position must come from listing the archive. The restart rolls at a different record count, so
/// re-archiving anything would create overlapping objects and duplicate offsets, which the check
/// catches: this test fails without S3 recovery.
async fn hard_kill_then_new_group(dest: TestDest) {
    let topic = unique("kill");
    create_topic(&topic, 4).await;
    let mut produced = produce(&brokers(), &topic, 4, 0..6_000, 200).await.expect("produce");
    let store = dest.store().await;
    let spool = tempfile::tempdir().unwrap();

    let mut first = ArchiverProcess::spawn("kill-1", &archiver_args(&dest, &unique("g1"), &topic, 300, spool.path()));
    wait_objects(store.as_ref(), &dest.prefix(), &topic, 6, &mut first).await;
    first.kill_hard();

    let mut second = ArchiverProcess::spawn("kill-2", &archiver_args(&dest, &unique("g2"), &topic, 170, spool.path()));
    merge(&mut produced, produce(&brokers(), &topic, 4, 6_000..8_000, 200).await.expect("produce"));
    wait_archived(store.as_ref(), &dest.prefix(), &topic, &last_offsets(&produced), &mut [&mut second]).await;
    let status = second.terminate();
    assert!(status.success(), "exit {status}; log:\n{}", second.log_text());
    assert!(second.log_text().contains("recovered position from the archive"));
    assert_exactly_once(&dest, &topic, &produced).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn s3_hard_kill_then_new_group_is_exactly_once() {
    hard_kill_then_new_group(TestDest::s3().await).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn gcs_hard_kill_then_new_group_is_exactly_once() {
    hard_kill_then_new_group(TestDest::gcs().await).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn azure_hard_kill_then_new_group_is_exactly_once() {
    hard_kill_then_new_group(TestDest::azure().await).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn file_hard_kill_then_new_group_is_exactly_once() {
    hard_kill_then_new_group(TestDest::file()).await;
}

/// Two instances in one group: the second joining moves partitions away from the first (revoke →
/// flush), the first leaving moves them back; records keep arriving throughout. `protocol` adapts the
/// archivers' flags to the consumer group protocol under test.
async fn two_instances_through_rebalances(dest: TestDest, protocol: fn(Vec<String>) -> Vec<String>) {
    let topic = unique("pair");
    create_topic(&topic, 4).await;
    let group = unique("g");
    let mut produced = produce(&brokers(), &topic, 4, 0..3_000, 200).await.expect("produce");
    let store = dest.store().await;
    let spool_a = tempfile::tempdir().unwrap();
    let spool_b = tempfile::tempdir().unwrap();

    let mut a = ArchiverProcess::spawn("pair-a", &protocol(archiver_args(&dest, &group, &topic, 250, spool_a.path())));
    wait_objects(store.as_ref(), &dest.prefix(), &topic, 4, &mut a).await;
    let mut b = ArchiverProcess::spawn("pair-b", &protocol(archiver_args(&dest, &group, &topic, 250, spool_b.path())));
    wait_log(&mut b, "partitions assigned").await;
    wait_log(&mut a, "partitions revoked").await;
    merge(&mut produced, produce(&brokers(), &topic, 4, 3_000..6_000, 200).await.expect("produce"));
    wait_archived(store.as_ref(), &dest.prefix(), &topic, &last_offsets(&produced), &mut [&mut a, &mut b]).await;

    let status = a.terminate();
    assert!(status.success(), "exit {status}; log:\n{}", a.log_text());
    merge(&mut produced, produce(&brokers(), &topic, 4, 6_000..8_000, 200).await.expect("produce"));
    wait_archived(store.as_ref(), &dest.prefix(), &topic, &last_offsets(&produced), &mut [&mut b]).await;
    let status = b.terminate();
    assert!(status.success(), "exit {status}; log:\n{}", b.log_text());
    assert_exactly_once(&dest, &topic, &produced).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn s3_two_instances_through_rebalances_is_exactly_once() {
    two_instances_through_rebalances(TestDest::s3().await, classic_protocol).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn gcs_two_instances_through_rebalances_is_exactly_once() {
    two_instances_through_rebalances(TestDest::gcs().await, classic_protocol).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn azure_two_instances_through_rebalances_is_exactly_once() {
    two_instances_through_rebalances(TestDest::azure().await, classic_protocol).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn file_two_instances_through_rebalances_is_exactly_once() {
    two_instances_through_rebalances(TestDest::file(), classic_protocol).await;
}

/// KIP-848's consumer group protocol (`group.protocol=consumer`, GA in Kafka 4.0): the broker assigns
/// and times sessions, so the client-side session and heartbeat settings go.
#[tokio::test(flavor = "multi_thread")]
async fn kip848_two_instances_through_rebalances_is_exactly_once() {
    two_instances_through_rebalances(TestDest::s3().await, consumer_protocol).await;
}

fn classic_protocol(args: Vec<String>) -> Vec<String> {
    args
}

fn consumer_protocol(args: Vec<String>) -> Vec<String> {
    let mut out = Vec::new();
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        if arg == "--kafka" {
            let kv = it.next().expect("a --kafka value");
            if !kv.starts_with("session.timeout.ms=") && !kv.starts_with("heartbeat.interval.ms=") {
                out.extend([arg, kv]);
            }
        } else {
            out.push(arg);
        }
    }
    out.extend(["--kafka".to_string(), "group.protocol=consumer".to_string()]);
    out
}

/// The lake case: DuckDB reads the whole archive as-is, with topic and partition from the path.
#[tokio::test(flavor = "multi_thread")]
async fn duckdb_reads_the_parquet_archive_with_hive_partitions() {
    let dest = TestDest::file();
    let topic = unique("lake");
    create_topic(&topic, 3).await;
    let produced = produce(&brokers(), &topic, 3, 0..1_500, 100).await.expect("produce");
    let spool = tempfile::tempdir().unwrap();
    let mut archiver = ArchiverProcess::spawn("lake", &archiver_args(&dest, &unique("g"), &topic, 400, spool.path()));
    let store = dest.store().await;
    wait_archived(store.as_ref(), &dest.prefix(), &topic, &last_offsets(&produced), &mut [&mut archiver]).await;
    assert!(archiver.terminate().success());

    let TestDest::File { dir } = &dest else { unreachable!() };
    let script = r#"
import duckdb, sys
rows = duckdb.sql(f"""
  SELECT topic, partition, count(*), min("offset"), max("offset"),
         sum(len(headers)), count(key), epoch_ms(min(timestamp))
  FROM read_parquet('{sys.argv[1]}/**/*.parquet', hive_partitioning=true)
  GROUP BY ALL ORDER BY partition""").fetchall()
for r in rows: print("|".join(str(x) for x in r))
"#;
    let out = std::process::Command::new(env("KSA_TEST_PYTHON"))
        .args(["-c", script, &dir.path().display().to_string()])
        .output()
        .expect("run duckdb");
    assert!(out.status.success(), "duckdb failed: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let expected: Vec<String> = produced
        .iter()
        .map(|(p, recs)| {
            let headers: usize = recs.iter().map(|r| r.headers.len()).sum();
            let keys = recs.iter().filter(|r| r.key.is_some()).count();
            let min_ts = recs.iter().filter_map(|r| r.timestamp_ms).min().unwrap();
            format!(
                "{topic}|{p}|{}|{}|{}|{headers}|{keys}|{min_ts}",
                recs.len(),
                recs[0].offset,
                recs.last().unwrap().offset
            )
        })
        .collect();
    assert_eq!(text.lines().collect::<Vec<_>>(), expected);
}

/// A bucket that does not exist stops the archiver before it consumes anything, naming the bucket.
#[tokio::test(flavor = "multi_thread")]
async fn a_missing_bucket_fails_fast_with_its_name() {
    let dest = TestDest::S3 { bucket: "ksa-no-such-bucket".into() };
    let spool = tempfile::tempdir().unwrap();
    let mut archiver =
        ArchiverProcess::spawn("nobucket", &archiver_args(&dest, &unique("g"), "whatever", 10, spool.path()));
    let status = archiver.wait_exit(std::time::Duration::from_secs(30)).await;
    assert!(!status.success());
    let log = archiver.log_text();
    assert!(log.contains("bucket \"ksa-no-such-bucket\" does not exist"), "{log}");
    assert!(log.contains("create the bucket"), "{log}");
}

/// Files larger than the spool memory threshold wait on disk, and files past the multipart threshold
/// go up as parallel multipart uploads; the archive is still exact and the spool is emptied.
#[tokio::test(flavor = "multi_thread")]
async fn s3_large_files_spool_to_disk_and_upload_in_parts() {
    let dest = TestDest::s3().await;
    let topic = unique("large");
    create_topic(&topic, 2).await;
    let produced = produce(&brokers(), &topic, 2, 0..30_000, 1024).await.expect("produce");
    let spool = tempfile::tempdir().unwrap();
    let mut args = archiver_args(&dest, &unique("g"), &topic, 1_000_000, spool.path());
    args.extend(
        [
            "--compression",
            "none",
            "--roll-bytes",
            "12MiB",
            "--spool-memory-threshold",
            "1MiB",
            "--upload-part-size",
            "5MiB",
        ]
        .map(String::from),
    );
    let mut archiver = ArchiverProcess::spawn("large", &args);
    let store = dest.store().await;
    wait_archived(store.as_ref(), &dest.prefix(), &topic, &last_offsets(&produced), &mut [&mut archiver]).await;
    assert!(archiver.terminate().success(), "log:\n{}", archiver.log_text());
    let keys = kafka_s3_archiver::store::list_all(store.as_ref(), &dest.prefix().topic_folder(&topic)).await.unwrap();
    let mut multipart_sized = 0;
    for k in &keys {
        if store.head(k).await.unwrap().unwrap() > 10 << 20 {
            multipart_sized += 1;
        }
    }
    assert!(multipart_sized >= 2, "expected files over the 10 MiB multipart threshold: {keys:?}");
    assert_eq!(std::fs::read_dir(spool.path()).unwrap().count(), 0, "spool files left behind");
    assert_exactly_once(&dest, &topic, &produced).await;
}

/// A second SIGTERM exits at once, without waiting for the flush.
#[tokio::test(flavor = "multi_thread")]
async fn a_second_signal_exits_at_once() {
    let dest = TestDest::file();
    let topic = unique("twice");
    create_topic(&topic, 1).await;
    produce(&brokers(), &topic, 1, 0..100, 100).await.expect("produce");
    let spool = tempfile::tempdir().unwrap();
    let mut archiver =
        ArchiverProcess::spawn("twice", &archiver_args(&dest, &unique("g"), &topic, 1_000_000, spool.path()));
    wait_log(&mut archiver, "recovered position from the archive").await;
    let pid = archiver.pid().to_string();
    for _ in 0..2 {
        std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let status = archiver.wait_exit(std::time::Duration::from_secs(5)).await;
    assert_eq!(status.code(), Some(130), "log:\n{}", archiver.log_text());
    assert!(archiver.log_text().contains("second signal"));
}

/// A topic that does not exist, or brokers that do not answer, stop the archiver at start with a
/// one-line error that names the input.
#[tokio::test(flavor = "multi_thread")]
async fn an_unknown_topic_or_unreachable_brokers_fail_clearly() {
    let dest = TestDest::file();
    let spool = tempfile::tempdir().unwrap();
    let missing = unique("no-such-topic");
    let closed_port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let mut unreachable = archiver_args(&dest, &unique("g"), "anything", 10, spool.path());
    let at = unreachable.iter().position(|a| a == "--brokers").unwrap() + 1;
    unreachable[at] = format!("127.0.0.1:{closed_port}");
    let cases = [
        (archiver_args(&dest, &unique("g"), &missing, 10, spool.path()), format!("topic \"{missing}\" does not exist")),
        (unreachable, format!("cannot reach the Kafka brokers 127.0.0.1:{closed_port}")),
    ];
    for (args, expected) in cases {
        let mut archiver = ArchiverProcess::spawn("badinput", &args);
        let status = archiver.wait_exit(std::time::Duration::from_secs(40)).await;
        assert!(!status.success());
        assert!(archiver.log_text().contains(&expected), "expected {expected:?} in:\n{}", archiver.log_text());
    }
}

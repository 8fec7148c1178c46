//! Bad input, as users meet it (the binary): each case fails before anything is consumed or written,
//! with one line that names the input and says what to do; objects in the archive that are not ours
//! are skipped with a warning. The test prints what the user sees for each.
//! (Missing bucket, unknown topic, unreachable brokers: `archive_e2e.rs`; a corrupt object: `verify.rs`;
//! a record larger than the roll size: the pipeline's unit tests.)

mod common;

use std::process::Command;

use common::s3_proxy::{Fault, Kind, S3Proxy};
use common::*;
use kafka_s3_archiver::commands::demo::generate::produce;
use kafka_s3_archiver::encode::spool::SpoolData;

fn run(args: &[String]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kafka-s3-archiver")).args(args).output().expect("run");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn error_line(stderr: &str) -> &str {
    stderr.lines().find(|l| l.starts_with("error")).unwrap_or_else(|| panic!("no error line in:\n{stderr}"))
}

#[test]
fn invalid_settings_fail_before_connecting_and_name_the_input() {
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("archive");
    let file_dest = format!("file://{}", archive.display());
    let with_dest = |dest: &str, extra: &[&str]| {
        let mut args: Vec<String> = ["run", "--brokers", "127.0.0.1:1", "--group", "g", "--topic", "t", "--dest", dest]
            .map(String::from)
            .to_vec();
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    };
    let base = |extra: &[&str]| with_dest(&file_dest, extra);
    let config = dir.path().join("archiver.toml");
    std::fs::write(&config, "roll-bytes = \"64MiB\"\nroll-sise = \"1MiB\"\n").unwrap();
    let config_flag = config.display().to_string();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (base(&["--config", &config_flag]), "line 2: unknown field `roll-sise`"),
        (base(&["--roll-bytes", "12XB"]), "--roll-bytes"),
        (base(&["--roll-age", "soon"]), "--roll-age"),
        (base(&["--roll-records", "0"]), "--roll-records"),
        (with_dest("ftp://host/dir", &[]), "ftp://host/dir"),
        (with_dest("s3://Bad_Bucket/x", &[]), "Bad_Bucket"),
        (base(&["--format", "csv"]), "--format"),
        (base(&["--kafka", "group.id=other"]), "group.id"),
        (base(&["--kafka", "statistics.interval.ms=0"]), "statistics.interval.ms"),
        (base(&["--kafka", "partition.assignment.strategy=range"]), "cooperative-sticky"),
        (base(&["--start-from", "middle"]), "--start-from"),
        (base(&["--topic", "a/b"]), "a/b"),
        (base(&["--claims", "maybe"]), "--claims"),
        (base(&["--s3-sse", "rot13"]), "--s3-sse"),
        (base(&["--s3-sse-kms-key-id", "alias/k"]), "--s3-sse-kms-key-id"),
        (base(&["--s3-storage-class", "DEEP_ARCHIVE"]), "lifecycle rule"),
        (base(&["--s3-expected-bucket-owner", "acme"]), "--s3-expected-bucket-owner"),
    ];
    for (args, names) in cases {
        let (code, stderr) = run(&args);
        assert_ne!(code, 0, "{args:?} should fail");
        let line = error_line(&stderr);
        println!("{:<45} -> {line}", args[7..].join(" ").replace(&dir.path().display().to_string(), "<dir>"));
        assert!(line.contains(names), "{args:?}: expected {names:?} in {line:?}");
        assert!(!archive.exists(), "{args:?} wrote to the archive");
    }
}

/// S3 refusing the credentials (InvalidAccessKeyId, as AWS answers it) stops the archiver at start.
#[tokio::test(flavor = "multi_thread")]
async fn wrong_credentials_fail_fast_and_say_what_to_check() {
    let dest = TestDest::s3().await;
    let proxy = S3Proxy::start(&s3_endpoint()).await;
    proxy.set_rule(|_| Fault::Status(403, "InvalidAccessKeyId"));
    let spool = tempfile::tempdir().unwrap();
    let args = through(archiver_args(&dest, &unique("g"), "whatever", 10, spool.path()), &proxy.url);
    let mut archiver = ArchiverProcess::spawn("badcreds", &args);
    let status = archiver.wait_exit(std::time::Duration::from_secs(30)).await;
    assert!(!status.success());
    let log = archiver.log_text();
    let line = error_line(&log);
    println!("wrong credentials -> {line}");
    assert!(line.contains("denied") && line.contains("credentials"), "{log}");
}

/// A store that ignores conditional writes (If-None-Match) would let every claim "win": the archiver
/// proves the store honours them before it starts, and refuses to run, naming them and the endpoint.
#[tokio::test(flavor = "multi_thread")]
async fn a_store_ignoring_conditional_writes_is_refused_at_start() {
    let proxy = S3Proxy::start(&s3_endpoint()).await;
    refused_without_conditional_writes(TestDest::s3().await, proxy).await;
}

/// The same on GCS, its `ifGenerationMatch=0` parameter dropped. (Azure's `If-None-Match` is covered by
/// its shared-key signature: a proxy that dropped it would be refused with a 403. The conformance suite
/// shows Azure refusing a second create.)
#[tokio::test(flavor = "multi_thread")]
async fn a_gcs_store_ignoring_conditional_writes_is_refused_at_start() {
    let proxy = S3Proxy::start_as_upstream(&gcs_endpoint()).await;
    refused_without_conditional_writes(TestDest::gcs().await, proxy).await;
}

async fn refused_without_conditional_writes(dest: TestDest, proxy: S3Proxy) {
    let topic = unique("unconditional");
    create_topic(&topic, 1).await;
    proxy.set_rule(|_| Fault::StripConditional);
    let spool = tempfile::tempdir().unwrap();
    let args = through(archiver_args(&dest, &unique("g"), &topic, 10, spool.path()), &proxy.url);
    let mut archiver = ArchiverProcess::spawn("unconditional", &args);
    let status = archiver.wait_exit(std::time::Duration::from_secs(30)).await;
    assert!(!status.success());
    let log = archiver.log_text();
    let line = error_line(&log);
    println!("store without conditional writes -> {line}");
    assert!(line.contains("does not honour conditional writes") && line.contains(&proxy.url), "{log}");
    let store = dest.store().await;
    assert!(kafka_s3_archiver::store::list_all(store.as_ref(), "").await.unwrap().is_empty(), "the probe was left");
}

/// A store that refuses every upload for good (400 InvalidRequest: a key too long, an argument it does
/// not support) stops the archiver with one line naming the operation, the key and the S3 code, instead
/// of retrying forever while every partition stalls.
#[tokio::test(flavor = "multi_thread")]
async fn a_permanent_upload_error_stops_the_archiver_naming_operation_key_and_code() {
    let dest = TestDest::s3().await;
    let topic = unique("refused");
    create_topic(&topic, 1).await;
    produce(&brokers(), &topic, 1, 0..50, 50).await.unwrap();
    let proxy = S3Proxy::start(&s3_endpoint()).await;
    // Uploads of the archive (not the start-up probe) are refused.
    proxy.set_rule(|req| match req.kind {
        Kind::PutClaim | Kind::PutData if !req.key.contains("/_probe/") => Fault::Status(400, "InvalidRequest"),
        _ => Fault::Pass,
    });
    let spool = tempfile::tempdir().unwrap();
    let args = through(archiver_args(&dest, &unique("g"), &topic, 10, spool.path()), &proxy.url);
    let mut archiver = ArchiverProcess::spawn("refused", &args);
    let status = archiver.wait_exit(std::time::Duration::from_secs(60)).await;
    assert!(!status.success());
    let log = archiver.log_text();
    let line = error_line(&log);
    println!("permanent upload error -> {line}");
    assert!(line.contains("PutObject") && line.contains("InvalidRequest") && line.contains("HTTP 400"), "{log}");
    assert!(line.contains(&format!("_claims/topic={topic}/partition=0/")), "the key is named: {line}");
}

/// Keys in the archive's folders that are not archive objects are skipped with a warning; the
/// archive around them is still exact.
#[tokio::test(flavor = "multi_thread")]
async fn foreign_objects_in_the_archive_are_ignored_with_a_warning() {
    let dest = TestDest::s3().await;
    let topic = unique("foreign");
    create_topic(&topic, 1).await;
    let store = dest.store().await;
    let tp = kafka_s3_archiver::archive::partition::TopicPartition::new(topic.as_str(), 0).unwrap();
    for key in [
        format!("{}README.txt", dest.prefix().partition_folder(&tp)),
        format!("{}notes", dest.prefix().claims_folder(&tp)),
    ] {
        store.put_if_absent(&key, &SpoolData::memory("not ours"), 8).await.unwrap();
    }
    let produced = produce(&brokers(), &topic, 1, 0..300, 50).await.unwrap();
    let spool = tempfile::tempdir().unwrap();
    let mut archiver =
        ArchiverProcess::spawn("foreign", &archiver_args(&dest, &unique("g"), &topic, 100, spool.path()));
    wait_archived(store.as_ref(), &dest.prefix(), &topic, &last_offsets(&produced), &mut [&mut archiver]).await;
    assert!(archiver.terminate().success());
    let log = archiver.log_text();
    assert_eq!(log.matches("ignoring an object in the archive folder that is not ours").count(), 2, "{log}");
    let contents =
        kafka_s3_archiver::commands::demo::check::read_topic(store.as_ref(), &dest.prefix(), &topic).await.unwrap();
    assert!(kafka_s3_archiver::commands::demo::check::compare(&produced, &contents).is_exact());
}

/// Header names that are not UTF-8, or hold a NUL (C and Go producers can send them): the records are
/// archived, with their names byte for byte, and restored as they came. (Before, the first such name
/// panicked the consumer thread and wedged the process: nothing archived, SIGTERM ignored.)
#[tokio::test(flavor = "multi_thread")]
async fn header_names_that_are_not_utf8_are_archived_and_restored_byte_for_byte() {
    use kafka_s3_archiver::archive::record::Header;
    use kafka_s3_archiver::commands::demo::generate::{generated, produce_records};
    let topic = unique("poison-headers");
    create_topic(&topic, 1).await;
    let odd = |i: usize| {
        let mut r = generated(i, 40);
        if (100..103).contains(&i) {
            r.headers.push(Header { key: b"\xff\xfe-not-utf8".to_vec(), value: Some(b"v".to_vec()) });
            r.headers.push(Header { key: b"nul\x00inside".to_vec(), value: None });
        }
        r
    };
    let produced = produce_records(&brokers(), &topic, 1, 0..203, odd).await.unwrap();
    let dest = TestDest::file();
    let store = dest.store().await;
    let spool = tempfile::tempdir().unwrap();
    let mut archiver =
        ArchiverProcess::spawn("poison-headers", &archiver_args(&dest, &unique("g"), &topic, 50, spool.path()));
    wait_archived(store.as_ref(), &dest.prefix(), &topic, &last_offsets(&produced), &mut [&mut archiver]).await;
    assert!(archiver.terminate().success(), "{}", archiver.log_text());
    assert_exactly_once(&dest, &topic, &produced).await;

    // Restored into a new topic: the same names come back.
    let target = unique("poison-headers-restored");
    create_topic(&target, 1).await;
    let (code, stderr) =
        run(&["restore", "--dest", &dest.url(), "--topic", &topic, "--brokers", &brokers(), "--to-topic", &target]
            .map(String::from));
    assert_eq!(code, 0, "{stderr}");
    let restored = read_from_kafka(&target, 1);
    let names = |r: &kafka_s3_archiver::archive::record::Record| -> Vec<Vec<u8>> {
        r.headers.iter().map(|h| h.key.clone()).filter(|k| k != b"ksa-restored-from").collect()
    };
    assert_eq!(restored[&0].len(), 203);
    for (back, sent) in restored[&0].iter().zip(&produced[&0]) {
        assert_eq!(names(back), names(sent), "offset {}", sent.offset);
        assert_eq!((&back.key, &back.value), (&sent.key, &sent.value));
    }
}

/// A group join the broker refuses for a setting (here a session timeout below the broker's
/// group.min.session.timeout.ms, 1000 on the test broker) can never succeed by retrying: `run` stops
/// with one line naming the setting and the broker's bound (it used to log the refusal every 2 s,
/// forever), and `run --check` says so before anything joins.
#[tokio::test(flavor = "multi_thread")]
async fn a_group_join_refused_for_a_setting_stops_start_up_naming_it() {
    let topic = unique("refused-join");
    create_topic(&topic, 1).await;
    let dir = tempfile::tempdir().unwrap();
    let mut args: Vec<String> =
        ["run", "--brokers", &brokers(), "--group", &unique("g"), "--topic", &topic].map(String::from).to_vec();
    let dest = format!("file://{}", dir.path().join("archive").display());
    let spool = dir.path().join("spool").display().to_string();
    args.extend(["--dest", &dest, "--spool-dir", &spool].map(String::from));
    args.extend(["--kafka", "session.timeout.ms=500", "--kafka", "heartbeat.interval.ms=100"].map(String::from));
    let mut archiver = ArchiverProcess::spawn("refused-join", &args);
    let status = archiver.wait_exit(std::time::Duration::from_secs(60)).await;
    assert!(!status.success());
    let log = archiver.log_text();
    let line = error_line(&log);
    println!("session timeout below the broker's bound -> {line}");
    assert!(line.contains("session.timeout.ms=500") && line.contains("group.min.session.timeout.ms=1000"), "{log}");
    args.push("--check".into());
    let (code, stderr) = run(&args);
    assert_ne!(code, 0, "{stderr}");
    assert!(
        stderr.contains("session.timeout.ms=500") && stderr.contains("group.min.session.timeout.ms=1000"),
        "{stderr}"
    );
}

/// `run --check` on GCS and Azure lists the store and proves its conditional writes; a wrong Azure key
/// (Azurite checks every signature) is refused at once, naming the credentials, not retried.
#[tokio::test(flavor = "multi_thread")]
async fn run_check_proves_gcs_and_azure_and_refuses_a_wrong_azure_key() {
    let topic = unique("cloud-check");
    create_topic(&topic, 1).await;
    let check = |dest: &TestDest, flags: Vec<String>| {
        let mut args = ["run", "--check", "--brokers", &brokers(), "--group", &unique("g"), "--topic", &topic]
            .map(String::from)
            .to_vec();
        args.extend(["--dest".to_string(), dest.url()]);
        args.extend(flags);
        Command::new(env!("CARGO_BIN_EXE_kafka-s3-archiver")).args(&args).output().expect("run --check")
    };
    for dest in [TestDest::gcs().await, TestDest::azure().await] {
        let out = check(&dest, dest.flags());
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
        let line = format!("archive {}", dest.url().trim_end_matches("/archive"));
        assert!(stdout.contains(&line) && stdout.contains("conditional writes honoured"), "{stdout}");
    }
    let dest = TestDest::azure().await;
    let wrong_key = "d3Jvbmcga2V5IGZvciB0aGUgZGV2ZWxvcG1lbnQgYWNjb3VudA==";
    let mut flags = dest.flags();
    let at = flags.iter().position(|f| f == "--azure-access-key").unwrap();
    flags[at + 1] = wrong_key.into();
    let started = std::time::Instant::now();
    let out = check(&dest, flags);
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    println!(
        "a wrong Azure key -> {}",
        text.lines().find(|l| l.contains("FAIL") || l.starts_with("error")).unwrap_or("")
    );
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("HTTP 403") && text.contains("check the credentials"), "{text}");
    assert!(started.elapsed() < std::time::Duration::from_secs(30), "refused at once, not retried: {text}");
}

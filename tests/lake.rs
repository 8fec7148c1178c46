//! The lake layout (`--time-buckets hour`) against Kafka and S3: three hours of records, a SIGKILL and
//! a restart under a new consumer group (no commits: the position comes from the claims chain alone).
//! Every record is archived exactly once, each object sits in the hour folder the rule gives it (late
//! records stay in their partition's current hour, never in an earlier one), the number of files stays
//! bounded at the edges, DuckDB reads dt/hour from the folders, and complete hours get their `_SUCCESS`.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::*;
use kafka_s3_archiver::archive::completeness::Marker;
use kafka_s3_archiver::archive::object_key::ObjectKey;
use kafka_s3_archiver::archive::record::Record;
use kafka_s3_archiver::archive::time_bucket::{Bucket, BucketWidth};
use kafka_s3_archiver::commands::demo::generate::{generated, merge, produce_records};
use kafka_s3_archiver::commands::status::{status, StatusOptions};
use kafka_s3_archiver::encode::decode;
use kafka_s3_archiver::store::{list_all, ObjectStore};

/// 2026-01-01T10:00:00Z.
const START: i64 = 1_767_261_600_000;
const HOUR: i64 = 3_600_000;
const PARTITIONS: i32 = 3;
const RECORDS: usize = 3_000;
/// Three hours over all records: 3.6 s apart, 10.8 s within a partition.
const SPACING_MS: i64 = 3 * HOUR / RECORDS as i64;
const ROLL_RECORDS: usize = 100;

/// Record `i`, stamped `START + i * SPACING_MS`; in the first 40 s after each full hour, every other
/// record of a partition is stamped 45 s early (a producer clock behind): it belongs to the hour before,
/// and arrives after its partition has moved on.
fn timed(i: usize) -> Record {
    let nominal = START + i as i64 * SPACING_MS;
    let late = nominal.rem_euclid(HOUR) < 40_000 && (i / PARTITIONS as usize) % 2 == 1;
    Record { timestamp_ms: Some(nominal - if late { 45_000 } else { 0 }), ..generated(i, 100) }
}

fn hour_of(ms: i64) -> Bucket {
    Bucket::containing(BucketWidth::Hour, ms)
}

#[tokio::test(flavor = "multi_thread")]
async fn hourly_folders_survive_a_kill_and_a_new_group_and_duckdb_reads_them() {
    let dest = TestDest::s3().await;
    let (store, prefix) = (dest.store().await, dest.prefix());
    let topic = unique("lake-hours");
    create_topic(&topic, PARTITIONS).await;
    let mut produced = produce_records(&brokers(), &topic, PARTITIONS, 0..RECORDS / 2, timed).await.expect("produce");
    let spool = tempfile::tempdir().unwrap();
    let args = |group: &str| hourly_args(&dest, group, &topic, spool.path());
    let mut first = ArchiverProcess::spawn("lake-first", &args(&unique("g")));
    wait_objects(store.as_ref(), &prefix, &topic, 6, &mut first).await;
    // Partitions are in hour 11 now: whatever was marked, hour 11 was not.
    first.kill_hard();
    let markers_then = markers(store.as_ref(), &dest, &topic).await;
    assert!(markers_then.iter().all(|(hour, _)| *hour < 1), "only hour 10 may be complete: {markers_then:?}");
    merge(&mut produced, produce_records(&brokers(), &topic, PARTITIONS, RECORDS / 2..RECORDS, timed).await.unwrap());
    // The second subscribes by regex: its markers' topic is known from its assignments only.
    let group = unique("g");
    let mut second = ArchiverProcess::spawn("lake-second", &by_regex(args(&group), &topic));
    wait_archived(store.as_ref(), &prefix, &topic, &last_offsets(&produced), &mut [&mut second]).await;
    // Every partition is in hour 12: hours 10 and 11 are complete, and get their markers.
    let started = std::time::Instant::now();
    while markers(store.as_ref(), &dest, &topic).await.len() < 2 {
        second.assert_running();
        assert!(started.elapsed().as_secs() < 60, "no markers for hours 10 and 11 within 60 s:\n{}", second.log_text());
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    assert!(second.terminate().success(), "{}", second.log_text());
    assert!(second.log_text().contains("reason=\"bucket\""), "files rolled at the hour edges");
    // Kafka's default timestamps (CreateTime, no bound on lateness): complete through the start of the
    // hour every partition is in now (12:00), however long ago that was.
    let report = status(store.as_ref(), &status_options(&dest, &group, &topic)).await.unwrap();
    let t = &report.topics[0];
    assert_eq!((t.time_buckets, t.lateness_bound_ms), (Some("hour"), None));
    assert_eq!(t.complete_through_ms, Some(START + 2 * HOUR), "{}", report.table());

    assert_exactly_once(&dest, &topic, &produced).await;
    let objects = read_objects(store.as_ref(), &dest, &topic).await;
    check_folder_rule(&objects, &produced);
    check_markers(&markers(store.as_ref(), &dest, &topic).await, &objects);
    check_restore_by_time(&dest, &topic, &produced);

    let local = tempfile::tempdir().unwrap();
    for (key, _) in &objects {
        let path = local.path().join(key.relative());
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, store.get(&key.to_string()).await.unwrap()).unwrap();
    }
    check_duckdb(local.path(), &objects, &produced);

    // `ddl --engine duckdb` for this layout runs in DuckDB, and its view types the folder columns.
    let ddl = std::process::Command::new(env!("CARGO_BIN_EXE_kafka-s3-archiver"))
        .args(["ddl", "--dest", &format!("file://{}", local.path().display()), "--topic", &topic, "--engine", "duckdb"])
        .output()
        .expect("run ddl");
    assert!(ddl.status.success(), "ddl failed: {}", String::from_utf8_lossy(&ddl.stderr));
    let table = kafka_s3_archiver::commands::ddl::engines::table_name(&topic);
    let script = r#"
import duckdb, sys
duckdb.sql(sys.argv[1])
for r in duckdb.sql(f'SELECT typeof(dt), typeof(hour), typeof(partition), count(*) FROM "{sys.argv[2]}" GROUP BY ALL').fetchall():
    print(*r)
"#;
    let out = std::process::Command::new(env("KSA_TEST_PYTHON"))
        .args(["-c", script, &String::from_utf8(ddl.stdout).unwrap(), &table])
        .output()
        .expect("run duckdb");
    assert!(out.status.success(), "the DDL failed in DuckDB: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8(out.stdout).unwrap().trim(), format!("DATE INTEGER INTEGER {RECORDS}"));
}

/// With broker-stamped times (LogAppendTime: no record is late), a caught-up topic's hours are complete
/// up to the current one (less a minute of allowed clock skew), although no newer record came; its third
/// partition never had a record, and counts as caught up.
#[tokio::test(flavor = "multi_thread")]
async fn with_log_append_time_quiet_partitions_complete_their_hour() {
    let topic = unique("lake-append");
    create_topic_with(&topic, 3, &[("message.timestamp.type", "LogAppendTime")]).await;
    quiet_partitions_complete_their_hour(&topic, &[], Some(0)).await;
}

/// Bucketed by arrival (recorded in the claims), no record can be late: the same, on a topic with
/// Kafka's default timestamps (no lateness bound).
#[tokio::test(flavor = "multi_thread")]
async fn by_arrival_time_quiet_partitions_complete_their_hour_whatever_the_topic() {
    let topic = unique("lake-arrival");
    create_topic(&topic, 3).await;
    quiet_partitions_complete_their_hour(&topic, &["--time-source", "arrival"], None).await;
}

async fn quiet_partitions_complete_their_hour(topic: &str, flags: &[&str], topic_bound: Option<i64>) {
    let dest = TestDest::s3().await;
    let (store, prefix) = (dest.store().await, dest.prefix());
    let topic = topic.to_string();
    let produced = produce_records(&brokers(), &topic, 2, 0..200, |i| generated(i, 50)).await.expect("produce");
    let (spool, group) = (tempfile::tempdir().unwrap(), unique("g"));
    let mut args = hourly_args(&dest, &group, &topic, spool.path());
    args.extend(flags.iter().map(|f| f.to_string()));
    let mut archiver = ArchiverProcess::spawn("lake-quiet", &args);
    wait_archived(store.as_ref(), &prefix, &topic, &last_offsets(&produced), &mut [&mut archiver]).await;
    assert!(archiver.terminate().success(), "{}", archiver.log_text());

    let wall = || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    let skew = kafka_s3_archiver::archive::completeness::CLOCK_SKEW_MS;
    let before = hour_of(wall() - skew).start_ms();
    let report = status(store.as_ref(), &status_options(&dest, &group, &topic)).await.unwrap();
    let after = hour_of(wall() - skew).start_ms();
    let t = &report.topics[0];
    assert_eq!(t.lateness_bound_ms, topic_bound, "{t:?}");
    let through = t.complete_through_ms.expect("complete through some time");
    assert!((before..=after).contains(&through), "{} not in {before}..={after}", report.table());
}

/// The topic's `_SUCCESS` markers: (hours after 10:00, body).
async fn markers(store: &dyn ObjectStore, dest: &TestDest, topic: &str) -> Vec<(i64, Marker)> {
    let mut out = Vec::new();
    for key in list_all(store, &dest.prefix().topic_folder(topic)).await.unwrap() {
        if key.ends_with("/_SUCCESS") {
            let marker: Marker = serde_json::from_slice(&store.get(&key).await.unwrap()).unwrap();
            assert!(key.contains(&format!("/{}/_SUCCESS", marker.bucket)), "{key}: {marker:?}");
            out.push(((marker.start_ms - START) / HOUR, marker));
        }
    }
    out
}

/// Exactly hours 10 and 11 are marked (hour 12 is where the partitions are), once each, naming every
/// partition with an archived-through offset at or past its last record in the hour.
fn check_markers(markers: &[(i64, Marker)], objects: &[(ObjectKey, Vec<Record>)]) {
    assert_eq!(markers.iter().map(|(h, _)| *h).collect::<Vec<_>>(), vec![0, 1], "{markers:?}");
    for (_, m) in markers {
        assert_eq!(m.partitions, PARTITIONS as usize);
        let in_folder: Vec<_> =
            objects.iter().filter(|(k, _)| k.bucket.is_some_and(|b| b.start_ms() == m.start_ms)).collect();
        for (key, recs) in &in_folder {
            let through = m.archived_through.get(&key.tp.partition()).copied();
            assert!(through >= recs.last().map(|r| r.offset), "{m:?} misses {key}");
        }
        // What a restore by time prunes whole folders by: their objects and their records' time span.
        let times: Vec<i64> =
            in_folder.iter().flat_map(|(_, recs)| recs.iter().filter_map(|r| r.timestamp_ms)).collect();
        assert_eq!(m.objects, Some(in_folder.len() as u64), "{m:?}");
        assert_eq!(m.timestamps, times.iter().min().zip(times.iter().max()).map(|(a, b)| (*a, *b)), "{m:?}");
    }
}

/// `restore --from-time` of 10:20-10:40 skips hour 11's folder by its marker (its records start at
/// 10:59:15, the late ones), looks at the claims of hours 10 and 12 (12 has no marker yet), and writes
/// exactly the records stamped in the window.
fn check_restore_by_time(dest: &TestDest, topic: &str, produced: &BTreeMap<i32, Vec<Record>>) {
    let (from, to) = (START + HOUR / 3, START + 2 * HOUR / 3);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kafka-s3-archiver"))
        .args(["restore", "--dest", &dest.url(), "--s3-endpoint", &s3_endpoint(), "--topic", topic, "--to-stdout"])
        .args(["--from-time", &from.to_string(), "--to-time", &to.to_string()])
        .output()
        .expect("run restore");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "restore failed: {stderr}");
    assert!(stderr.contains("(1 time-bucket folders by their markers)"), "{stderr}");
    let mut restored: Vec<(i64, i64)> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|l| (l["partition"].as_i64().unwrap(), l["offset"].as_i64().unwrap()))
        .collect();
    restored.sort();
    let expected: Vec<(i64, i64)> = produced
        .iter()
        .flat_map(|(p, recs)| recs.iter().map(move |r| (*p, r)))
        .filter(|(_, r)| (from..=to).contains(&r.timestamp_ms.unwrap()))
        .map(|(p, r)| (i64::from(p), r.offset))
        .collect();
    assert!(!expected.is_empty());
    assert_eq!(restored, expected);
}

fn hourly_args(dest: &TestDest, group: &str, topic: &str, spool: &Path) -> Vec<String> {
    let mut args = set_flag(archiver_args(dest, group, topic, ROLL_RECORDS as u64, spool), "--roll-age", "3s");
    args.extend(["--time-buckets".into(), "hour".into(), "--marker-interval".into(), "1s".into()]);
    args
}

/// The same flags with `--topic-regex ^<topic>$` for `--topic <topic>`.
fn by_regex(mut args: Vec<String>, topic: &str) -> Vec<String> {
    let at = args.iter().position(|a| a == "--topic").expect("--topic");
    args[at] = "--topic-regex".into();
    args[at + 1] = format!("^{topic}$");
    args
}

fn status_options(dest: &TestDest, group: &str, topic: &str) -> StatusOptions {
    StatusOptions {
        prefix: dest.prefix(),
        topics: vec![topic.to_string()],
        brokers: brokers(),
        props: vec![],
        group: group.to_string(),
    }
}

/// Every data object of the topic with its records, in offset order per partition.
async fn read_objects(store: &dyn ObjectStore, dest: &TestDest, topic: &str) -> Vec<(ObjectKey, Vec<Record>)> {
    let mut objects = Vec::new();
    for raw in list_all(store, &dest.prefix().topic_folder(topic)).await.unwrap() {
        if raw.ends_with("/_SUCCESS") {
            continue;
        }
        let key = ObjectKey::parse(&dest.prefix(), &raw).unwrap_or_else(|e| panic!("{e}"));
        let records = decode(key.kind, store.get(&raw).await.unwrap()).unwrap().records;
        objects.push((key, records));
    }
    objects.sort_by_key(|(k, _)| (k.tp.partition(), k.range.start()));
    objects
}

/// What an hour folder may hold: records of that hour, and late records (stamped earlier than a record
/// of the partition before them); never a record of a later hour. Buckets never go back in offset
/// order, and a partition adds at most one file per hour edge to what its roll size makes.
fn check_folder_rule(objects: &[(ObjectKey, Vec<Record>)], produced: &BTreeMap<i32, Vec<Record>>) {
    let mut late_in_folder = 0;
    for (p, records) in produced {
        let mine: Vec<&(ObjectKey, Vec<Record>)> = objects.iter().filter(|(k, _)| k.tp.partition() == *p).collect();
        let (mut newest, mut floor) = (i64::MIN, i64::MIN);
        for (key, recs) in &mine {
            let bucket = key.bucket.unwrap_or_else(|| panic!("{key} is not in an hour folder"));
            assert!(bucket.start_ms() >= floor, "{key}: back to an earlier hour");
            floor = bucket.start_ms();
            for r in recs {
                let t = r.timestamp_ms.unwrap();
                assert!(t < bucket.end_ms(), "{key} holds offset {} of a later hour", r.offset);
                if t < bucket.start_ms() {
                    assert!(t < newest, "{key}: offset {} is earlier than its folder but not late", r.offset);
                    late_in_folder += 1;
                }
                newest = newest.max(t);
            }
        }
        let hours = records.iter().map(|r| hour_of(r.timestamp_ms.unwrap())).collect::<std::collections::HashSet<_>>();
        // One restart (a file cut short) on top of the roll size and the hour edges.
        let bound = records.len().div_ceil(ROLL_RECORDS) + hours.len() + 1;
        assert!(mine.len() <= bound, "partition {p}: {} files, more than {bound}", mine.len());
    }
    assert!(late_in_folder >= 2 * PARTITIONS as usize, "the edges had late records: {late_in_folder}");
}

/// DuckDB reads dt and hour from the folders: counts per folder, one folder's records exactly, and the
/// docs/archive.md's recipe for an hour's records by time (that folder and later ones, filtered on timestamp).
fn check_duckdb(dir: &Path, objects: &[(ObjectKey, Vec<Record>)], produced: &BTreeMap<i32, Vec<Record>>) {
    let script = r#"
import duckdb, sys
src = f"read_parquet('{sys.argv[1]}/**/*.parquet', hive_partitioning=true)"
q = lambda sql: duckdb.sql(sql.replace("SRC", src)).fetchall()
for r in q("SELECT CAST(dt AS VARCHAR), hour, count(*) FROM SRC GROUP BY ALL ORDER BY ALL"):
    print("count", *r)
for r in q("SELECT partition, \"offset\" FROM SRC WHERE dt = DATE '2026-01-01' AND hour = 11 ORDER BY ALL"):
    print("folder", *r)
for r in q("""SELECT partition, "offset" FROM SRC WHERE dt = DATE '2026-01-01' AND hour >= 11
              AND epoch_ms(timestamp) >= 1767265200000 AND epoch_ms(timestamp) < 1767268800000 ORDER BY ALL"""):
    print("hour", *r)
"#;
    let out = std::process::Command::new(env("KSA_TEST_PYTHON"))
        .args(["-c", script, &dir.display().to_string()])
        .output()
        .expect("run duckdb");
    assert!(out.status.success(), "duckdb failed: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let lines = |tag: &str| -> Vec<String> {
        text.lines().filter_map(|l| l.strip_prefix(tag).map(|rest| rest.trim().to_string())).collect()
    };
    let mut per_folder: BTreeMap<(String, u32), usize> = BTreeMap::new();
    for (key, recs) in objects {
        let b = key.bucket.unwrap();
        *per_folder.entry((b.date(), b.hour().unwrap())).or_default() += recs.len();
    }
    let counts: Vec<String> = per_folder.iter().map(|((dt, h), n)| format!("{dt} {h} {n}")).collect();
    assert_eq!(lines("count "), counts);
    assert_eq!(counts.len(), 3, "three hours: {counts:?}");

    let eleven = hour_of(START + HOUR);
    let mut in_folder: Vec<(i32, i64)> = objects
        .iter()
        .filter(|(k, _)| k.bucket == Some(eleven))
        .flat_map(|(k, recs)| recs.iter().map(move |r| (k.tp.partition(), r.offset)))
        .collect();
    in_folder.sort();
    let expected: Vec<String> = in_folder.iter().map(|(p, o)| format!("{p} {o}")).collect();
    assert_eq!(lines("folder "), expected);

    let mut of_hour: Vec<(i32, i64)> = produced
        .iter()
        .flat_map(|(p, recs)| recs.iter().map(move |r| (*p, r)))
        .filter(|(_, r)| hour_of(r.timestamp_ms.unwrap()) == eleven)
        .map(|(p, r)| (p, r.offset))
        .collect();
    of_hour.sort();
    let expected: Vec<String> = of_hour.iter().map(|(p, o)| format!("{p} {o}")).collect();
    assert_eq!(lines("hour "), expected);
    assert_ne!(lines("hour "), lines("folder "), "late records at both edges make the two differ");
}

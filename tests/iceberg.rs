//! Iceberg tables as views of the archive, on the SQL catalog (SQLite) and read back by pyiceberg,
//! DuckDB and Apache Spark: a topic archived by an in-process archiver from librdkafka's mock cluster, committed by two
//! committers at once (two instances), then again (nothing to add), then after more records were
//! archived; an archiver with `--table iceberg` and hourly time buckets keeping its table up to date; one
//! on S3 that commits the objects it created without reading them back; one whose
//! typed values gain a column mid-stream (the table's schema evolves); one committed to so often that its
//! manifests are merged; and one whose graceful stop commits the files it closed on the way out.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use common::s3_proxy::{Kind, S3Proxy};
use common::{
    archive_mock_topic, cart, carts_table, data_objects, duckdb_iceberg_row, mock_settings,
    pyiceberg_reads_each_record_once, read_carts_table, s3_endpoint, spark_reads_the_table, start_archiver,
    wait_for_table, TestDest,
};
use kafka_s3_archiver::archive::keys::{classify, ArchiveKey};
use kafka_s3_archiver::archive::record::Record;
use kafka_s3_archiver::archive::time_bucket::BucketWidth;
use kafka_s3_archiver::commands::demo::generate::{produce, produce_records};
use kafka_s3_archiver::commands::status::tables::table_statuses;
use kafka_s3_archiver::commands::status::{status, StatusOptions};
use kafka_s3_archiver::commands::verify::tables::check_tables;
use kafka_s3_archiver::config::{CatalogConfig, CatalogLocation, Settings, TableFormat, TimeBuckets, ValueFormatName};
use kafka_s3_archiver::store::{list_all, ObjectStore};
use kafka_s3_archiver::table::audit::TableProblem;
use kafka_s3_archiver::table::catalog::sql::SqlCatalog;
use kafka_s3_archiver::table::catalog::Catalog;
use kafka_s3_archiver::table::catalog::TableIdent;
use kafka_s3_archiver::table::committer::{Committer, TopicTable};
use rdkafka::mocking::MockCluster;

const TOPIC: &str = "orders";

fn committer(
    db: &Path,
    store: Arc<dyn ObjectStore>,
    prefix: &kafka_s3_archiver::archive::object_key::Prefix,
) -> Committer {
    let catalog = SqlCatalog::sqlite(db, "default", store.clone()).unwrap();
    Committer { store, catalog: Arc::new(catalog), prefix: prefix.clone(), max_files: 1000, recent: Default::default() }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_archived_object_is_in_the_table_once_whoever_commits_it_and_pyiceberg_reads_them() {
    let cluster = MockCluster::new(1).unwrap();
    let bootstrap = cluster.bootstrap_servers();
    cluster.create_topic(TOPIC, 3, 1).unwrap();
    let mut produced = produce(&bootstrap, TOPIC, 3, 0..900, 40).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (config, store) = archive_mock_topic(&bootstrap, dir.path(), TOPIC, &produced).await;
    let prefix = config.store.dest.prefix().clone();
    let objects: Vec<String> = list_all(store.as_ref(), &prefix.topic_folder(TOPIC))
        .await
        .unwrap()
        .into_iter()
        .filter(|k| matches!(classify(&prefix, k), ArchiveKey::Data(_)))
        .collect();
    let table = TopicTable {
        ident: TableIdent { namespace: "kafka".into(), name: TOPIC.into() },
        topic: TOPIC.into(),
        width: None,
    };
    let db = dir.path().join("catalog.db");
    let (a, b) = (committer(&db, store.clone(), &prefix), committer(&db, store.clone(), &prefix));

    // Two instances at once on a table neither has created, both committing partition 1 (one of them a
    // zombie, say): each file goes in once, and neither's other partition is lost.
    let (ra, rb) = tokio::join!(a.commit(&table, &[0, 1], 1_000), b.commit(&table, &[1, 2], 1_000));
    let (ra, rb) = (ra.unwrap(), rb.unwrap());
    assert_eq!(ra.files + rb.files, objects.len(), "{ra:?} {rb:?}");
    assert_eq!(ra.records + rb.records, 900);
    let again = a.commit(&table, &[0, 1, 2], 2_000).await.unwrap();
    assert_eq!((again.files, again.snapshot_id), (0, None), "nothing new: no snapshot");
    check_pyiceberg(&db, dir.path(), TOPIC, &produced);
    check_duckdb(&a, &table, &produced).await;
    let spark = spark_reads_the_table(&db, dir.path(), "kafka.orders");
    assert!(spark.contains("spark: 900 records in 3 partitions") && spark.contains("check OK"), "{spark}");

    // More records archived later (a restart resumes from the archive): only those are added.
    let more = produce(&bootstrap, TOPIC, 3, 900..1200, 40).await.unwrap();
    for (p, records) in more {
        produced.entry(p).or_default().extend(records);
    }
    drop(archive_mock_topic(&bootstrap, dir.path(), TOPIC, &produced).await);
    let before = b.catalog.load(&table.ident).await.unwrap().unwrap().metadata;
    // Six days on: the snapshots older than five go with this commit, their manifest lists too; every
    // record stays readable (the manifests and data files are the later snapshots' as well).
    let six_days_on = 3_000 + 6 * 24 * 3600 * 1000;
    let later = b.commit(&table, &[0, 1, 2], six_days_on).await.unwrap();
    assert_eq!(later.records, 300, "{later:?}");
    check_pyiceberg(&db, dir.path(), TOPIC, &produced);
    check_duckdb(&b, &table, &produced).await;
    let after = b.catalog.load(&table.ident).await.unwrap().unwrap().metadata;
    let snapshots = |m: &serde_json::Value| m["snapshots"].as_array().unwrap().clone();
    assert!(snapshots(&before).len() >= 2, "{before}");
    assert_eq!(snapshots(&after).len(), 1, "only the new snapshot stays");
    for old in snapshots(&before) {
        let list = old["manifest-list"].as_str().unwrap();
        let key = list.strip_prefix(&format!("{}/", store.describe())).unwrap();
        assert!(store.head(key).await.unwrap().is_none(), "{list} is deleted with its snapshot");
    }

    // verify holds the table against the archive: exact; then an object deleted from the archive.
    let catalog = CatalogConfig {
        location: CatalogLocation::Sqlite(db.clone()),
        name: "default".into(),
        namespace: "kafka".into(),
    };
    let checked = check_tables(store.clone(), &prefix, &catalog, &[TOPIC.to_string()]).await.unwrap();
    assert_eq!((checked.len(), checked[0].records, checked[0].problems.clone()), (1, 1200, vec![]));
    let lost = list_all(store.as_ref(), &prefix.topic_folder(TOPIC))
        .await
        .unwrap()
        .into_iter()
        .find(|k| k.contains("partition=1/"))
        .unwrap();
    store.delete(&lost).await.unwrap();
    let checked = check_tables(store.clone(), &prefix, &catalog, &[TOPIC.to_string()]).await.unwrap();
    assert!(
        matches!(checked[0].problems.as_slice(), [TableProblem::Position { partition: 1, .. }]),
        "{:?}",
        checked[0].problems
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_archiver_with_a_table_keeps_it_up_to_date_partitioned_by_hour() {
    let cluster = MockCluster::new(1).unwrap();
    let bootstrap = cluster.bootstrap_servers();
    cluster.create_topic("clicks.v1", 2, 1).unwrap();
    let produced = produce(&bootstrap, "clicks.v1", 2, 0..400, 40).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("catalog.db");
    let settings = Settings { time_buckets: Some(TimeBuckets::Hour), ..table_settings(&bootstrap, &db, "clicks.v1") };
    let (archiver, store) = start_archiver(settings).await;
    let catalog = SqlCatalog::sqlite(&db, "default", store.clone()).unwrap();
    let ident = TableIdent { namespace: "kafka".into(), name: "clicks_v1".into() };
    wait_for_table(&catalog, &ident, &produced).await;
    archiver.shutdown().await.unwrap();
    check_pyiceberg(&db, dir.path(), "clicks_v1", &produced);
    let loaded = catalog.load(&ident).await.unwrap().unwrap();
    assert_eq!(loaded.metadata["default-spec-id"], 1, "partitioned by Kafka partition and hour");
}

/// A table keeps the partition specs it was made with: committed to later with other time buckets
/// (days when it was made, hours now), each file's partition value is still its day, so a scan bounded
/// by time (which prunes by those values) still finds every record.
#[tokio::test(flavor = "multi_thread")]
async fn a_table_keeps_its_own_time_partitions_when_the_time_buckets_change() {
    let cluster = MockCluster::new(1).unwrap();
    let bootstrap = cluster.bootstrap_servers();
    cluster.create_topic("visits", 2, 1).unwrap();
    let mut produced = produce(&bootstrap, "visits", 2, 0..200, 40).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (config, store) = archive_mock_topic(&bootstrap, dir.path(), "visits", &produced).await;
    let db = dir.path().join("catalog.db");
    let committer = committer(&db, store.clone(), config.store.dest.prefix());
    let by_day = TopicTable::new("kafka", "visits", Some(BucketWidth::Day));
    assert_eq!(committer.commit(&by_day, &[0, 1], 1_000).await.unwrap().records, 200);

    let more = produce(&bootstrap, "visits", 2, 200..400, 40).await.unwrap();
    for (p, records) in more {
        produced.entry(p).or_default().extend(records);
    }
    drop(archive_mock_topic(&bootstrap, dir.path(), "visits", &produced).await);
    let by_hour = TopicTable::new("kafka", "visits", Some(BucketWidth::Hour));
    assert_eq!(committer.commit(&by_hour, &[0, 1], 2_000).await.unwrap().records, 200);
    check_pyiceberg(&db, dir.path(), "visits", &produced);
    let metadata = committer.catalog.load(&by_day.ident).await.unwrap().unwrap().metadata;
    assert_eq!(metadata["partition-specs"][1]["fields"][1]["transform"], "day", "{metadata}");
}

/// Topics `a.b` and `a_b` name one table: the second topic's files are refused by the first's table,
/// saying why (added, they would have been planned from the first topic's positions).
#[tokio::test(flavor = "multi_thread")]
async fn a_topic_whose_name_gives_another_topics_table_is_refused() {
    let cluster = MockCluster::new(1).unwrap();
    let bootstrap = cluster.bootstrap_servers();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("catalog.db");
    let mut committers = Vec::new();
    for topic in ["a.b", "a_b"] {
        cluster.create_topic(topic, 1, 1).unwrap();
        let produced = produce(&bootstrap, topic, 1, 0..100, 40).await.unwrap();
        let (config, store) = archive_mock_topic(&bootstrap, dir.path(), topic, &produced).await;
        committers.push((topic, committer(&db, store, config.store.dest.prefix())));
    }
    let (first, a) = &committers[0];
    assert_eq!(a.commit(&TopicTable::new("kafka", first, None), &[0], 1_000).await.unwrap().records, 100);
    let (second, b) = &committers[1];
    let table = TopicTable::new("kafka", second, None);
    let refused = b.commit(&table, &[0], 2_000).await.unwrap_err().to_string();
    assert!(refused.contains(r#"the table holds topic "a.b", not "a_b""#), "{refused}");
    // status and verify say so too, rather than show or audit the other topic's table.
    assert!(b.positions(&table).await.unwrap_err().to_string().contains("a_b"));
    assert!(b.check(&table).await.unwrap_err().to_string().contains("a_b"));
}

/// An archiver's commits take the size and footer of the objects it created from its own pipeline:
/// through a proxy that counts the store's requests, the table is complete with no HEAD and no footer
/// read of any of them (each added file cost a HEAD and a ranged GET before).
#[tokio::test(flavor = "multi_thread")]
async fn an_archiver_commits_the_objects_it_created_without_reading_them_back() {
    let cluster = MockCluster::new(1).unwrap();
    let bootstrap = cluster.bootstrap_servers();
    cluster.create_topic("taps", 2, 1).unwrap();
    let produced = produce(&bootstrap, "taps", 2, 0..400, 40).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (dest, proxy) = (TestDest::s3().await, S3Proxy::start(&s3_endpoint()).await);
    let settings = Settings {
        dest: Some(dest.url()),
        s3_endpoint: Some(proxy.url.clone()),
        ..table_settings(&bootstrap, &dir.path().join("catalog.db"), "taps")
    };
    let (archiver, store) = start_archiver(settings).await;
    let catalog = SqlCatalog::sqlite(&dir.path().join("catalog.db"), "default", store.clone()).unwrap();
    wait_for_table(&catalog, &TableIdent { namespace: "kafka".into(), name: "taps".into() }, &produced).await;
    archiver.shutdown().await.unwrap();
    let files = data_objects(store.as_ref(), &dest.prefix(), "taps").await;
    assert!(files >= 8, "{files} files: 50 records each");
    let counts = proxy.counts();
    assert_eq!(counts.requests.get(&Kind::Head), None, "{:?}", counts.requests);
    drop(counts);
    // The sizes and footers the table took from the pipeline are the stored objects': a reader finds
    // every record once through them.
    check_pyiceberg(&dir.path().join("catalog.db"), dir.path(), "taps", &produced);
}

/// Typed values whose producer adds a field mid-stream: the files after it have a column the table's
/// first schema lacks, and the table's schema evolves in the commit that adds the first of them, so
/// readers see the new column (null in the rows before it) and every row once.
#[tokio::test(flavor = "multi_thread")]
async fn a_column_added_mid_stream_evolves_the_tables_schema_and_readers_see_it() {
    const TOPIC: &str = "carts";
    let cluster = MockCluster::new(1).unwrap();
    let bootstrap = cluster.bootstrap_servers();
    cluster.create_topic(TOPIC, 2, 1).unwrap();
    let produced = produce_records(&bootstrap, TOPIC, 2, 0..400, cart).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("catalog.db");
    let settings = Settings {
        value_format: Some(ValueFormatName::Json),
        value_schema: Some("infer".into()),
        ..table_settings(&bootstrap, &db, TOPIC)
    };
    let (archiver, store) = start_archiver(settings).await;
    let catalog = SqlCatalog::sqlite(&db, "default", store.clone()).unwrap();
    let ident = TableIdent { namespace: "kafka".into(), name: TOPIC.into() };
    wait_for_table(&catalog, &ident, &produced).await;
    archiver.shutdown().await.unwrap();
    check_pyiceberg(&db, dir.path(), TOPIC, &produced);

    let load = r#"
from pyiceberg.catalog.sql import SqlCatalog
catalog = SqlCatalog("default", uri=f"sqlite:///{sys.argv[1]}", warehouse=f"file://{sys.argv[2]}")
t = catalog.load_table("kafka.carts")
"#;
    let args = [db.display().to_string(), dir.path().display().to_string()];
    assert_eq!(read_carts_table(load, &args), carts_table(400, 50, 2));
    let metadata = catalog.load(&ident).await.unwrap().unwrap().location;
    let duckdb = duckdb_iceberg_row(
        &metadata,
        "count(*), count(t.value.coupon), min(t.value.cart) FILTER (t.value.coupon IS NOT NULL), sum(t.value.amount)",
    );
    assert_eq!(
        duckdb,
        format!("400|200|200|{}", (0..400).map(|i| i % 50).sum::<usize>()),
        "DuckDB reads the evolved table"
    );
    let loaded = catalog.load(&ident).await.unwrap().unwrap();
    let schemas: Vec<_> = loaded.metadata["schemas"].as_array().unwrap().iter().map(|s| &s["schema-id"]).collect();
    assert_eq!((schemas, &loaded.metadata["current-schema-id"]), (vec![&0.into(), &1.into()], &1.into()));
}

/// A table committed to many times (one file a commit here, five hours apart): each commit lists every
/// manifest before it, until a hundred small ones are merged into one, so the list stays short; the
/// snapshots older than five days expire, and once none lists the small manifests they are deleted too;
/// every record is still read once.
#[tokio::test(flavor = "multi_thread")]
async fn many_commits_merge_their_manifests_and_readers_still_see_every_record_once() {
    const TOPIC: &str = "ticks";
    let cluster = MockCluster::new(1).unwrap();
    let bootstrap = cluster.bootstrap_servers();
    cluster.create_topic(TOPIC, 1, 1).unwrap();
    let produced = produce(&bootstrap, TOPIC, 1, 0..1300, 20).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let settings = Settings { roll_records: Some(10), ..mock_settings(&bootstrap, dir.path()) };
    let (config, store) = common::archive_mock_topic_as(settings, TOPIC, &produced).await;
    let db = dir.path().join("catalog.db");
    let committer = Committer { max_files: 1, ..committer(&db, store.clone(), config.store.dest.prefix()) };
    let table = TopicTable::new("kafka", TOPIC, None);
    let mut commits = 0;
    let hours = |n: i64| n * 3600 * 1000;
    while committer.commit(&table, &[0], hours(5 * commits)).await.unwrap().snapshot_id.is_some() {
        commits += 1;
    }
    assert_eq!(commits, 130, "a file a commit");
    let loaded = committer.catalog.load(&table.ident).await.unwrap().unwrap();
    let current =
        loaded.metadata["snapshots"].as_array().unwrap().last().unwrap()["manifest-list"].as_str().unwrap().to_string();
    let key = current.strip_prefix(&format!("{}/", store.describe())).unwrap();
    let listed =
        kafka_s3_archiver::table::iceberg::manifest::read_manifest_list(&store.get(key).await.unwrap()).unwrap();
    let existing: Vec<i64> = listed.iter().map(|m| m.0["existing_files_count"].as_i64().unwrap()).collect();
    assert_eq!(listed.len(), 31, "one merged manifest of 100 files, then 30 of one each: {existing:?}");
    assert_eq!(existing.iter().sum::<i64>(), 100);
    let snapshots = loaded.metadata["snapshots"].as_array().unwrap().len();
    assert_eq!(snapshots, 25, "those of the last five days (hours 525 to 645)");
    let location = committer.location(&table.ident);
    let folder = format!("{}/metadata/", location.strip_prefix(&format!("{}/", store.describe())).unwrap());
    let manifests: Vec<String> = list_all(store.as_ref(), &folder)
        .await
        .unwrap()
        .into_iter()
        .filter(|k| k.ends_with(".avro") && !k.contains("/snap-"))
        .map(|k| format!("{}/{k}", store.describe()))
        .collect();
    let current: Vec<&str> = listed.iter().map(|m| m.0["manifest_path"].as_str().unwrap()).collect();
    let unlisted = manifests.iter().filter(|m| !current.contains(&m.as_str())).count();
    assert_eq!(unlisted, 0, "the small manifests merged away went with the last snapshot that listed them");
    assert_eq!(manifests.len(), current.len(), "every listed manifest is there");
    check_pyiceberg(&db, dir.path(), TOPIC, &produced);
    check_duckdb(&committer, &table, &produced).await;
    let catalog = CatalogConfig {
        location: CatalogLocation::Sqlite(db.clone()),
        name: "default".into(),
        namespace: "kafka".into(),
    };
    let prefix = config.store.dest.prefix();
    let checked = check_tables(store.clone(), prefix, &catalog, &[TOPIC.to_string()]).await.unwrap();
    assert_eq!((checked[0].records, checked[0].problems.clone()), (1300, vec![]), "verify finds the table exact");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_graceful_stop_commits_what_the_archiver_uploaded_last() {
    let cluster = MockCluster::new(1).unwrap();
    let bootstrap = cluster.bootstrap_servers();
    cluster.create_topic("refunds", 2, 1).unwrap();
    let produced = produce(&bootstrap, "refunds", 2, 0..300, 40).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("catalog.db");
    let settings = Settings {
        topics: Some(vec!["refunds".into()]),
        roll_records: Some(1000), // every file is closed by the stop
        table: Some(TableFormat::Iceberg),
        iceberg_catalog: Some(format!("sqlite://{}", db.display())),
        table_commit_interval: Some("1h".parse().unwrap()),
        table_commit_files: Some(1), // two files at the stop: two commits
        ..mock_settings(&bootstrap, dir.path())
    };
    let prefix = settings.clone().resolve(None).unwrap().store.dest.prefix().clone();
    let (archiver, store) = start_archiver(settings).await;
    let metrics = archiver.metrics();
    let started = std::time::Instant::now();
    while metrics.records_received.get() < 300 {
        assert!(started.elapsed() < std::time::Duration::from_secs(60), "the records did not arrive");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    archiver.shutdown().await.unwrap();
    check_pyiceberg(&db, dir.path(), "refunds", &produced);

    // `status --iceberg-catalog`: each partition's table position is right after what it archived.
    let options = StatusOptions {
        prefix: prefix.clone(),
        topics: vec!["refunds".into()],
        brokers: bootstrap.clone(),
        props: vec![],
        group: "g".into(),
    };
    let mut report = status(store.as_ref(), &options).await.unwrap();
    let catalog = CatalogConfig {
        location: CatalogLocation::Sqlite(db.clone()),
        name: "default".into(),
        namespace: "kafka".into(),
    };
    let tables = table_statuses(store.clone(), &prefix, &catalog, &report.partitions).await.unwrap();
    let positions: Vec<_> = tables[0].partitions.iter().map(|p| (p.partition, p.position, p.lag)).collect();
    let last = common::last_offsets(&produced);
    assert_eq!(positions, [(0, Some(last[&0] + 1), 0), (1, Some(last[&1] + 1), 0)]);
    assert_eq!(tables[0].table, "kafka.refunds");
    // The archiver's gauge says the same: the archived offset + 1 minus it is the table's lag.
    for (p, last) in &last {
        let position = metrics.table_position.with_label_values(&["refunds", p.to_string().as_str()]).get();
        assert_eq!(position, last + 1, "partition {p}'s ksa_table_position");
    }
    report.tables = tables;
    println!("{}", report.table());
}

/// An archiver of `topic` on the mock cluster at `bootstrap`, files of 50 records, committing them to the
/// topic's table in the SQL catalog `db` (beside which it archives) every second.
fn table_settings(bootstrap: &str, db: &Path, topic: &str) -> Settings {
    Settings {
        topics: Some(vec![topic.into()]),
        roll_records: Some(50),
        table: Some(TableFormat::Iceberg),
        iceberg_catalog: Some(format!("sqlite://{}", db.display())),
        table_commit_interval: Some("1s".parse().unwrap()),
        ..mock_settings(bootstrap, db.parent().unwrap())
    }
}

/// DuckDB (its iceberg extension, on the table's current metadata file) reads every produced record
/// once: per partition, the count, the distinct offsets and the last.
async fn check_duckdb(committer: &Committer, table: &TopicTable, produced: &BTreeMap<i32, Vec<Record>>) {
    let metadata = committer.catalog.load(&table.ident).await.unwrap().unwrap().location;
    for (p, records) in produced {
        let select = format!(
            "count(*) FILTER (partition = {p}), count(DISTINCT \"offset\") FILTER (partition = {p}), \
             max(\"offset\") FILTER (partition = {p})"
        );
        let last = records.last().unwrap().offset;
        assert_eq!(duckdb_iceberg_row(&metadata, &select), format!("{0}|{0}|{last}", records.len()), "partition {p}");
    }
}

/// pyiceberg's SqlCatalog on the same SQLite database reads every produced record once.
fn check_pyiceberg(db: &Path, dir: &Path, table: &str, produced: &BTreeMap<i32, Vec<Record>>) {
    pyiceberg_reads_each_record_once(&format!("sqlite:///{}", db.display()), "default", dir, table, produced);
}

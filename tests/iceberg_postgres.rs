//! Iceberg tables on the SQL catalog in PostgreSQL (the real server `localstack/start.sh` runs, password
//! authentication over TLS): committers racing on a table nobody has created add each archived file once;
//! an archiver keeps its table up to date; pyiceberg (its SqlCatalog through psycopg2) reads every record
//! once; verify holds the table against the archive; a wrong password or an untrusted certificate says so;
//! and, with archiver processes on Apache Kafka, a zombie's commit that lands after a second group's
//! commit of the same files adds nothing twice.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::s3_proxy::{Fault, Kind, S3Proxy};
use common::{
    archive_mock_topic, archiver_args, brokers, create_topic, data_objects, env, mock_settings,
    pyiceberg_reads_each_record_once, s3_endpoint, start_archiver, through, unique, wait_for_table, wait_log,
    ArchiverProcess, TestDest,
};
use kafka_s3_archiver::commands::demo::generate::produce;
use kafka_s3_archiver::commands::verify::tables::check_tables;
use kafka_s3_archiver::config::{CatalogConfig, Settings, TableFormat};
use kafka_s3_archiver::store::ObjectStore;
use kafka_s3_archiver::table::catalog::{self, TableIdent};
use kafka_s3_archiver::table::committer::{Committer, TopicTable};
use rdkafka::mocking::MockCluster;

/// Settings committing `topic` to the test's PostgreSQL over TLS (trusting the test CA), in catalog
/// `name`, archiving beside `dir` from the mock cluster at `bootstrap`.
fn postgres_settings(bootstrap: &str, dir: &Path, topic: &str, name: &str) -> Settings {
    Settings {
        topics: Some(vec![topic.into()]),
        roll_records: Some(50),
        table: Some(TableFormat::Iceberg),
        iceberg_catalog: Some(format!("{}?sslmode=require", env("KSA_TEST_POSTGRES"))),
        iceberg_catalog_password: Some(env("KSA_TEST_POSTGRES_PASSWORD")),
        iceberg_ca: Some(env("KSA_TEST_CA").into()),
        iceberg_catalog_name: Some(name.into()),
        table_commit_interval: Some("1s".parse().unwrap()),
        ..mock_settings(bootstrap, dir)
    }
}

fn catalog_of(settings: &Settings) -> CatalogConfig {
    settings.clone().resolve(None).unwrap().table.expect("a table").catalog
}

/// The URI pyiceberg's SqlCatalog reaches the same database at (psycopg2, verifying the certificate).
fn pyiceberg_uri() -> String {
    let url = env("KSA_TEST_POSTGRES");
    let (user, rest) = url.strip_prefix("postgresql://").unwrap().split_once('@').unwrap();
    let password = env("KSA_TEST_POSTGRES_PASSWORD");
    format!("postgresql+psycopg2://{user}:{password}@{rest}?sslmode=verify-full&sslrootcert={}", env("KSA_TEST_CA"))
}

#[tokio::test(flavor = "multi_thread")]
async fn committers_racing_on_a_postgresql_catalog_add_each_archived_file_once() {
    let cluster = MockCluster::new(1).unwrap();
    let bootstrap = cluster.bootstrap_servers();
    cluster.create_topic("payments", 3, 1).unwrap();
    let produced = produce(&bootstrap, "payments", 3, 0..900, 40).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (config, store) = archive_mock_topic(&bootstrap, dir.path(), "payments", &produced).await;
    let prefix = config.store.dest.prefix().clone();
    let objects = data_objects(store.as_ref(), &prefix, "payments").await;
    let name = unique("race");
    let settings = postgres_settings(&bootstrap, dir.path(), "payments", &name);
    let catalog = catalog_of(&settings);
    let table = TopicTable {
        ident: TableIdent { namespace: "kafka".into(), name: "payments".into() },
        topic: "payments".into(),
        width: None,
    };
    // Four instances (each its own connection) at once on a table none has created, each partition
    // committed by two of them.
    let committers: Vec<Committer> = (0..4)
        .map(|_| Committer {
            store: store.clone(),
            catalog: catalog::open(&catalog.location, &name, store.clone()).unwrap(),
            prefix: prefix.clone(),
            max_files: 1000,
            recent: Default::default(),
        })
        .collect();
    let partitions = [vec![0, 1], vec![1, 2], vec![2, 0], vec![0, 1, 2]];
    let runs = committers.iter().zip(&partitions).map(|(c, p)| c.commit(&table, p, 1_000));
    let results: Vec<_> = futures::future::join_all(runs).await.into_iter().map(Result::unwrap).collect();
    assert_eq!(results.iter().map(|r| r.files).sum::<usize>(), objects, "{results:?}");
    assert_eq!(results.iter().map(|r| r.records).sum::<u64>(), 900, "{results:?}");
    let again = committers[0].commit(&table, &[0, 1, 2], 2_000).await.unwrap();
    assert_eq!((again.files, again.snapshot_id), (0, None), "nothing new: no snapshot");
    pyiceberg_reads_each_record_once(&pyiceberg_uri(), &name, dir.path(), "payments", &produced);
    let checked = check_tables(store.clone(), &prefix, &catalog, &["payments".to_string()]).await.unwrap();
    assert_eq!((checked[0].records, checked[0].problems.clone()), (900, vec![]), "verify finds the table exact");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_archiver_keeps_its_table_in_a_postgresql_catalog_over_tls() {
    let cluster = MockCluster::new(1).unwrap();
    let bootstrap = cluster.bootstrap_servers();
    cluster.create_topic("invoices", 2, 1).unwrap();
    let produced = produce(&bootstrap, "invoices", 2, 0..400, 40).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let name = unique("archiver");
    let settings = postgres_settings(&bootstrap, dir.path(), "invoices", &name);
    let (archiver, store) = start_archiver(settings.clone()).await;
    let catalog = catalog::open(&catalog_of(&settings).location, &name, store.clone()).unwrap();
    let ident = TableIdent { namespace: "kafka".into(), name: "invoices".into() };
    wait_for_table(catalog.as_ref(), &ident, &produced).await;
    archiver.shutdown().await.unwrap();
    pyiceberg_reads_each_record_once(&pyiceberg_uri(), &name, dir.path(), "invoices", &produced);
    let answer = catalog.check().await.unwrap();
    assert!(answer.contains("postgresql://") && answer.ends_with(": 1 tables"), "{answer}");
}

/// A catalog whose tables an administrator made in Iceberg's JDBC schema V0 (no `iceberg_type`), in a
/// schema of their own, for a user who may read and write them but not create tables: it commits.
#[tokio::test(flavor = "multi_thread")]
async fn a_user_without_create_rights_commits_to_tables_made_for_it_in_schema_v0() {
    let cluster = MockCluster::new(1).unwrap();
    let bootstrap = cluster.bootstrap_servers();
    cluster.create_topic("refunds", 2, 1).unwrap();
    let produced = produce(&bootstrap, "refunds", 2, 0..200, 40).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (config, store) = archive_mock_topic(&bootstrap, dir.path(), "refunds", &produced).await;
    let prefix = config.store.dest.prefix().clone();
    let role = unique("committer").replace('-', "_");
    let admin = format!("{}?sslmode=disable&password={}", env("KSA_TEST_POSTGRES"), env("KSA_TEST_POSTGRES_PASSWORD"));
    let (db, connection) = tokio_postgres::connect(&admin, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    db.batch_execute(&format!(
        "CREATE SCHEMA {role};
         CREATE TABLE {role}.iceberg_tables (catalog_name VARCHAR(255) NOT NULL, table_namespace VARCHAR(255) NOT NULL,
           table_name VARCHAR(255) NOT NULL, metadata_location VARCHAR(1000), previous_metadata_location VARCHAR(1000),
           PRIMARY KEY (catalog_name, table_namespace, table_name));
         CREATE TABLE {role}.iceberg_namespace_properties (catalog_name VARCHAR(255) NOT NULL,
           namespace VARCHAR(255) NOT NULL, property_key VARCHAR(255) NOT NULL, property_value VARCHAR(1000),
           PRIMARY KEY (catalog_name, namespace, property_key));
         CREATE ROLE {role} LOGIN PASSWORD 'r0le-pw';
         GRANT USAGE ON SCHEMA {role} TO {role};
         GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA {role} TO {role};
         ALTER ROLE {role} SET search_path = {role};"
    ))
    .await
    .unwrap();
    let url = env("KSA_TEST_POSTGRES").replace("//archiver@", &format!("//{role}@"));
    let settings = Settings {
        iceberg_catalog: Some(url),
        iceberg_catalog_password: Some("r0le-pw".into()),
        ..postgres_settings(&bootstrap, dir.path(), "refunds", "v0")
    };
    let location = catalog_of(&settings).location;
    let committer = Committer {
        store: store.clone(),
        catalog: catalog::open(&location, "v0", store.clone()).unwrap(),
        prefix,
        max_files: 1000,
        recent: Default::default(),
    };
    let table = TopicTable {
        ident: TableIdent { namespace: "kafka".into(), name: "refunds".into() },
        topic: "refunds".into(),
        width: None,
    };
    let report = committer.commit(&table, &[0, 1], 1_000).await.unwrap();
    assert_eq!((report.records, report.failed.len()), (200, 0), "{report:?}");
    let rows = db.query_one(&format!("SELECT count(*) FROM {role}.iceberg_tables"), &[]).await.unwrap();
    assert_eq!(rows.get::<_, i64>(0), 1, "the table's row is in the schema made for the user");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wrong_password_or_an_untrusted_certificate_is_refused_saying_why() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn ObjectStore> = Arc::new(kafka_s3_archiver::store::LocalStore::new(dir.path()).unwrap());
    let good = postgres_settings("127.0.0.1:9", dir.path(), "t", "checks");
    let wrong = Settings { iceberg_catalog_password: Some("not-the-password".into()), ..good.clone() };
    let untrusted = Settings { iceberg_ca: None, ..good.clone() };
    for (settings, why) in [(wrong, "password authentication failed"), (untrusted, "certificate")] {
        let catalog = catalog::open(&catalog_of(&settings).location, "checks", store.clone()).unwrap();
        let error = catalog.check().await.unwrap_err().to_string();
        assert!(error.contains(why) && !error.contains("not-the-password"), "{why}: {error}");
    }
    let catalog = catalog::open(&catalog_of(&good).location, "checks", store).unwrap();
    let answer = catalog.check().await.unwrap();
    assert!(answer.ends_with(": 0 tables"), "{answer}");
}

/// The table flags of an archiver process committing to the test's PostgreSQL, catalog `name`.
fn table_flags(name: &str) -> Vec<String> {
    let catalog = format!("{}?sslmode=require", env("KSA_TEST_POSTGRES"));
    [
        "--table",
        "iceberg",
        "--iceberg-catalog",
        &catalog,
        "--iceberg-ca",
        &env("KSA_TEST_CA"),
        "--iceberg-catalog-password",
        &env("KSA_TEST_POSTGRES_PASSWORD"),
        "--iceberg-catalog-name",
        name,
        "--table-commit-interval",
        "1s",
    ]
    .map(String::from)
    .to_vec()
}

/// Archiver A commits to the table, then its next commit, planned on the table as it was, is held at
/// its metadata file's PUT (as a process stalled mid-commit would be). Meanwhile archiver B, of another
/// group (no Kafka commits in common), commits the same files. Then A's PUT is let go: its commit
/// reaches the catalog after B's, is refused as a conflict, planned again on B's table, and adds nothing.
#[tokio::test(flavor = "multi_thread")]
async fn a_zombies_commit_landing_after_another_groups_adds_nothing_twice() {
    let topic = unique("late-commit");
    create_topic(&topic, 2).await;
    let mut produced = produce(&brokers(), &topic, 2, 0..200, 40).await.unwrap();
    let dest = TestDest::s3().await;
    let proxy = S3Proxy::start(&s3_endpoint()).await;
    let (name, spool) = (unique("zombie"), tempfile::tempdir().unwrap());
    let table_name = topic.replace('-', "_");
    let mut a_args = through(archiver_args(&dest, &unique("ga"), &topic, 50, &spool.path().join("a")), &proxy.url);
    a_args.extend(table_flags(&name));
    a_args.extend(["--s3-attempt-timeout".into(), "120s".into()]); // the held PUT waits, not retried
    let mut a = ArchiverProcess::spawn("zombie-a", &a_args);
    let store = dest.store().await;
    let settings = postgres_settings("127.0.0.1:9", spool.path(), &topic, &name);
    let catalog = catalog::open(&catalog_of(&settings).location, &name, store.clone()).unwrap();
    let ident = TableIdent { namespace: "kafka".into(), name: table_name.clone() };
    wait_for_table(catalog.as_ref(), &ident, &produced).await;

    // From now on A's next metadata file is held: its next commit stalls between planning and the swap.
    let held = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let hold_once = held.clone();
    proxy.set_rule(move |req| {
        let metadata = req.kind == Kind::PutData && req.key.ends_with(".metadata.json");
        if metadata && !hold_once.swap(true, std::sync::atomic::Ordering::SeqCst) {
            Fault::HoldUntilReleased
        } else {
            Fault::Pass
        }
    });
    for (p, records) in produce(&brokers(), &topic, 2, 200..400, 40).await.unwrap() {
        produced.entry(p).or_default().extend(records);
    }
    let started = std::time::Instant::now();
    while !held.load(std::sync::atomic::Ordering::SeqCst) {
        a.assert_running();
        assert!(started.elapsed().as_secs() < 60, "A never committed the new files; log:\n{}", a.log_text());
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let mut b_args = archiver_args(&dest, &unique("gb"), &topic, 50, &spool.path().join("b"));
    b_args.extend(table_flags(&name));
    let mut b = ArchiverProcess::spawn("zombie-b", &b_args);
    wait_for_table(catalog.as_ref(), &ident, &produced).await;
    proxy.release_held();
    wait_log(&mut a, "another committer had added what this round planned").await;
    assert!(a.terminate().success() && b.terminate().success(), "A:\n{}\nB:\n{}", a.log_text(), b.log_text());
    pyiceberg_reads_each_record_once(&pyiceberg_uri(), &name, spool.path(), &table_name, &produced);
    let prefix = dest.prefix();
    let checked = check_tables(store, &prefix, &catalog_of(&settings), std::slice::from_ref(&topic)).await.unwrap();
    assert_eq!((checked[0].records, checked[0].problems.clone()), (400, vec![]), "verify finds the table exact");
}

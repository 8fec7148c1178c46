//! Iceberg tables on the SQL catalog in PostgreSQL (the real server `localstack/start.sh` runs, password
//! authentication over TLS): committers racing on a table nobody has created add each archived file once;
//! an archiver keeps its table up to date; pyiceberg (its SqlCatalog through psycopg2) reads every record
//! once; verify holds the table against the archive; a wrong password or an untrusted certificate says so.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::{
    archive_mock_topic, env, mock_settings, pyiceberg_reads_each_record_once, start_archiver, unique, wait_for_table,
};
use kafka_s3_archiver::archive::keys::{classify, ArchiveKey};
use kafka_s3_archiver::commands::demo::generate::produce;
use kafka_s3_archiver::commands::verify::tables::check_tables;
use kafka_s3_archiver::config::{CatalogConfig, Settings, TableFormat};
use kafka_s3_archiver::store::{list_all, ObjectStore};
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
    let objects = list_all(store.as_ref(), &prefix.topic_folder("payments")).await.unwrap();
    let objects = objects.iter().filter(|k| matches!(classify(&prefix, k), ArchiveKey::Data(_))).count();
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

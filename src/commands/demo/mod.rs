//! `demo`: the whole loop with no services. An in-process Kafka mock cluster (librdkafka's), generated
//! records, an archive in a local directory, a crash mid-way (no flush, no commit), a restart under a new
//! consumer group (so Kafka's committed offsets are lost and only the archive knows the position), and
//! an independent check that every produced record is in the archive exactly once, bytes equal; with
//! Parquet, also in the topic's Iceberg table (a SQL catalog in the demo's folder) exactly once.

pub mod check;
pub mod cli;
pub mod generate;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::mocking::MockCluster;
use thiserror::Error;

use crate::archive::object_key::Prefix;
use crate::archive::record::Record;
use crate::commands::demo::check::{archived_ends, compare, read_topic, CheckError, Comparison};
use crate::commands::demo::generate::produce;
use crate::commands::verify::tables::check_tables;
use crate::commands::verify::{verify, VerifyOptions};
use crate::config::{ArchiverConfig, ConfigError, Settings, TableFormat};
use crate::encode::Format;
use crate::service::archiver::{Archiver, ArchiverError};
use crate::store::{self, list_all, ObjectStore, Role, StoreError};

const TOPIC: &str = "demo-orders";
/// The topic's Iceberg table (its name in SQL identifier characters).
const TOPIC_TABLE: &str = "demo_orders";
const PARTITIONS: i32 = 3;

#[derive(Debug, Error)]
pub enum DemoError {
    #[error("the Kafka mock cluster failed: {0}")]
    Kafka(#[from] rdkafka::error::KafkaError),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Archiver(#[from] ArchiverError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Check(#[from] CheckError),
    #[error(transparent)]
    Verify(#[from] crate::commands::verify::VerifyError),
    #[error("timed out after {0:?} waiting for {1}")]
    Timeout(Duration, &'static str),
    #[error("the archive does not match what was produced: {0:?}")]
    Mismatch(Comparison),
    #[error("verify found {0} problems in the archive")]
    Problems(usize),
    #[error(transparent)]
    Table(#[from] crate::table::committer::TableError),
}

pub struct DemoOptions {
    pub records: usize,
    pub dir: PathBuf,
    pub format: Format,
}

async fn wait_for(
    what: &'static str,
    timeout: Duration,
    mut done: impl AsyncFnMut() -> Result<bool, DemoError>,
) -> Result<(), DemoError> {
    let started = Instant::now();
    while !done().await? {
        if started.elapsed() > timeout {
            return Err(DemoError::Timeout(timeout, what));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

fn settings(bootstrap: &str, group: &str, opts: &DemoOptions) -> Settings {
    // Parquet files also go to the topic's Iceberg table, on a SQL catalog in the demo's folder.
    let table = (opts.format == Format::Parquet).then(|| Settings {
        table: Some(TableFormat::Iceberg),
        iceberg_catalog: Some(format!("sqlite://{}", opts.dir.join("catalog.db").display())),
        table_commit_interval: Some("1s".parse().expect("valid duration")),
        ..Settings::default()
    });
    let table = table.unwrap_or_default();
    Settings {
        brokers: Some(bootstrap.to_string()),
        group: Some(group.to_string()),
        topics: Some(vec![TOPIC.to_string()]),
        dest: Some(format!("file://{}", opts.dir.join("archive").display())),
        format: Some(opts.format),
        roll_records: Some(1_200),
        roll_age: Some("2s".parse().expect("valid duration")),
        spool_dir: Some(opts.dir.join("spool")),
        kafka_flags: Some(vec!["session.timeout.ms=6000".into(), "heartbeat.interval.ms=500".into()]),
        ..table
    }
}

/// Runs the demo; prints what it does. Ok only when the final check is exact.
pub async fn run(opts: DemoOptions) -> Result<Comparison, DemoError> {
    let started = Instant::now();
    let cluster = MockCluster::new(1)?;
    let bootstrap = cluster.bootstrap_servers();
    cluster.create_topic(TOPIC, PARTITIONS, 1)?;
    println!("1. started an in-process Kafka mock cluster ({bootstrap}) with topic {TOPIC} ({PARTITIONS} partitions)");

    let produced = produce(&bootstrap, TOPIC, PARTITIONS, 0..opts.records, 64).await?;
    let total: usize = produced.values().map(Vec::len).sum();
    println!("2. produced {total} records (keys, binary and null values, headers, timestamps)");

    let first = settings(&bootstrap, "demo-archiver-1", &opts).resolve(None)?;
    let store: Arc<dyn ObjectStore> = store::open(&first.store.dest, &first.store.settings, Role::Archive).await?;
    let prefix = first.store.dest.prefix().clone();
    println!("3. archiving to {} as {} files (group demo-archiver-1)", first.store.dest, opts.format);
    archive_then_crash(&first, &store, &prefix, total as u64).await?;

    let second = settings(&bootstrap, "demo-archiver-2", &opts).resolve(None)?;
    println!("5. restarted with a NEW consumer group (demo-archiver-2): Kafka knows no position, the archive does");
    let last_offsets: BTreeMap<i32, i64> =
        produced.iter().filter_map(|(p, recs)| recs.last().map(|r| (*p, r.offset))).collect();
    archive_to_the_end(&second, &store, &prefix, &last_offsets).await?;

    let comparison = check(&store, &prefix, &produced).await?;
    let options = VerifyOptions {
        prefix: prefix.clone(),
        topics: vec![TOPIC.to_string()],
        partitions: vec![],
        deep: true,
        brokers: Some((bootstrap.clone(), vec![])),
        concurrency: 8,
        strict: false,
    };
    let mut report = verify(store.as_ref(), &options).await?;
    let catalog = second.table.as_ref().map(|t| &t.catalog);
    if let Some(catalog) = catalog {
        report.tables = check_tables(store.clone(), &prefix, catalog, &[TOPIC.to_string()]).await?;
    }
    let tables = catalog.map_or("", |_| " --iceberg-catalog");
    println!("8. verify --deep --brokers{tables} (the same check an operator runs):");
    for line in report.table().lines() {
        println!("   {line}");
    }
    println!("   archive: {}/archive ({:.1}s in all)", opts.dir.display(), started.elapsed().as_secs_f64());
    if !comparison.is_exact() {
        println!("RESULT: FAILED");
        Err(DemoError::Mismatch(comparison))
    } else if catalog.is_some() && report.tables.iter().map(|t| t.records).sum::<u64>() != total as u64 {
        println!("RESULT: FAILED (the Iceberg table does not hold every record)");
        Err(DemoError::Problems(1))
    } else if !report.is_clean() {
        println!("RESULT: FAILED");
        Err(DemoError::Problems(report.problem_count()))
    } else {
        let table =
            catalog.map_or(String::new(), |c| format!(", and in Iceberg table {}.{TOPIC_TABLE} once", c.namespace));
        println!("RESULT: OK: every produced record is in the archive exactly once, bytes equal{table}");
        Ok(comparison)
    }
}

/// Archives until 40% of the records are archived and some are in open files, then crashes.
async fn archive_then_crash(
    config: &ArchiverConfig,
    store: &Arc<dyn ObjectStore>,
    prefix: &Prefix,
    total: u64,
) -> Result<(), DemoError> {
    let archiver = Archiver::start(config, store.clone())?;
    let metrics = archiver.metrics();
    let crash_at = (total * 2 / 5).max(1);
    wait_for("the first archiver to archive 40% of the records", Duration::from_secs(120), async || {
        let archived = metrics.records_archived.get();
        Ok(archived >= crash_at && (metrics.records_received.get() > archived || archived == total))
    })
    .await?;
    archiver.crash().await;
    let objects_before = list_all(store.as_ref(), &prefix.topic_folder(TOPIC)).await?.len();
    println!(
        "4. CRASHED the archiver: {} records were archived in {objects_before} objects, {} more were in open files \
         and are lost with it; nothing was flushed or committed",
        metrics.records_archived.get(),
        metrics.records_received.get().saturating_sub(metrics.records_archived.get()),
    );
    Ok(())
}

/// Archives until every partition's last produced offset is archived, then stops gracefully.
async fn archive_to_the_end(
    config: &ArchiverConfig,
    store: &Arc<dyn ObjectStore>,
    prefix: &Prefix,
    last_offsets: &BTreeMap<i32, i64>,
) -> Result<(), DemoError> {
    let archiver = Archiver::start(config, store.clone())?;
    let metrics = archiver.metrics();
    // Its partitions recovered first: with few records the first archiver may have archived them all,
    // and only an archiver that holds the partitions commits them to the table.
    wait_for("the restarted archiver to reach the end of every partition", Duration::from_secs(180), async || {
        let recovered = metrics.recoveries.get() >= last_offsets.len() as u64;
        Ok(recovered && archived_ends(store.as_ref(), prefix, TOPIC).await? == *last_offsets)
    })
    .await?;
    archiver.shutdown().await?;
    println!(
        "6. the restarted archiver recovered every partition's position by listing the archive ({} list requests) \
         and archived the remaining {} records",
        metrics.recovery_list_requests.get(),
        metrics.records_archived.get(),
    );
    Ok(())
}

/// Reads the archive back and compares it with what was produced.
async fn check(
    store: &Arc<dyn ObjectStore>,
    prefix: &Prefix,
    produced: &BTreeMap<i32, Vec<Record>>,
) -> Result<Comparison, DemoError> {
    let contents = read_topic(store.as_ref(), prefix, TOPIC).await?;
    let objects: usize = contents.partitions.values().map(|p| p.objects.len()).sum();
    let comparison = compare(produced, &contents);
    println!(
        "7. check (read back {objects} objects): expected {}, archived {}, missing {}, duplicates {}, different {}, \
         unexpected {}, mislabelled objects {}",
        comparison.expected,
        comparison.archived,
        comparison.missing,
        comparison.duplicates,
        comparison.different,
        comparison.unexpected,
        comparison.mislabelled_objects
    );
    Ok(comparison)
}

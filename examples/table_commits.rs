//! A table's cost: writes N data objects (a small real Parquet file each) and their claims over 4
//! partitions of a new S3 bucket, as the archiver names them, then commits them to the topic's Iceberg
//! table (SQL catalog on SQLite) in commits of 1,000, 100 and 10 files — one commit a minute holds what
//! a minute archived — counting the store's and the catalog's requests and timing the commits. A commit's
//! cost grows with the files it adds (a footer read each), not with the table's history (old snapshots
//! expire, small manifests are merged).
//!
//! Usage (services from localstack/with-services.sh): localstack/bench-table.sh [files]

#[path = "common/bucket.rs"]
mod bucket;
#[path = "common/counting.rs"]
mod counting;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use arrow_array::{Int64Array, RecordBatch, TimestampMillisecondArray};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use async_trait::async_trait;
use bucket::new_bucket;
use bytes::Bytes;
use counting::Counting;
use kafka_s3_archiver::archive::object_key::{FileKind, Prefix};
use kafka_s3_archiver::archive::partition::{OffsetRange, TopicPartition};
use kafka_s3_archiver::commands::demo::generate::write_synthetic_objects;
use kafka_s3_archiver::table::catalog::sql::SqlCatalog;
use kafka_s3_archiver::table::catalog::{Catalog, CatalogError, Committed, Loaded, TableIdent};
use kafka_s3_archiver::table::committer::{Committer, TopicTable};
use kafka_s3_archiver::table::iceberg::metadata::Change;
use serde_json::Value;

/// Records per data object.
const RECORDS: i64 = 100;
const PARTITIONS: i32 = 4;
/// PUTs in flight while writing the archive.
const WRITERS: usize = 64;

/// Counts the catalog's requests.
struct CountingCatalog {
    inner: SqlCatalog,
    calls: AtomicU64,
}

#[async_trait]
impl Catalog for CountingCatalog {
    async fn load(&self, table: &TableIdent) -> Result<Option<Loaded>, CatalogError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.inner.load(table).await
    }

    async fn create(&self, table: &TableIdent, metadata: &Value) -> Result<Option<Loaded>, CatalogError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.inner.create(table, metadata).await
    }

    async fn check(&self) -> Result<String, CatalogError> {
        self.inner.check().await
    }

    async fn commit(
        &self,
        t: &TableIdent,
        base: &Loaded,
        change: &Change,
        now: i64,
    ) -> Result<Committed, CatalogError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.inner.commit(t, base, change, now).await
    }
}

/// A data object's body: a Parquet file of the archive's offset and timestamp columns.
fn parquet_body() -> Bytes {
    let schema = Arc::new(Schema::new(vec![
        Field::new("offset", DataType::Int64, false),
        Field::new("timestamp", DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())), true),
    ]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(Int64Array::from_iter_values(0..RECORDS)),
            Arc::new(TimestampMillisecondArray::from_iter_values(0..RECORDS).with_timezone("UTC")),
        ],
    )
    .expect("a batch");
    let mut writer = parquet::arrow::ArrowWriter::try_new(Vec::new(), schema, None).expect("a writer");
    writer.write(&batch).expect("written");
    Bytes::from(writer.into_inner().expect("a file"))
}

#[tokio::main]
async fn main() {
    let files: i64 = std::env::args().nth(1).map_or(1000, |a| a.parse().expect("files"));
    let store = new_bucket("tables", "localstack/bench-table.sh").await;
    let dir = tempfile::tempdir().expect("a directory");
    println!("| files a commit | commits | catalog requests | LISTs | GETs | PUTs | others | seconds | ms a commit |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for per_commit in [1000, 100, 10] {
        let prefix = Prefix::new(&format!("per{per_commit}"));
        let ranges = (0..files).map(|i| {
            let tp = TopicPartition::new("orders", (i % i64::from(PARTITIONS)) as i32).expect("partition");
            let start = i / i64::from(PARTITIONS) * RECORDS;
            (tp, OffsetRange::new(start, start + RECORDS - 1).expect("range"))
        });
        write_synthetic_objects(store.as_ref(), &prefix, ranges, WRITERS, (FileKind::Parquet, parquet_body()))
            .await
            .expect("write the archive");
        let counting = Arc::new(Counting::new(store.clone()));
        let db = dir.path().join(format!("catalog-{per_commit}.db"));
        let catalog = Arc::new(CountingCatalog {
            inner: SqlCatalog::sqlite(&db, "default", counting.clone()).expect("catalog"),
            calls: AtomicU64::new(0),
        });
        let committer = Committer {
            store: counting.clone(),
            catalog: catalog.clone(),
            prefix: prefix.clone(),
            max_files: per_commit,
            recent: Default::default(),
        };
        let table = TopicTable::new("kafka", "orders", None);
        let partitions: Vec<i32> = (0..PARTITIONS).collect();
        let (started, mut commits, mut added) = (Instant::now(), 0u64, 0);
        loop {
            let report = committer.commit(&table, &partitions, 60_000 * commits as i64).await.expect("commit");
            if report.snapshot_id.is_none() {
                break;
            }
            (commits, added) = (commits + 1, added + report.files);
        }
        let secs = started.elapsed().as_secs_f64();
        assert_eq!(added as i64, files, "every file once");
        let [lists, gets, puts, others] = counting.counts();
        let calls = catalog.calls.load(Ordering::Relaxed);
        let ms = secs * 1000.0 / commits as f64;
        println!("| {per_commit} | {commits} | {calls} | {lists} | {gets} | {puts} | {others} | {secs:.2} | {ms:.0} |");
    }
}

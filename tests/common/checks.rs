//! Reading an archive back the way the tests check it: exactly once, and `verify`.

use std::collections::BTreeMap;

use kafka_s3_archiver::archive::object_key::ObjectKey;
use kafka_s3_archiver::store::list_all;

use super::kafka::brokers;
use super::s3::TestDest;

/// `verify --deep` in-process, and the independent comparison with what was produced: both must be
/// clean, and every object must have exactly one claim.
pub async fn assert_exactly_once(
    dest: &TestDest,
    topic: &str,
    produced: &BTreeMap<i32, Vec<kafka_s3_archiver::archive::record::Record>>,
) {
    let store = dest.store().await;
    let contents = kafka_s3_archiver::commands::demo::check::read_topic(store.as_ref(), &dest.prefix(), topic)
        .await
        .expect("read archive");
    let c = kafka_s3_archiver::commands::demo::check::compare(produced, &contents);
    assert!(c.is_exact(), "archive differs from what was produced: {c:?}");
    assert!(contents.ignored_keys.is_empty(), "unexpected keys: {:?}", contents.ignored_keys);
    let report = verify_deep(dest, topic).await;
    assert!(report.is_clean(), "{}", report.table());
    assert!(report.partitions.iter().all(|p| p.claims == p.objects), "{}", report.table());
}

pub async fn verify_deep(dest: &TestDest, topic: &str) -> kafka_s3_archiver::commands::verify::VerifyReport {
    run_verify(dest, topic, true, None).await
}

/// `verify` of `topic` compared with the test broker's logs (`--brokers`), reading objects when `deep`.
pub async fn verify_with_brokers(
    dest: &TestDest,
    topic: &str,
    deep: bool,
) -> kafka_s3_archiver::commands::verify::VerifyReport {
    run_verify(dest, topic, deep, Some((brokers(), vec![]))).await
}

async fn run_verify(
    dest: &TestDest,
    topic: &str,
    deep: bool,
    brokers: Option<(String, Vec<(String, String)>)>,
) -> kafka_s3_archiver::commands::verify::VerifyReport {
    let store = dest.store().await;
    let options = kafka_s3_archiver::commands::verify::VerifyOptions {
        prefix: dest.prefix(),
        topics: vec![topic.to_string()],
        partitions: vec![],
        deep,
        brokers,
        concurrency: 8,
        strict: false,
    };
    kafka_s3_archiver::commands::verify::verify(store.as_ref(), &options).await.expect("verify")
}

/// The topic's data objects with their bytes.
pub async fn fetch_objects(dest: &TestDest, topic: &str) -> Vec<(ObjectKey, bytes::Bytes)> {
    let (store, prefix) = (dest.store().await, dest.prefix());
    let mut objects = Vec::new();
    for raw in list_all(store.as_ref(), &prefix.topic_folder(topic)).await.unwrap() {
        objects.push((ObjectKey::parse(&prefix, &raw).unwrap(), store.get(&raw).await.unwrap()));
    }
    objects
}

/// DuckDB's one-row answer to `SELECT <select>` over the objects (as local files, all schemas merged
/// by name), its values joined by `|`.
pub fn duckdb_row(objects: &[(ObjectKey, bytes::Bytes)], select: &str) -> String {
    let local = tempfile::tempdir().unwrap();
    for (key, data) in objects {
        let path = local.path().join(key.relative());
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, data).unwrap();
    }
    let script = r#"
import duckdb, sys
row = duckdb.sql(f"SELECT {sys.argv[2]} FROM read_parquet('{sys.argv[1]}/**/*.parquet', union_by_name=true)").fetchall()[0]
print("|".join(str(x) for x in row))
"#;
    let out = std::process::Command::new(super::env("KSA_TEST_PYTHON"))
        .args(["-c", script, &local.path().display().to_string(), select])
        .output()
        .expect("run duckdb");
    assert!(out.status.success(), "duckdb failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// DuckDB's one-row answer to `SELECT <select>` over the Iceberg table whose current metadata file is
/// at `metadata` (read by its iceberg extension, as `t`), its values joined by `|`.
pub fn duckdb_iceberg_row(metadata: &str, select: &str) -> String {
    let script = r#"
import duckdb, glob, os, sys
site = os.path.dirname(os.path.dirname(duckdb.__file__))
config = {"autoload_known_extensions": False, "autoinstall_known_extensions": False}
con = duckdb.connect(config=config)
con.execute("SET enable_progress_bar = false")
for ext in ["avro", "iceberg"]:
    con.execute(f"LOAD '{glob.glob(f'{site}/duckdb_extension_{ext}/extensions/*/{ext}.duckdb_extension')[0]}'")
row = con.sql(f"SELECT {sys.argv[2]} FROM iceberg_scan('{sys.argv[1]}') AS t").fetchall()[0]
print("|".join(str(x) for x in row))
"#;
    let out = std::process::Command::new(super::env("KSA_TEST_DUCKDB_ICEBERG_PYTHON"))
        .args(["-c", script, metadata, select])
        .output()
        .expect("run duckdb");
    assert!(out.status.success(), "duckdb failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// The columns of the value struct of an Iceberg table of [`super::cart`]s and what pyiceberg reads of
/// it: the coupons it holds and the first cart with one, and the amounts' sum. `load` is Python
/// that sets `t` to the table (`sys.argv[1:]` are `args`).
pub fn read_carts_table(load: &str, args: &[String]) -> Vec<String> {
    let script = format!(
        r#"
import sys
import pyarrow.compute as pc
{load}
print("columns", [f.name for f in t.schema().find_field("value").field_type.fields])
value = t.scan().to_arrow()["value"].combine_chunks()
coupons = value.field("coupon")
print("coupons", len(coupons) - coupons.null_count, pc.min(value.field("cart").filter(pc.is_valid(coupons))).as_py())
print("amount", pc.sum(value.field("amount")).as_py())
files = lambda f: len(list(t.scan(row_filter=f).plan_files()))
print("files for the last carts", files("value.cart >= 390"), "of", files("value.cart >= 0"))
"#
    );
    let out = std::process::Command::new(super::env("KSA_TEST_PYTHON"))
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .expect("run pyiceberg");
    assert!(out.status.success(), "pyiceberg failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().lines().map(str::to_string).collect()
}

/// What [`read_carts_table`] reads of a table holding carts `0..n` (n > 200), each once, in files of
/// `per_file` records of `partitions` partitions: the files of carts `n - 10..` are the last of each
/// partition (an engine prunes the others by their column bounds).
pub fn carts_table(n: usize, per_file: usize, partitions: usize) -> Vec<String> {
    let amounts: usize = (0..n).map(|i| i % 50).sum();
    let coupons = n - super::CARTS_WITHOUT_COUPON;
    vec![
        "columns ['amount', 'cart', 'coupon']".to_string(),
        format!("coupons {coupons} {}", super::CARTS_WITHOUT_COUPON),
        format!("amount {amounts}"),
        format!("files for the last carts {partitions} of {}", files(n, per_file, partitions)),
    ]
}

/// The files of carts `0..n` in files of `per_file` records of each of `partitions` partitions (a file
/// is cut where the coupons start too: its schema changes there).
fn files(n: usize, per_file: usize, partitions: usize) -> usize {
    let per_partition = |before: usize| before.div_ceil(partitions).div_ceil(per_file);
    partitions * (per_partition(super::CARTS_WITHOUT_COUPON) + per_partition(n - super::CARTS_WITHOUT_COUPON))
}

/// pyiceberg's SqlCatalog `catalog` at `uri` (SQLAlchemy's: `sqlite:///…`, `postgresql+psycopg2://…`)
/// reads every produced record of `kafka.<table>` once, each partition's through its last offset (also
/// when the scan is bounded by time, which prunes by the table's time partitions), and the positions the
/// table records. `dir` is its warehouse (unused: the tables exist); tables on the
/// test S3 server are read there.
pub fn pyiceberg_reads_each_record_once(
    uri: &str,
    catalog: &str,
    dir: &std::path::Path,
    table: &str,
    produced: &std::collections::BTreeMap<i32, Vec<kafka_s3_archiver::archive::record::Record>>,
) {
    let script = r#"
import os, sys
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import And, EqualTo, GreaterThanOrEqual, LessThan
# Tables on the test S3 server (LocalStack or moto) are read with its endpoint and keys.
s3 = {"s3.endpoint": os.environ.get("KSA_TEST_S3_ENDPOINT", ""), "s3.region": "us-east-1",
      "s3.access-key-id": "test", "s3.secret-access-key": "test"}
catalog = SqlCatalog(sys.argv[2], uri=sys.argv[1], warehouse=f"file://{sys.argv[3]}", **s3)
t = catalog.load_table(f"kafka.{sys.argv[4]}")
rows = t.scan().to_arrow()
pairs = list(zip(rows["partition"].to_pylist(), rows["offset"].to_pylist()))
print("rows", len(pairs), len(set(pairs)))
# A scan bounded by time (2000 to 2100, in microseconds) prunes by the table's time partitions: a file
# recorded under a wrong partition value is left out of it.
in_time = And(GreaterThanOrEqual("timestamp", 946684800000000), LessThan("timestamp", 4102444800000000))
for p in sorted({p for p, _ in pairs}):
    print("partition", p, max(o for q, o in pairs if q == p), t.scan(row_filter=f"partition == {p}").to_arrow().num_rows,
          t.scan(row_filter=And(EqualTo("partition", p), in_time)).to_arrow().num_rows)
for k, v in sorted(t.properties.items()):
    if k.startswith("kafka-s3-archiver.position."):
        print("position", k.rsplit(".", 1)[1], v)
"#;
    let out = std::process::Command::new(super::env("KSA_TEST_PYTHON"))
        .args(["-c", script, uri, catalog, &dir.display().to_string(), table])
        .output()
        .expect("run pyiceberg");
    assert!(out.status.success(), "pyiceberg failed: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let total: usize = produced.values().map(Vec::len).sum();
    let mut expected = vec![format!("rows {total} {total}")];
    for (p, records) in produced {
        let last = records.last().unwrap().offset;
        expected.push(format!("partition {p} {last} {0} {0}", records.len()));
    }
    for (p, records) in produced {
        expected.push(format!("position {p} {}", records.last().unwrap().offset + 1));
    }
    assert_eq!(text.lines().collect::<Vec<_>>(), expected);
}

/// Waits (up to 60 s) until the table's position of each partition is right after its last record.
pub async fn wait_for_table(
    catalog: &dyn kafka_s3_archiver::table::catalog::Catalog,
    ident: &kafka_s3_archiver::table::catalog::TableIdent,
    produced: &std::collections::BTreeMap<i32, Vec<kafka_s3_archiver::archive::record::Record>>,
) {
    let wanted: Vec<String> = produced.iter().map(|(p, r)| format!("{p}={}", r.last().unwrap().offset + 1)).collect();
    let started = std::time::Instant::now();
    loop {
        let positions: Vec<String> = match catalog.load(ident).await.unwrap() {
            Some(t) => produced
                .keys()
                .filter_map(|p| {
                    t.metadata["properties"][format!("kafka-s3-archiver.position.{p}")]
                        .as_str()
                        .map(|v| format!("{p}={v}"))
                })
                .collect(),
            None => Vec::new(),
        };
        if positions == wanted {
            return;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "the table is at {positions:?}, not {wanted:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}

/// Apache Spark (pyspark with Iceberg's Spark runtime, `localstack/spark/check.py`) reads `table`
/// (`namespace.name`) of the SQL catalog `default` in the SQLite database `db`: every record once, the
/// positions, and time travel to each snapshot. Its report.
pub fn spark_reads_the_table(db: &std::path::Path, warehouse: &std::path::Path, table: &str) -> String {
    let out = std::process::Command::new(super::env("KSA_TEST_SPARK_PYTHON"))
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/localstack/spark/check.py"))
        .args([&db.display().to_string(), &warehouse.display().to_string(), table, &super::env("KSA_TEST_SPARK_JARS")])
        .env("SPARK_LOCAL_IP", "127.0.0.1")
        .output()
        .expect("run pyspark");
    let report = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "Spark's check failed: {report}\n{}", String::from_utf8_lossy(&out.stderr));
    report
}

/// How many data objects (not claims, not tables) the archive holds of `topic`.
pub async fn data_objects(
    store: &dyn kafka_s3_archiver::store::ObjectStore,
    prefix: &kafka_s3_archiver::archive::object_key::Prefix,
    topic: &str,
) -> usize {
    use kafka_s3_archiver::archive::keys::{classify, ArchiveKey};
    let keys = kafka_s3_archiver::store::list_all(store, &prefix.topic_folder(topic)).await.unwrap();
    keys.iter().filter(|k| matches!(classify(prefix, k), ArchiveKey::Data(_))).count()
}

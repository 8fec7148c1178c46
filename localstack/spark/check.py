"""Apache Spark reads an Iceberg table of the archiver's SQL catalog on SQLite (catalog `default`) through
Iceberg's JDBC catalog: every record once (offsets from 0, no gaps), the table's positions right after
each partition's last record, and time travel to each snapshot holding exactly what the positions in its
and earlier summaries say. Prints what it read; exits non-zero saying what differs.
Usage: check.py CATALOG_DB WAREHOUSE_DIR NAMESPACE.TABLE JARS (tests/iceberg.rs, localstack/spark-check.sh)"""
import sys

from pyspark.sql import SparkSession

db, warehouse, name, jars = sys.argv[1:5]
POSITION = "kafka-s3-archiver.position."
# Iceberg's JDBC catalog names its rows after the Spark catalog: the demo's catalog is `default`.
spark = (
    SparkSession.builder.master("local[2]")
    .config("spark.jars", jars)
    .config("spark.driver.bindAddress", "127.0.0.1")
    .config("spark.driver.host", "127.0.0.1")
    .config("spark.ui.enabled", "false")
    .config("spark.ui.showConsoleProgress", "false")
    .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
    .config("spark.sql.catalog.default", "org.apache.iceberg.spark.SparkCatalog")
    .config("spark.sql.catalog.default.catalog-impl", "org.apache.iceberg.jdbc.JdbcCatalog")
    .config("spark.sql.catalog.default.uri", f"jdbc:sqlite:file:{db}")
    .config("spark.sql.catalog.default.warehouse", f"file://{warehouse}")
    .getOrCreate()
)
spark.sparkContext.setLogLevel("ERROR")
table = f"`default`.{name}"

def per_partition(version=None):
    at = f" VERSION AS OF {version}" if version else ""
    rows = spark.sql(
        f"SELECT partition, count(*), count(DISTINCT `offset`), min(`offset`), max(`offset`) FROM {table}{at} GROUP BY partition"
    ).collect()
    return {r[0]: tuple(r[1:]) for r in rows}

failures = []
now = per_partition()
properties = {r[0]: r[1] for r in spark.sql(f"SHOW TBLPROPERTIES {table}").collect()}
positions = {int(k[len(POSITION):]): int(v) for k, v in properties.items() if k.startswith(POSITION)}
total = sum(c for c, _, _, _ in now.values())
print(f"spark: {total} records in {len(now)} partitions; positions {positions}")
for p, (count, distinct, first, last) in sorted(now.items()):
    if count != distinct or first != 0 or last + 1 != count or positions.get(p) != last + 1:
        failures.append(f"partition {p}: {count} rows, {distinct} distinct offsets {first}..{last}, position {positions.get(p)}")

# Time travel: each snapshot holds offsets 0 up to the position its summary (or an earlier one's) records.
# In commit order: from the current snapshot back along its parents (commits in one millisecond tie on time).
rows = spark.sql(f"SELECT snapshot_id, parent_id, summary FROM {table}.snapshots").collect()
by_id = {r[0]: r for r in rows}
parents = {r[1] for r in rows}
(current,) = [r for r in rows if r[0] not in parents]
snapshots = [current]
while snapshots[-1][1] in by_id:
    snapshots.append(by_id[snapshots[-1][1]])
snapshots.reverse()
covered = {}
for snapshot_id, _, summary in snapshots:
    covered.update({int(k[len(POSITION):]): int(v) for k, v in summary.items() if k.startswith(POSITION)})
    then = per_partition(snapshot_id)
    seen = {p: last + 1 for p, (count, distinct, first, last) in then.items() if count == distinct == last + 1 and first == 0}
    wanted = {p: at for p, at in covered.items() if at > 0}
    if seen != wanted:
        failures.append(f"snapshot {snapshot_id}: holds {then}, its summaries say {wanted}")
if not any(f.startswith("snapshot") for f in failures):
    print(f"spark: time travel to each of {len(snapshots)} snapshots holds what its summary says")
if failures:
    sys.exit("spark check FAILED:\n" + "\n".join(failures))
print("spark check OK: every record once, positions right after each partition's last record")

"""The table side of the Kafka Connect + Iceberg sink peer (run.sh beside this file), run with the services'
Python (KSA_TEST_PYTHON: boto3, pyarrow, pyiceberg).

  table.py wait  CATALOG_DB NAMESPACE TABLE RECORDS PID TIMEOUT_S
      Polls the JDBC catalog's SQLite file every 0.1 s for the table's metadata location and, when it
      changes, reads that metadata file from S3 (boto3) for the current snapshot's total-records. Prints
      "FIRST_COMMIT_EPOCH DONE_EPOCH" (wall-clock seconds at which the first snapshot and the snapshot
      holding RECORDS rows or more were seen) once the table holds RECORDS rows; exits non-zero if
      process PID (Kafka Connect) dies or TIMEOUT_S passes first. Polling is a cheap SQLite query, so the
      poller takes almost no CPU from the measured process.

  table.py check CATALOG_DB NAMESPACE TABLE WAREHOUSE END_OFFSETS
      Reads the table once with pyiceberg (SqlCatalog on the same SQLite file) and checks that it holds
      one row for every offset 0..end-1 of every partition and nothing else. END_OFFSETS is
      "p:end,p:end,...". Prints a summary line to stderr; exits non-zero with the reason otherwise.

S3 settings come from KSA_TEST_S3_ENDPOINT, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_REGION.
"""

import json
import os
import sqlite3
import sys
import time

CATALOG_NAME = "iceberg"  # the Iceberg sink's default catalog name (iceberg.catalog)


def die(msg):
    print(f"table.py: {msg}", file=sys.stderr)
    sys.exit(1)


def s3_client():
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=os.environ["KSA_TEST_S3_ENDPOINT"],
        region_name=os.environ.get("AWS_REGION", "us-east-1"),
        config=Config(s3={"addressing_style": "path"}),
    )


def metadata_location(db, namespace, table):
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    except sqlite3.OperationalError:
        return None  # the catalog file does not exist yet
    try:
        row = con.execute(
            "SELECT metadata_location FROM iceberg_tables "
            "WHERE catalog_name = ? AND table_namespace = ? AND table_name = ?",
            (CATALOG_NAME, namespace, table),
        ).fetchone()
        return row[0] if row else None
    except sqlite3.OperationalError:
        return None  # the catalog tables are not created yet, or locked for a moment
    finally:
        con.close()


def current_total_records(s3, location):
    """The current snapshot's total-records of the metadata file at location (s3://bucket/key), or None."""
    bucket, key = location.removeprefix("s3://").removeprefix("s3a://").split("/", 1)
    meta = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    current = meta.get("current-snapshot-id")
    if current is None or current == -1:
        return None
    for snap in meta.get("snapshots", []):
        if snap["snapshot-id"] == current:
            return int(snap["summary"]["total-records"])
    return None


def wait(db, namespace, table, records, pid, timeout_s):
    records, pid, deadline = int(records), int(pid), time.time() + float(timeout_s)
    s3 = s3_client()
    seen, first, total = None, None, None
    while True:
        now = time.time()
        loc = metadata_location(db, namespace, table)
        if loc and loc != seen:
            seen = loc
            total = current_total_records(s3, loc)
            if total is not None:
                print(f"table.py: {now:.3f} snapshot with {total} rows", file=sys.stderr)
                if first is None:
                    first = now
                if total >= records:
                    print(f"{first:.3f} {now:.3f}")
                    return
        if not os.path.exists(f"/proc/{pid}"):
            die(f"Kafka Connect (pid {pid}) exited before the table held {records} rows (it holds {total})")
        if now > deadline:
            die(f"timed out after {timeout_s} s: the table holds {total} rows of {records}")
        time.sleep(0.1)


def check(db, namespace, table, warehouse, end_offsets):
    import pyarrow.compute as pc
    from pyiceberg.catalog.sql import SqlCatalog

    ends = {int(p): int(e) for p, e in (x.split(":") for x in end_offsets.split(","))}
    expected = sum(ends.values())
    catalog = SqlCatalog(
        CATALOG_NAME,
        uri=f"sqlite:///{db}",
        warehouse=warehouse,
        **{
            "s3.endpoint": os.environ["KSA_TEST_S3_ENDPOINT"],
            "s3.access-key-id": os.environ["AWS_ACCESS_KEY_ID"],
            "s3.secret-access-key": os.environ["AWS_SECRET_ACCESS_KEY"],
            "s3.region": os.environ.get("AWS_REGION", "us-east-1"),
            "s3.force-virtual-addressing": "false",
        },
    )
    tbl = catalog.load_table((namespace, table))
    snap = tbl.current_snapshot()
    if snap is None:
        die("the table has no snapshot")
    arrow = tbl.scan(selected_fields=("kafka_partition", "kafka_offset")).to_arrow()
    rows = arrow.num_rows
    if rows != expected:
        die(f"the table holds {rows} rows, the topic {expected} records")
    for col in ("kafka_partition", "kafka_offset"):
        if arrow[col].null_count:
            die(f"{arrow[col].null_count} rows have a null {col}")
    stats = arrow.group_by("kafka_partition").aggregate(
        [("kafka_offset", "count"), ("kafka_offset", "count_distinct"), ("kafka_offset", "min"), ("kafka_offset", "max")]
    ).to_pylist()
    got = {s["kafka_partition"]: s for s in stats}
    if set(got) - set(ends):
        die(f"rows of partitions {sorted(set(got) - set(ends))}, which the topic does not have")
    for p, end in sorted(ends.items()):
        s = got.get(p)
        if end == 0:
            if s:
                die(f"partition {p} is empty but the table holds {s['kafka_offset_count']} rows of it")
            continue
        if s is None:
            die(f"partition {p} (offsets 0..{end - 1}) has no rows in the table")
        if not (s["kafka_offset_count"] == s["kafka_offset_count_distinct"] == end
                and s["kafka_offset_min"] == 0 and s["kafka_offset_max"] == end - 1):
            die(
                f"partition {p}: {s['kafka_offset_count']} rows, {s['kafka_offset_count_distinct']} distinct offsets "
                f"from {s['kafka_offset_min']} to {s['kafka_offset_max']}; want each of 0..{end - 1} once"
            )
    pairs = pc.count_distinct(
        pc.add(pc.multiply(arrow["kafka_partition"].cast("int64"), 1 << 40), arrow["kafka_offset"])
    ).as_py()
    if pairs != expected:
        die(f"{pairs} distinct (partition, offset) pairs, want {expected}")
    summary = snap.summary
    print(
        f"table.py: checked {rows} rows, {pairs} distinct (partition, offset) pairs, every offset of "
        f"{len(ends)} partitions; {len(tbl.snapshots())} snapshots, "
        f"{summary.get('total-data-files')} data files, {summary.get('total-files-size')} bytes",
        file=sys.stderr,
    )


if __name__ == "__main__":
    cmd, args = (sys.argv[1], sys.argv[2:]) if len(sys.argv) > 1 else ("", [])
    if cmd == "wait" and len(args) == 6:
        wait(*args)
    elif cmd == "check" and len(args) == 5:
        check(*args)
    else:
        die(__doc__)

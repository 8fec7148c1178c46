"""Watches the Flink peer's output in S3 for run.sh (run with KSA_TEST_PYTHON: pyarrow).

  watch.py wait BUCKET PREFIX RECORDS PID START TIMEOUT CLK_TCK
      Polls s3://BUCKET/PREFIX for committed Parquet files (part-*.parquet; FileSink's in-progress data is
      a pending multipart upload or a hidden "_..._tmp_" object, never such a file) and sums their row
      counts (from the footers) until they reach RECORDS. Then, at once, reads the JVM's (PID) CPU time
      and peak RSS from /proc and prints one JSON object: seconds and first_commit_seconds (since START,
      the epoch time the JVM was started), cpu_seconds, peak_rss_kib, files. Fails if the JVM exits or
      TIMEOUT seconds pass first.
  watch.py check BUCKET PREFIX RECORDS PARTITIONS
      Exactly once: the committed files hold RECORDS rows, RECORDS distinct (partition, offset) pairs, and
      each partition's offsets run from 0 without a gap. Prints what it found to stderr; fails otherwise.

S3 is KSA_TEST_S3_ENDPOINT with AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_REGION.
"""
import json
import os
import sys
import time
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow import fs


def s3():
    endpoint = urlparse(os.environ["KSA_TEST_S3_ENDPOINT"])
    return fs.S3FileSystem(
        endpoint_override=endpoint.netloc,
        scheme=endpoint.scheme,
        access_key=os.environ["AWS_ACCESS_KEY_ID"],
        secret_key=os.environ["AWS_SECRET_ACCESS_KEY"],
        region=os.environ.get("AWS_REGION", "us-east-1"),
        allow_bucket_creation=False,
    )


def committed_files(s3fs, bucket, prefix):
    """Paths of the committed part files: part-*.parquet, nothing hidden (".x" or "_x")."""
    infos = s3fs.get_file_info(fs.FileSelector(f"{bucket}/{prefix}", recursive=True, allow_not_found=True))
    return sorted(
        i.path
        for i in infos
        if i.type == fs.FileType.File and i.base_name.startswith("part") and i.base_name.endswith(".parquet")
    )


def jvm_usage(pid, clk_tck):
    """(CPU seconds, user + system, and peak RSS in KiB) of a live process."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()  # after the command's name, which may hold spaces
    utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15 of proc(5)
    with open(f"/proc/{pid}/status") as f:
        hwm = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    return (utime + stime) / clk_tck, hwm


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wait(bucket, prefix, records, pid, start, timeout, clk_tck):
    s3fs = s3()
    rows = {}  # path -> row count of each committed file seen
    first_commit = None
    while True:
        if not alive(pid):
            sys.exit(f"watch.py: the JVM (pid {pid}) exited before the files held {records} rows (they held {sum(rows.values())})")
        for path in committed_files(s3fs, bucket, prefix):
            if path not in rows:
                rows[path] = pq.read_metadata(path, filesystem=s3fs).num_rows
                if first_commit is None:
                    first_commit = time.time() - start
        total = sum(rows.values())
        if total >= records:
            seconds = time.time() - start
            cpu, rss = jvm_usage(pid, clk_tck)
            print(json.dumps({"seconds": round(seconds, 2), "first_commit_seconds": round(first_commit, 2),
                              "cpu_seconds": round(cpu, 2), "peak_rss_kib": rss, "files": len(rows)}))
            return
        if time.time() - start > timeout:
            sys.exit(f"watch.py: timed out after {timeout} s with {total} of {records} rows in {len(rows)} committed files")
        time.sleep(0.5)


def check(bucket, prefix, records, partitions):
    s3fs = s3()
    paths = committed_files(s3fs, bucket, prefix)
    schema = pa.schema([("partition", pa.int32()), ("offset", pa.int64())])
    rows = pa.concat_tables([schema.empty_table()] + [
        pq.read_table(p, filesystem=s3fs, columns=["partition", "offset"]).cast(schema) for p in paths])
    problems = []
    if rows.num_rows != records:
        problems.append(f"{rows.num_rows} rows, not {records}")
    distinct = rows.group_by(["partition", "offset"]).aggregate([]).num_rows
    if distinct != rows.num_rows:
        problems.append(f"{rows.num_rows - distinct} duplicate (partition, offset) pairs")
    by_partition = rows.group_by("partition").aggregate(
        [("offset", "min"), ("offset", "max"), ("offset", "count_distinct")]).to_pylist()
    for p in by_partition:
        if not 0 <= p["partition"] < partitions:
            problems.append(f"partition {p['partition']} is not one of the topic's {partitions}")
        elif p["offset_min"] != 0 or p["offset_max"] != p["offset_count_distinct"] - 1:
            problems.append(f"partition {p['partition']}: offsets {p['offset_min']}..{p['offset_max']} with "
                            f"{p['offset_count_distinct']} distinct, not 0..{p['offset_count_distinct'] - 1}")
    meta = pq.read_metadata(paths[0], filesystem=s3fs) if paths else None
    codec = meta.row_group(0).column(0).compression if meta and meta.num_row_groups else "?"
    print(f"watch.py: {len(paths)} committed files, {rows.num_rows} rows, {distinct} distinct (partition, offset), "
          f"{len(by_partition)} partitions, {codec} compression", file=sys.stderr)
    if problems:
        sys.exit("watch.py: NOT exactly once: " + "; ".join(problems))


if __name__ == "__main__":
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "wait":
        wait(args[0], args[1], int(args[2]), int(args[3]), float(args[4]), float(args[5]), int(args[6]))
    elif mode == "check":
        check(args[0], args[1], int(args[2]), int(args[3]))
    else:
        sys.exit(f"watch.py: unknown mode {mode}")

#!/usr/bin/env bash
# A peer of the benchmark: Apache Flink 2.2.0 in one JVM (a local environment: a MiniCluster) running
# KafkaSource (flink-connector-kafka 5.0.0-2.2, from the earliest offsets) -> FileSink of bulk Parquet
# (flink-parquet, through Avro's GenericRecord, zstd) to s3:// (flink-s3-fs-hadoop 2.2.0), exactly once by
# checkpoints every 5 s (a part file is rolled at each checkpoint and committed when it completes).
#
# Usage: localstack/peers/flink-filesink/run.sh TOPIC PARTITIONS RECORDS BUCKET WORKDIR
# with the test services' environment (localstack/with-services.sh), TOPIC holding exactly RECORDS
# records in PARTITIONS partitions. Builds the job once (not measured), creates BUCKET, starts the JVM and
# polls S3 until the committed Parquet files hold RECORDS rows, then checks exactly once (RECORDS distinct
# (partition, offset) pairs, every offset of each partition from 0) and prints as its last line:
#   PEER {"contender":...,"seconds":S,"first_commit_seconds":F,"cpu_seconds":C,"peak_rss_kib":K,"records":N}
# seconds and first_commit_seconds count from the JVM's start; CPU and peak RSS are the JVM's, read as the
# last rows became visible. Logs: WORKDIR/flink.log (the JVM), WORKDIR/build.log (a build).
# Settings (environment): FLINK_PEER_PARALLELISM (a number, or "partitions"; default 2), FLINK_PEER_HEAP
# (-Xmx; default 1g), FLINK_PEER_TIMEOUT (seconds; default 900).
#
# Tuning: 1,000,000 records of 1 KiB random values (keys, 0-3 headers) in 4 partitions, on the 2-core
# machine; the checkpoint interval stays 5 s. The machine was shared with other benchmarks, so only runs
# started on an idle machine count (when it was loaded, every setting took 26-75 s). Medians (ranges):
#   parallelism  heap    runs  seconds            first file  CPU s              peak RSS MiB
#   1            -Xmx1g  6     21.5 (17.8-25.8)   7.7         25.8 (24.2-26.9)   1103 (1014-1294)
#   1            -Xmx2g  8     20.2 (17.9-21.5)   6.2         24.0 (22.3-25.6)   1056 (1023-1247)
#   2            -Xmx1g  8     19.8 (17.4-21.5)   8.0         26.8 (25.4-29.7)   1321 (1178-1344)  <- default
#   2            -Xmx2g  3     21.4 (19.5-22.0)   9.2         26.8 (26.7-28.0)   1821 (1503-1965)
#   4            -Xmx1g  5     23.3 (19.5-37.4)   11.3        31.3 (26.8-37.8)   1375 (1362-1375)
#   4            -Xmx2g  3     21.6 (20.0-24.1)   9.8         29.8 (28.1-33.6)   2176 (2025-2310)
# Parallelism 2 with 1 GiB of heap was the fastest (~50,000 records/s), by less than the noise: parallelism 1
# with 2 GiB is as fast within it, with ~10 % less CPU and ~20 % less memory. More parallelism than cores
# only costs CPU; a bigger heap only memory. Every run was checked exactly once.
set -euo pipefail

[ $# -eq 5 ] || { echo "usage: $0 TOPIC PARTITIONS RECORDS BUCKET WORKDIR" >&2; exit 2; }
TOPIC=$1 PARTITIONS=$2 RECORDS=$3 BUCKET=$4 WORKDIR=$5
HERE=$(cd "$(dirname "$0")" && pwd)
die() { echo "flink-filesink/run.sh: $*" >&2; exit 1; }
say() { echo "flink-filesink/run.sh: $*" >&2; }

for v in KSA_TEST_BROKERS KSA_TEST_S3_ENDPOINT KSA_TEST_PYTHON AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY; do
  [ -n "${!v:-}" ] || die "$v is not set: run under localstack/with-services.sh"
done
PARALLELISM=${FLINK_PEER_PARALLELISM:-2}
[ "$PARALLELISM" = partitions ] && PARALLELISM=$PARTITIONS
HEAP=${FLINK_PEER_HEAP:-1g}
TIMEOUT=${FLINK_PEER_TIMEOUT:-900}
CHECKPOINT_MS=5000
mkdir -p "$WORKDIR"
WORKDIR=$(cd "$WORKDIR" && pwd)

# shellcheck source=../../java.sh
source "$HERE/../../java.sh"
JAVA=$(find_java 17) || die "Flink 2.2 needs Java 17+ and none was found ($JAVA)"

# 1. Build (once per version of the sources): the job's jar and its dependencies' jars, from Maven Central.
pom_property() { sed -n "s:.*<$1>\(.*\)</$1>.*:\1:p" "$HERE/pom.xml"; }
FLINK_VERSION=$(pom_property flink.version)
FLINK_KAFKA_VERSION=$(pom_property flink.kafka.version)
DIR="${KSA_SERVICES_DIR:-$HOME/.cache/kafka-s3-archiver/services}/peers/flink-filesink-$FLINK_VERSION-kafka-$FLINK_KAFKA_VERSION"
SOURCES_HASH=$(cd "$HERE" && find pom.xml src -type f | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16)
if [ "$(cat "$DIR/.installed" 2>/dev/null)" != "$SOURCES_HASH" ]; then
  command -v mvn >/dev/null || die "mvn is not installed (it builds the Flink job): apt-get install maven"
  say "building the Flink $FLINK_VERSION job (its jars from Maven Central) into $DIR"
  rm -rf "$DIR" && mkdir -p "$DIR" && cp -r "$HERE/pom.xml" "$HERE/src" "$DIR/"
  (cd "$DIR" && JAVA_HOME=$(dirname "$(dirname "$(readlink -f "$JAVA")")") \
    mvn -q -B package dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=lib) \
    >"$WORKDIR/build.log" 2>&1 || { tail -n 30 "$WORKDIR/build.log" >&2; die "mvn could not build the job (log above: $WORKDIR/build.log)"; }
  echo "$SOURCES_HASH" >"$DIR/.installed"
fi
# flink-s3-fs-hadoop bundles Hadoop and some common libraries unrelocated (it is meant to be a plugin with a
# class loader of its own): it goes last, so the job's own versions of those libraries come first.
CLASSPATH="$DIR/target/peer-flink-filesink-1.jar"
for jar in "$DIR"/lib/*.jar; do
  case "$jar" in */flink-s3-fs-hadoop-*) ;; *) CLASSPATH="$CLASSPATH:$jar" ;; esac
done
CLASSPATH="$CLASSPATH:$DIR/lib/flink-s3-fs-hadoop-$FLINK_VERSION.jar"

# 2. The bucket.
"$KSA_TEST_PYTHON" - "$BUCKET" <<'PY' || die "could not create the bucket $BUCKET"
import os, sys, boto3
from botocore.config import Config
boto3.client("s3", endpoint_url=os.environ["KSA_TEST_S3_ENDPOINT"], config=Config(s3={"addressing_style": "path"})).create_bucket(Bucket=sys.argv[1])
PY

# 3. The job, unbounded; whatever happens next, the JVM is stopped when this script ends.
JVM_PID=""
trap '[ -z "$JVM_PID" ] || kill -9 "$JVM_PID" 2>/dev/null || true' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
mkdir -p "$WORKDIR/tmp" # FileSink's S3 writer buffers the parts of its uploads here
# The JDK modules that Flink's own launch scripts open to it (env.java.opts.all in its config.yaml).
OPENS=(--add-exports=java.base/sun.net.util=ALL-UNNAMED --add-exports=java.rmi/sun.rmi.registry=ALL-UNNAMED)
for p in java.lang java.net java.io java.nio sun.nio.ch java.lang.reflect java.text java.time java.util \
  java.util.concurrent java.util.concurrent.atomic java.util.concurrent.locks; do
  OPENS+=("--add-opens=java.base/$p=ALL-UNNAMED")
done
say "running Flink $FLINK_VERSION (parallelism $PARALLELISM, -Xmx$HEAP, checkpoints every $CHECKPOINT_MS ms) on $TOPIC -> s3://$BUCKET/flink/"
START=$(date +%s.%N) # the measurement starts with the JVM
"$JAVA" "-Xmx$HEAP" "${OPENS[@]}" -Djava.io.tmpdir="$WORKDIR/tmp" -Daws.java.v1.disableDeprecationAnnouncement=true \
  -cp "$CLASSPATH" peers.flink.ArchiveJob "$KSA_TEST_BROKERS" "$TOPIC" "flink-filesink-$BUCKET-$$" \
  "s3://$BUCKET/flink/" "$PARALLELISM" "$CHECKPOINT_MS" >"$WORKDIR/flink.log" 2>&1 &
JVM_PID=$!

# 4. and 5. Wait for every record to be committed (S3 is listed every 0.5 s); the JVM's CPU time and peak RSS
# at that moment.
CLK_TCK=$(getconf CLK_TCK)
RESULT=$("$KSA_TEST_PYTHON" "$HERE/watch.py" wait "$BUCKET" flink/ "$RECORDS" "$JVM_PID" "$START" "$TIMEOUT" "$CLK_TCK") \
  || { tail -n 40 "$WORKDIR/flink.log" >&2; die "the job did not commit $RECORDS rows (its log, above: $WORKDIR/flink.log)"; }
kill -9 "$JVM_PID" 2>/dev/null || true
wait "$JVM_PID" 2>/dev/null || true
JVM_PID=""
say "committed: $RESULT"

# The check: exactly once.
"$KSA_TEST_PYTHON" "$HERE/watch.py" check "$BUCKET" flink/ "$RECORDS" "$PARTITIONS" || die "the output is not exactly once"

# 6. The result line.
"$KSA_TEST_PYTHON" - "$RESULT" "$RECORDS" \
  "Apache Flink $FLINK_VERSION FileSink, Parquet (zstd, parallelism $PARALLELISM, checkpoints $((CHECKPOINT_MS / 1000)) s, -Xmx$HEAP)" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
line = {"contender": sys.argv[3], "seconds": r["seconds"], "first_commit_seconds": r["first_commit_seconds"],
        "cpu_seconds": r["cpu_seconds"], "peak_rss_kib": r["peak_rss_kib"], "records": int(sys.argv[2])}
print("PEER " + json.dumps(line, separators=(",", ":")))
PY

#!/usr/bin/env bash
# A benchmark peer: Kafka Connect (standalone) with Apache Iceberg's Kafka Connect sink, archiving a topic
# into an Iceberg table of Parquet files on S3, timed from the start of the Connect process until every
# record is in the table's current snapshot.
#
# Usage: localstack/peers/kafka-connect-iceberg/run.sh TOPIC PARTITIONS RECORDS BUCKET WORKDIR
#   run with the test services' environment (localstack/with-services.sh): KSA_TEST_BROKERS,
#   KSA_TEST_S3_ENDPOINT, KSA_TEST_PYTHON, KSA_TEST_KAFKA_DIR, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
#   AWS_REGION; TOPIC must hold exactly RECORDS records in PARTITIONS partitions, from offset 0.
#
# What it does:
#   1. installs (once, not timed) Kafka Connect's runtime and the Iceberg sink with what it needs from
#      Maven Central into $KSA_SERVICES_DIR/peers/kafka-connect-iceberg-<versions>: the runtime on the
#      worker's class path, the sink in an isolated plugin folder (plugin.path) as Iceberg's own
#      distribution zip lays it out, with S3FileIO (iceberg-aws + iceberg-aws-bundle), Parquet, Hadoop's
#      client jars (parquet-hadoop needs its Configuration), sqlite-jdbc and our KeyIntoValue transform;
#   2. creates BUCKET, and the sink's control topic (a name of its own for each run);
#   3. starts Kafka Connect standalone (fresh offsets file, connector and so consumer group named for the
#      run) with the sink reading TOPIC from the earliest offset into the table bench.records, created by
#      the sink, of a JDBC catalog on SQLite in WORKDIR (warehouse s3://BUCKET/warehouse, S3FileIO with
#      path-style access to KSA_TEST_S3_ENDPOINT), committing every 5 s; Parquet with zstd, Iceberg's
#      default codec;
#   4. polls the catalog (table.py wait) until the current snapshot holds RECORDS rows, noting when the
#      first snapshot appeared;
#   5. reads the JVM's CPU time (utime+stime, children included, from /proc/PID/stat) and peak RSS
#      (VmHWM), kills it, then checks the table once (table.py check): RECORDS rows, RECORDS distinct
#      (partition, offset) pairs, every offset 0..end-1 of each partition;
#   6. prints, as its last line of stdout, PEER {"contender":...,"seconds":...,...} (JSON).
# Logs go to stderr and to WORKDIR (connect.log, connect.out). Exits non-zero, with no PEER line, when
# anything fails; Kafka Connect is stopped whatever happens.
#
# Rows: key and value are bytes (ByteArrayConverter), so the record is made a struct with Connect's own
# transforms and one of ours:
#   HoistField$Value (field "value")  -> {value}
#   InsertField$Value (partition.field, offset.field) -> {value, kafka_partition, kafka_offset}
#   ksa.peer.KeyIntoValue (KeyIntoValue.java beside this file) -> {value, kafka_partition, kafka_offset, key}
# Connect has no transform that puts the key into the value, and the sink writes only the value. Headers
# are not kept (the sink has no place for them without another transform of ours).
#
# Settings tried: 1,000,000 records of 1 KiB random values (keys, some nulls, 0-3 headers) in 4
# partitions, on the 2-core machine, 3-14 runs each, interleaved, while other work ran beside (load
# average 1 to 12, so the figures swing by 2x); all with offset.flush.interval.ms=1000 and 5 s commits.
# Seconds to the last commit (median, min-max), to the first commit (median), CPU s (median, min), peak
# RSS MB (median):
#   tasks  -Xmx  fetch(*)   seconds            first   CPU s        RSS MB
#   1      1g    default    38.8 (21.3-49.1)   14.2    26.9 (23.3)  1189   n=14
#   4      1g    default    36.6 (20.9-65.3)   17.1    29.3 (26.8)  1210   n=11
#   1      2g    default    26.5 (21.1-46.4)   10.6    25.5 (23.7)  1492   n=12
#   1      1g    larger     26.2 (21.7-45.7)   11.2    26.2 (24.0)  1234   n=11
#   1      512m  default    22.5 (21.0-45.1)   10.5    26.9 (24.8)   740   n=12
#   1      2g    larger     21.6 (20.6-28.8)   10.5    24.9 (23.6)  1652   n=8   <- the default
#   4      2g    larger     21.5 (21.4-28.8)   12.1    28.5 (25.4)  1908   n=3
#   1      512m  larger     26.8 (21.4-37.5)   10.7    30.1 (26.6)   767   n=7
#   (*) default: max.poll.records=500, max.partition.fetch.bytes=1 MiB; larger: 2000 and 4 MiB.
# On a quiet machine every setting ends at ~21 s: the table grows only at the 5 s commits (the first at
# ~10 s, once the JVM is up, the table created and an interval passed), and the sink takes in ~90,000
# records/s between them, so the last records land in the commit at ~20 s whatever the settings; the
# settings show in how often a run slips to the next commit under load, and in CPU and memory. One task
# per partition costs ~10 % more CPU and commits later (more workers to collect); -Xmx512m keeps RSS at
# ~750 MB for ~5 % more CPU (more GC, and much more with the larger fetches); Kafka's own
# connect-standalone.sh default, -Xmx2g, with larger fetches was the fastest and cheapest in CPU, so it
# is the default here (KSA_PEER_HEAP=512m is the frugal alternative).
set -euo pipefail

KAFKA_VERSION="4.1.1"
ICEBERG_VERSION="1.12.0"
HADOOP_VERSION="3.4.1"       # hadoop-client-api/-runtime (shaded); Iceberg's own connector zip has hadoop-common 3.4
SQLITE_JDBC_VERSION="3.50.3.0"
LOG4J_VERSION="2.24.3"

# Tuned settings (see above); the environment may override them, for trying others.
TASKS="${KSA_PEER_TASKS:-1}"                  # tasks.max ("partitions": one per partition)
HEAP="${KSA_PEER_HEAP:-2g}"                   # the JVM's -Xmx
MAX_POLL_RECORDS="${KSA_PEER_MAX_POLL_RECORDS:-2000}"              # consumer max.poll.records
MAX_PARTITION_FETCH_BYTES="${KSA_PEER_MAX_PARTITION_FETCH_BYTES:-4194304}"  # consumer max.partition.fetch.bytes
# offset.flush.interval.ms: Connect polls the topic for at most this long before calling the sink's put(),
# the only place where the sink's workers answer the coordinator's commit requests; at the default 60 s,
# once the topic is drained the last commit waits up to a minute (measured: 126 s for 10,000 records).
OFFSET_FLUSH_INTERVAL_MS="${KSA_PEER_OFFSET_FLUSH_INTERVAL_MS:-1000}"
COMMIT_INTERVAL_MS=5000                       # iceberg.control.commit.interval-ms, as the benchmark asks
TIMEOUT_S="${KSA_PEER_TIMEOUT_S:-1800}"       # give up waiting for the table after this long

HERE="$(cd "$(dirname "$0")" && pwd)"
SERVICES_DIR="${KSA_SERVICES_DIR:-$HOME/.cache/kafka-s3-archiver/services}"
PEER_DIR="$SERVICES_DIR/peers/kafka-connect-iceberg-$KAFKA_VERSION-$ICEBERG_VERSION"

die() { echo "kafka-connect-iceberg/run.sh: $*" >&2; exit 1; }
say() { echo "kafka-connect-iceberg/run.sh: $*" >&2; }

[ $# -eq 5 ] || die "usage: $0 TOPIC PARTITIONS RECORDS BUCKET WORKDIR"
TOPIC="$1" PARTITIONS="$2" RECORDS="$3" BUCKET="$4" WORKDIR="$5"
[[ "$PARTITIONS" =~ ^[1-9][0-9]*$ ]] || die "PARTITIONS must be a positive number, not '$PARTITIONS'"
[[ "$RECORDS" =~ ^[1-9][0-9]*$ ]] || die "RECORDS must be a positive number, not '$RECORDS'"
if [ "$TASKS" = partitions ]; then TASKS="$PARTITIONS"; fi
[[ "$TASKS" =~ ^[1-9][0-9]*$ ]] || die "KSA_PEER_TASKS must be a positive number or 'partitions', not '$TASKS'"
for v in KSA_TEST_BROKERS KSA_TEST_S3_ENDPOINT KSA_TEST_PYTHON KSA_TEST_KAFKA_DIR AWS_ACCESS_KEY_ID \
  AWS_SECRET_ACCESS_KEY AWS_REGION; do
  [ -n "${!v:-}" ] || die "$v is not set: run under localstack/with-services.sh"
done

# shellcheck source-path=SCRIPTDIR source=../../java.sh
source "$HERE/../../java.sh"
JAVA=$(find_java 17) || die "Kafka Connect $KAFKA_VERSION needs Java 17+ and none was found ($JAVA)"

# A pom.xml of DEPENDENCY... (group:artifact:version) in DIR, whose runtime jars mvn copies to DIR/libs.
# Usage: fetch_jars DIR DEPENDENCY...
fetch_jars() {
  local dir="$1" dep="" a g n v
  shift
  for a in "$@"; do
    IFS=: read -r g n v <<<"$a"
    dep="$dep
    <dependency><groupId>$g</groupId><artifactId>$n</artifactId><version>$v</version></dependency>"
  done
  mkdir -p "$dir"
  cat >"$dir/pom.xml" <<POM
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.kafka-s3-archiver</groupId>
  <artifactId>peer-$(basename "$dir")</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>$dep
  </dependencies>
</project>
POM
  if ! (cd "$dir" && mvn -q -B dependency:copy-dependencies -DoutputDirectory=libs -DincludeScope=runtime) >"$dir/mvn.log" 2>&1; then
    cat "$dir/mvn.log" >&2
    die "mvn could not fetch $* from Maven Central (see its output above)"
  fi
}

# Installs into PEER_DIR (once; again when KeyIntoValue.java changes):
#   connect/libs: the worker's class path (Connect's runtime, JSON converter, transforms, log4j 2);
#   plugins/iceberg-sink: the sink and its dependencies, plus our transform's jar.
install_peer() {
  [ -f "$PEER_DIR/.installed" ] && cmp -s "$HERE/KeyIntoValue.java" "$PEER_DIR/KeyIntoValue.java" && return 0
  command -v mvn >/dev/null || die "mvn is not installed (it fetches the jars from Maven Central): apt-get install maven"
  local javac
  javac="$(dirname "$(readlink -f "$JAVA")")/javac"
  [ -x "$javac" ] || die "no javac beside $JAVA (it compiles KeyIntoValue.java): apt-get install openjdk-17-jdk-headless"
  say "installing Kafka Connect $KAFKA_VERSION and Apache Iceberg's sink $ICEBERG_VERSION (jars from Maven Central) into $PEER_DIR"
  rm -rf "$PEER_DIR" && mkdir -p "$PEER_DIR"
  fetch_jars "$PEER_DIR/connect" \
    "org.apache.kafka:connect-runtime:$KAFKA_VERSION" "org.apache.kafka:connect-json:$KAFKA_VERSION" \
    "org.apache.kafka:connect-transforms:$KAFKA_VERSION" \
    "org.apache.logging.log4j:log4j-slf4j-impl:$LOG4J_VERSION" "org.apache.logging.log4j:log4j-core:$LOG4J_VERSION"
  fetch_jars "$PEER_DIR/plugin-pom" \
    "org.apache.iceberg:iceberg-kafka-connect:$ICEBERG_VERSION" "org.apache.iceberg:iceberg-parquet:$ICEBERG_VERSION" \
    "org.apache.iceberg:iceberg-aws:$ICEBERG_VERSION" "org.apache.iceberg:iceberg-aws-bundle:$ICEBERG_VERSION" \
    "org.apache.hadoop:hadoop-client-api:$HADOOP_VERSION" "org.apache.hadoop:hadoop-client-runtime:$HADOOP_VERSION" \
    "org.xerial:sqlite-jdbc:$SQLITE_JDBC_VERSION"
  mkdir -p "$PEER_DIR/plugins"
  mv "$PEER_DIR/plugin-pom/libs" "$PEER_DIR/plugins/iceberg-sink"
  ls "$PEER_DIR/connect/libs/connect-runtime-$KAFKA_VERSION.jar" \
    "$PEER_DIR/plugins/iceberg-sink/iceberg-kafka-connect-$ICEBERG_VERSION.jar" >/dev/null \
    || die "the Kafka Connect or Iceberg sink jars are missing from $PEER_DIR"
  # Our transform, with the service file that plugin.discovery=service_load finds it by.
  local build="$PEER_DIR/key-into-value"
  mkdir -p "$build/classes/META-INF/services"
  cp "$HERE/KeyIntoValue.java" "$PEER_DIR/"
  "$javac" --release 17 -d "$build/classes" -cp "$PEER_DIR/connect/libs/*" "$PEER_DIR/KeyIntoValue.java" >&2 \
    || die "javac could not compile KeyIntoValue.java (output above)"
  echo ksa.peer.KeyIntoValue >"$build/classes/META-INF/services/org.apache.kafka.connect.transforms.Transformation"
  "$(dirname "$javac")/jar" cf "$PEER_DIR/plugins/iceberg-sink/ksa-key-into-value.jar" -C "$build/classes" . \
    || die "could not make the jar of KeyIntoValue"
  touch "$PEER_DIR/.installed"
}

install_peer

mkdir -p "$WORKDIR"
WORKDIR="$(cd "$WORKDIR" && pwd)"
RUN_ID="$(date +%Y%m%d%H%M%S)-$$"
NAME="ksa-peer-iceberg-$RUN_ID"          # the connector, so its consumer group connect-$NAME
CONTROL_TOPIC="ksa-peer-iceberg-control-$RUN_ID"
NAMESPACE=bench
TABLE=records
CATALOG_DB="$WORKDIR/catalog.db"
WAREHOUSE="s3://$BUCKET/warehouse"
rm -f "$CATALOG_DB" "$WORKDIR/connect.offsets" "$WORKDIR/connect.log" "$WORKDIR/connect.out" "$WORKDIR/times"

# Stops what this script started (Kafka Connect, the poller), whatever happens.
CONNECT_PID=""
POLLER_PID=""
cleanup() {
  local pid
  for pid in "$POLLER_PID" "$CONNECT_PID"; do
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
      kill -9 "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
    fi
  done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

kafka_tool() { "$JAVA" -cp "$KSA_TEST_KAFKA_DIR/libs/*" "$@"; }

# The topic's partitions and offsets: each from 0, RECORDS in all.
earliest=$(kafka_tool org.apache.kafka.tools.GetOffsetShell --bootstrap-server "$KSA_TEST_BROKERS" --topic "$TOPIC" --time -2) \
  || die "could not read the earliest offsets of $TOPIC"
latest=$(kafka_tool org.apache.kafka.tools.GetOffsetShell --bootstrap-server "$KSA_TEST_BROKERS" --topic "$TOPIC" --time -1) \
  || die "could not read the end offsets of $TOPIC"
[ "$(grep -c . <<<"$latest")" -eq "$PARTITIONS" ] || die "$TOPIC has $(grep -c . <<<"$latest") partitions, not $PARTITIONS"
if awk -F: '$NF != 0 { bad = 1 } END { exit !bad }' <<<"$earliest"; then
  die "$TOPIC does not start at offset 0 in every partition: $(tr '\n' ' ' <<<"$earliest")"
fi
END_OFFSETS=$(awk -F: '{ printf "%s%s:%s", (NR > 1 ? "," : ""), $(NF-1), $NF }' <<<"$latest")
total=$(awk -F: '{ s += $NF } END { print s + 0 }' <<<"$latest")
[ "$total" -eq "$RECORDS" ] || die "$TOPIC holds $total records, not $RECORDS ($END_OFFSETS)"

kafka_tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$KSA_TEST_BROKERS" --create \
  --topic "$CONTROL_TOPIC" --partitions 1 --replication-factor 1 >&2 \
  || die "could not create the control topic $CONTROL_TOPIC"

"$KSA_TEST_PYTHON" - "$BUCKET" <<'PY' || die "could not create the bucket $BUCKET at $KSA_TEST_S3_ENDPOINT"
import os, sys, boto3
from botocore.config import Config
s3 = boto3.client("s3", endpoint_url=os.environ["KSA_TEST_S3_ENDPOINT"], region_name=os.environ["AWS_REGION"],
                  config=Config(s3={"addressing_style": "path"}))
try:
    s3.create_bucket(Bucket=sys.argv[1])
except s3.exceptions.BucketAlreadyOwnedByYou:
    pass
PY

cat >"$WORKDIR/log4j2.properties" <<EOF
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = $WORKDIR/connect.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
EOF

# The worker: standalone, its REST API on a free port, plugins found by their service files (no scan of
# the ~150 MB of jars), the sink's consumer settings.
cat >"$WORKDIR/worker.properties" <<EOF
bootstrap.servers=$KSA_TEST_BROKERS
key.converter=org.apache.kafka.connect.converters.ByteArrayConverter
value.converter=org.apache.kafka.connect.converters.ByteArrayConverter
offset.storage.file.filename=$WORKDIR/connect.offsets
offset.flush.interval.ms=$OFFSET_FLUSH_INTERVAL_MS
listeners=http://127.0.0.1:0
plugin.path=$PEER_DIR/plugins
plugin.discovery=service_load
consumer.auto.offset.reset=earliest
consumer.max.poll.records=$MAX_POLL_RECORDS
consumer.max.partition.fetch.bytes=$MAX_PARTITION_FETCH_BYTES
EOF

cat >"$WORKDIR/connector.properties" <<EOF
name=$NAME
connector.class=org.apache.iceberg.connect.IcebergSinkConnector
tasks.max=$TASKS
topics=$TOPIC
transforms=hoist,meta,key
transforms.hoist.type=org.apache.kafka.connect.transforms.HoistField\$Value
transforms.hoist.field=value
transforms.meta.type=org.apache.kafka.connect.transforms.InsertField\$Value
transforms.meta.partition.field=kafka_partition
transforms.meta.offset.field=kafka_offset
transforms.key.type=ksa.peer.KeyIntoValue
transforms.key.field=key
iceberg.tables=$NAMESPACE.$TABLE
iceberg.tables.auto-create-enabled=true
iceberg.control.topic=$CONTROL_TOPIC
iceberg.control.group-id-prefix=cg-control-$RUN_ID-
iceberg.control.commit.interval-ms=$COMMIT_INTERVAL_MS
iceberg.catalog.catalog-impl=org.apache.iceberg.jdbc.JdbcCatalog
iceberg.catalog.uri=jdbc:sqlite:$CATALOG_DB
iceberg.catalog.jdbc.schema-version=V1
iceberg.catalog.warehouse=$WAREHOUSE
iceberg.catalog.io-impl=org.apache.iceberg.aws.s3.S3FileIO
iceberg.catalog.s3.endpoint=$KSA_TEST_S3_ENDPOINT
iceberg.catalog.s3.path-style-access=true
iceberg.catalog.s3.access-key-id=$AWS_ACCESS_KEY_ID
iceberg.catalog.s3.secret-access-key=$AWS_SECRET_ACCESS_KEY
iceberg.catalog.client.region=$AWS_REGION
EOF

# The JVM options of Kafka's connect-standalone.sh (kafka-run-class.sh), with our heap.
say "starting Kafka Connect: $TASKS task(s), -Xmx$HEAP, offset.flush.interval.ms=$OFFSET_FLUSH_INTERVAL_MS, max.poll.records=$MAX_POLL_RECORDS, max.partition.fetch.bytes=$MAX_PARTITION_FETCH_BYTES; logs in $WORKDIR"
start=$(date +%s.%N)
"$JAVA" -Xms256m "-Xmx$HEAP" -server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 \
  -XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15 -Djava.awt.headless=true \
  "-Dlog4j2.configurationFile=$WORKDIR/log4j2.properties" -cp "$PEER_DIR/connect/libs/*" \
  org.apache.kafka.connect.cli.ConnectStandalone "$WORKDIR/worker.properties" "$WORKDIR/connector.properties" \
  >"$WORKDIR/connect.out" 2>&1 &
CONNECT_PID=$!

# The poller runs in the background so that a signal to this script (trapped above) ends the wait at once.
"$KSA_TEST_PYTHON" "$HERE/table.py" wait "$CATALOG_DB" "$NAMESPACE" "$TABLE" "$RECORDS" "$CONNECT_PID" "$TIMEOUT_S" \
  >"$WORKDIR/times" &
POLLER_PID=$!
if ! wait "$POLLER_PID"; then
  echo "--- the last lines of $WORKDIR/connect.log:" >&2
  tail -n 30 "$WORKDIR/connect.log" >&2 || true
  tail -n 10 "$WORKDIR/connect.out" >&2 || true
  die "the table did not reach $RECORDS rows (see above and $WORKDIR)"
fi
POLLER_PID=""
read -r first_commit done_at <"$WORKDIR/times"

# The JVM's CPU time and peak RSS, just before stopping it.
stat=$(cat "/proc/$CONNECT_PID/stat") || die "Kafka Connect (pid $CONNECT_PID) is gone before its CPU time was read"
hwm=$(awk '/^VmHWM:/ { print $2 }' "/proc/$CONNECT_PID/status")
read -r -a fields <<<"${stat##*) }"   # fields after "pid (comm) ": state is [0], utime [11] ... cstime [14]
ticks=$((fields[11] + fields[12] + fields[13] + fields[14]))
cleanup
CONNECT_PID=""

"$KSA_TEST_PYTHON" "$HERE/table.py" check "$CATALOG_DB" "$NAMESPACE" "$TABLE" "$WAREHOUSE" "$END_OFFSETS" \
  || die "the table failed its check (see above)"

tasks_words="$TASKS task"
[ "$TASKS" -eq 1 ] || tasks_words="${tasks_words}s"
contender="Kafka Connect $KAFKA_VERSION + Iceberg sink $ICEBERG_VERSION ($tasks_words, 5 s commits, JDBC/SQLite catalog, -Xmx$HEAP)"
LC_ALL=C awk -v c="$contender" -v s="$start" -v f="$first_commit" -v d="$done_at" -v t="$ticks" \
  -v hz="$(getconf CLK_TCK)" -v k="$hwm" -v n="$RECORDS" 'BEGIN {
  printf "PEER {\"contender\":\"%s\",\"seconds\":%.2f,\"first_commit_seconds\":%.2f,\"cpu_seconds\":%.2f,\"peak_rss_kib\":%d,\"records\":%d}\n",
    c, d - s, f - s, t / hz, k, n }'

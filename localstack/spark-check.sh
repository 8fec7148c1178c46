#!/usr/bin/env bash
# Spark reads the demo's Iceberg table: runs `demo` (its archive and SQL catalog on SQLite in a folder),
# then Apache Spark 4.0 (pyspark, with Apache Iceberg's Spark runtime 1.10.0 and sqlite-jdbc from Maven
# Central) reads the table through Iceberg's JDBC catalog on the same database file, and checks every
# record is there once, that the table's positions are right after each partition's last record, and
# that each earlier snapshot (time travel) holds exactly the records its summary's positions say.
# tests/iceberg.rs runs the same check on its own table; this one shows it on the demo.
# Usage: localstack/spark-check.sh [demo arguments, e.g. --records 9000]
set -euo pipefail
cd "$(dirname "$0")/.."
SERVICES_DIR="${KSA_SERVICES_DIR:-$HOME/.cache/kafka-s3-archiver/services}"
VENV="$SERVICES_DIR/spark-venv"
JARS="$SERVICES_DIR/spark-venv/jars-iceberg"
die() { echo "localstack/spark-check.sh: $*" >&2; exit 1; }

./localstack/install.sh >/dev/null
DIR=$(mktemp -d "${TMPDIR:-/tmp}/ksa-spark.XXXXXX")
trap 'rm -rf "$DIR"' EXIT
./localstack/demo.sh --dir "$DIR" "$@" >"$DIR/demo.log" 2>&1 || { cat "$DIR/demo.log" >&2; die "demo failed (output above)"; }
grep '^RESULT' "$DIR/demo.log"
SPARK_LOCAL_IP=127.0.0.1 "$VENV/bin/python" localstack/spark/check.py "$DIR/catalog.db" "$DIR/archive" kafka.demo_orders \
  "$(ls "$JARS"/*.jar | paste -sd, -)"

#!/usr/bin/env bash
# Spark reads the demo's Iceberg table: runs `demo` (its archive and SQL catalog on SQLite in a folder),
# then Apache Spark 4.0 (pyspark, with Apache Iceberg's Spark runtime 1.10.0 and sqlite-jdbc from Maven
# Central) reads the table through Iceberg's JDBC catalog on the same database file, and checks every
# record is there once, that the table's positions are right after each partition's last record, and
# that each earlier snapshot (time travel) holds exactly the records its summary's positions say.
# Not part of the test suite (pyspark is a 434 MB download and Spark takes ~20 s to start on 2 cores).
# Usage: localstack/spark-check.sh [demo arguments, e.g. --records 9000]
set -euo pipefail
cd "$(dirname "$0")/.."
SERVICES_DIR="${KSA_SERVICES_DIR:-$HOME/.cache/kafka-s3-archiver/services}"
VENV="$SERVICES_DIR/spark-venv"
JARS="$SERVICES_DIR/spark-jars"
die() { echo "localstack/spark-check.sh: $*" >&2; exit 1; }

if [ ! -f "$VENV/.installed" ]; then
  echo "localstack/spark-check.sh: installing pyspark 4.0.1 into $VENV"
  python3 -m venv "$VENV" || die "python3 -m venv $VENV failed"
  "$VENV/bin/pip" install --quiet "pyspark==4.0.1" || die "pip could not install pyspark==4.0.1"
  touch "$VENV/.installed"
fi
if [ ! -f "$JARS/.installed" ]; then
  mkdir -p "$JARS"
  for a in org.apache.iceberg:iceberg-spark-runtime-4.0_2.13:1.10.0 org.xerial:sqlite-jdbc:3.50.3.0; do
    mvn -q -B dependency:copy -Dartifact="$a" -DoutputDirectory="$JARS" || die "mvn could not fetch $a from Maven Central"
  done
  touch "$JARS/.installed"
fi

DIR=$(mktemp -d "${TMPDIR:-/tmp}/ksa-spark.XXXXXX")
trap 'rm -rf "$DIR"' EXIT
./localstack/demo.sh --dir "$DIR" "$@" >"$DIR/demo.log" 2>&1 || { cat "$DIR/demo.log" >&2; die "demo failed (output above)"; }
grep '^RESULT' "$DIR/demo.log"
"$VENV/bin/python" localstack/spark/check.py "$DIR" "$(ls "$JARS"/*.jar | paste -sd, -)"

#!/usr/bin/env bash
# Installs the real test services into a cache folder outside the clone (idempotent):
#   - Apache Kafka (the broker and its tools), pinned below, as jars from Maven Central (needs java 17+
#     and mvn); started as a single-node KRaft broker by start.sh;
#   - DuckDB (to check that lake engines read the archive), in the S3 server's venv;
#   - LocalStack's S3 (localstack-core 2026.3.0) in a Python 3.13 venv, or moto[server] 5.2.5 on
#     Python 3.11 where 3.13 is absent.
# Prints nothing on success but a summary line; exits non-zero with the reason when anything fails.
set -euo pipefail

SERVICES_DIR="${KSA_SERVICES_DIR:-$HOME/.cache/kafka-s3-archiver/services}"
# shellcheck source=versions.sh
source "$(dirname "$0")/versions.sh"
mkdir -p "$SERVICES_DIR"

die() { echo "localstack/install.sh: $*" >&2; exit 1; }

find_python() {
  local want="$1"
  for c in "python$want" "$HOME/.pyenv/versions/$want"*/bin/python3; do
    if command -v "$c" >/dev/null 2>&1 && "$c" -c "import sys; assert sys.version_info[:2] == tuple(map(int, '$want'.split('.')))" 2>/dev/null; then
      command -v "$c"; return 0
    fi
  done
  return 1
}

install_kafka() {
  local dir="$SERVICES_DIR/kafka-$KAFKA_VERSION"
  [ -f "$dir/.installed" ] && return 0
  command -v java >/dev/null || die "java is not installed (Apache Kafka $KAFKA_VERSION needs Java 17+): apt-get install openjdk-17-jre-headless"
  command -v mvn >/dev/null || die "mvn is not installed (it fetches the Kafka jars from Maven Central): apt-get install maven"
  rm -rf "$dir" && mkdir -p "$dir"
  cat >"$dir/pom.xml" <<POM
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.kafka-s3-archiver</groupId>
  <artifactId>test-kafka</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>$LOG4J_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId><version>$LOG4J_VERSION</version></dependency>
  </dependencies>
</project>
POM
  (cd "$dir" && mvn -q -B dependency:copy-dependencies -DoutputDirectory=libs -DincludeScope=runtime) \
    || die "mvn could not fetch Apache Kafka $KAFKA_VERSION from Maven Central (see its output above)"
  ls "$dir/libs/kafka_2.13-$KAFKA_VERSION.jar" >/dev/null || die "the Kafka jars are missing from $dir/libs"
  touch "$dir/.installed"
}

install_s3() {
  local venv="$SERVICES_DIR/s3-venv"
  [ -f "$venv/.installed" ] && return 0
  rm -rf "$venv"
  local py
  if py=$(find_python 3.13); then
    "$py" -m venv "$venv"
    "$venv/bin/pip" install --quiet --upgrade pip
    "$venv/bin/pip" install --quiet "localstack-core[base-runtime]==2026.3.0" "cbor2<5.8" "pyopenssl==24.2.1" \
      "cryptography<44" service_identity jinja2 \
      || die "pip could not install localstack-core 2026.3.0 into $venv"
    echo localstack > "$venv/.installed"
  elif py=$(find_python 3.11); then
    "$py" -m venv "$venv"
    "$venv/bin/pip" install --quiet "moto[server]==5.2.5" || die "pip could not install moto[server]==5.2.5 into $venv"
    echo moto > "$venv/.installed"
  else
    die "neither Python 3.13 (for LocalStack) nor Python 3.11 (for moto) was found; install one with pyenv"
  fi
}

# DuckDB reads the archive in the data-lake test, as a user's query engine would.
install_duckdb() {
  local venv="$SERVICES_DIR/s3-venv"
  [ -f "$venv/.duckdb" ] && return 0
  "$venv/bin/pip" install --quiet "duckdb==2.0.0" || die "pip could not install duckdb==2.0.0 into $venv"
  touch "$venv/.duckdb"
}

# PyYAML parses the Kubernetes manifests under deploy/ in tests/packaging.rs (LocalStack brings it; moto
# may not).
install_pyyaml() {
  local venv="$SERVICES_DIR/s3-venv"
  "$venv/bin/python" -c "import yaml" 2>/dev/null && return 0
  "$venv/bin/pip" install --quiet "pyyaml==6.0.3" || die "pip could not install pyyaml==6.0.3 into $venv"
}

install_kafka
install_s3
install_duckdb
install_pyyaml
echo "test services installed in $SERVICES_DIR (Apache Kafka $KAFKA_VERSION, S3: $(cat "$SERVICES_DIR/s3-venv/.installed"), duckdb, pyyaml)"

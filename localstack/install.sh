#!/usr/bin/env bash
# Installs the real test services into a cache folder outside the clone (idempotent):
#   - Apache Kafka (the broker and its tools), pinned below, as jars from Maven Central (needs java 17+
#     and mvn); started as a single-node KRaft broker by start.sh;
#   - DuckDB (to check that lake engines read the archive), in the S3 server's venv;
#   - LocalStack's S3 (localstack-core 2026.3.0) in a Python 3.13 venv, or moto[server] 5.2.5 on
#     Python 3.11 where 3.13 is absent;
#   - Apicurio Registry, pinned in versions.sh, the prebuilt Quarkus app from Maven Central (needs a
#     Java 21+, found by java.sh, and mvn); started with in-memory storage by start.sh, its
#     Confluent-compatible API is the tests' Schema Registry;
#   - Apache Iceberg's REST catalog server, pinned in versions.sh, as jars from Maven Central with a
#     start-up class of ours (needs javac 17+); started by start.sh on the S3 server;
#   - Prometheus and promtool, from Debian's package, unpacked (for the alert rules' tests);
#   - confluent-kafka (the Python producer, with its Avro, Protobuf, JSON Schema and Schema Registry
#     serializers) in a venv of its own: its Schema Registry client needs cryptography>=45 (through
#     authlib), which LocalStack's venv pins below 44.
# Prints a line for each thing it installs and a summary line; exits non-zero with the reason when
# anything fails.
set -euo pipefail

SERVICES_DIR="${KSA_SERVICES_DIR:-$HOME/.cache/kafka-s3-archiver/services}"
# shellcheck source=versions.sh
source "$(dirname "$0")/versions.sh"
# shellcheck source=java.sh
source "$(dirname "$0")/java.sh"
mkdir -p "$SERVICES_DIR"

die() { echo "localstack/install.sh: $*" >&2; exit 1; }
say() { echo "localstack/install.sh: $*"; }

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
  say "installing Apache Kafka $KAFKA_VERSION (its jars from Maven Central) into $dir"
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

# KSA_S3_SERVER=localstack or moto picks the S3 server (with a KSA_SERVICES_DIR of its own, as the two
# keep their Python test packages in the S3 server's venv); by default LocalStack where Python 3.13 is.
install_s3() {
  local venv="$SERVICES_DIR/s3-venv" want="${KSA_S3_SERVER:-}"
  case "$want" in
    "" | localstack | moto) ;;
    *) die "KSA_S3_SERVER=$want: localstack or moto" ;;
  esac
  if [ -f "$venv/.installed" ]; then
    [ -z "$want" ] || [ "$(cat "$venv/.installed")" = "$want" ] \
      || die "$SERVICES_DIR holds $(cat "$venv/.installed"), not $want: point KSA_SERVICES_DIR at another folder"
    return 0
  fi
  rm -rf "$venv"
  local py
  if [ "$want" != moto ] && py=$(find_python 3.13); then
    say "installing LocalStack S3 (localstack-core 2026.3.0) into a Python 3.13 venv, $venv"
    "$py" -m venv "$venv"
    "$venv/bin/pip" install --quiet --upgrade pip
    "$venv/bin/pip" install --quiet "localstack-core[base-runtime]==2026.3.0" "cbor2<5.8" "pyopenssl==24.2.1" \
      "cryptography<44" service_identity jinja2 \
      || die "pip could not install localstack-core 2026.3.0 into $venv"
    echo localstack > "$venv/.installed"
  elif [ "$want" = localstack ]; then
    die "KSA_S3_SERVER=localstack needs Python 3.13, which was not found; install it with pyenv"
  elif py=$(find_python 3.11); then
    local why="Python 3.13 is absent"
    if [ "$want" = moto ]; then why="KSA_S3_SERVER=moto"; fi
    say "installing moto[server] 5.2.5 into a Python 3.11 venv, $venv ($why)"
    "$py" -m venv "$venv"
    "$venv/bin/pip" install --quiet "moto[server]==5.2.5" || die "pip could not install moto[server]==5.2.5 into $venv"
    echo moto > "$venv/.installed"
  elif [ "$want" = moto ]; then
    die "KSA_S3_SERVER=moto needs Python 3.11, which was not found; install it with pyenv"
  else
    die "neither Python 3.13 (for LocalStack) nor Python 3.11 (for moto) was found; install one with pyenv"
  fi
}

# Python packages the tests use beside the S3 server, in its venv: installs SPEC... once, remembered by
# the marker file NAME. Usage: s3_venv_pip NAME SPEC...
s3_venv_pip() {
  local venv="$SERVICES_DIR/s3-venv" marker="$1"
  shift
  [ -f "$venv/.$marker" ] && return 0
  say "installing $* into $venv"
  "$venv/bin/pip" install --quiet "$@" || die "pip could not install $* into $venv"
  touch "$venv/.$marker"
}

# DuckDB reads the archive in the data-lake test, as a user's query engine would.
install_duckdb() { s3_venv_pip duckdb "duckdb==2.0.0"; }

# pyiceberg reads the Iceberg tables back in tests/iceberg.rs, as a user's reader would (its SqlCatalog on
# the same SQLite catalog; pyarrow reads the files).
install_pyiceberg() { s3_venv_pip pyiceberg "pyiceberg[sql-sqlite]==0.12.0" "pyarrow==26.0.1"; }

# pyiceberg reads a table of the PostgreSQL catalog too (tests/iceberg_postgres.rs), through psycopg2.
install_psycopg2() { s3_venv_pip psycopg2 "psycopg2-binary==2.9.11"; }

# Apache Spark reads the Iceberg tables back in tests/iceberg.rs (localstack/spark/check.py): pyspark 4.0.1
# from PyPI (a 434 MB download, Spark's jars inside) in a venv of its own, with Apache Iceberg's Spark runtime
# and sqlite-jdbc (Iceberg's JDBC catalog on the tests' SQLite catalog) from Maven Central.
install_spark() {
  local venv="$SERVICES_DIR/spark-venv"
  [ -f "$venv/.installed" ] && return 0
  say "installing pyspark 4.0.1 into $venv, Apache Iceberg's Spark runtime 1.10.0 and sqlite-jdbc 3.50.3.0 beside it"
  rm -rf "$venv"
  python3 -m venv "$venv" || die "python3 -m venv $venv failed"
  "$venv/bin/pip" install --quiet "pyspark==4.0.1" || die "pip could not install pyspark==4.0.1 into $venv"
  for a in "org.apache.iceberg:iceberg-spark-runtime-4.0_2.13:$ICEBERG_VERSION" org.xerial:sqlite-jdbc:3.50.3.0; do
    mvn -q -B dependency:copy -Dartifact="$a" -DoutputDirectory="$venv/jars-iceberg" \
      || die "mvn could not fetch $a from Maven Central"
  done
  touch "$venv/.installed"
}

# PostgreSQL, for the SQL catalog on PostgreSQL (tests/iceberg_postgres.rs): Debian's server package. start.sh runs
# a cluster of its own in the state folder, so nothing of the package's own cluster is used.
install_postgres() {
  ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 && return 0
  command -v apt-get >/dev/null || die "PostgreSQL's server is not installed and there is no apt-get: install PostgreSQL 13 or newer (its postgres and initdb under /usr/lib/postgresql/VERSION/bin)"
  [ "$(id -u)" = 0 ] || die "PostgreSQL's server is not installed: run 'apt-get install postgresql' as root (or install.sh as root)"
  say "installing Debian's postgresql package"
  { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends postgresql; } \
    >"$SERVICES_DIR/postgres-install.log" 2>&1 \
    || { tail -n 20 "$SERVICES_DIR/postgres-install.log" >&2; die "apt-get could not install postgresql (log above)"; }
}

# Prometheus and promtool (the alert rules under deploy/prometheus are checked and unit-tested with
# promtool in tests/monitoring.rs): Debian's prometheus package, downloaded and unpacked into the cache
# folder (not installed: no service is started, no user added).
install_prometheus() {
  local dir="$SERVICES_DIR/prometheus-deb"
  [ -f "$dir/.installed" ] && return 0
  command -v apt-get >/dev/null || die "Prometheus comes from Debian's prometheus package and there is no apt-get: unpack a Prometheus 2.x release into $dir/root/usr/bin (prometheus, promtool)"
  say "downloading Debian's prometheus package into $dir"
  rm -rf "$dir" && mkdir -p "$dir"
  (cd "$dir" && { apt-get download -q prometheus || { apt-get update -q && apt-get download -q prometheus; }; }) \
    >"$dir/download.log" 2>&1 || { tail -n 20 "$dir/download.log" >&2; die "apt-get could not download prometheus (log above)"; }
  dpkg-deb -x "$dir"/prometheus_*.deb "$dir/root" || die "dpkg-deb could not unpack $(ls "$dir"/prometheus_*.deb)"
  "$dir/root/usr/bin/promtool" --version >/dev/null 2>&1 || die "promtool from Debian's prometheus package does not run"
  dpkg-deb -f "$dir"/prometheus_*.deb Version >"$dir/.installed"
}

# go install NAME DIR LDFLAGS MODULE@VERSION: builds a Go program from the Go module proxy into DIR/bin,
# its module cache in a scratch folder removed afterwards.
go_install() {
  local name="$1" dir="$2" ldflags="$3" module="$4"
  command -v go >/dev/null || die "$name is built with Go from the Go module proxy and there is no go: install Go 1.24+ or put a $name binary in $dir/bin"
  rm -rf "$dir" && mkdir -p "$dir/bin"
  local scratch="$dir/scratch"
  GOPATH="$scratch/gopath" GOCACHE="$scratch/cache" GOBIN="$dir/bin" GOFLAGS=-modcacherw \
    go install -ldflags "$ldflags" "$module" >"$dir/build.log" 2>&1 \
    || { tail -n 20 "$dir/build.log" >&2; die "go could not build $module (log above)"; }
  rm -rf "$scratch"
}

# Helm, built from the Go module proxy (helm.sh/helm/v4; ~2.5 min on 2 cores, 545 MB of modules in a
# scratch folder removed afterwards): the tests run `helm lint` and `helm template` on deploy/helm/.
install_helm() {
  local dir="$SERVICES_DIR/helm"
  [ -f "$dir/.installed" ] && return 0
  say "building Helm $HELM_VERSION from the Go module proxy into $dir (about 2-3 minutes)"
  go_install Helm "$dir" "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" \
    "helm.sh/helm/v4/cmd/helm@$HELM_VERSION"
  "$dir/bin/helm" version --short >"$dir/.installed" 2>&1 || die "the Helm just built does not run: $(cat "$dir/.installed")"
}

# The GCS emulator, built from the Go module proxy like Helm (~1.5 min).
install_fake_gcs() {
  local dir="$SERVICES_DIR/fake-gcs-server-$FAKE_GCS_VERSION"
  [ -f "$dir/.installed" ] && return 0
  say "building fake-gcs-server $FAKE_GCS_VERSION from the Go module proxy into $dir (about a minute)"
  go_install fake-gcs-server "$dir" "-s -w" "github.com/fsouza/fake-gcs-server@$FAKE_GCS_VERSION"
  "$dir/bin/fake-gcs-server" -help >/dev/null 2>&1 || die "the fake-gcs-server just built does not run (log: $dir/build.log)"
  echo "$FAKE_GCS_VERSION" >"$dir/.installed"
}

# The Azure Blob Storage emulator, from npm (needs Node.js 18+).
install_azurite() {
  local dir="$SERVICES_DIR/azurite-$AZURITE_VERSION"
  [ -f "$dir/.installed" ] && return 0
  command -v npm >/dev/null || die "Azurite comes from the npm registry and there is no npm: install Node.js 18+ with npm"
  say "installing Azurite $AZURITE_VERSION from npm into $dir"
  rm -rf "$dir" && mkdir -p "$dir"
  npm install --prefix "$dir" --no-audit --no-fund --silent "azurite@$AZURITE_VERSION" >"$dir/install.log" 2>&1 \
    || { tail -n 20 "$dir/install.log" >&2; die "npm could not install azurite@$AZURITE_VERSION (log above)"; }
  [ -x "$dir/node_modules/.bin/azurite-blob" ] || die "npm installed no azurite-blob in $dir/node_modules/.bin"
  echo "$AZURITE_VERSION" >"$dir/.installed"
}

# PyYAML parses the Kubernetes manifests under deploy/ in tests/packaging.rs (LocalStack brings it; moto
# may not).
install_pyyaml() {
  local venv="$SERVICES_DIR/s3-venv"
  "$venv/bin/python" -c "import yaml" 2>/dev/null && return 0
  say "installing pyyaml 6.0.3 into $venv"
  "$venv/bin/pip" install --quiet "pyyaml==6.0.3" || die "pip could not install pyyaml==6.0.3 into $venv"
}

# The Schema Registry: Apicurio Registry's prebuilt Quarkus app (a tar.gz of ~160 MB), fetched through mvn
# like the Kafka jars (so Maven's mirrors, proxy and checksums apply) and unpacked; start.sh runs
# quarkus-run.jar with a Java 21+.
install_registry() {
  local dir="$SERVICES_DIR/apicurio-registry-$APICURIO_VERSION"
  local tarball="apicurio-registry-app-$APICURIO_VERSION-all.tar.gz"
  [ -f "$dir/.installed" ] && return 0
  local java
  java=$(find_java 21) || die "Apicurio Registry $APICURIO_VERSION needs Java 21+ and none was found ($java): install a JDK 21 or newer under /usr/lib/jvm (e.g. Temurin 21), or point JAVA_HOME at one"
  command -v mvn >/dev/null || die "mvn is not installed (it fetches Apicurio Registry from Maven Central): apt-get install maven"
  say "installing Apicurio Registry $APICURIO_VERSION (the Schema Registry; ~160 MB from Maven Central) into $dir"
  rm -rf "$dir" && mkdir -p "$dir"
  (cd "$dir" && mvn -q -B dependency:copy -DoutputDirectory=. \
    -Dartifact="io.apicurio:apicurio-registry-app:$APICURIO_VERSION:tar.gz:all") \
    || die "mvn could not fetch Apicurio Registry $APICURIO_VERSION (io.apicurio:apicurio-registry-app:tar.gz:all) from Maven Central (see its output above)"
  tar -xzf "$dir/$tarball" -C "$dir" || die "could not unpack $dir/$tarball"
  rm -f "$dir/$tarball" # Maven's local repository keeps a copy
  [ -f "$dir/quarkus-run.jar" ] || die "quarkus-run.jar is missing from $dir (not the expected Quarkus app layout)"
  touch "$dir/.installed"
}

# The producer the tests use to write Schema Registry framed records (confluent-kafka, librdkafka
# bundled in its wheel). Its own venv: confluent-kafka[schemaregistry] needs authlib>=1.8, hence
# cryptography>=45, and LocalStack's venv pins cryptography<44 (with pyopenssl 24.2.1).
install_producer() {
  local venv="$SERVICES_DIR/producer-venv"
  local spec="confluent-kafka[avro,protobuf,json,schemaregistry]==2.16.1"
  [ "$(cat "$venv/.installed" 2>/dev/null)" = "$spec" ] && return 0
  local py
  py=$(find_python 3.13) || py=$(find_python 3.11) \
    || die "neither Python 3.13 nor Python 3.11 was found for $spec; install one with pyenv"
  say "installing $spec into a Python $("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])') venv, $venv"
  rm -rf "$venv"
  "$py" -m venv "$venv"
  "$venv/bin/pip" install --quiet --upgrade pip
  "$venv/bin/pip" install --quiet --only-binary confluent-kafka "$spec" \
    || die "pip could not install $spec into $venv (a confluent-kafka wheel for $("$py" -V) may be missing)"
  "$venv/bin/python" -c "import confluent_kafka.schema_registry.avro, confluent_kafka.schema_registry.protobuf, confluent_kafka.schema_registry.json_schema" \
    || die "confluent-kafka's serializers do not import in $venv (output above)"
  echo "$spec" >"$venv/.installed"
}

# DuckDB reads the Iceberg tables back in tests/iceberg.rs through its iceberg extension. DuckDB's own
# extension repository is not reachable here, so the extensions come from PyPI's duckdb-extension-*
# packages (a third party's repackaging of DuckDB's builds, fine for a reader check), loaded by path with
# autoloading off; they are built for DuckDB 1.5.5, hence a venv of its own beside s3-venv's DuckDB 2.
install_duckdb_iceberg() {
  local venv="$SERVICES_DIR/duckdb-iceberg-venv"
  local spec="duckdb==1.5.5 duckdb-extension-iceberg==1.5.5 duckdb-extension-avro==1.5.5"
  [ "$(cat "$venv/.installed" 2>/dev/null)" = "$spec" ] && return 0
  say "installing $spec into $venv"
  rm -rf "$venv"
  "$SERVICES_DIR/s3-venv/bin/python" -m venv "$venv"
  # shellcheck disable=SC2086 # the spec is several requirements
  "$venv/bin/pip" install --quiet $spec || die "pip could not install $spec into $venv"
  echo "$spec" >"$venv/.installed"
}

# The Iceberg REST catalog: Apache Iceberg's own server (iceberg-open-api's test fixtures; their pom lists
# no dependencies, so they are named here: ~40 jars, 144 MB) and our few lines of Java that start it bound
# to 127.0.0.1 (iceberg-rest/LoopbackRESTCatalogServer.java), compiled against them.
install_iceberg_rest() {
  local dir="$SERVICES_DIR/iceberg-rest-$ICEBERG_VERSION" source="$(dirname "$0")/iceberg-rest/LoopbackRESTCatalogServer.java"
  [ -f "$dir/.installed" ] && cmp -s "$source" "$dir/LoopbackRESTCatalogServer.java" && return 0
  local java javac
  java=$(find_java 17) || die "Apache Iceberg's REST catalog needs Java 17+ and none was found ($java)"
  javac="$(dirname "$(readlink -f "$java")")/javac"
  [ -x "$javac" ] || die "no javac beside $java (it compiles the REST catalog's start-up class): apt-get install openjdk-17-jdk-headless"
  say "installing Apache Iceberg's REST catalog server $ICEBERG_VERSION (its jars from Maven Central) into $dir"
  rm -rf "$dir" && mkdir -p "$dir"
  local dep="" a
  for a in "org.apache.iceberg:iceberg-open-api:$ICEBERG_VERSION:test-fixtures" \
    "org.apache.iceberg:iceberg-core:$ICEBERG_VERSION:" "org.apache.iceberg:iceberg-core:$ICEBERG_VERSION:tests" \
    "org.apache.iceberg:iceberg-aws:$ICEBERG_VERSION:" "org.apache.iceberg:iceberg-aws-bundle:$ICEBERG_VERSION:" \
    "org.apache.hadoop:hadoop-client-api:$ICEBERG_HADOOP_VERSION:" "org.apache.hadoop:hadoop-client-runtime:$ICEBERG_HADOOP_VERSION:" \
    "org.eclipse.jetty:jetty-server:$ICEBERG_JETTY_VERSION:" "org.eclipse.jetty:jetty-servlet:$ICEBERG_JETTY_VERSION:" \
    "org.xerial:sqlite-jdbc:3.50.3.0:" "org.slf4j:slf4j-simple:2.0.17:"; do
    IFS=: read -r g n v c <<<"$a"
    dep="$dep<dependency><groupId>$g</groupId><artifactId>$n</artifactId><version>$v</version>${c:+<classifier>$c</classifier>}</dependency>"
  done
  cat >"$dir/pom.xml" <<POM
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.kafka-s3-archiver</groupId>
  <artifactId>test-iceberg-rest</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>$dep</dependencies>
</project>
POM
  (cd "$dir" && mvn -q -B dependency:copy-dependencies -DoutputDirectory=libs -DincludeScope=runtime) \
    || die "mvn could not fetch Apache Iceberg's REST catalog $ICEBERG_VERSION from Maven Central (see its output above)"
  cp "$source" "$dir/"
  "$javac" -d "$dir/classes" -cp "$dir/libs/*" "$dir/LoopbackRESTCatalogServer.java" \
    || die "javac could not compile $source against the Iceberg $ICEBERG_VERSION jars (output above)"
  touch "$dir/.installed"
}

install_kafka
install_s3
install_duckdb
install_pyiceberg
install_psycopg2
install_postgres
install_spark
install_duckdb_iceberg
install_pyyaml
install_prometheus
install_helm
install_fake_gcs
install_azurite
install_registry
install_producer
install_iceberg_rest
echo "test services installed in $SERVICES_DIR (Apache Kafka $KAFKA_VERSION, S3: $(cat "$SERVICES_DIR/s3-venv/.installed"), duckdb, pyiceberg, DuckDB 1.5.5 with its iceberg extension, pyyaml, Prometheus $(cat "$SERVICES_DIR/prometheus-deb/.installed"), Helm $HELM_VERSION, fake-gcs-server $FAKE_GCS_VERSION, Azurite $AZURITE_VERSION, Apicurio Registry $APICURIO_VERSION, confluent-kafka 2.16.1, Apache Iceberg's REST catalog $ICEBERG_VERSION, PostgreSQL $(ls -d /usr/lib/postgresql/*/ | sort -V | tail -n 1 | xargs basename), pyspark 4.0.1)"

#!/usr/bin/env bash
# Starts Apache Kafka (a single-node KRaft broker), an S3 server (LocalStack, or moto), a Schema
# Registry (Apicurio Registry, in memory), an Iceberg REST catalog (Apache Iceberg's), PostgreSQL and
# the GCS and Azure Blob emulators (fake-gcs-server, Azurite) on free 127.0.0.1 ports.
# Usage: localstack/start.sh STATE_DIR
# Writes STATE_DIR/env (source it: KSA_TEST_BROKERS, KSA_TEST_S3_ENDPOINT, KSA_TEST_SCHEMA_REGISTRY,
# KSA_TEST_ICEBERG_REST, KSA_TEST_POSTGRES, KSA_TEST_PROMTOOL, KSA_TEST_PROMETHEUS, KSA_TEST_HELM,
# KSA_TEST_GCS_ENDPOINT, KSA_TEST_AZURE_ENDPOINT, AWS_*), logs and pid files.
# Exits non-zero, saying why, if a service does not come up; stop.sh STATE_DIR stops what was started.
set -euo pipefail

STATE="${1:?usage: localstack/start.sh STATE_DIR}"
SERVICES_DIR="${KSA_SERVICES_DIR:-$HOME/.cache/kafka-s3-archiver/services}"
# shellcheck source=versions.sh
source "$(dirname "$0")/versions.sh"
# shellcheck source=java.sh
source "$(dirname "$0")/java.sh"
KAFKA_DIR="$SERVICES_DIR/kafka-$KAFKA_VERSION"
REGISTRY_DIR="$SERVICES_DIR/apicurio-registry-$APICURIO_VERSION"
ICEBERG_REST_DIR="$SERVICES_DIR/iceberg-rest-$ICEBERG_VERSION"
FAKE_GCS_DIR="$SERVICES_DIR/fake-gcs-server-$FAKE_GCS_VERSION"
AZURITE_DIR="$SERVICES_DIR/azurite-$AZURITE_VERSION"
mkdir -p "$STATE"

die() {
  echo "localstack/start.sh: $*" >&2
  exit 1
}

# N free ports on 127.0.0.1, all different: each socket is held until every port is chosen (ports picked
# one at a time, each socket closed at once, can come back twice: two services on one port).
free_ports() {
  python3 -c 'import socket, sys
held = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in held:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in held))' "$1"
}

wait_tcp() { # port seconds name log
  local deadline=$((SECONDS + $2))
  until python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', $1), timeout=1)" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || { tail -n 30 "$4" >&2 || true; die "$3 did not listen on 127.0.0.1:$1 within $2 s (log above: $4)"; }
    sleep 0.3
  done
}

[ -f "$KAFKA_DIR/.installed" ] || die "Apache Kafka $KAFKA_VERSION is not installed; run localstack/install.sh first"
[ -f "$SERVICES_DIR/s3-venv/.installed" ] || die "the S3 server is not installed; run localstack/install.sh first"
[ -f "$REGISTRY_DIR/.installed" ] || die "Apicurio Registry $APICURIO_VERSION is not installed; run localstack/install.sh first"
[ -f "$ICEBERG_REST_DIR/.installed" ] || die "Apache Iceberg's REST catalog $ICEBERG_VERSION is not installed; run localstack/install.sh first"
[ -f "$SERVICES_DIR/duckdb-iceberg-venv/.installed" ] || die "DuckDB's iceberg reader (duckdb-iceberg-venv) is not installed; run localstack/install.sh first"
[ -f "$SERVICES_DIR/spark-venv/.installed" ] || die "pyspark (spark-venv) is not installed; run localstack/install.sh first"
[ -f "$FAKE_GCS_DIR/.installed" ] || die "fake-gcs-server $FAKE_GCS_VERSION is not installed; run localstack/install.sh first"
[ -f "$AZURITE_DIR/.installed" ] || die "Azurite $AZURITE_VERSION is not installed; run localstack/install.sh first"
command -v node >/dev/null || die "Azurite runs on Node.js and there is no node: install Node.js 18+"
[ -f "$SERVICES_DIR/producer-venv/.installed" ] || die "confluent-kafka (the producer venv) is not installed; run localstack/install.sh first"
PG_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
[ -x "$PG_BIN/postgres" ] || die "PostgreSQL's server is not installed; run localstack/install.sh first"
command -v curl >/dev/null || die "curl is not installed (start.sh asks the Schema Registry and LocalStack whether they are up): apt-get install curl"
ICEBERG_REST_JAVA=$(find_java 17) || die "Apache Iceberg's REST catalog needs Java 17+ and none was found ($ICEBERG_REST_JAVA)"
REGISTRY_JAVA=$(find_java 21) || die "Apicurio Registry $APICURIO_VERSION needs Java 21+ and none was found ($REGISTRY_JAVA): install a JDK 21 or newer under /usr/lib/jvm, or point JAVA_HOME at one"

read -r KAFKA_PORT KAFKA_SASL_SSL_PORT CONTROLLER_PORT S3_PORT ICEBERG_REST_PORT REGISTRY_PORT \
  REGISTRY_MANAGEMENT_PORT REGISTRY_TLS_PORT PG_PORT GCS_PORT AZURITE_PORT <<PORTS
$(free_ports 11)
PORTS
[ -n "$AZURITE_PORT" ] || die "could not find 11 free ports on 127.0.0.1"

# A CA and a server certificate for 127.0.0.1, made for this run: the broker's SASL_SSL listener and the
# registry's HTTPS port present it.
TLS="$STATE/tls"
mkdir -p "$STATE/kafka-data" "$TLS"
SASL_USER=archiver
SASL_PASSWORD="archiver-$(python3 -c 'import secrets; print(secrets.token_hex(8))')"
KEYSTORE_PASSWORD="keystore-$(python3 -c 'import secrets; print(secrets.token_hex(8))')"
{
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=ksa-test-ca" -keyout "$TLS/ca.key" -out "$TLS/ca.pem"
  openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout "$TLS/broker.key" -out "$TLS/broker.csr"
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$TLS/san.ext"
  openssl x509 -req -in "$TLS/broker.csr" -CA "$TLS/ca.pem" -CAkey "$TLS/ca.key" -CAcreateserial -days 2 \
    -extfile "$TLS/san.ext" -out "$TLS/broker.pem"
  openssl pkcs12 -export -in "$TLS/broker.pem" -inkey "$TLS/broker.key" -name broker \
    -passout "pass:$KEYSTORE_PASSWORD" -out "$TLS/broker.p12"
} >"$STATE/tls.log" 2>&1 || { cat "$STATE/tls.log" >&2; die "making the test TLS certificates with openssl failed (log above)"; }

# The Schema Registry: Apicurio Registry with its default in-memory (H2) storage, so every run starts
# empty and schema ids start at 1. Quarkus serves the API on quarkus.http.* and health and metrics on a
# management interface (quarkus.management.*, fixed on at build time, port 9000 by default), so both are
# bound to free 127.0.0.1 ports; it serves HTTPS too, on a port of its own. Temporary, snapshot and import files go to the state dir. Started first:
# it is the slowest to come up.
mkdir -p "$STATE/registry-tmp"
(cd "$STATE" && exec setsid "$REGISTRY_JAVA" -Xmx384m -Djava.io.tmpdir="$STATE/registry-tmp" \
  -Dquarkus.http.host=127.0.0.1 -Dquarkus.http.port="$REGISTRY_PORT" \
  -Dquarkus.management.host=127.0.0.1 -Dquarkus.management.port="$REGISTRY_MANAGEMENT_PORT" \
  -Dquarkus.http.ssl-port="$REGISTRY_TLS_PORT" -Dquarkus.http.ssl.certificate.files="$TLS/broker.pem" \
  -Dquarkus.http.ssl.certificate.key-files="$TLS/broker.key" \
  -Dapicurio.storage.snapshot.location="$STATE/registry-tmp" -Dapicurio.import.work-dir="$STATE/registry-tmp" \
  -jar "$REGISTRY_DIR/quarkus-run.jar") >"$STATE/registry.log" 2>&1 &
echo $! >"$STATE/registry.pid"

# A fresh single-node KRaft broker (broker and controller in one process) for every test run. Small
# internal topics, no delay before the first rebalance, short session timeouts and heartbeats allowed
# (classic and KIP-848 consumer groups), no topic auto-creation (the tests create what they use), and
# no time-based retention: generated records carry timestamps from 2026-01-01 on, which the default
# 7 days would delete (tests that need retention delete records themselves). The log cleaner looks
# for work every 0.5 s, so compacted test topics are compacted soon.
# A second listener speaks SASL_SSL (SCRAM-SHA-512 over TLS), as production brokers do, with the
# certificate made above; the SCRAM user is added when formatting.
cat >"$STATE/kafka.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$CONTROLLER_PORT
listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,SASL_SSL://127.0.0.1:$KAFKA_SASL_SSL_PORT,CONTROLLER://127.0.0.1:$CONTROLLER_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,SASL_SSL://127.0.0.1:$KAFKA_SASL_SSL_PORT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT
sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
ssl.keystore.type=PKCS12
ssl.keystore.location=$TLS/broker.p12
ssl.keystore.password=$KEYSTORE_PASSWORD
ssl.key.password=$KEYSTORE_PASSWORD
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
log.dirs=$STATE/kafka-data
num.partitions=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
group.initial.rebalance.delay.ms=0
group.min.session.timeout.ms=1000
group.consumer.min.session.timeout.ms=1000
group.consumer.session.timeout.ms=6000
group.consumer.min.heartbeat.interval.ms=100
group.consumer.heartbeat.interval.ms=500
auto.create.topics.enable=false
log.retention.ms=-1
log.cleaner.backoff.ms=500
PROPS
cat >"$STATE/kafka-log4j2.properties" <<'LOG4J'
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.out.ref = out
logger.started.name = kafka.server.KafkaRaftServer
logger.started.level = info
LOG4J
KAFKA_JAVA=(java -Xmx512m -Dlog4j2.configurationFile="$STATE/kafka-log4j2.properties" -cp "$KAFKA_DIR/libs/*")
"${KAFKA_JAVA[@]}" kafka.tools.StorageTool format -t "$("${KAFKA_JAVA[@]}" kafka.tools.StorageTool random-uuid)" \
  -c "$STATE/kafka.properties" --add-scram "SCRAM-SHA-512=[name=$SASL_USER,password=$SASL_PASSWORD]" \
  >"$STATE/kafka-format.log" 2>&1 \
  || { cat "$STATE/kafka-format.log" >&2; die "formatting the Kafka storage failed (log above)"; }
setsid "${KAFKA_JAVA[@]}" kafka.Kafka "$STATE/kafka.properties" >"$STATE/kafka.log" 2>&1 &
echo $! >"$STATE/kafka.pid"

# PostgreSQL, for the SQL catalog on PostgreSQL: a cluster of its own in the state folder, password
# (SCRAM) authentication and TLS with the certificate made above. The server refuses to run as root, so
# as root it runs as the package's postgres user (setpriv execs it: the pid file names the server).
PG_DIR="$STATE/postgres"
PG_PASSWORD="catalog-$(python3 -c 'import secrets; print(secrets.token_hex(8))')"
mkdir -p "$PG_DIR"
printf '%s\n' "$PG_PASSWORD" >"$PG_DIR/pwfile"
cp "$TLS/broker.pem" "$TLS/broker.key" "$PG_DIR/"
chmod 600 "$PG_DIR/broker.key"
AS_PG=()
if [ "$(id -u)" = 0 ]; then
  chmod o+x "$STATE"
  chown -R postgres: "$PG_DIR"
  AS_PG=(setpriv --reuid=postgres --regid=postgres --init-groups --)
  "${AS_PG[@]}" test -w "$PG_DIR" \
    || die "the postgres user cannot reach $PG_DIR (a parent folder is closed to others): set TMPDIR to a folder under /tmp"
fi
"${AS_PG[@]}" "$PG_BIN/initdb" -D "$PG_DIR/data" -U archiver --pwfile="$PG_DIR/pwfile" --auth=scram-sha-256 \
  -E UTF8 --no-sync >"$STATE/postgres-init.log" 2>&1 \
  || { cat "$STATE/postgres-init.log" >&2; die "initdb of the PostgreSQL cluster failed (log above)"; }
setsid "${AS_PG[@]}" "$PG_BIN/postgres" -D "$PG_DIR/data" -c listen_addresses=127.0.0.1 -p "$PG_PORT" \
  -c unix_socket_directories= -c fsync=off -c synchronous_commit=off -c full_page_writes=off \
  -c ssl=on -c ssl_cert_file="$PG_DIR/broker.pem" -c ssl_key_file="$PG_DIR/broker.key" \
  >"$STATE/postgres.log" 2>&1 &
echo $! >"$STATE/postgres.pid"

S3_KIND=$(cat "$SERVICES_DIR/s3-venv/.installed")
mkdir -p "$STATE/s3-tmp"
if [ "$S3_KIND" = localstack ]; then
  (cd "$STATE" && exec setsid env TMPDIR="$STATE/s3-tmp" SERVICES=s3 EAGER_SERVICE_LOADING=1 \
    GATEWAY_LISTEN="127.0.0.1:$S3_PORT" LOCALSTACK_HOST="127.0.0.1:$S3_PORT" DISABLE_EVENTS=1 \
    SKIP_SSL_CERT_DOWNLOAD=1 DNS_ADDRESS=0 FILESYSTEM_ROOT="$STATE/s3-fs" \
    "$SERVICES_DIR/s3-venv/bin/python" -m localstack.runtime.main) >"$STATE/s3.log" 2>&1 &
else
  setsid env TMPDIR="$STATE/s3-tmp" "$SERVICES_DIR/s3-venv/bin/moto_server" -H 127.0.0.1 -p "$S3_PORT" \
    >"$STATE/s3.log" 2>&1 &
fi
echo $! >"$STATE/s3.pid"

# Google Cloud Storage's emulator, in memory, plain HTTP (the tests create their buckets), and Azure
# Blob Storage's, in memory, with its well-known development account (the tests create their
# containers); Azurite is told to accept the newer service versions object_store's client asks for.
setsid "$FAKE_GCS_DIR/bin/fake-gcs-server" -scheme http -host 127.0.0.1 -port "$GCS_PORT" -backend memory \
  -public-host "127.0.0.1:$GCS_PORT" -log-level warn >"$STATE/fake-gcs.log" 2>&1 &
echo $! >"$STATE/fake-gcs.pid"
setsid node "$AZURITE_DIR/node_modules/azurite/dist/src/blob/main.js" --blobHost 127.0.0.1 --blobPort "$AZURITE_PORT" \
  --inMemoryPersistence --skipApiVersionCheck --silent >"$STATE/azurite.log" 2>&1 &
echo $! >"$STATE/azurite.pid"

wait_tcp "$KAFKA_PORT" 60 "Apache Kafka" "$STATE/kafka.log"
deadline=$((SECONDS + 60))
until grep -q "Kafka Server started" "$STATE/kafka.log"; do
  [ $SECONDS -lt $deadline ] || { tail -n 30 "$STATE/kafka.log" >&2; die "Apache Kafka did not start within 60 s (log: $STATE/kafka.log)"; }
  sleep 0.2
done
wait_tcp "$S3_PORT" 120 "$S3_KIND" "$STATE/s3.log"
if [ "$S3_KIND" = localstack ]; then
  deadline=$((SECONDS + 120))
  until curl -fsS "http://127.0.0.1:$S3_PORT/_localstack/health" 2>/dev/null | grep -Eq '"s3": *"(running|available)"'; do
    [ $SECONDS -lt $deadline ] || { tail -n 30 "$STATE/s3.log" >&2; die "LocalStack S3 did not become ready (log: $STATE/s3.log)"; }
    sleep 0.5
  done
fi
# Ready when the Confluent-compatible API answers (about 8 s alone, 10-14 s next to the others on 2 cores).
REGISTRY_URL="http://127.0.0.1:$REGISTRY_PORT/apis/ccompat/v7"
deadline=$((SECONDS + 120))
until [ "$(curl -sS -o /dev/null -w '%{http_code}' "$REGISTRY_URL/subjects" 2>/dev/null)" = 200 ]; do
  kill -0 "$(cat "$STATE/registry.pid")" 2>/dev/null \
    || { tail -n 30 "$STATE/registry.log" >&2; die "Apicurio Registry exited before it answered on 127.0.0.1:$REGISTRY_PORT (log above: $STATE/registry.log)"; }
  [ $SECONDS -lt $deadline ] \
    || { tail -n 30 "$STATE/registry.log" >&2; die "Apicurio Registry did not answer GET $REGISTRY_URL/subjects with 200 within 120 s (log above: $STATE/registry.log)"; }
  sleep 0.5
done
REGISTRY_HTTPS_URL="https://127.0.0.1:$REGISTRY_TLS_PORT/apis/ccompat/v7"
[ "$(curl -sS --cacert "$TLS/ca.pem" -o /dev/null -w '%{http_code}' "$REGISTRY_HTTPS_URL/subjects" 2>&1)" = 200 ] \
  || { tail -n 30 "$STATE/registry.log" >&2; die "Apicurio Registry does not answer over HTTPS at $REGISTRY_HTTPS_URL (log above: $STATE/registry.log)"; }

# Apache Iceberg's REST catalog on its JDBC catalog (SQLite in the state folder). Tables are registered
# with metadata the archiver wrote, on S3 or a local folder: ResolvingFileIO reads both, S3 by LocalStack.
# The warehouse is only where tables created through the catalog itself would go.
(cd "$STATE" && exec setsid env CATALOG_WAREHOUSE=s3://ksa-iceberg-warehouse/ \
  CATALOG_URI="jdbc:sqlite:file:$STATE/iceberg-rest.db" CATALOG_IO__IMPL=org.apache.iceberg.io.ResolvingFileIO \
  CATALOG_S3_ENDPOINT="http://127.0.0.1:$S3_PORT" CATALOG_S3_PATH__STYLE__ACCESS=true \
  AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1 \
  "$ICEBERG_REST_JAVA" -Xmx256m -cp "$ICEBERG_REST_DIR/libs/*:$ICEBERG_REST_DIR/classes" \
  org.apache.iceberg.rest.LoopbackRESTCatalogServer "$ICEBERG_REST_PORT") >"$STATE/iceberg-rest.log" 2>&1 &
echo $! >"$STATE/iceberg-rest.pid"
ICEBERG_REST_URL="http://127.0.0.1:$ICEBERG_REST_PORT"
deadline=$((SECONDS + 120))
until [ "$(curl -sS -o /dev/null -w '%{http_code}' "$ICEBERG_REST_URL/v1/config" 2>/dev/null)" = 200 ]; do
  kill -0 "$(cat "$STATE/iceberg-rest.pid")" 2>/dev/null \
    || { tail -n 30 "$STATE/iceberg-rest.log" >&2; die "the Iceberg REST catalog exited before it answered on 127.0.0.1:$ICEBERG_REST_PORT (log above: $STATE/iceberg-rest.log)"; }
  [ $SECONDS -lt $deadline ] \
    || { tail -n 30 "$STATE/iceberg-rest.log" >&2; die "the Iceberg REST catalog did not answer GET $ICEBERG_REST_URL/v1/config with 200 within 120 s (log above: $STATE/iceberg-rest.log)"; }
  sleep 0.5
done

wait_tcp "$GCS_PORT" 30 "fake-gcs-server" "$STATE/fake-gcs.log"
wait_tcp "$AZURITE_PORT" 60 "Azurite" "$STATE/azurite.log"

deadline=$((SECONDS + 60))
until "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT"; do
  kill -0 "$(cat "$STATE/postgres.pid")" 2>/dev/null \
    || { tail -n 30 "$STATE/postgres.log" >&2; die "PostgreSQL exited before it answered on 127.0.0.1:$PG_PORT (log above: $STATE/postgres.log)"; }
  [ $SECONDS -lt $deadline ] || { tail -n 30 "$STATE/postgres.log" >&2; die "PostgreSQL did not answer on 127.0.0.1:$PG_PORT within 60 s (log above: $STATE/postgres.log)"; }
  sleep 0.3
done
PGPASSWORD="$PG_PASSWORD" "$PG_BIN/psql" -q -h 127.0.0.1 -p "$PG_PORT" -U archiver -d postgres -c "CREATE DATABASE iceberg" \
  >"$STATE/postgres-db.log" 2>&1 || { cat "$STATE/postgres-db.log" >&2; die "creating PostgreSQL's database iceberg failed (log above)"; }

cat >"$STATE/env" <<ENV
export KSA_TEST_BROKERS=127.0.0.1:$KAFKA_PORT
export KSA_TEST_KAFKA_DIR=$KAFKA_DIR
export KSA_TEST_SASL_SSL_BROKERS=127.0.0.1:$KAFKA_SASL_SSL_PORT
export KSA_TEST_SASL_USERNAME=$SASL_USER
export KSA_TEST_SASL_PASSWORD=$SASL_PASSWORD
export KSA_TEST_CA=$TLS/ca.pem
export KSA_TEST_S3_ENDPOINT=http://127.0.0.1:$S3_PORT
export KSA_TEST_S3_KIND=$S3_KIND
export KSA_TEST_PYTHON=$SERVICES_DIR/s3-venv/bin/python
export KSA_TEST_DUCKDB_ICEBERG_PYTHON=$SERVICES_DIR/duckdb-iceberg-venv/bin/python
export KSA_TEST_SCHEMA_REGISTRY=$REGISTRY_URL
export KSA_TEST_SCHEMA_REGISTRY_HTTPS=$REGISTRY_HTTPS_URL
export KSA_TEST_ICEBERG_REST=$ICEBERG_REST_URL
export KSA_TEST_SPARK_PYTHON=$SERVICES_DIR/spark-venv/bin/python
export KSA_TEST_SPARK_JARS=$(ls "$SERVICES_DIR"/spark-venv/jars-iceberg/*.jar | paste -sd, -)
export KSA_TEST_POSTGRES=postgresql://archiver@127.0.0.1:$PG_PORT/iceberg
export KSA_TEST_POSTGRES_PASSWORD=$PG_PASSWORD
export KSA_TEST_PRODUCER_PYTHON=$SERVICES_DIR/producer-venv/bin/python
export KSA_TEST_PROMTOOL=$SERVICES_DIR/prometheus-deb/root/usr/bin/promtool
export KSA_TEST_PROMETHEUS=$SERVICES_DIR/prometheus-deb/root/usr/bin/prometheus
export KSA_TEST_HELM=$SERVICES_DIR/helm/bin/helm
export KSA_TEST_GCS_ENDPOINT=http://127.0.0.1:$GCS_PORT
export KSA_TEST_AZURE_ENDPOINT=http://127.0.0.1:$AZURITE_PORT/devstoreaccount1
export AWS_ACCESS_KEY_ID=test
export AWS_SECRET_ACCESS_KEY=test
export AWS_REGION=us-east-1
export AWS_EC2_METADATA_DISABLED=true
ENV
echo "started Apache Kafka $KAFKA_VERSION on 127.0.0.1:$KAFKA_PORT, $S3_KIND S3 on 127.0.0.1:$S3_PORT, Apicurio Registry $APICURIO_VERSION on 127.0.0.1:$REGISTRY_PORT, Apache Iceberg's REST catalog $ICEBERG_VERSION on 127.0.0.1:$ICEBERG_REST_PORT, PostgreSQL on 127.0.0.1:$PG_PORT, fake-gcs-server $FAKE_GCS_VERSION on 127.0.0.1:$GCS_PORT and Azurite $AZURITE_VERSION on 127.0.0.1:$AZURITE_PORT (state in $STATE)"

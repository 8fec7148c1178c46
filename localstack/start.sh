#!/usr/bin/env bash
# Starts tansu (Kafka protocol) and an S3 server (LocalStack, or moto) on free 127.0.0.1 ports.
# Usage: localstack/start.sh STATE_DIR
# Writes STATE_DIR/env (source it: KSA_TEST_BROKERS, KSA_TEST_S3_ENDPOINT, AWS_*), logs and pid files.
# Exits non-zero, saying why, if a service does not come up; stop.sh STATE_DIR stops what was started.
set -euo pipefail

STATE="${1:?usage: localstack/start.sh STATE_DIR}"
SERVICES_DIR="${KSA_SERVICES_DIR:-$HOME/.cache/kafka-s3-archiver/services}"
mkdir -p "$STATE"

die() {
  echo "localstack/start.sh: $*" >&2
  exit 1
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

wait_tcp() { # port seconds name log
  local deadline=$((SECONDS + $2))
  until python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', $1), timeout=1)" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || { tail -n 30 "$4" >&2 || true; die "$3 did not listen on 127.0.0.1:$1 within $2 s (log above: $4)"; }
    sleep 0.3
  done
}

[ -x "$SERVICES_DIR/tansu/tansu" ] || die "tansu is not installed; run localstack/install.sh first"
[ -f "$SERVICES_DIR/s3-venv/.installed" ] || die "the S3 server is not installed; run localstack/install.sh first"

KAFKA_PORT=$(free_port)
S3_PORT=$(free_port)

# tansu keeps topics in memory; it is started fresh for every test run.
setsid "$SERVICES_DIR/tansu/tansu" broker \
  --listener-url "tcp://127.0.0.1:$KAFKA_PORT" \
  --advertised-listener-url "tcp://127.0.0.1:$KAFKA_PORT" \
  --storage-engine "memory://tansu/" >"$STATE/tansu.log" 2>&1 &
echo $! >"$STATE/tansu.pid"

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

wait_tcp "$KAFKA_PORT" 30 tansu "$STATE/tansu.log"
wait_tcp "$S3_PORT" 120 "$S3_KIND" "$STATE/s3.log"
if [ "$S3_KIND" = localstack ]; then
  deadline=$((SECONDS + 120))
  until curl -fsS "http://127.0.0.1:$S3_PORT/_localstack/health" 2>/dev/null | grep -Eq '"s3": *"(running|available)"'; do
    [ $SECONDS -lt $deadline ] || { tail -n 30 "$STATE/s3.log" >&2; die "LocalStack S3 did not become ready (log: $STATE/s3.log)"; }
    sleep 0.5
  done
fi

cat >"$STATE/env" <<ENV
export KSA_TEST_BROKERS=127.0.0.1:$KAFKA_PORT
export KSA_TEST_S3_ENDPOINT=http://127.0.0.1:$S3_PORT
export KSA_TEST_S3_KIND=$S3_KIND
export KSA_TEST_PYTHON=$SERVICES_DIR/s3-venv/bin/python
export AWS_ACCESS_KEY_ID=test
export AWS_SECRET_ACCESS_KEY=test
export AWS_REGION=us-east-1
export AWS_EC2_METADATA_DISABLED=true
ENV
echo "started tansu on 127.0.0.1:$KAFKA_PORT and $S3_KIND S3 on 127.0.0.1:$S3_PORT (state in $STATE)"

#!/usr/bin/env bash
# The throughput benchmark (examples/throughput/) against freshly started Apache Kafka and LocalStack S3.
# Usage: localstack/bench.sh [records] [value-bytes] [partitions] [max-buffer-bytes]
# Measures compressible and random values, each against a plain consumer and plain S3 PUTs, and prints one table.
set -euo pipefail
cd "$(dirname "$0")/.."
exec ./localstack/with-services.sh sh -c \
  'cargo build --locked --release --bin kafka-s3-archiver --example throughput && "$CARGO_TARGET_DIR/release/examples/throughput" "$@"' \
  bench "$@"

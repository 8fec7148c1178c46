#!/usr/bin/env bash
# The throughput benchmark (examples/throughput/) against freshly started Apache Kafka and LocalStack S3.
# Usage: localstack/bench.sh [records] [value-bytes] [partitions] [max-buffer-bytes]
# Measures compressible and random values, each against a plain consumer, plain S3 PUTs and the peers
# (localstack/peers/: Apache Flink's FileSink, Kafka Connect with Apache Iceberg's sink, installed from Maven
# Central on first use), and prints one table; examples/throughput/main.rs lists the KSA_BENCH_* settings.
set -euo pipefail
cd "$(dirname "$0")/.."
exec ./localstack/with-services.sh sh -c \
  'cargo build --locked --release --bin kafka-s3-archiver --example throughput && "$CARGO_TARGET_DIR/release/examples/throughput" "$@"' \
  bench "$@"

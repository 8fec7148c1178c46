#!/usr/bin/env bash
# Runs the throughput benchmark (examples/throughput.rs) against freshly started tansu and LocalStack S3.
# Usage: localstack/bench.sh [records] [value-bytes]
set -euo pipefail
cd "$(dirname "$0")/.."
./localstack/install.sh
STATE=$(mktemp -d "${TMPDIR:-/tmp}/ksa-services.XXXXXX")
trap './localstack/stop.sh "$STATE"' EXIT
./localstack/start.sh "$STATE"
# shellcheck disable=SC1091
source "$STATE/env"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/kafka-s3-archiver/target}"
cargo build --locked --bin kafka-s3-archiver
cargo run --locked --example throughput -- "$@"

#!/usr/bin/env bash
# Recovery's cost on a long partition (examples/recovery.rs) against a freshly started LocalStack S3.
# Usage: localstack/bench-recovery.sh [objects]   (that many data objects and as many claims)
set -euo pipefail
cd "$(dirname "$0")/.."
exec ./localstack/with-services.sh sh -c \
  'cargo build --locked --release --example recovery && "$CARGO_TARGET_DIR/release/examples/recovery" "$@"' \
  bench "$@"

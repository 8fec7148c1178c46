#!/usr/bin/env bash
# A table's cost (examples/table_commits.rs) against a freshly started LocalStack S3: store and catalog
# requests and time per commit, committing the same files 1,000, 100 and 10 at a time.
# Usage: localstack/bench-table.sh [files]
set -euo pipefail
cd "$(dirname "$0")/.."
exec ./localstack/with-services.sh sh -c \
  'cargo build --locked --release --example table_commits && "$CARGO_TARGET_DIR/release/examples/table_commits" "$@"' \
  bench "$@"

#!/usr/bin/env bash
# The test command: formatting (rustfmt) and lints (clippy, warnings are errors) first, then every test
# (unit and integration) against real Apache Kafka and LocalStack S3, which it installs if needed, starts on
# free local ports and stops afterwards. Extra arguments go to cargo test.
set -euo pipefail
cd "$(dirname "$0")/.."

# Builds are slow; reuse a target directory outside the clone when there is one.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/kafka-s3-archiver/target}"
cargo fmt --all --check || { echo "localstack/test.sh: the code is not formatted as rustfmt.toml says: run cargo fmt" >&2; exit 1; }
cargo clippy --locked --all-targets -- -D warnings
python3 localstack/unit_graph.py
exec ./localstack/with-services.sh cargo test --locked "$@"

#!/usr/bin/env bash
# The test command: installs the real test services (tansu, LocalStack S3) if needed, starts them on
# free local ports, runs every test (unit and integration) against them, and stops them afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."

./localstack/install.sh
STATE=$(mktemp -d "${TMPDIR:-/tmp}/ksa-services.XXXXXX")
trap './localstack/stop.sh "$STATE"' EXIT
./localstack/start.sh "$STATE"
# shellcheck disable=SC1091
source "$STATE/env"

# Builds are slow; reuse a target directory outside the clone when there is one.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/kafka-s3-archiver/target}"
cargo test --locked "$@"

#!/usr/bin/env bash
# Runs a command with the real test services up: installs Apache Kafka, LocalStack S3 and the Schema
# Registry (Apicurio Registry) if needed, starts them on free local ports, exports their addresses
# (KSA_TEST_*, AWS_*), runs the command, and stops them afterwards whatever the command's outcome. Exits
# with the command's status.
set -euo pipefail
cd "$(dirname "$0")/.."

./localstack/install.sh
STATE=$(mktemp -d "${TMPDIR:-/tmp}/ksa-services.XXXXXX")
trap './localstack/stop.sh "$STATE"' EXIT
./localstack/start.sh "$STATE"
# shellcheck disable=SC1091
source "$STATE/env"
# The bench reads the services' pid files here (the CPU they take during each run).
export KSA_SERVICES_STATE="$STATE"

# Builds are slow; reuse a target directory outside the clone when there is one.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/kafka-s3-archiver/target}"
"$@"

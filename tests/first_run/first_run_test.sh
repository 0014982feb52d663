#!/usr/bin/env bash
# The README's first-run command (scripts/run.sh) from this checkout: it must end with the
# demonstration passing, leave the gate and the sidecar answering, run again in seconds
# reusing what it built, and stop everything it started.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
state=$(mktemp -d /tmp/dockgate-run.XXXXXX)
# shellcheck source=scripts/lib.sh
source "$root/scripts/lib.sh"  # free_port
export DOCKGATE_RUN_DIR=$state DOCKGATE_SIDECAR_PORT=$(free_port) DOCKGATE_METRICS_PORT=$(free_port)
trap '"$root/scripts/run.sh" stop >/dev/null 2>&1 || true; rm -rf "$state"' EXIT

"$root/scripts/run.sh"
curl -fsS "http://127.0.0.1:$DOCKGATE_SIDECAR_PORT/healthz" >/dev/null
curl -fsS "http://127.0.0.1:$DOCKGATE_METRICS_PORT/healthz" >/dev/null
started=$SECONDS
"$root/scripts/run.sh" >/dev/null
echo "first run again: $((SECONDS - started)) s"
((SECONDS - started < 90)) || { echo "FAILED: the second run took $((SECONDS - started)) s"; exit 1; }
"$root/scripts/run.sh" stop
if curl -fsS "http://127.0.0.1:$DOCKGATE_SIDECAR_PORT/healthz" >/dev/null 2>&1; then echo "FAILED: still running after stop"; exit 1; fi
echo "first run checks passed"

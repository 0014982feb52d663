#!/usr/bin/env bash
# End-to-end benchmark: the same requests direct to a private dockerd and through
# dockgate-proxy (release build), in one run, alternating rounds. Needs root.
#
#   scripts/bench.sh [dockgate-load arguments, e.g. --connections 8 --seconds 3 --rounds 5]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target dockgate-proxy dockgate-load

work=$(mktemp -d /tmp/dockgate-bench.XXXXXX)
proxy_pid=
cleanup() {
  [[ -n $proxy_pid ]] && kill "$proxy_pid" 2>/dev/null && wait "$proxy_pid" 2>/dev/null || true
  scripts/engine.sh stop "$work/engine" || true
  rm -rf "$work"
}
trap cleanup EXIT
scripts/engine.sh start "$work/engine" >/dev/null
source "$work/engine/env"

build/release/proxy/dockgate-proxy --upstream "$DOCKGATE_TEST_ENGINE" \
  --listen "unix://$work/proxy.sock" --policy compose/policies/docker-cli.json \
  >/dev/null 2>"$work/proxy.err" &
proxy_pid=$!
for _ in $(seq 100); do [[ -S $work/proxy.sock ]] && break; sleep 0.05; done
# The container is created through the proxy, so that the docker-cli profile owns it, and
# addressed by its full ID (names are resolved by an inspect on every request).
id=$(DOCKER_HOST="unix://$work/proxy.sock" docker run -d "$DOCKGATE_TEST_IMAGE" sleep 3600)

echo "== unix socket"
build/release/tests/bench/dockgate-load --direct "$DOCKGATE_TEST_ENGINE" \
  --proxy "unix://$work/proxy.sock" --container "$id" "$@"

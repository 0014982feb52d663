#!/usr/bin/env bash
# Node.js clients for the client-compatibility tests, from the npm registry, cached:
# Docker's (dockerode, testcontainers), the Dev Containers CLI (@devcontainers/cli, for
# compose/policies/devcontainer.json) and OpenSandbox's own SDK (@alibaba-group/opensandbox,
# for the sidecar's OpenSandbox front; it needs Node.js 20). OpenSandbox's code-interpreter
# SDK (@alibaba-group/opensandbox-code-interpreter) is not on the npm registry (404 for every
# version, 2026-12-07): tests/integration/clients/opensandbox_code.js makes its requests
# over this SDK instead.
#
#   scripts/node-clients.sh DIR   install (cached), write DIR/env with DOCKGATE_NODE_PATH
set -euo pipefail
dir=${1:?usage: node-clients.sh DIR}
cache=${DOCKGATE_CACHE:-/var/cache/dockgate}/node-clients
mkdir -p "$dir" "$cache"
if [[ ! -d $cache/node_modules/dockerode || ! -d $cache/node_modules/testcontainers ||
  ! -d $cache/node_modules/@alibaba-group/opensandbox || ! -d $cache/node_modules/@devcontainers/cli ]]; then
  npm install --prefix "$cache" --no-audit --no-fund --silent dockerode@4.0.2 testcontainers@10.13.2 \
    @alibaba-group/opensandbox@0.1.11 @devcontainers/cli@0.89.0 >"$dir/npm.log" 2>&1 || {
    tail -n 20 "$dir/npm.log" >&2
    exit 1
  }
fi
echo "export DOCKGATE_NODE_PATH=$cache/node_modules" >"$dir/env"
echo "node-clients.sh: dockerode, testcontainers, the Dev Containers CLI and the OpenSandbox SDK in $cache/node_modules"

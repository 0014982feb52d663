#!/usr/bin/env bash
# Node.js Docker clients for the client-compatibility tests (dockerode, testcontainers),
# from the npm registry, cached.
#
#   scripts/node-clients.sh DIR   install (cached), write DIR/env with DOCKGATE_NODE_PATH
set -euo pipefail
dir=${1:?usage: node-clients.sh DIR}
cache=${DOCKGATE_CACHE:-/var/cache/dockgate}/node-clients
mkdir -p "$dir" "$cache"
if [[ ! -d $cache/node_modules/dockerode || ! -d $cache/node_modules/testcontainers ]]; then
  npm install --prefix "$cache" --no-audit --no-fund --silent dockerode@4.0.2 testcontainers@10.13.2 >"$dir/npm.log" 2>&1 || {
    tail -n 20 "$dir/npm.log" >&2
    exit 1
  }
fi
echo "export DOCKGATE_NODE_PATH=$cache/node_modules" >"$dir/env"
echo "node-clients.sh: dockerode and testcontainers in $cache/node_modules"

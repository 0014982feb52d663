#!/usr/bin/env bash
# Runs every dockgate test: unit tests, then integration tests against a private
# Docker engine and registry that this script starts and stops (scripts/engine.sh).
# Needs root: it installs Debian packages and starts dockerd.
#
#   scripts/test.sh [ctest arguments...]
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ $(id -u) -ne 0 ]]; then
  echo "scripts/test.sh: run as root (it installs packages and starts a private dockerd)" >&2
  exit 1
fi

scripts/install-deps.sh
cmake --preset dev >/dev/null
cmake --build --preset dev

engine_dir=$(mktemp -d /tmp/dockgate-engine.XXXXXX)
trap 'scripts/engine.sh stop "$engine_dir" || true' EXIT
scripts/engine.sh start "$engine_dir"
# shellcheck disable=SC1091
source "$engine_dir/env"
export DOCKGATE_BUILD_DIR=$PWD/build/dev

ctest --preset dev --output-on-failure "$@"

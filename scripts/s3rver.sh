#!/usr/bin/env bash
# s3rver (npm) for tests of S3-compatible storage, under DIR, on $S3RVER_ADDRESS
# (default 127.0.0.1; a bridge address lets network namespaces reach it).
# It runs through scripts/s3rver-conditional.js, which adds S3's conditional writes
# (PUT with If-None-Match: * / If-Match: "<etag>", answered 412 like AWS, MinIO and
# AIStor) that s3rver itself ignores; DIR/s3rver.pid is that node process.
# Path-style requests name the bucket in the path; virtual-hosted ones (Aliyun OSS's
# S3-compatible API) name it in the host, <bucket>.s3.oss-<region>.aliyuncs.com, which
# s3rver recognises with its service endpoint aliyuncs.com (tests map the name to
# 127.0.0.1 in a mount namespace of their own, never in the machine's /etc/hosts).
#
#   scripts/s3rver.sh start DIR   install (cached), start, write DIR/env
#   scripts/s3rver.sh stop DIR
set -euo pipefail
cmd=${1:?usage: s3rver.sh start|stop DIR}
dir=${2:?usage: s3rver.sh start|stop DIR}
cache=${DOCKGATE_CACHE:-/var/cache/dockgate}/s3rver
address=${S3RVER_ADDRESS:-127.0.0.1}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
source "$here/lib.sh"  # free_port, stop_pid

case $cmd in
  start)
    mkdir -p "$dir/data" "$cache"
    if [[ ! -x $cache/node_modules/.bin/s3rver ]]; then
      npm install --prefix "$cache" --no-audit --no-fund --silent s3rver@3.7.1 >"$dir/npm.log" 2>&1 || {
        tail -n 20 "$dir/npm.log" >&2
        exit 1
      }
    fi
    port=$(free_port "$address")
    NODE_PATH=$cache/node_modules node "$here/s3rver-conditional.js" "$dir/data" "$address" "$port" dockgate-test \
      >"$dir/s3rver.log" 2>&1 &
    echo $! >"$dir/s3rver.pid"
    for _ in $(seq 100); do
      curl -s --noproxy "*" -o /dev/null "http://$address:$port/" && break
      kill -0 "$(cat "$dir/s3rver.pid")" 2>/dev/null || { cat "$dir/s3rver.log" >&2; exit 1; }
      sleep 0.1
    done
    cat >"$dir/env" <<ENV
export DOCKGATE_TEST_S3_ENDPOINT=http://$address:$port
export DOCKGATE_TEST_S3_BUCKET=dockgate-test
export DOCKGATE_TEST_S3_ACCESS_KEY=S3RVER
export DOCKGATE_TEST_S3_SECRET_KEY=S3RVER
export DOCKGATE_TEST_S3_PORT=$port
ENV
    echo "s3rver.sh: s3rver on $address:$port"
    ;;
  stop)
    stop_pid "$dir/s3rver.pid" 5
    rm -rf "$dir"
    ;;
esac

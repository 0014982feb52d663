#!/usr/bin/env bash
# s3rver (npm) on 127.0.0.1 for tests of S3-compatible storage, under DIR.
# Path-style requests name the bucket in the path; virtual-hosted ones (Aliyun OSS's
# S3-compatible API) name it in the host, <bucket>.s3.oss-<region>.aliyuncs.com, which
# s3rver recognises with --service-endpoint aliyuncs.com (tests map the name to
# 127.0.0.1 in a mount namespace of their own, never in the machine's /etc/hosts).
#
#   scripts/s3rver.sh start DIR   install (cached), start, write DIR/env
#   scripts/s3rver.sh stop DIR
set -euo pipefail
cmd=${1:?usage: s3rver.sh start|stop DIR}
dir=${2:?usage: s3rver.sh start|stop DIR}
cache=${DOCKGATE_CACHE:-/var/cache/dockgate}/s3rver

case $cmd in
  start)
    mkdir -p "$dir/data" "$cache"
    if [[ ! -x $cache/node_modules/.bin/s3rver ]]; then
      npm install --prefix "$cache" --no-audit --no-fund --silent s3rver@3.7.1 >"$dir/npm.log" 2>&1 || {
        tail -n 20 "$dir/npm.log" >&2
        exit 1
      }
    fi
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    "$cache/node_modules/.bin/s3rver" -d "$dir/data" -a 127.0.0.1 -p "$port" --silent \
      --service-endpoint aliyuncs.com --configure-bucket dockgate-test >"$dir/s3rver.log" 2>&1 &
    echo $! >"$dir/s3rver.pid"
    for _ in $(seq 100); do
      curl -s -o /dev/null "http://127.0.0.1:$port/" && break
      sleep 0.1
    done
    cat >"$dir/env" <<ENV
export DOCKGATE_TEST_S3_ENDPOINT=http://127.0.0.1:$port
export DOCKGATE_TEST_S3_BUCKET=dockgate-test
export DOCKGATE_TEST_S3_ACCESS_KEY=S3RVER
export DOCKGATE_TEST_S3_SECRET_KEY=S3RVER
export DOCKGATE_TEST_S3_PORT=$port
ENV
    echo "s3rver.sh: s3rver on 127.0.0.1:$port"
    ;;
  stop)
    if [[ -s $dir/s3rver.pid ]]; then
      pid=$(cat "$dir/s3rver.pid")
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
    fi
    rm -rf "$dir"
    ;;
esac

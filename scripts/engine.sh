#!/usr/bin/env bash
# A private Docker engine and image registry for dockgate's tests.
#
#   scripts/engine.sh start DIR   start dockerd and docker-registry under DIR, write DIR/env
#   scripts/engine.sh stop DIR    stop both, by the PIDs recorded under DIR
#
# The engine has its own --data-root, --exec-root, --pidfile and socket, so it never
# touches a daemon the user already runs. It has the default bridge network (clients such
# as testcontainers inspect it) on a bridge of its own, and does not touch iptables:
# containers reach each other, not the outside. Debian's crun is registered as a second
# runtime ("crun"), to prove that a profile can hold containers to a stronger one.
# Test images are made offline: busybox from Debian's busybox-static, imported with
# `docker import`, and pushed to the local registry on 127.0.0.1 for pull tests.
set -euo pipefail

cmd=${1:?usage: engine.sh start|stop DIR}
dir=${2:?usage: engine.sh start|stop DIR}

wait_for() { # wait_for SECONDS COMMAND...: bounded retry
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 0.2
  done
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

stop_pid() { # stop_pid PIDFILE: TERM, wait up to 20 s, then KILL
  local f=$1 pid
  [[ -s $f ]] || return 0
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

start() {
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  local sock="$dir/docker.sock"
  # The default bridge network on a bridge of its own (never the host's docker0, never
  # another engine's); dockerd gives it a free subnet. Removed by stop.
  local bridge; bridge="dg$(printf %s "$dir" | md5sum | cut -c1-10)"
  ip link add "$bridge" type bridge 2>/dev/null || true
  ip link set "$bridge" up
  echo "$bridge" >"$dir/bridge"
  # DOCKGATE_DOCKERD_ARGS: more flags, split on spaces (scripts/fleet.sh: --cgroup-parent).
  local more=()
  read -r -a more <<<"${DOCKGATE_DOCKERD_ARGS:-}"
  dockerd \
    --data-root "$dir/data" --exec-root "$dir/exec" --pidfile "$dir/dockerd.pid" \
    --host "unix://$sock" --bridge "$bridge" --iptables=false --ip-masq=false \
    --add-runtime crun=/usr/bin/crun "${more[@]}" \
    >"$dir/dockerd.log" 2>&1 &
  if ! wait_for 60 docker -H "unix://$sock" version; then
    echo "engine.sh: dockerd did not come up; log follows" >&2
    tail -n 30 "$dir/dockerd.log" >&2
    return 1
  fi

  local port; port=$(free_port)
  mkdir -p "$dir/registry"
  cat >"$dir/registry.yml" <<YML
version: 0.1
storage:
  filesystem:
    rootdirectory: $dir/registry
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$port
YML
  docker-registry serve "$dir/registry.yml" >"$dir/registry.log" 2>&1 &
  echo $! >"$dir/registry.pid"
  if ! wait_for 30 curl -fsS "http://127.0.0.1:$port/v2/"; then
    echo "engine.sh: docker-registry did not come up; log follows" >&2
    tail -n 30 "$dir/registry.log" >&2
    return 1
  fi

  # busybox image from Debian's busybox-static, one symlink per applet.
  local root="$dir/busybox-root"
  rm -rf "$root"; mkdir -p "$root/bin" "$root/tmp" "$root/etc"; chmod 1777 "$root/tmp"
  cp /bin/busybox "$root/bin/busybox"
  for applet in $("$root/bin/busybox" --list); do
    [[ $applet == busybox ]] || ln -sf busybox "$root/bin/$applet"
  done
  echo 'root:x:0:0:root:/root:/bin/sh' >"$root/etc/passwd"
  echo 'nobody:x:65534:65534:nobody:/:/bin/sh' >>"$root/etc/passwd"
  echo 'root:x:0:' >"$root/etc/group"
  tar -C "$root" -c . | docker -H "unix://$sock" import \
    --change 'CMD ["/bin/sh"]' --change 'ENV PATH=/bin' - dockgate/test-busybox:latest >/dev/null
  local remote="127.0.0.1:$port/dockgate/test-busybox:latest"
  docker -H "unix://$sock" tag dockgate/test-busybox:latest "$remote"
  docker -H "unix://$sock" push "$remote" >/dev/null
  docker -H "unix://$sock" rmi "$remote" >/dev/null

  # The python session image for sidecar tests (debootstrap, cached between runs).
  "$(dirname "$0")/runtime-image.sh" "unix://$sock" dockgate/sandbox-runtime:test

  cat >"$dir/env" <<ENV
export DOCKGATE_TEST_ENGINE=unix://$sock
export DOCKGATE_TEST_REGISTRY=127.0.0.1:$port
export DOCKGATE_TEST_IMAGE=dockgate/test-busybox:latest
export DOCKGATE_TEST_RUNTIME_IMAGE=dockgate/sandbox-runtime:test
ENV
  echo "engine.sh: dockerd on unix://$sock, registry on 127.0.0.1:$port"
}

stop() {
  [[ -d $dir ]] || return 0
  stop_pid "$dir/registry.pid"
  stop_pid "$dir/dockerd.pid"
  # dockerd unmounts its layers on a clean stop; anything left behind goes now.
  { grep -o " $dir/[^ ]*" /proc/mounts || true; } | sort -r | while read -r m; do
    umount -l "$m" || true
  done
  if [[ -s $dir/bridge ]]; then ip link del "$(cat "$dir/bridge")" 2>/dev/null || true; fi
  rm -rf "$dir" 2>/dev/null || true
}

case $cmd in
  start) start ;;
  stop) stop ;;
  *) echo "usage: engine.sh start|stop DIR" >&2; exit 2 ;;
esac

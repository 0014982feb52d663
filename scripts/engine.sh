#!/usr/bin/env bash
# A private Docker engine and image registry for dockgate's tests.
#
#   scripts/engine.sh start DIR   start dockerd and docker-registry under DIR, write DIR/env
#   scripts/engine.sh stop DIR    stop both, by the PIDs recorded under DIR
#
# The engine has its own --data-root, --exec-root, --pidfile and socket, so it never
# touches a daemon the user already runs. It has the default bridge network (clients such
# as testcontainers inspect it) on a bridge of its own, and its networks' addresses come
# from a /16 of its own (DIR/pool: 10.N.0.0/16, N from 200 to 254, one no route and no
# other running engine.sh uses); dockerd leaves iptables alone (--iptables=false):
# containers reach each other, not the outside.
# Beside another dockerd (most developers' machines): that daemon sets the FORWARD policy
# to DROP, and with br_netfilter even traffic bridged between two containers on one of our
# bridges passes FORWARD, so our containers could not reach each other. The engine's own
# chain DGENGINE-<hash> accepts, from FORWARD's first rule, what goes between its pool's
# addresses and across its default bridge, nothing else, and only in the iptables backends
# in use (nf_tables always; legacy only if its filter table is loaded, where such a daemon
# put its DROP); stop removes the chain and its jump. The other daemon's rules and policy
# are never touched (scripts/lib.sh, which also holds wait_for, free_port and stop_pid).
# Debian's crun is registered as a second runtime ("crun"), to prove that a profile can
# hold containers to a stronger one, and gVisor's runsc (Debian's package) as "runsc" when
# it is installed, both through the engine's own configuration file (DIR/daemon.json,
# dockerd --config-file: --add-runtime cannot pass a runtime its arguments). runsc runs
# with --network=none: its netstack's check for a root network namespace misfires on this
# kernel (every container fails to start, even with `docker run --network none`), and the
# sessions have no network anyway (an allowlist session cannot run on it: docs/sidecar.md,
# "gVisor"); and with --oci-seccomp: without it runsc ignores the container's seccomp
# profile (Docker's default, or the one the gate forces), which then filters nothing in the
# guest; with it the profile is applied to the guest's system calls as runc applies it to
# the host's. DIR/env says DOCKGATE_TEST_RUNSC=1 when runsc is registered; without it the
# [runsc] tests skip, saying so (scripts/test.sh installs it and fails without it).
# A runsc container that failed to start can leave its sandbox and gofer (and their shim)
# running after dockerd stops: stop ends them by the PIDs runsc recorded under the
# engine's exec root (its state files), and their shim as the sandbox's parent, never by a
# pattern over the machine's processes.
# Test images are made offline: busybox from Debian's busybox-static, imported with
# `docker import`, and pushed to the local registry on 127.0.0.1 for pull tests.
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

cmd=${1:?usage: engine.sh start|stop DIR}
dir=${2:?usage: engine.sh start|stop DIR}

# pool_take DIR: a 10.N.0.0/16 that no route of this network namespace overlaps and no
# other engine.sh holds (/run/dockgate-engine-pools/N, made with mkdir: atomic), recorded
# in DIR/pool. A claim whose engine directory is gone is stale and taken back.
pool_claims=/run/dockgate-engine-pools
pool_take() {
  local n owner
  mkdir -p "$pool_claims"
  for n in $(seq 200 254); do
    # Any route but the default one that overlaps the /16 (a LAN, a VPN, another engine).
    if ip -4 route show table all 2>/dev/null | awk '$1 ~ /^[0-9]/ {print $1}' |
      python3 -c 'import ipaddress, sys
pool = ipaddress.ip_network(sys.argv[1])
sys.exit(0 if any(ipaddress.ip_network(l.strip(), strict=False).overlaps(pool) for l in sys.stdin if l.strip()) else 1)' "10.$n.0.0/16"; then
      continue
    fi
    if ! mkdir "$pool_claims/$n" 2>/dev/null; then
      owner=$(cat "$pool_claims/$n/dir" 2>/dev/null || true)
      [[ -n $owner && ! -d $owner ]] || continue
      rm -rf "${pool_claims:?}/$n"
      mkdir "$pool_claims/$n" 2>/dev/null || continue
    fi
    echo "$dir" >"$pool_claims/$n/dir"
    echo "10.$n.0.0/16" >"$dir/pool"
    return 0
  done
  echo "engine.sh: no free 10.N.0.0/16 (N 200-254) for the engine's networks" >&2
  return 1
}
pool_release() {
  local pool n
  pool=$(cat "$dir/pool" 2>/dev/null) || return 0
  n=${pool#10.}; n=${n%%.*}
  if [[ $(cat "$pool_claims/$n/dir" 2>/dev/null) == "$dir" ]]; then rm -rf "${pool_claims:?}/$n"; fi
  rm -f "$dir/pool"
}

start() {
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  local sock="$dir/docker.sock"
  # The default bridge network on a bridge of its own (never the host's docker0, never
  # another engine's); dockerd gives it a free subnet of the pool. Removed by stop.
  local hash bridge pool
  hash=$(printf %s "$dir" | md5sum | cut -c1-10)
  bridge="dg$hash"
  ip link add "$bridge" type bridge 2>/dev/null || true
  ip link set "$bridge" up
  echo "$bridge" >"$dir/bridge"
  pool_take
  pool=$(cat "$dir/pool")
  # FORWARD beside another dockerd (scripts/lib.sh): what goes between the pool's
  # addresses (every network of the engine, the default bridge's included) and anything
  # across the default bridge.
  forward_chain_add "$dir/iptables" "DGENGINE-$hash" "-s $pool -d $pool" "-i $bridge -o $bridge"
  # DOCKGATE_DOCKERD_ARGS: more flags, split on spaces (scripts/fleet.sh: --cgroup-parent).
  local more=()
  read -r -a more <<<"${DOCKGATE_DOCKERD_ARGS:-}"
  local runsc=0
  if [[ -x /usr/bin/runsc ]]; then runsc=1; fi
  python3 - "$dir/daemon.json" "$runsc" <<'PY'
import json, sys
runtimes = {"crun": {"path": "/usr/bin/crun"}}
if sys.argv[2] == "1":
    runtimes["runsc"] = {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=none", "--oci-seccomp"]}
json.dump({"runtimes": runtimes}, open(sys.argv[1], "w"), indent=2)
PY
  dockerd --config-file "$dir/daemon.json" \
    --data-root "$dir/data" --exec-root "$dir/exec" --pidfile "$dir/dockerd.pid" \
    --host "unix://$sock" --bridge "$bridge" --iptables=false --ip-masq=false \
    --default-address-pool "base=$pool,size=24" "${more[@]}" \
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

  # The python session image for sidecar tests (debootstrap, cached between runs);
  # ENGINE_RUNTIME_IMAGE=0 leaves it out (tests that need busybox only).
  if [[ ${ENGINE_RUNTIME_IMAGE:-1} != 0 ]]; then
    "$(dirname "$0")/runtime-image.sh" "unix://$sock" dockgate/sandbox-runtime:test
  fi

  cat >"$dir/env" <<ENV
export DOCKGATE_TEST_ENGINE=unix://$sock
export DOCKGATE_TEST_REGISTRY=127.0.0.1:$port
export DOCKGATE_TEST_IMAGE=dockgate/test-busybox:latest
export DOCKGATE_TEST_RUNTIME_IMAGE=dockgate/sandbox-runtime:test
export DOCKGATE_TEST_RUNSC=$runsc
ENV
  if [[ $runsc == 0 ]]; then
    echo "engine.sh: /usr/bin/runsc is not installed: runtime runsc NOT registered, the [runsc] tests will skip (apt-get install runsc)" >&2
  fi
  echo "engine.sh: dockerd on unix://$sock, registry on 127.0.0.1:$port"
}

# runsc_leftovers: what runsc and its shims left running once dockerd is gone, each by a PID
# recorded for this engine: a sandbox's and its gofer's from runsc's state files under the
# engine's runtime root (dockerd 20.10 gives every runtime of the runc shim the root
# DIR/exec/runtime-runc/moby), and the shim that started them (the sandbox's parent). A
# PID is ended only while its command line still names this engine's directory (a PID
# reused since by another process is left alone).
runsc_leftovers() {
  local pids pid
  pids=$(python3 - "$dir/exec" <<'PY'
import glob, json, os, sys
pids = set()
for f in glob.glob(os.path.join(sys.argv[1], "runtime-*", "*", "*.state")):
    try:
        st = json.load(open(f))
    except (OSError, ValueError):
        continue
    sandbox = (st.get("sandbox") or {}).get("pid")
    for p in (sandbox, st.get("goferPid")):
        if isinstance(p, int) and p > 1:
            pids.add(p)
    if isinstance(sandbox, int) and sandbox > 1:
        try:  # its shim: the sandbox's parent (stat's 4th field, after the comm)
            shim = int(open(f"/proc/{sandbox}/stat").read().rsplit(") ", 1)[1].split()[1])
            if shim > 1:
                pids.add(shim)
        except (OSError, ValueError, IndexError):
            pass
print(" ".join(str(p) for p in sorted(pids)))
PY
  )
  for pid in $pids; do
    if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "$dir/"; then
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
}

stop() {
  [[ -d $dir ]] || return 0
  dir=$(cd "$dir" && pwd)
  stop_pid "$dir/registry.pid" 20
  stop_pid "$dir/dockerd.pid" 20
  runsc_leftovers
  # dockerd unmounts its layers on a clean stop; anything left behind goes now.
  { grep -o " $dir/[^ ]*" /proc/mounts || true; } | sort -r | while read -r m; do
    umount -l "$m" || true
  done
  if [[ -s $dir/bridge ]]; then ip link del "$(cat "$dir/bridge")" 2>/dev/null || true; fi
  # The bridges of the engine's own networks (dockerd leaves them up when it stops): those
  # with an address of its pool, and only those.
  if [[ -s $dir/pool ]]; then
    local link
    for link in $(ip -4 -o addr show 2>/dev/null | python3 -c 'import ipaddress, sys
pool = ipaddress.ip_network(sys.argv[1])
for l in sys.stdin:
    f = l.split()
    if f[2] == "inet" and ipaddress.ip_interface(f[3]).ip in pool and f[1].startswith("br-"):
        print(f[1])' "$(cat "$dir/pool")"); do
      ip link del "$link" 2>/dev/null || true
    done
  fi
  forward_chain_remove "$dir/iptables"
  pool_release
  rm -rf "$dir" 2>/dev/null || true
}

case $cmd in
  start) start ;;
  stop) stop ;;
  *) echo "usage: engine.sh start|stop DIR" >&2; exit 2 ;;
esac

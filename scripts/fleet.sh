#!/usr/bin/env bash
# A fleet of sandbox hosts on one machine (issue 22): N hosts, each its own dockerd, gate
# and sidecar (FUSE workspaces) in a network namespace of its own, one object store
# (s3rver) and HAProxy (compose/fleet/haproxy.cfg) in front, on one address.
#
#   scripts/fleet.sh start DIR [N]   N hosts (default 3, at most 6), state under DIR
#   scripts/fleet.sh run DIR         30 sessions through HAProxy, each writing files; host 2
#                                    dies (SIGKILL); every session asked again: sessions
#                                    moved, time to take over, files lost
#   scripts/fleet.sh bench DIR       cells/s at 50 concurrent sessions through HAProxy with
#                                    1, 2, ... N hosts in it (a fresh start: every host live),
#                                    each host held to FLEET_HOST_CPUS (0.6) CPU meanwhile
#   scripts/fleet.sh stop DIR        everything stopped, unmounted and removed
#   scripts/fleet.sh smoke           the routing test (tests/fleet/haproxy_routing_test.py),
#                                    then start, run and stop in a temporary directory; exit 1
#                                    if a session did not answer again or a file was lost
#   scripts/fleet.sh kill DIR K      host K dies as a machine would (used by run;
#                                    FLEET_KILL_LINK=up: only its programs die)
#
# Host K lives in the network namespace dgfleet-K (10.77.0.1K), joined by a veth to the
# bridge dgfleet0 (10.77.0.1/24) in the root namespace, where s3rver and HAProxy listen.
# Nothing is routed out. A host's processes are started with nsenter --net only, not
# `ip netns exec`, which would also give them a mount namespace of their own: the FUSE
# mounts a sidecar makes must be visible to its host's dockerd. Needs root. Figures are
# printed; nothing timed is asserted.
# Beside a Docker daemon the user runs (FORWARD policy DROP; with br_netfilter frames
# bridged between two hosts' veths pass FORWARD too), the chain DGFLEET accepts what
# crosses dgfleet0 from one of its ports to another, nothing else; stop removes it
# (scripts/lib.sh, as scripts/engine.sh does for each host's engine).
# Every PID file holds the program's own PID (nsenter, sh and setsid exec it), so a stop's
# SIGTERM reaches the sidecar, which ends its sessions and says so in its log.
# DOCKGATE_RELEASE_DIR: the programs, built by the caller (default: build/release, built
# here).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
bin=${DOCKGATE_RELEASE_DIR:-$repo/build/release}
lease=10               # SANDBOX_INSTANCE_LEASE_S: the instance lease and the store's session lease
api_key=fleet-smoke    # SANDBOX_API_KEY, the same on every host
image=dockgate/sandbox-runtime:test  # python3 only (scripts/runtime-image.sh)
bridge=dgfleet0

say() { printf '== %s\n' "$*"; }
fail() { echo "fleet.sh: $*" >&2; exit 1; }
host_addr() { echo "10.77.0.1$1"; }
record() { # record PID FILE [PROGRAM]: the PID in FILE, and in DIR/started (what stop
  # checks is gone); with PROGRAM, the PID must be that program's own, not a wrapper's
  # (its /proc/PID/exe, waited for: the exec chain may still be under way).
  echo "$1" >"$2"
  echo "$1" >>"$dir/started"
  [[ -n ${3:-} ]] || return 0
  local exe
  for _ in $(seq 50); do
    exe=$(readlink "/proc/$1/exe" 2>/dev/null || true)
    [[ $exe == "$3" ]] && return 0
    sleep 0.1
  done
  fail "PID $1 in $2 is $exe, not $3"
}

# The PIDs of a host: every process in its network namespace (sidecar, gate, dockerd,
# containerd, shims, registry, s3fs) and every descendant of one (the containers' processes,
# which have network namespaces of their own).
host_pids() {
  local k=$1
  [[ -e /run/netns/dgfleet-$k ]] || return 0
  python3 - "$(stat -L -c %i "/run/netns/dgfleet-$k")" <<'PY'
import os, sys
ns = f"net:[{sys.argv[1]}]"
parent, inside = {}, set()
for p in filter(str.isdigit, os.listdir("/proc")):
    try:
        stat = open(f"/proc/{p}/stat").read()
        parent[int(p)] = int(stat[stat.rindex(")") + 2:].split()[1])
        if os.readlink(f"/proc/{p}/ns/net") == ns:
            inside.add(int(p))
    except OSError:
        pass
found, grew = set(inside), True
while grew:
    grew = False
    for p, pp in parent.items():
        if pp in found and p not in found:
            found.add(p)
            grew = True
found.discard(os.getpid())
print(" ".join(map(str, sorted(found))))
PY
}

# ---- the network --------------------------------------------------------------------
net_up() {
  ip link add "$bridge" type bridge
  ip addr add 10.77.0.1/24 dev "$bridge"
  ip link set "$bridge" up
  # Host to host across the bridge, beside another dockerd (scripts/lib.sh).
  forward_chain_add "$dir/iptables" DGFLEET "-i $bridge -o $bridge"
}
host_net_up() { # host_net_up K: the namespace, its veth into the bridge, lo
  local k=$1
  ip netns add "dgfleet-$k"
  ip link add "dgfleet$k" type veth peer name eth0 netns "dgfleet-$k"
  ip link set "dgfleet$k" master "$bridge" up
  ip -n "dgfleet-$k" addr add "$(host_addr "$k")/24" dev eth0
  ip -n "dgfleet-$k" link set eth0 up
  ip -n "dgfleet-$k" link set lo up
}

# ---- a host's CPU -------------------------------------------------------------------
# Every process of host K (engine, gate, sidecar, s3fs, and the session containers, through
# dockerd's --cgroup-parent) runs in the CPU cgroup dgfleet-K, so that `bench` can give each
# host a CPU budget of its own (FLEET_HOST_CPUS) as separate machines would have: on one
# machine the hosts otherwise share the same cores, and adding hosts adds no capacity.
# A session's container is held to SANDBOX_CPUS=0.5 here: cgroup v1 refuses a host budget
# below a container's own quota.
# cgroup v1's cpu hierarchy, or v2's unified one.
cg_dir() { if [[ -e /sys/fs/cgroup/cgroup.controllers ]]; then echo "/sys/fs/cgroup/dgfleet-$1"; else echo "/sys/fs/cgroup/cpu/dgfleet-$1"; fi; }
cg_make() {
  local cg; cg=$(cg_dir "$1")
  if [[ -e /sys/fs/cgroup/cgroup.controllers ]]; then echo +cpu >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true; fi
  mkdir -p "$cg"
}
cg_quota() { # cg_quota K CPUS|max: host K's CPU budget
  local cg us=max; cg=$(cg_dir "$1")
  [[ $2 == max ]] || us=$(awk -v c="$2" 'BEGIN { printf "%d", c * 100000 }')
  if [[ -e /sys/fs/cgroup/cgroup.controllers ]]; then
    echo "$us 100000" >"$cg/cpu.max"
  else
    echo 100000 >"$cg/cpu.cfs_period_us"
    if [[ $us == max ]]; then echo -1 >"$cg/cpu.cfs_quota_us"; else echo "$us" >"$cg/cpu.cfs_quota_us"; fi
  fi
}
cg_remove() { # host K's cgroups, in every hierarchy dockerd made them in (v1) or the one (v2)
  local cg
  for cg in /sys/fs/cgroup/dgfleet-"$1" /sys/fs/cgroup/*/dgfleet-"$1"; do
    [[ -d $cg ]] && find "$cg" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
}
# in_cg K PROGRAM...: PROGRAM in host K's network namespace and CPU cgroup
in_cg() { local k=$1; shift; nsenter --net="/run/netns/dgfleet-$k" sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$(cg_dir "$k")" "$@"; }
# spawn K PIDFILE EXE PROGRAM...: PROGRAM in the background, as in_cg, its own PID in
# PIDFILE. A simple command run with & is exec'd in bash's child, and nsenter, sh, env and
# setsid each exec the next (setsid without a fork: the child leads no process group), so
# $! is PROGRAM's PID; record checks it is EXE. (`in_cg ... &` would record the PID of a
# subshell running the function: a stop's SIGTERM ended that shell, never PROGRAM.)
spawn() {
  local k=$1 f=$2 exe=$3
  shift 3
  nsenter --net="/run/netns/dgfleet-$k" sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$(cg_dir "$k")" "$@" &
  record $! "$f" "$exe"
}

# ---- the object store ---------------------------------------------------------------
s3_start() { # s3rver (with S3's conditional writes: the store's leases) on the bridge
  local s3=$dir/s3
  S3RVER_ADDRESS=10.77.0.1 scripts/s3rver.sh start "$s3" >/dev/null
  cat "$s3/s3rver.pid" >>"$dir/started"
  # shellcheck disable=SC1091
  source "$s3/env"
  [[ $DOCKGATE_TEST_S3_ENDPOINT == http://10.77.0.1:* ]] || fail "s3rver is not on the bridge: $DOCKGATE_TEST_S3_ENDPOINT"
}

# ---- a host -------------------------------------------------------------------------
host_start() { # host_start K: engine, gate and sidecar of host K (its network is up)
  local k=$1 h=$dir/host$1
  mkdir -p "$h/mnt" && chmod 755 "$h/mnt"
  cg_make "$k"
  DOCKGATE_DOCKERD_ARGS="--cgroup-parent=/dgfleet-$k" in_cg "$k" scripts/engine.sh start "$h/engine" >"$h/engine-start.log" 2>&1 ||
    { tail -n 20 "$h/engine-start.log" >&2; return 1; }
  # The gate's policy: the sandbox profile with its workspace root at this host's mount
  # root; root's file, not writable by others (the gate refuses anything else).
  sed "s|\"/mnt/aimem\"|\"$h/mnt\"|" compose/policies/sandbox.json >"$h/sandbox.json.tmp"
  install -m 0644 "$h/sandbox.json.tmp" "$h/sandbox.json" && rm -f "$h/sandbox.json.tmp"
  spawn "$k" "$h/gate.pid" "$bin/proxy/dockgate-proxy" setsid "$bin/proxy/dockgate-proxy" --upstream "unix://$h/engine/docker.sock" \
    --listen "unix://$h/gate.sock" --policy "$h/sandbox.json" >"$h/gate-audit.log" 2>"$h/gate.log" </dev/null
  wait_for 20 test -S "$h/gate.sock" || { tail -n 20 "$h/gate.log" >&2; return 1; }
  local addr; addr=$(host_addr "$k")
  # The members a sidecar forwards to (never an address read from the store) and the
  # fleet's shared secret that signs the hop (docs/sidecar.md, "Members trust each other").
  local members="" m
  for ((m = 1; m <= $(cat "$dir/hosts"); m++)); do members+="${members:+,}fleet-$m=http://$(host_addr "$m"):8000"; done
  [[ -s $dir/fleet.key ]] || (umask 077 && openssl rand -hex 32 >"$dir/fleet.key")
  spawn "$k" "$h/sidecar.pid" "$bin/sidecar/dockgate-sidecar" env -u SANDBOX_ALLOW_NO_AUTH -u AWS_CA_BUNDLE \
    DOCKER_HOST="unix://$h/gate.sock" SANDBOX_LISTEN="$addr:8000" SANDBOX_FLEET_URL="http://$addr:8000" \
    SANDBOX_FLEET_MEMBERS="$members" SANDBOX_FLEET_KEY_FILE="$dir/fleet.key" \
    SANDBOX_INSTANCE="fleet-$k" SANDBOX_INSTANCE_LEASE_S="$lease" SANDBOX_API_KEY="$api_key" \
    SANDBOX_IMAGE="$image" SANDBOX_PULL_ON_START=0 SANDBOX_WARM_POOL=0 SANDBOX_CPUS=0.5 \
    SANDBOX_MAX_SESSIONS=120 SANDBOX_MAX_CONCURRENT_EXECS=64 SANDBOX_MAX_CONCURRENT_CREATES=8 \
    SANDBOX_WORKSPACE_MODE=fuse SANDBOX_MOUNT_COMMAND="$bin/mount/dockgate-mount" \
    AIMEM_BUCKET="$DOCKGATE_TEST_S3_BUCKET" AIMEM_ENDPOINT="$DOCKGATE_TEST_S3_ENDPOINT" \
    AIMEM_ACCESS_KEY="$DOCKGATE_TEST_S3_ACCESS_KEY" AIMEM_SECRET_KEY="$DOCKGATE_TEST_S3_SECRET_KEY" \
    AIMEM_PREFIX=fleet AIMEM_MOUNT_ROOT="$h/mnt" \
    setsid "$bin/sidecar/dockgate-sidecar" >"$h/sidecar.log" 2>&1 </dev/null
  cat "$h/engine/dockerd.pid" "$h/engine/registry.pid" >>"$dir/started"
  wait_for 60 curl -fsS "http://$addr:8000/healthz" || { tail -n 20 "$h/sidecar.log" >&2; return 1; }
}

# ---- HAProxy ------------------------------------------------------------------------
haproxy_start() { # haproxy_start N: HAProxy with hosts 1..N, waiting until all are UP
  local n=$1 k port env=()
  stop_pid "$dir/haproxy.pid" 10
  port=$(cat "$dir/port" 2>/dev/null || free_port)
  echo "$port" >"$dir/port"
  for ((k = 1; k <= n; k++)); do env+=("FLEET_HOST_$k=$(host_addr "$k"):8000"); done
  env FLEET_BIND="127.0.0.1:$port" FLEET_ADMIN_SOCKET="$dir/haproxy.sock" "${env[@]}" \
    setsid haproxy -db -f compose/fleet/haproxy.cfg >>"$dir/haproxy.log" 2>&1 </dev/null &
  record $! "$dir/haproxy.pid" "$(command -v haproxy)"
  wait_for 20 servers_up "$n" || { tail -n 20 "$dir/haproxy.log" >&2; fail "HAProxy's servers did not come up"; }
}
servers_up() { # servers_up N: HAProxy's runtime API says N servers of new_sessions are UP
  python3 - "$dir/haproxy.sock" "$1" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b"show stat\n")
out = b""
while chunk := s.recv(65536):
    out += chunk
rows = [line.split(",") for line in out.decode().splitlines() if line.startswith("new_sessions,fleet-")]
sys.exit(0 if sum(r[17] == "UP" for r in rows) == int(sys.argv[2]) else 1)
PY
}

ensure_haproxy() {
  # HAProxy is for the fleet only, as for scripts/bench.sh (not in install-deps.sh).
  command -v haproxy >/dev/null || { apt-get update -qq && apt-get install -y -qq --no-install-recommends haproxy; }
}

# ---- subcommands --------------------------------------------------------------------
start() {
  local n=${1:-3}
  ((n >= 1 && n <= 6)) || fail "N must be 1..6"
  [[ $(id -u) -eq 0 ]] || fail "run as root (network namespaces, dockerd, FUSE)"
  ! ip link show "$bridge" >/dev/null 2>&1 || fail "$bridge exists: a fleet runs already (scripts/fleet.sh stop ITS_DIR)"
  [[ ${SKIP_DEPS:-0} == 1 ]] || scripts/install-deps.sh
  ensure_haproxy
  if [[ -z ${DOCKGATE_RELEASE_DIR:-} ]]; then
    cmake --preset release >/dev/null
    cmake --build --preset release --target dockgate-proxy dockgate-sidecar dockgate-mount >/dev/null
  fi
  mkdir -p "$dir" && chmod 755 "$dir"
  echo "$n" >"$dir/hosts"
  net_up
  s3_start
  say "$n hosts (engine, gate, sidecar each), s3rver on $DOCKGATE_TEST_S3_ENDPOINT"
  local k pids=()
  for ((k = 1; k <= n; k++)); do host_net_up "$k"; done
  # The hosts come up side by side (each imports the session image into its own engine).
  for ((k = 1; k <= n; k++)); do host_start "$k" & pids+=($!); done
  for k in "${!pids[@]}"; do wait "${pids[k]}" || fail "host $((k + 1)) did not start (logs in $dir/host$((k + 1)))"; done
  haproxy_start "$n"
  echo "http://127.0.0.1:$(cat "$dir/port")" >"$dir/url"
  say "fleet up: $(cat "$dir/url") (HAProxy) -> $(for ((k = 1; k <= n; k++)); do printf '%s:8000 ' "$(host_addr "$k")"; done)"
}

kill_host() { # kill_host K: SIGKILL every process of host K at once, then its link down
  local k=$1 pids
  pids=$(host_pids "$k")
  # Stopped first, so none of them sees another die and acts (dockerd restarting
  # containerd, a shim reporting an exit): then all killed.
  # shellcheck disable=SC2086
  if [[ -n $pids ]]; then kill -STOP $pids 2>/dev/null || true; kill -KILL $pids 2>/dev/null || true; fi
  # A dead machine answers nothing: its link goes down, and a connect to it hangs until
  # its peer gives up. FLEET_KILL_LINK=up leaves the link up: the kernel still answers a
  # connect with a reset, as after a crash of the programs on a live machine.
  if [[ ${FLEET_KILL_LINK:-down} == down ]]; then ip link set "dgfleet$k" down; fi
  echo "fleet.sh: host $k killed ($(wc -w <<<"$pids") processes), its link ${FLEET_KILL_LINK:-down}" >&2
}

run() {
  [[ -s $dir/url ]] || fail "no fleet under $dir (scripts/fleet.sh start $dir)"
  local n engines=() k
  n=$(cat "$dir/hosts")
  ((n >= 2)) || fail "run needs at least 2 hosts"
  for ((k = 1; k <= n; k++)); do engines+=(--engine "fleet-$k=unix://$dir/host$k/engine/docker.sock"); done
  say "failover: 30 sessions, then host 2 dies"
  python3 tests/fleet/fleet_client.py failover --url "$(cat "$dir/url")" --key "$api_key" "${engines[@]}" \
    --victim fleet-2 --kill "$repo/scripts/fleet.sh kill $dir 2" --lease "$lease" --sessions "${SESSIONS:-30}" |
    tee "$dir/run.out"
  return "${PIPESTATUS[0]}"
}

bench() {
  [[ -s $dir/url ]] || fail "no fleet under $dir (scripts/fleet.sh start $dir)"
  local n k status=0
  n=$(cat "$dir/hosts")
  for ((k = 1; k <= n; k++)); do
    curl -fsS -o /dev/null "http://$(host_addr "$k"):8000/healthz" || fail "host $k is down: bench needs a fresh start"
  done
  : >"$dir/bench.out"
  # Each host a CPU budget of its own, as a machine of its own would have.
  local cpus=${FLEET_HOST_CPUS:-0.6}
  for ((k = 1; k <= n; k++)); do cg_quota "$k" "$cpus"; done
  say "bench: each host limited to $cpus CPU (FLEET_HOST_CPUS; cgroup dgfleet-K)"
  for ((k = 1; k <= n; k++)); do
    haproxy_start "$k"
    say "bench: $k host(s) in HAProxy, ${SESSIONS:-50} sessions, print(1) cells for ${SECONDS_PER_RUN:-20} s"
    python3 tests/fleet/fleet_client.py bench --url "$(cat "$dir/url")" --key "$api_key" --tag "hosts=$k" \
      --sessions "${SESSIONS:-50}" --seconds "${SECONDS_PER_RUN:-20}" | tee -a "$dir/bench.out" || status=1
  done
  haproxy_start "$n"
  for ((k = 1; k <= n; k++)); do cg_quota "$k" max; done
  python3 - "$dir/bench.out" <<'PY'
import json, sys
rows = [json.loads(l[7:]) for l in open(sys.argv[1]) if l.startswith("RESULT ")]
print(f"{'hosts':>6}{'sessions':>10}{'cells/s':>10}{'p50 ms':>8}{'vs 1 host':>11}")
for r in rows:
    print(f"{r['tag'].split('=')[1]:>6}{r['sessions']:>10}{r['cells_per_s']:>10.1f}{r['p50_ms']:>8.0f}"
          f"{r['cells_per_s'] / rows[0]['cells_per_s']:>11.2f}")
PY
  return "$status"
}

host_stop() { # host_stop K: sidecar, gate, engine of host K; what a killed host left
  local k=$1 h=$dir/host$1 pids
  # The sidecar first: it ends its sessions (unmounting their workspaces) through the gate.
  # A live one must say it stopped cleanly (SIGTERM reached it, not a wrapper's shell).
  if alive "$h/sidecar.pid"; then
    stop_pid "$h/sidecar.pid" 30
    grep -q '^dockgate-sidecar: stopped' "$h/sidecar.log" 2>/dev/null || echo "$k" >>"$dir/unclean"
  fi
  if alive "$h/gate.pid" && [[ -S $h/engine/docker.sock ]]; then
    docker -H "unix://$h/engine/docker.sock" ps -aq | xargs -r docker -H "unix://$h/engine/docker.sock" rm -f >/dev/null 2>&1 || true
  fi
  stop_pid "$h/gate.pid" 10
  if [[ -e /run/netns/dgfleet-$k ]]; then nsenter --net="/run/netns/dgfleet-$k" scripts/engine.sh stop "$h/engine" || true
  else scripts/engine.sh stop "$h/engine" || true; fi
  # What a killed host leaves: its s3fs processes (their FUSE mounts are unmounted below).
  pids=$(host_pids "$k")
  # shellcheck disable=SC2086
  if [[ -n $pids ]]; then kill -KILL $pids 2>/dev/null || true; sleep 0.5; fi
}

stop() {
  [[ -d $dir ]] || return 0
  local k n=6 pids left_pids=""
  [[ -s $dir/hosts ]] && n=$(cat "$dir/hosts")
  stop_pid "$dir/haproxy.pid" 10
  # The hosts side by side: each sidecar ends its sessions, then its gate and engine stop.
  local stops=()
  for ((k = 1; k <= n; k++)); do
    [[ -d $dir/host$k ]] || continue
    host_stop "$k" &
    stops+=($!)
  done
  for k in "${stops[@]}"; do wait "$k" || true; done
  # Every mount under DIR (FUSE workspaces, dockerd's layers of a killed engine), deepest first.
  { grep -o " $dir/[^ ]*" /proc/mounts || true; } | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
  for ((k = 1; k <= n; k++)); do
    left_pids+=$(host_pids "$k" | sed 's/^./ &/')
    ip netns del "dgfleet-$k" 2>/dev/null || true
    ip link del "dgfleet$k" 2>/dev/null || true
    cg_remove "$k"
  done
  ip link del "$bridge" 2>/dev/null || true
  forward_chain_remove "$dir/iptables"
  if [[ -d $dir/s3 ]]; then scripts/s3rver.sh stop "$dir/s3" || true; fi
  # What is left, said: nothing of the fleet may run or be mounted, and every sidecar
  # that was alive stopped cleanly.
  local left_mounts p unclean
  unclean=$(sort -n "$dir/unclean" 2>/dev/null | tr '\n' ' ' || true)
  left_mounts=$(grep -c " $dir/" /proc/mounts || true)
  while read -r p; do
    if kill -0 "$p" 2>/dev/null; then left_pids+=" $p"; fi
  done < <(cat "$dir/started" 2>/dev/null || true)
  rm -rf "$dir"
  if [[ $left_mounts != 0 || -n $left_pids ]] || ip link show "$bridge" >/dev/null 2>&1; then
    echo "fleet.sh: left behind: $left_mounts mounts, processes:${left_pids:- none}" >&2
    return 1
  fi
  if [[ -n $unclean ]]; then
    echo "fleet.sh: the sidecar of host(s) $unclean did not stop cleanly (no 'stopped' line in its log)" >&2
    return 1
  fi
  echo "fleet.sh: stopped; nothing of the fleet runs or is mounted (checked /proc/mounts and the recorded PIDs)"
}

smoke() {
  dir=$(mktemp -d /tmp/dockgate-fleet.XXXXXX)
  # Stopped on any exit; a stop that leaves something behind fails the smoke too.
  # shellcheck disable=SC2154  # rc is the trap's own
  trap 'rc=$?; stop || rc=1; exit $rc' EXIT
  ensure_haproxy
  say "haproxy.cfg's routing, against stub sidecars"
  python3 tests/fleet/haproxy_routing_test.py
  start 3
  run
}

cmd=${1:?usage: fleet.sh start DIR [N] | run DIR | bench DIR | stop DIR | smoke}
if [[ $cmd != smoke ]]; then
  dir=${2:?usage: fleet.sh $cmd DIR}
  mkdir -p "$(dirname "$dir")"
  dir=$(cd "$(dirname "$dir")" && pwd)/$(basename "$dir")
fi
case $cmd in
  start) start "${3:-3}" ;;
  run) run ;;
  bench) bench ;;
  stop) stop ;;
  kill) kill_host "${3:?usage: fleet.sh kill DIR K}" ;;
  smoke) smoke ;;
  *) echo "usage: fleet.sh start DIR [N] | run DIR | bench DIR | stop DIR | smoke" >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# The scripts beside a Docker daemon the user runs (issue 39 item 7). Such a daemon leaves
# iptables' FORWARD policy at DROP, and with br_netfilter (net.bridge.bridge-nf-call-iptables
# =1) frames bridged between two ports of one bridge pass FORWARD too. That state is made
# here in a network namespace of the test's own (FORWARD and the bridge sysctl are per
# namespace: the machine's own, and every other engine on it, are left alone), and in it:
#   - scripts/engine.sh's containers reach each other, on a user-defined network (as the
#     compose test's services do) by name and on the default bridge by address;
#   - scripts/fleet.sh's hosts reach each other across dgfleet0 (FLEET=0 leaves this out);
#   - each stop removes its chain, and leaves FORWARD's policy and the other rules as they
#     were; fleet.sh's stop reaches every sidecar's clean shutdown (it checks that itself).
# Judged by the packets (ping, HTTP answers) and by iptables' own listing.
#
# Needs root. The fleet part needs the release programs (DOCKGATE_RELEASE_DIR, default
# build/release) and the session image cache (scripts/runtime-image.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
release=${DOCKGATE_RELEASE_DIR:-$root/build/release}
ns=dgbeside$$
work=$(mktemp -d /tmp/dockgate-beside.XXXXXX)
failures=0
# shellcheck source=scripts/lib.sh
source "$root/scripts/lib.sh"  # check
in_ns() { nsenter --net="/run/netns/$ns" "$@"; }

ip netns add "$ns"
ip -n "$ns" link set lo up
cleanup() {
  in_ns "$root/scripts/engine.sh" stop "$work/engine" >/dev/null 2>&1 || true
  if [[ -d $work/fleet ]]; then in_ns "$root/scripts/fleet.sh" stop "$work/fleet" >/dev/null 2>&1 || true; fi
  ip netns del "$ns" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# --- the other daemon's state: FORWARD DROP, bridged frames through iptables ---------
# In the backend it uses: nf_tables (Debian 12's iptables) or legacy (iptables-legacy),
# each in turn for the engine; a packet the chain accepts in one backend is still dropped
# by the other's policy, so the chain must be where the DROP is.
sysctl_file=/proc/sys/net/bridge/bridge-nf-call-iptables
if [[ ! -e $sysctl_file ]] && command -v modprobe >/dev/null; then modprobe br_netfilter 2>/dev/null || true; fi
bridged=no
if in_ns test -e "$sysctl_file"; then
  sysctl_before=$(in_ns cat "$sysctl_file")
  in_ns sh -c "echo 1 >$sysctl_file"
  bridged=yes
else
  echo "note: no br_netfilter on this kernel: frames bridged on one bridge do not pass FORWARD here"
fi
other=iptables  # the other daemon's backend, for the fleet part: the last one the engine met
policy_before=
other_daemon() {  # other_daemon BACKEND: its DROP policy and a rule of its own
  other=$1
  policy_before=$(in_ns "$other" -S FORWARD | head -n 1)
  in_ns "$other" -P FORWARD DROP
  in_ns "$other" -A FORWARD -m comment --comment other-daemon -j DROP
}
other_daemon_gone() {
  in_ns "$other" -D FORWARD -m comment --comment other-daemon -j DROP
  in_ns "$other" -P FORWARD "$(awk '{print $3}' <<<"$policy_before")"
}
# Legacy iptables where this kernel has it (a CI container may not load its tables).
legacy=no
if command -v iptables-legacy >/dev/null && in_ns iptables-legacy -S >/dev/null 2>&1; then legacy=yes; fi
all_rules() { in_ns iptables -S; if [[ $legacy == yes ]]; then in_ns iptables-legacy -S; fi; }

# --- scripts/engine.sh -------------------------------------------------------------------
backends=(iptables)
if [[ $legacy == yes ]]; then backends+=(iptables-legacy); else echo "note: no legacy iptables here: nf_tables only"; fi
for backend in "${backends[@]}"; do
  [[ $backend == iptables ]] || other_daemon_gone
  other_daemon "$backend"
  rules_before=$(all_rules)
  in_ns env ENGINE_RUNTIME_IMAGE=0 "$root/scripts/engine.sh" start "$work/engine" >"$work/engine.log" 2>&1 ||
    { cat "$work/engine.log"; exit 1; }
  docker="docker -H unix://$work/engine/docker.sock"
  image=dockgate/test-busybox:latest
  chain=$(awk -v b="$backend" '$1 == b {print $2}' "$work/engine/iptables" 2>/dev/null || true)
  check "engine ($backend): its chain is jumped to from FORWARD ($chain)" \
    sh -c "nsenter --net=/run/netns/$ns $backend -S FORWARD | grep -qx -- '-A FORWARD -j $chain'"
  $docker network create dgbeside >/dev/null
  for c in one two; do $docker run -d --name "beside-$c" --network dgbeside "$image" sleep 600 >/dev/null; done
  for c in three four; do $docker run -d --name "beside-$c" "$image" sleep 600 >/dev/null; done
  four=$($docker inspect -f '{{.NetworkSettings.IPAddress}}' beside-four)
  check "engine ($backend): a user-defined network's containers ping each other by name (bridged: $bridged)" \
    $docker exec beside-one ping -c 1 -W 3 beside-two
  check "engine ($backend): and by TCP (nc to a listener in the other)" sh -c "
    $docker exec -d beside-two sh -c 'echo tcp-ok | nc -l -p 7000'
    sleep 0.5
    $docker exec beside-one sh -c 'nc -w 3 beside-two 7000' | grep -qx tcp-ok"
  check "engine ($backend): the default bridge's containers ping each other ($four)" \
    $docker exec beside-three ping -c 1 -W 3 "$four"
  $docker rm -f beside-one beside-two beside-three beside-four >/dev/null
  in_ns "$root/scripts/engine.sh" stop "$work/engine"
  check "engine ($backend): stop removed its chain and left every other rule and the policy as they were" \
    test "$(all_rules)" = "$rules_before"
done

# --- scripts/fleet.sh --------------------------------------------------------------------
if [[ ${FLEET:-1} == 1 ]]; then
  # The fleet's bridge, namespaces and HAProxy, all made from inside this namespace (which
  # has no way out: HAProxy is installed before, as fleet.sh would).
  command -v haproxy >/dev/null || { apt-get update -qq && apt-get install -y -qq --no-install-recommends haproxy; }
  in_ns env SKIP_DEPS=1 DOCKGATE_RELEASE_DIR="$release" "$root/scripts/fleet.sh" start "$work/fleet" 2 \
    >"$work/fleet.log" 2>&1 || { tail -n 30 "$work/fleet.log"; exit 1; }
  check "fleet: host 1 reaches host 2's sidecar across dgfleet0" \
    nsenter --net=/run/netns/dgfleet-1 curl -fsS -m 5 -o /dev/null http://10.77.0.12:8000/healthz
  check "fleet: host 2 reaches host 1's sidecar across dgfleet0" \
    nsenter --net=/run/netns/dgfleet-2 curl -fsS -m 5 -o /dev/null http://10.77.0.11:8000/healthz
  check "fleet: each PID file holds its program (the sidecar's, not a shell's)" \
    test "$(readlink "/proc/$(cat "$work/fleet/host1/sidecar.pid")/exe")" = "$release/sidecar/dockgate-sidecar"
  check "fleet: stop ends everything, every sidecar cleanly" in_ns "$root/scripts/fleet.sh" stop "$work/fleet"
  check "fleet: stop removed its chains and left every other rule and the policy as they were" \
    test "$(all_rules)" = "$rules_before"
fi

# --- the other daemon's state, restored as it was ----------------------------------------
other_daemon_gone
if [[ $bridged == yes ]]; then in_ns sh -c "echo $sysctl_before >$sysctl_file"; fi

if ((failures)); then echo "$failures check(s) failed"; exit 1; fi
echo "all beside-host-docker checks passed"

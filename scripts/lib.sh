# shellcheck shell=bash
# What the scripts would otherwise each write again (sourced, not run): scripts/*.sh and the
# tests' shell scripts (tests/stack, tests/package, tests/first_run) source it from their
# own directory (`source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"`, or ../../scripts/lib.sh).
# It only defines: nothing runs, no option is set. compose/egress.Dockerfile copies it
# beside egress-proxy.sh, which sources it there too.

# wait_for SECONDS COMMAND...: COMMAND run (its output dropped) every 0.2 s until it
# succeeds; 1 if SECONDS pass first.
wait_for() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 0.2
  done
}

# free_port [ADDRESS]: a TCP port free on ADDRESS (default 127.0.0.1), as the kernel picks
# one for a bind to port 0. Free when asked: the caller binds it soon after.
# shellcheck disable=SC2120  # ADDRESS is optional
free_port() {
  python3 -c 'import socket, sys; s=socket.socket(); s.bind((sys.argv[1], 0)); print(s.getsockname()[1])' \
    "${1:-127.0.0.1}"
}

# alive PIDFILE: the process PIDFILE names is running.
alive() { [[ -s $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

# stop_pid PIDFILE [SECONDS]: the process PIDFILE names sent TERM, waited for up to SECONDS
# (default 30), then sent KILL; PIDFILE removed. Nothing to stop when PIDFILE is missing
# or empty.
stop_pid() {
  local f=$1 wait=${2:-30} pid
  [[ -s $f ]] || return 0
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq $((wait * 5))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

# check DESCRIPTION COMMAND...: the tests' shell scripts' one check: "ok: DESCRIPTION" when
# COMMAND succeeds, else "FAILED: DESCRIPTION" and one more in the caller's `failures`.
check() {
  local what=$1
  shift
  if "$@"; then echo "ok: $what"; else echo "FAILED: $what"; failures=$((failures + 1)); fi
}

# Forwarding beside another dockerd. A Docker daemon the user runs sets iptables' FORWARD
# policy to DROP, and with br_netfilter (net.bridge.bridge-nf-call-iptables=1) even frames
# bridged between two ports of one bridge pass FORWARD: containers on the scripts' own
# bridges could not reach each other. The scripts add a chain of their own, jumped to from
# FORWARD's first rule, that accepts their own traffic and nothing else, and remove it at
# stop; that daemon's chains, rules and policy are never touched. The chain goes into
# every iptables backend in use: nf_tables (`iptables` on Debian 12) always, legacy only
# when its filter table is loaded already (a daemon using iptables-legacy put its DROP
# there; asking iptables-legacy otherwise would load it). A packet must be accepted in
# both when both hold rules.

# The iptables programs of the backends in use, one a line.
iptables_backends() {
  echo iptables
  if command -v iptables-legacy >/dev/null && grep -qx filter /proc/net/ip_tables_names 2>/dev/null; then
    echo iptables-legacy
  fi
}

# forward_chain_add RECORD CHAIN RULE...: CHAIN made in every backend in use, one ACCEPT
# per RULE (iptables match arguments, one string each, split on spaces), jumped to from
# FORWARD's first rule; "BACKEND CHAIN" appended to the file RECORD for
# forward_chain_remove. A chain of that name left by a killed run is emptied first.
forward_chain_add() {
  local record=$1 chain=$2 ipt rule
  shift 2
  while read -r ipt; do
    while "$ipt" -D FORWARD -j "$chain" 2>/dev/null; do :; done
    "$ipt" -N "$chain" 2>/dev/null || "$ipt" -F "$chain"
    echo "$ipt $chain" >>"$record"
    for rule in "$@"; do
      # shellcheck disable=SC2086  # the rule's words
      "$ipt" -A "$chain" $rule -j ACCEPT
    done
    "$ipt" -I FORWARD 1 -j "$chain"
  done < <(iptables_backends)
}

# forward_chain_remove RECORD: every chain RECORD names, and its jumps, gone; RECORD too.
forward_chain_remove() {
  local record=$1 ipt chain
  [[ -s $record ]] || return 0
  while read -r ipt chain; do
    while "$ipt" -D FORWARD -j "$chain" 2>/dev/null; do :; done
    "$ipt" -F "$chain" 2>/dev/null || true
    "$ipt" -X "$chain" 2>/dev/null || true
  done <"$record"
  rm -f "$record"
}

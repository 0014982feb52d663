# shellcheck shell=bash
# Helpers shared by scripts/engine.sh and scripts/fleet.sh (sourced, not run).
#
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

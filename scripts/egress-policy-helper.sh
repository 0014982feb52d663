#!/usr/bin/env bash
# squid's external ACL helper for each session's own egress list (docs/sidecar.md, Egress;
# sidecar/src/egress/egress_policy.hpp). scripts/egress-proxy.sh copies it beside squid's
# configuration and names it twice: for a request's host (%DST) and for a TLS ClientHello's
# SNI (%ssl::>sni). Each line squid sends: "<local address> <name> [acl arguments]", the
# local address being the one the session's connection arrived on: its network's gateway
# (the host firewall lets a session reach its own gateway only, so it cannot name
# another's). The answer: OK when DIR/<that address> holds a rule matching the name whose
# first match is "allow", ERR otherwise; ERR when there is no such file (fail closed), no
# name ("-": no SNI) or an address that is not IPv4.
#
#   egress-policy-helper.sh DIR
#
# A file: one "allow TARGET" or "deny TARGET" a line, written whole by the sidecar (a rename).
# TARGET "a.example": that name; "*.a.example": every name under it, not the name itself
# (OpenSandbox's egress rules); ".a.example": the name and every name under it (the
# operator's SANDBOX_EGRESS_ALLOW, squid's dstdomain). squid checks the operator's list on
# its own as well: a file never widens it.
set -u
dir=${1:?usage: egress-policy-helper.sh DIR}

matches() {  # target name
  local target=$1 name=$2
  case $target in
  \*.*) [[ $name == ?*"${target#\*}" ]] ;;
  .*) [[ $name == "${target#.}" || $name == *"$target" ]] ;;
  *) [[ $name == "$target" ]] ;;
  esac
}

verdict() {  # address name
  local address=$1 name=${2,,} action target
  name=${name%.}
  [[ $address =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ && -n $name && $name != - ]] || return 1
  [[ -f $dir/$address ]] || return 1
  while read -r action target; do
    matches "$target" "$name" || continue
    [[ $action == allow ]]
    return
  done <"$dir/$address"
  return 1
}

while read -r address name _; do
  if verdict "$address" "${name:-}"; then echo OK; else echo ERR; fi
done

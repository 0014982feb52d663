#!/usr/bin/env bash
# The egress proxy of SANDBOX_NETWORK=allowlist (docs/sidecar.md, Egress): Debian's squid
# (squid-openssl) on the host, reachable only from the sessions' bridges, letting through
# CONNECT and plain HTTP to SANDBOX_EGRESS_ALLOW's names only, and a CONNECT tunnel only
# when the TLS ClientHello inside it names (SNI) a listed name too; and the host firewall
# rules that make it the only thing a session reaches.
#
#   scripts/egress-proxy.sh start DIR
#   scripts/egress-proxy.sh stop DIR
#
# Environment: SANDBOX_EGRESS_ALLOW (names, comma-separated; ".example.org" for the name
# and its subdomains), SANDBOX_EGRESS_PROXY_PORT (3128), SANDBOX_EGRESS_PORTS (the
# destination ports, 80,443), SANDBOX_EGRESS_BRIDGE_PREFIX (dgsbx: the sandbox-egress
# profile's networks.bridge_prefix), EGRESS_HOSTS_FILE (a hosts file squid resolves names
# from first: tests point a listed name at a local server), EGRESS_POLICY_DIR (required:
# each session's own list, a file per session network named by its gateway, written by the
# sidecar: its SANDBOX_EGRESS_POLICY_DIR), EGRESS_POLICY_OWNER (a uid: that directory's
# owner, when the sidecar runs as another user than this script).
#
# Every session has a network of its own (sidecar/src/egress/egress_network.cpp: alone on it, no
# session resolves, reaches or sees another), on a bridge the gate names
# <prefix><hash> (networks.bridge_prefix). The rules hold every such bridge by the
# interface pattern <prefix>+, so they are in place before the first session's network is
# made, with nothing to watch or add later: no window in which a new bridge is open.
#
# Why firewall rules: a container on an internal Docker network still reaches every
# address of the host through its bridge (the packets go to INPUT, which Docker's rules
# leave alone), and on an engine started with --iptables=false (scripts/engine.sh) it even
# has a default route through the host. The rules accept, from a session bridge, only TCP
# to the proxy's port on that bridge's own address (its gateway: addrtype LOCAL limited to
# the incoming interface, so no session learns whether another network's gateway exists),
# and drop everything else a session bridge sends to the host or through it (other host
# services, DNS to any resolver, other sessions' networks, other networks, the outside) and
# everything forwarded onto one. squid listens on the port on every IPv4 address (the
# gateways come and go with the sessions); a rule drops what reaches the port from any
# other interface, loopback included.
#
# Why the SNI check: a CONNECT to a listed name could carry a TLS ClientHello naming any
# other host that the listed name's front end (a CDN) also serves (domain fronting). squid
# peeks at the ClientHello (step 1) and splices, never decrypts, only when its SNI is
# present and listed; anything else, including bytes that are not TLS, is refused. The
# certificate that squid's ssl-bump port insists on is made here, for squid alone, and is
# never used: nothing is bumped, nobody is told to trust it.
# Why a list per session (an OpenSandbox sandbox's networkPolicy): squid asks
# scripts/egress-policy-helper.sh, for each request's host and each ClientHello's SNI, whether
# the list of the session network the connection arrived on (its gateway: %>la, an address
# the session cannot choose) allows that name; no list there, no name. The operator's
# names are checked too, so a list never widens SANDBOX_EGRESS_ALLOW.
# Needs root (iptables, squid binding the port).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # stop_pid

cmd=${1:?usage: egress-proxy.sh start|stop DIR}
dir=${2:?usage: egress-proxy.sh start|stop DIR}
port=${SANDBOX_EGRESS_PROXY_PORT:-3128}
ports=${SANDBOX_EGRESS_PORTS:-80,443}
prefix=${SANDBOX_EGRESS_BRIDGE_PREFIX:-dgsbx}
chain=DGEGRESS-$prefix
guard=DGEGRESS-$prefix-port

unrule() {
  [[ -s $dir/chain ]] || return 0
  local p c g port_was
  p=$(cat "$dir/prefix") c=DGEGRESS-$(cat "$dir/prefix") g=DGEGRESS-$(cat "$dir/prefix")-port
  port_was=$(cat "$dir/port")
  while iptables -D INPUT -i "$p+" -j "$c" 2>/dev/null; do :; done
  while iptables -D FORWARD -i "$p+" -j "$c" 2>/dev/null; do :; done
  while iptables -D FORWARD -o "$p+" -j "$c" 2>/dev/null; do :; done
  while iptables -D INPUT -p tcp --dport "$port_was" -j "$g" 2>/dev/null; do :; done
  for c in "$c" "$g"; do
    iptables -F "$c" 2>/dev/null || true
    iptables -X "$c" 2>/dev/null || true
  done
  rm -f "$dir/chain"
}

case $cmd in
stop)
  stop_pid "$dir/squid.pid.own" 10
  unrule
  exit 0
  ;;
start) ;;
*) echo "egress-proxy.sh: start or stop" >&2; exit 2 ;;
esac

# squid drops to the proxy user: DIR (and every directory above it) must be one it can enter.
mkdir -p "$dir"
chmod 0755 "$dir"
# The allowlist: host names only (the sidecar checks the same at its start).
names=()
IFS=',' read -ra items <<<"${SANDBOX_EGRESS_ALLOW:-}"
for item in "${items[@]}"; do
  item=$(printf %s "$item" | tr -d '[:space:]' | tr '[:upper:]' '[:lower:]')
  [[ -z $item ]] && continue
  if ! [[ $item =~ ^\.?([a-z0-9]([a-z0-9-]*[a-z0-9])?\.)*[a-z0-9-]*[a-z][a-z0-9-]*$ ]]; then
    echo "egress-proxy.sh: SANDBOX_EGRESS_ALLOW: not a host name: $item" >&2
    exit 2
  fi
  names+=("$item")
done
if ((${#names[@]} == 0)); then
  echo "egress-proxy.sh: SANDBOX_EGRESS_ALLOW is empty" >&2
  exit 2
fi
[[ $ports =~ ^[0-9]+(,[0-9]+)*$ ]] || { echo "egress-proxy.sh: SANDBOX_EGRESS_PORTS: ports, comma-separated" >&2; exit 2; }

policies=${EGRESS_POLICY_DIR:-}
[[ $policies == /* ]] || { echo "egress-proxy.sh: EGRESS_POLICY_DIR: the absolute path of the sessions' lists (the sidecar's SANDBOX_EGRESS_POLICY_DIR)" >&2; exit 2; }

[[ $prefix =~ ^[a-z0-9]{1,5}$ ]] || { echo "egress-proxy.sh: SANDBOX_EGRESS_BRIDGE_PREFIX: 1-5 of a-z 0-9" >&2; exit 2; }

unrule
# Recorded first: a start that fails half-way is undone by the next start or a stop.
echo "$prefix" >"$dir/prefix"
echo "$port" >"$dir/port"
echo "$chain" >"$dir/chain"
iptables -N "$chain"
# Replies of the proxy's connections go out through OUTPUT; what comes in on a session
# bridge is the session's half of a connection to the proxy on that bridge's own address,
# or nothing at all.
iptables -A "$chain" -p tcp --dport "$port" -m addrtype --dst-type LOCAL --limit-iface-in -j ACCEPT
iptables -A "$chain" -j DROP
# The proxy's port from anywhere but a session bridge (loopback, the LAN): dropped.
iptables -N "$guard"
iptables -A "$guard" -i "$prefix+" -j RETURN
iptables -A "$guard" -j DROP
iptables -I INPUT 1 -p tcp --dport "$port" -j "$guard"
iptables -I INPUT 1 -i "$prefix+" -j "$chain"
iptables -I FORWARD 1 -i "$prefix+" -j "$chain"
iptables -I FORWARD 1 -o "$prefix+" -j "$chain"

# The sessions' lists: the sidecar writes them, squid's user reads them.
mkdir -p "$policies"
chmod 0755 "$policies"
if [[ -n ${EGRESS_POLICY_OWNER:-} ]]; then chown "$EGRESS_POLICY_OWNER" "$policies"; fi
install -m 0755 "$(dirname "${BASH_SOURCE[0]}")/egress-policy-helper.sh" "$dir/egress-policy"
hosts_line=
if [[ -n ${EGRESS_HOSTS_FILE:-} ]]; then
  install -m 0644 "$EGRESS_HOSTS_FILE" "$dir/hosts"
  hosts_line="hosts_file $dir/hosts"
fi
# The ssl-bump port's certificate: made per start, readable by squid alone, never trusted.
rm -f "$dir/bump.key" "$dir/bump.pem"
(umask 077 && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
  -keyout "$dir/bump.key" -out "$dir/bump.pem" -days 2 -subj "/CN=dockgate egress, never trusted" \
  >"$dir/openssl.log" 2>&1) || { cat "$dir/openssl.log" >&2; unrule; exit 1; }
# The SNI's presence: ssl::server_name falls back to the CONNECT name when the ClientHello
# has none, so a helper sees the SNI alone (a line "SNI ACL-ARGUMENTS", "-" for none).
cat >"$dir/sni-present" <<'HELPER'
#!/bin/sh
while read -r sni _; do
  case $sni in ""|-) echo ERR ;; *) echo OK ;; esac
done
HELPER
chmod 0755 "$dir/sni-present"
{
  echo "# written by scripts/egress-proxy.sh"
  echo "http_port 0.0.0.0:$port ssl-bump tls-cert=$dir/bump.pem tls-key=$dir/bump.key generate-host-certificates=off"
  echo "pid_filename $dir/squid.pid"
  echo "access_log stdio:$dir/access.log"
  echo "cache_log $dir/cache.log"
  echo "cache_store_log none"
  echo "netdb_filename none"
  echo "coredump_dir $dir"
  echo "cache deny all"
  echo "cache_mem 0 MB"
  echo "via off"
  echo "forwarded_for delete"
  [[ -n $hosts_line ]] && echo "$hosts_line"
  echo "acl egress_ports port ${ports//,/ }"
  # -n: compare the request's host as written, never a reverse lookup of an address.
  echo "acl egress_names dstdomain -n ${names[*]}"
  # An address as the host (dotted, decimal, hex or IPv6 in brackets) is refused before any
  # name is compared: the list names hosts, and an address reaches whatever answers there.
  echo 'acl ip_literal dstdom_regex -n ^[0-9.]+$ ^0x[0-9a-f.x]+$ ^\[?[0-9a-f:.]*:[0-9a-f:.]*\]?$'
  echo "acl CONNECT method CONNECT"
  echo "http_access deny ip_literal"
  echo "http_access deny !egress_ports"
  # A session's own list (egress-policy-helper.sh), by the address its connection came to.
  echo "external_acl_type session_names ttl=0 negative_ttl=0 children-max=4 children-startup=1 %>la %DST $dir/egress-policy $policies"
  echo "acl session_names external session_names"
  echo "http_access allow egress_names session_names"
  echo "http_access deny all"
  # Inside a CONNECT: peek at the ClientHello, splice when its SNI is listed (the same
  # names and dot-prefix semantics as above), terminate anything else; never bump.
  echo "acl step1 at_step SslBump1"
  echo "acl sni_names ssl::server_name --client-requested ${names[*]}"
  echo "external_acl_type sni_present ttl=0 negative_ttl=0 children-max=2 children-startup=1 %ssl::>sni $dir/sni-present"
  echo "acl sni_present external sni_present"
  echo "ssl_bump peek step1"
  echo "external_acl_type session_sni ttl=0 negative_ttl=0 children-max=4 children-startup=1 %>la %ssl::>sni $dir/egress-policy $policies"
  echo "acl session_sni external session_sni"
  echo "ssl_bump splice sni_names sni_present session_sni"
  echo "ssl_bump terminate all"
  # Bytes that are not TLS after a CONNECT: an error answer, never a blind tunnel.
  echo "on_unsupported_protocol respond all"
  echo "icp_port 0"
  echo "htcp_port 0"
  echo "snmp_port 0"
  echo "pinger_enable off"
  echo "shutdown_lifetime 1 seconds"
} >"$dir/squid.conf"
chown proxy "$dir" 2>/dev/null || true
touch "$dir/access.log" "$dir/cache.log"
chown proxy "$dir/access.log" "$dir/cache.log" "$dir/bump.key" 2>/dev/null || true
squid -k parse -f "$dir/squid.conf" >"$dir/parse.log" 2>&1 || { cat "$dir/parse.log" >&2; unrule; exit 1; }
squid -N -f "$dir/squid.conf" >>"$dir/squid.out" 2>&1 &
echo $! >"$dir/squid.pid.own"
for _ in $(seq 100); do
  # Listening (state 0A) on 0.0.0.0:PORT, from the kernel's table: a connect to it from
  # here would meet the port's guard.
  if awk -v a="00000000:$(printf %04X "$port")" '$2 == a && $4 == "0A" {f = 1} END {exit !f}' /proc/net/tcp; then
    echo "egress-proxy.sh: squid on port $port of every session bridge ($prefix+; ${names[*]})"
    echo "EGRESS_PROXY_PORT=$port" >"$dir/env"
    exit 0
  fi
  kill -0 "$(cat "$dir/squid.pid.own")" 2>/dev/null || break
  sleep 0.1
done
echo "egress-proxy.sh: squid did not start:" >&2
cat "$dir/cache.log" "$dir/squid.out" >&2
"$0" stop "$dir"
exit 1

#!/usr/bin/env bash
# The egress service of compose/egress.yml: starts scripts/egress-proxy.sh (squid and the
# firewall chains on the sessions' bridges, dgsbx+, in the host's network namespace; the
# sidecar makes each session's network later, each held from its first packet) and, when
# the container is stopped, stops both: `down` leaves no chain and no squid behind.
set -euo pipefail
dir=/run/dockgate-egress
stop() {
  egress-proxy.sh stop "$dir"
  exit "${1:-0}"
}
trap stop TERM INT
if [[ -s /etc/dockgate/egress-hosts ]]; then export EGRESS_HOSTS_FILE=/etc/dockgate/egress-hosts; fi
egress-proxy.sh start "$dir"
pid=$(cat "$dir/squid.pid.own")
while kill -0 "$pid" 2>/dev/null; do sleep 1 & wait $!; done
echo "egress: squid exited:" >&2
tail -n 20 "$dir/cache.log" >&2 || true
stop 1

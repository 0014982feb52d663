#!/usr/bin/env bash
# The egress service of compose/egress.yml: waits for the sidecar's internal network
# (asked of the gate, DOCKER_HOST), starts scripts/egress-proxy.sh on it (squid and the
# firewall chain, in the host's network namespace) and, when the container is stopped,
# stops both: `down` leaves no chain and no squid behind.
set -euo pipefail
dir=/run/dockgate-egress
network=${SANDBOX_EGRESS_NETWORK:-dockgate-egress}
stop() {
  egress-proxy.sh stop "$dir"
  exit "${1:-0}"
}
trap stop TERM INT
until docker network inspect "$network" >/dev/null 2>&1; do sleep 1 & wait $!; done
if [[ -s /etc/dockgate/egress-hosts ]]; then export EGRESS_HOSTS_FILE=/etc/dockgate/egress-hosts; fi
egress-proxy.sh start "$dir"
pid=$(cat "$dir/squid.pid.own")
while kill -0 "$pid" 2>/dev/null; do sleep 1 & wait $!; done
echo "egress: squid exited:" >&2
tail -n 20 "$dir/cache.log" >&2 || true
stop 1

#!/usr/bin/env bash
# The compose stacks (compose/docker-compose.yml, compose/standalone.yml) with Debian's
# docker-compose 1.29 against the private engine: the images build offline, both
# services become healthy, a session made through the published sidecar runs Python, the
# sidecar has no engine socket and only the internal network, a hostile create from the
# sidecar's network neighbour is refused by the gate, and `down` is quick and leaves no
# session container behind. Judged by the daemon (inspect), not by the services. Then
# SANDBOX_NETWORK=allowlist (compose/egress.yml on standalone.yml): a session reaches a
# listed name served on the host only through the stack's egress proxy, an unlisted one
# not (judged by the servers), each session alone on a network of its own, and `down`
# leaves no firewall chain, no squid and no session network.
#
# Needs DOCKGATE_TEST_ENGINE and DOCKGATE_TEST_RUNTIME_IMAGE (scripts/engine.sh) and the
# release programs (DOCKGATE_RELEASE_DIR, default build/release).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
engine=${DOCKGATE_TEST_ENGINE:?run under scripts/test.sh}
release=${DOCKGATE_RELEASE_DIR:-$root/build/release}
docker="/usr/bin/docker -H $engine"
failures=0
# shellcheck source=scripts/lib.sh
source "$root/scripts/lib.sh"  # check, free_port

"$root/scripts/images.sh" "$engine" "$release"

project=dgstack$$
port=$(free_port)
export DOCKER_HOST=$engine
export DOCKER_SOCKET=${engine#unix://}
DOCKER_GID=$(stat -c %g "$DOCKER_SOCKET"); export DOCKER_GID
export SANDBOX_IMAGE=${DOCKGATE_TEST_RUNTIME_IMAGE:?} SANDBOX_PULL_ON_START=0
export SANDBOX_API_KEY=stack-test-$$ SANDBOX_PUBLISH=127.0.0.1:$port SANDBOX_INSTANCE=$project
stack() { local file=$1; shift; timeout 300 docker-compose --ansi never -p "$project" -f "$root/compose/$file" "$@"; }
listeners=$(mktemp -d)
cleanup() {
  stack standalone.yml -f "$root/compose/egress.yml" down -v -t 5 >/dev/null 2>&1 || true
  if [[ -s $listeners/pid ]]; then kill "$(cat "$listeners/pid")" 2>/dev/null || true; fi
  rm -rf "$listeners"
  stack standalone.yml down -v -t 5 >/dev/null 2>&1 || true
  stack docker-compose.yml down -v -t 5 >/dev/null 2>&1 || true
  $docker ps -aq --filter "label=sandbox.instance=$project" | xargs -r $docker rm -f >/dev/null 2>&1 || true
}
trap cleanup EXIT

# --- the examples for servers that must never get docker.sock (docs/policy.md): each is a
# file docker-compose reads, with the values its header asks for.
for example in opensandbox.yml gitlab-runner.yml github-runner.yml devcontainer.yml; do
  check "example $example: docker-compose reads it" env OPENSANDBOX_SERVER_IMAGE=example \
    OPENSANDBOX_CONFIG=/dev/null RUNNER_GID=65533 DEV_GID=65533 \
    docker-compose -p "$project" -f "$root/compose/$example" config -q
done

healthy() {  # healthy SERVICE_CONTAINER: wait up to 90 s
  for _ in $(seq 90); do
    [[ $($docker inspect -f '{{.State.Health.Status}}' "$1" 2>/dev/null) == healthy ]] && return 0
    sleep 1
  done
  $docker logs "$1" 2>&1 | tail -n 20
  return 1
}

# --- the bundled stack: private network, nothing published ---------------------------
stack docker-compose.yml up -d
proxy=${project}_proxy_1 sidecar=${project}_sidecar_1
check "bundled: the proxy is healthy" healthy "$proxy"
check "bundled: the sidecar is healthy" healthy "$sidecar"
network=${project}_sandbox
check "bundled: the network is internal" test "$($docker network inspect -f '{{.Internal}}' "$network")" = true
check "bundled: the sidecar publishes no port" test -z "$($docker inspect -f '{{range $p, $b := .HostConfig.PortBindings}}{{$p}}{{end}}' "$sidecar")"
check "bundled: the sidecar has no engine socket" \
  test -z "$($docker inspect -f '{{range .Mounts}}{{.Source}} {{end}}' "$sidecar" | grep -o 'docker.sock' || true)"
check "bundled: the sidecar is on the internal network only" \
  test "$($docker inspect -f '{{range $n, $e := .NetworkSettings.Networks}}{{$n}} {{end}}' "$sidecar")" = "$network "
check "bundled: the sidecar runs as non-root, read-only, without capabilities" \
  test "$($docker inspect -f '{{.Config.User}} {{.HostConfig.ReadonlyRootfs}} {{.HostConfig.CapDrop}}' "$sidecar")" = "65532:65532 true [ALL]"
check "bundled: the proxy is not root, only the socket's group" \
  test "$($docker inspect -f '{{.Config.User}} {{.HostConfig.GroupAdd}} {{.HostConfig.ReadonlyRootfs}}' "$proxy")" = "65532:65532 [$DOCKER_GID] true"
# A neighbour on the sidecar's network: the app would sit here.
neighbour() { $docker run --rm --network "$network" "${DOCKGATE_TEST_IMAGE:?}" "$@"; }
session=$(neighbour wget -qO- --header "Authorization: Bearer $SANDBOX_API_KEY" --header 'Content-Type: application/json' \
  --post-data '{}' http://sidecar:8000/sessions | sed -n 's/.*"session_id":"\([^"]*\)".*/\1/p')
check "bundled: a session made from the neighbour" test -n "$session"
ran=$(neighbour wget -qO- --header "Authorization: Bearer $SANDBOX_API_KEY" --header 'Content-Type: application/json' \
  --post-data "{\"session_id\":\"$session\",\"code\":\"print(6*7)\"}" http://sidecar:8000/exec || true)
check "bundled: its code runs (stdout 42)" grep -q '"stdout":"42\\n"' <<<"$ran"
# The neighbour asks the gate itself for a privileged container: refused, nothing created.
hostile=$(neighbour sh -c 'printf "POST /v1.41/containers/create?name=dg-hostile-'$$' HTTP/1.1\r\nHost: proxy\r\nContent-Type: application/json\r\nContent-Length: 66\r\nConnection: close\r\n\r\n{\"Image\":\"x\",\"HostConfig\":{\"Privileged\":true,\"Binds\":[\"/:/host\"]}}" | nc proxy 2375' || true)
check "bundled: a hostile create from the neighbour is refused in Docker's error format" \
  grep -q '^{"message":"dockgate: ' <<<"$(tail -n 1 <<<"$hostile")"
check "bundled: the daemon never saw it" sh -c "! $docker inspect dg-hostile-$$ >/dev/null 2>&1"
started=$(date +%s)
stack docker-compose.yml down -t 20
check "bundled: down took under 30 s" test $(($(date +%s) - started)) -lt 30
check "bundled: no session container left" test -z "$($docker ps -aq --filter "label=sandbox.instance=$project")"

# --- standalone: the sidecar published on the host, key required ---------------------
check "standalone: refuses to start without SANDBOX_API_KEY" \
  sh -c "SANDBOX_API_KEY= docker-compose -p $project -f $root/compose/standalone.yml config >/dev/null 2>&1; test \$? -ne 0"
stack standalone.yml up -d
check "standalone: the sidecar is healthy" healthy "$sidecar"
url=http://127.0.0.1:$port
check "standalone: /healthz on the published port" curl -fsS "$url/healthz" -o /dev/null
check "standalone: a wrong key is refused (401)" \
  test "$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer wrong' -d '{}' "$url/sessions")" = 401
session=$(curl -fsS -H "Authorization: Bearer $SANDBOX_API_KEY" -H 'Content-Type: application/json' -d '{}' "$url/sessions" |
  sed -n 's/.*"session_id":"\([^"]*\)".*/\1/p')
ran=$(curl -sS -H "Authorization: Bearer $SANDBOX_API_KEY" -H 'Content-Type: application/json' \
  -d "{\"session_id\":\"$session\",\"code\":\"import sys; print(sys.version_info[0])\"}" "$url/exec")
check "standalone: a session through the published port runs Python" grep -q '"stdout":"3\\n"' <<<"$ran"
container=dockgate-sbx-$session
check "standalone: the session container is the gate's (owner label, no network, no capabilities)" \
  test "$($docker inspect -f '{{index .Config.Labels "dockgate.owner"}} {{.HostConfig.NetworkMode}} {{.HostConfig.CapDrop}}' "$container")" = "sandbox none [ALL]"
started=$(date +%s)
stack standalone.yml down -v -t 20
check "standalone: down took under 30 s" test $(($(date +%s) - started)) -lt 30
check "standalone: no session container left" test -z "$($docker ps -aq --filter "label=sandbox.instance=$project")"

# --- allowlist: compose/egress.yml, the egress service in the host's network namespace --
# Two servers on the host's loopback, both named in squid's hosts file; pypi.test is listed,
# other.test is not. Each counts the connections it accepted.
/usr/bin/python3 - "$listeners" <<'PY' &
import socket, sys, threading
d = sys.argv[1]
def serve(name):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(('127.0.0.1', 0))
    s.listen(16)
    open(f'{d}/{name}.port.tmp', 'w').write(str(s.getsockname()[1]))
    __import__('os').rename(f'{d}/{name}.port.tmp', f'{d}/{name}.port')
    while True:
        c, _ = s.accept()
        with open(f'{d}/{name}.seen', 'a') as f:
            f.write('connection\n')
        c.settimeout(2)
        try:
            c.recv(4096)
        except OSError:
            pass
        c.sendall(b'HTTP/1.1 200 OK\r\nContent-Length: 9\r\nConnection: close\r\n\r\negress-ok')
        c.close()
threading.Thread(target=serve, args=('other',), daemon=True).start()
serve('listed')
PY
echo $! >"$listeners/pid"
for _ in $(seq 50); do [[ -s $listeners/listed.port && -s $listeners/other.port ]] && break; sleep 0.1; done
listed_port=$(cat "$listeners/listed.port") other_port=$(cat "$listeners/other.port")
echo "127.0.0.1 pypi.test other.test" >"$listeners/hosts"
export EGRESS_HOSTS_FILE=$listeners/hosts SANDBOX_EGRESS_ALLOW=pypi.test SANDBOX_EGRESS_PORTS=$listed_port,$other_port
egress_stack() { stack standalone.yml -f "$root/compose/egress.yml" "$@"; }
egress_stack up -d
egress=${project}_egress_1
check "allowlist: the sidecar is healthy" healthy "$sidecar"
check "allowlist: the egress service runs in the host's network with NET_ADMIN, not privileged" \
  test "$($docker inspect -f '{{.HostConfig.NetworkMode}} {{.HostConfig.CapAdd}} {{.HostConfig.Privileged}}' "$egress")" = "host [NET_ADMIN] false"
session=$(curl -fsS -H "Authorization: Bearer $SANDBOX_API_KEY" -H 'Content-Type: application/json' -d '{}' "$url/sessions" |
  sed -n 's/.*"session_id":"\([^"]*\)".*/\1/p')
check "allowlist: a session" test -n "$session"
check "allowlist: the egress proxy is up on the sidecar's network" healthy "$egress"
chain=DGEGRESS-dgsbx
check "allowlist: the session is alone on its own internal network dockgate-egress-<id>, bridge dgsbx<hash>" \
  test "$($docker inspect -f '{{.HostConfig.NetworkMode}}' "dockgate-sbx-$session" 2>/dev/null) $($docker network inspect \
    -f '{{.Internal}} {{len .Containers}} {{slice (index .Options "com.docker.network.bridge.name") 0 5}}' \
    "dockgate-egress-$session" 2>/dev/null)" = "dockgate-egress-$session true 1 dgsbx"
check "allowlist: the firewall chain is on the host ($chain)" sh -c "iptables -S | grep -q -- '-N $chain\$'"
check "allowlist: squid runs on the host" pgrep -f 'squid -N -f /run/dockgate-egress/squid[.]conf'
cell() {  # cell CODE: the session runs it; prints the answer
  /usr/bin/python3 -c 'import json, sys; print(json.dumps({"session_id": sys.argv[1], "code": sys.argv[2]}))' "$session" "$1" |
    curl -sS -H "Authorization: Bearer $SANDBOX_API_KEY" -H 'Content-Type: application/json' -d @- "$url/exec"
}
fetch() {  # fetch URL [direct]: the session's urllib, through the proxy unless `direct`
  local proxies="{'http': os.environ['HTTP_PROXY']}"
  if [[ ${2:-} == direct ]]; then proxies='{}'; fi
  cell "import os, urllib.request
o = urllib.request.build_opener(urllib.request.ProxyHandler($proxies))
try:
    print(o.open('$1', timeout=10).read().decode())
except Exception as e:
    print('refused', e)"
}
ran=$(fetch "http://other.test:$other_port/")
check "allowlist: an unlisted name is refused by the proxy (403)" grep -q 'refused HTTP Error 403' <<<"$ran"
ran=$(fetch "http://pypi.test:$listed_port/simple/" direct)
check "allowlist: the listed name without the proxy is not reached" grep -q '"stdout":"refused' <<<"$ran"
check "allowlist: neither server saw a connection" test ! -e "$listeners/other.seen" -a ! -e "$listeners/listed.seen"
ran=$(fetch "http://pypi.test:$listed_port/simple/")
check "allowlist: the listed name through the proxy answers" grep -q '"stdout":"egress-ok' <<<"$ran"
check "allowlist: its server saw exactly that connection" test "$(cat "$listeners/listed.seen" 2>/dev/null)" = connection
check "allowlist: the unlisted server never saw one" test ! -e "$listeners/other.seen"
started=$(date +%s)
egress_stack down -v -t 20
check "allowlist: down took under 30 s" test $(($(date +%s) - started)) -lt 30
check "allowlist: no firewall chain left ($chain)" sh -c "! iptables -S | grep -q -- '$chain'"
check "allowlist: no squid left" sh -c "! pgrep -f 'squid -N -f /run/dockgate-egress/squid[.]conf' >/dev/null"
check "allowlist: no session container left" test -z "$($docker ps -aq --filter "label=sandbox.instance=$project")"
check "allowlist: no session network left" test -z "$($docker network ls -q --filter "label=sandbox.instance=$project")"

if ((failures)); then echo "$failures check(s) failed"; exit 1; fi
echo "all stack checks passed"

#!/usr/bin/env bash
# End-to-end benchmark: the same requests direct to a private dockerd, through
# dockgate-proxy (release build, docker-cli profile), through HAProxy configured as
# Tecnativa's docker-socket-proxy (tests/bench/haproxy.cfg), and through nginx as an HTTP
# proxy with keep-alive to the daemon (tests/bench/nginx-http.conf) and as a bare `stream`
# relay (tests/bench/nginx-stream.conf, the floor: it parses nothing), in one run,
# alternating rounds. Needs root.
#
#   scripts/bench.sh            the full run (a few minutes)
#   scripts/bench.sh --smoke    every scenario, small: well under 90 s once built
#   scripts/bench.sh [dockgate-load arguments, e.g. --rounds 5 --seconds 3 --held 1000]
#   scripts/bench.sh --own-sessions [...]   each relay in a session of its own (below)
#
# By default every process (the daemon, each relay, the load client) starts from this
# script, in its session: with the kernel's autogroup scheduling (Debian's default) they
# share one scheduling group, and CPU is shared out per thread, so a relay with more
# workers or threads (nginx's and HAProxy's run one per core) takes more of the machine.
# With --own-sessions each relay is started with setsid: a group of its own, as systemd
# gives each service a cgroup of its own, so each relay gets the same share whatever its
# threads. The two runs together separate a relay's cost per request from its parallelism.
#
# Prints the details as it goes and one markdown table at the end (tests/bench/load_client.cpp
# says what each row is). Exit status 1 only when a request failed, never on a ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
own_session=()  # --own-sessions, anywhere among the arguments; the rest go to dockgate-load
load_args=()
for a in "$@"; do
  if [[ $a == --own-sessions ]]; then
    own_session=(setsid)  # no fork: started in the background here, $! stays the relay's PID
  else
    load_args+=("$a")
  fi
done
set -- "${load_args[@]}"
scripts/install-deps.sh
# HAProxy is for this bench only, so it is not in install-deps.sh (which scripts/run.sh
# also runs on a user's machine, where the package would enable a haproxy service).
command -v haproxy >/dev/null || { apt-get update -qq && apt-get install -y -qq --no-install-recommends haproxy; }
# nginx the same way, with its service kept from starting (a policy-rc.d for the install:
# the package would otherwise start nginx on port 80); the stream module is its own package.
if [[ ! -x /usr/sbin/nginx || ! -e /usr/lib/nginx/modules/ngx_stream_module.so ]]; then
  own_policy=0
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d
    own_policy=1
  fi
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends nginx-light libnginx-mod-stream
  [[ $own_policy == 1 ]] && rm -f /usr/sbin/policy-rc.d
  if [[ -d /run/systemd/system ]]; then systemctl disable --now nginx.service >/dev/null 2>&1 || true; fi
fi
cmake --preset release >/dev/null
cmake --build --preset release --target dockgate-proxy dockgate-load

# Held streams take a descriptor each in the client, two in a relay (one in the gate, whose
# held event streams of one profile share a daemon stream), one in dockerd:
# everything started from here inherits the limit. Raising the hard limit needs
# CAP_SYS_RESOURCE; without it the current hard limit is used.
if ! ulimit -Hn 65536 2>/dev/null; then
  echo "bench.sh: cannot raise the descriptor hard limit to 65536; using $(ulimit -Hn)" >&2
fi
ulimit -n "$(ulimit -Hn)"
nofile=$(ulimit -n)

work=$(mktemp -d /tmp/dockgate-bench.XXXXXX)
proxy_pid=
haproxy_pid=
nginx_http_pid=
nginx_stream_pid=
stop_child() { # stop_child PID: TERM, wait for it
  [[ -n $1 ]] || return 0
  kill "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}
cleanup() {
  # Removed with SIGKILL now, instead of waiting out their stop timeout in dockerd's shutdown.
  if [[ -n ${DOCKGATE_TEST_ENGINE:-} ]]; then
    docker -H "$DOCKGATE_TEST_ENGINE" ps -aq | xargs -r docker -H "$DOCKGATE_TEST_ENGINE" rm -f >/dev/null || true
  fi
  stop_child "$proxy_pid"
  stop_child "$haproxy_pid"
  stop_child "$nginx_http_pid"
  stop_child "$nginx_stream_pid"
  scripts/engine.sh stop "$work/engine" || true
  rm -rf "$work"
  echo "bench.sh: done in $SECONDS s"
}
trap cleanup EXIT
wait_for_socket() { # wait_for_socket PATH NAME LOG
  for _ in $(seq 200); do [[ -S $1 ]] && return 0; sleep 0.05; done
  echo "bench.sh: $2 did not listen on $1; its log follows" >&2
  cat "$3" >&2
  return 1
}

scripts/engine.sh start "$work/engine" >/dev/null
source "$work/engine/env"
engine_sock=${DOCKGATE_TEST_ENGINE#unix://}
dockerd_pid=$(cat "$work/engine/dockerd.pid")

# The audit log (one line per request, stdout) is thrown away, as HAProxy's request log is.
# The gate reads only files root controls; the checkout may be its user's.
install -m 0644 compose/policies/docker-cli.json "$work/docker-cli.json"
"${own_session[@]}" prlimit --nofile="$nofile:$nofile" build/release/proxy/dockgate-proxy --upstream "$DOCKGATE_TEST_ENGINE" \
  --listen "unix://$work/proxy.sock" --policy "$work/docker-cli.json" \
  >/dev/null 2>"$work/proxy.err" &
proxy_pid=$!
wait_for_socket "$work/proxy.sock" dockgate-proxy "$work/proxy.err"

# Tecnativa's image defaults (its Dockerfile's ENV), with CONTAINERS, EXEC and POST on.
sed -e "s|@HAPROXY_SOCKET@|$work/haproxy.sock|" -e "s|@ENGINE_SOCKET@|$engine_sock|" \
  tests/bench/haproxy.cfg >"$work/haproxy.cfg"
env ALLOW_RESTARTS=0 ALLOW_START=0 ALLOW_STOP=0 AUTH=0 BUILD=0 COMMIT=0 CONFIGS=0 CONTAINERS=1 \
  DISTRIBUTION=0 EVENTS=1 EXEC=1 GRPC=0 IMAGES=0 INFO=0 LOG_LEVEL=info NETWORKS=0 NODES=0 PING=1 \
  PLUGINS=0 POST=1 SECRETS=0 SERVICES=0 SESSION=0 SWARM=0 SYSTEM=0 TASKS=0 VERSION=1 VOLUMES=0 \
  "${own_session[@]}" haproxy -db -f "$work/haproxy.cfg" >/dev/null 2>"$work/haproxy.err" &
haproxy_pid=$!
wait_for_socket "$work/haproxy.sock" haproxy "$work/haproxy.err"

# nginx, both ways, in the foreground (daemon off): $! is the master. Its CPU and memory
# are counted over the master and its workers.
for mode in http stream; do
  mkdir -p "$work/nginx-$mode-tmp"
  sed -e "s|@WORK@|$work|g" -e "s|@ENGINE_SOCKET@|$engine_sock|" \
    "tests/bench/nginx-$mode.conf" >"$work/nginx-$mode.conf"
  "${own_session[@]}" prlimit --nofile="$nofile:$nofile" nginx -p "$work/nginx-$mode-tmp/" -e "$work/nginx-$mode.err" \
    -c "$work/nginx-$mode.conf" >/dev/null 2>>"$work/nginx-$mode.err" &
  printf -v "nginx_${mode}_pid" %s $!
  wait_for_socket "$work/nginx-$mode.sock" "nginx ($mode)" "$work/nginx-$mode.err"
done
nginx_pids() { # nginx_pids MASTER: the master and its workers, comma-separated
  local workers
  for _ in $(seq 50); do
    workers=$(pgrep -P "$1" | paste -sd, -)
    [[ -n $workers ]] && break
    sleep 0.1
  done
  echo "$1,$workers"
}

# Containers are created through the gate, so that the docker-cli profile owns them (the
# gate's list shows only those), and addressed by full ID (a name costs the gate an
# inspect per request). The first is inspected and runs the exec streams; five make the list.
id=$(DOCKER_HOST="unix://$work/proxy.sock" docker run -d "$DOCKGATE_TEST_IMAGE" sleep 3600)
for _ in 1 2 3 4; do
  DOCKER_HOST="unix://$work/proxy.sock" docker run -d "$DOCKGATE_TEST_IMAGE" sleep 3600 >/dev/null
done

nginx_http=$(nginx_pids "$nginx_http_pid")
nginx_stream=$(nginx_pids "$nginx_stream_pid")
echo "== dockgate-proxy pid $proxy_pid, haproxy $(haproxy -v | head -n1 | cut -d' ' -f3) pid $haproxy_pid," \
  "$(nginx -v 2>&1 | cut -d' ' -f3) http pids $nginx_http, stream pids $nginx_stream," \
  "dockerd pid $dockerd_pid, descriptor limit $nofile"
build/release/tests/bench/dockgate-load \
  --target "direct=$DOCKGATE_TEST_ENGINE" \
  --target "dockgate=unix://$work/proxy.sock" --relay-pid "dockgate=$proxy_pid" \
  --target "haproxy=unix://$work/haproxy.sock" --relay-pid "haproxy=$haproxy_pid" \
  --target "nginx-http=unix://$work/nginx-http.sock" --relay-pid "nginx-http=$nginx_http" \
  --target "nginx-stream=unix://$work/nginx-stream.sock" --relay-pid "nginx-stream=$nginx_stream" \
  --versus dockgate=nginx-stream --versus dockgate=nginx-http \
  --dockerd-pid "$dockerd_pid" --container "$id" --list "$@"
echo "bench.sh: $SECONDS s so far (the engine's stop follows)" >&2

#!/usr/bin/env bash
# dockgate on this machine in one command (Debian 12, root): installs the packages,
# builds the programs (build/release), uses the Docker engine at /var/run/docker.sock or
# starts a private one (as the tests do), makes the session image offline, starts the
# gate with the sandbox profile and the sidecar behind it, runs one demonstration
# session, and leaves both running.
#
#   scripts/run.sh          start (again: reuses what is built and running; seconds)
#   scripts/run.sh stop     stop what it started
#
# State (logs, PIDs, the sidecar's key, archives, a private engine): $DOCKGATE_RUN_DIR,
# default /var/lib/dockgate-run.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh  # alive, stop_pid
state=${DOCKGATE_RUN_DIR:-/var/lib/dockgate-run}
gate_socket=$state/dockgate.sock
sidecar_port=${DOCKGATE_SIDECAR_PORT:-48217}
metrics=127.0.0.1:${DOCKGATE_METRICS_PORT:-9323}
image=dockgate/sandbox-runtime:local-full  # the data stack (runtime-image.sh --full)

say() { printf '\n== %s\n' "$*"; }

if [[ ${1:-} == stop ]]; then
  stop_pid "$state/sidecar.pid"  # first: it ends its sessions through the gate
  stop_pid "$state/proxy.pid"
  scripts/egress-proxy.sh stop "$state/egress"
  if [[ -d $state/engine ]]; then scripts/engine.sh stop "$state/engine"; fi
  echo "run.sh: stopped (state kept in $state)"
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then echo "run.sh: run as root (it installs packages and may start dockerd)" >&2; exit 1; fi
mkdir -p "$state" && chmod 700 "$state"

say "packages (Debian's archive only)"
scripts/install-deps.sh >/dev/null
say "build (build/release)"
cmake --preset release >/dev/null
cmake --build --preset release --target dockgate-proxy dockgate-sidecar dockgate-mount | tail -n 1

say "Docker engine"
if /usr/bin/docker -H unix:///var/run/docker.sock info >/dev/null 2>&1; then
  engine=unix:///var/run/docker.sock
  echo "using the engine at $engine"
else
  if ! /usr/bin/docker -H "unix://$state/engine/docker.sock" info >/dev/null 2>&1; then
    rm -rf "$state/engine"
    scripts/engine.sh start "$state/engine" >/dev/null
  fi
  engine=unix://$state/engine/docker.sock
  echo "a private engine at $engine (none was running at /var/run/docker.sock)"
fi

say "session image ($image)"
if ! /usr/bin/docker -H "$engine" image inspect "$image" >/dev/null 2>&1; then
  # Built once per machine (debootstrap, about 10 minutes; cached in /var/cache/dockgate),
  # then imported in about a minute.
  scripts/runtime-image.sh "$engine" "$image" --full
fi
echo "ready"

say "the gate (sandbox profile) and the sidecar"
stop_pid "$state/sidecar.pid"
stop_pid "$state/proxy.pid"
[[ -s $state/api-key ]] || (umask 077 && openssl rand -hex 24 >"$state/api-key")
mkdir -p "$state/archives"
# The gate reads only files root controls; the checkout may be its user's.
# SANDBOX_NETWORK=allowlist SANDBOX_EGRESS_ALLOW=pypi.org,files.pythonhosted.org: sessions
# reach those names through the egress proxy, nothing else (docs/sidecar.md, Egress); the
# gate runs the sandbox-egress profile.
profile=sandbox
if [[ ${SANDBOX_NETWORK:-none} == allowlist ]]; then
  profile="sandbox-egress"
  # Each session's own list (an OpenSandbox sandbox's networkPolicy), from the sidecar to squid.
  export EGRESS_POLICY_DIR=$state/egress-policies SANDBOX_EGRESS_POLICY_DIR=$state/egress-policies
fi
scripts/egress-proxy.sh stop "$state/egress"
# The egress proxy before the sidecar: its rules hold every session bridge from the first.
if [[ $profile == sandbox-egress ]]; then scripts/egress-proxy.sh start "$state/egress"; fi
install -m 0644 "compose/policies/$profile.json" "$state/$profile.json"
setsid build/release/proxy/dockgate-proxy serve --upstream "$engine" --listen "unix://$gate_socket" \
  --metrics "tcp://$metrics" --policy "$state/$profile.json" \
  >>"$state/proxy-audit.log" 2>>"$state/proxy.log" </dev/null &
echo $! >"$state/proxy.pid"
for _ in $(seq 50); do build/release/proxy/dockgate-proxy healthcheck "tcp://$metrics" 2>/dev/null && break; sleep 0.2; done
DOCKER_HOST=unix://$gate_socket SANDBOX_API_KEY=$(cat "$state/api-key") SANDBOX_LISTEN=127.0.0.1:$sidecar_port \
  SANDBOX_IMAGE=$image SANDBOX_PULL_ON_START=0 SANDBOX_LOCAL_STORAGE_DIR=$state/archives \
  setsid build/release/sidecar/dockgate-sidecar >>"$state/sidecar.log" 2>&1 </dev/null &
echo $! >"$state/sidecar.pid"
for _ in $(seq 100); do build/release/sidecar/dockgate-sidecar healthcheck "tcp://127.0.0.1:$sidecar_port" 2>/dev/null && break; sleep 0.2; done
build/release/sidecar/dockgate-sidecar healthcheck "tcp://127.0.0.1:$sidecar_port" || {
  echo "run.sh: the sidecar is not healthy; $state/sidecar.log:" >&2; tail -n 20 "$state/sidecar.log" >&2; exit 1; }

say "demonstration"
key=$(cat "$state/api-key")
api() { curl -sS -H "Authorization: Bearer $key" -H 'Content-Type: application/json' "$@"; }
url=http://127.0.0.1:$sidecar_port
session=$(api -d '{}' "$url/sessions" | sed -n 's/.*"session_id":"\([^"]*\)".*/\1/p')
[[ -n $session ]] || { echo "run.sh: no session" >&2; exit 1; }
echo "session $session: a hardened container, made through the gate"
ran=$(api -d "{\"session_id\":\"$session\",\"code\":\"import platform, pandas\\nopen('/workspace/outputs/hello.txt','w').write('hello from the sandbox\\\\n')\\nprint('python', platform.python_version(), 'says 6*7 =', 6*7, 'with pandas', pandas.__version__)\"}" "$url/exec")
echo "code ran:  $(sed -n 's/.*"stdout":"\([^"]*\)\\n".*/\1/p' <<<"$ran")"
artifact=$(sed -n 's/.*"name":"hello.txt","mime_type":"[^"]*","data_base64":"\([^"]*\)".*/\1/p' <<<"$ran" | base64 -d 2>/dev/null || true)
echo "artifact:  /workspace/outputs/hello.txt came back: $artifact"
api -X DELETE "$url/sessions/$session" >/dev/null
hostile=$(curl -sS --unix-socket "$gate_socket" -H 'Content-Type: application/json' \
  -d '{"Image":"'"$image"'","HostConfig":{"Privileged":true,"Binds":["/:/host"]}}' http://docker/v1.41/containers/create)
echo "hostile create (privileged, binding /) through the gate: $hostile"
if [[ -z $artifact ]] || ! grep -q 'says 6\*7 = 42' <<<"$ran" || ! grep -q '^{"message":"dockgate: ' <<<"$hostile"; then
  echo "run.sh: the demonstration did not go as expected: $ran" >&2
  exit 1
fi
# The same sidecar as an OpenSandbox server (docs/opensandbox-api.md): a sandbox, execd's
# endpoint on the sidecar's proxy path with its access token, a command, the end.
os() { curl -sS -H "OPEN-SANDBOX-API-KEY: $key" -H 'Content-Type: application/json' "$@"; }
sandbox=$(os -d '{"image":{"uri":"'"$image"'"},"entrypoint":["tail","-f","/dev/null"],"resourceLimits":{"cpu":"1","memory":"512Mi"},"timeout":600}' \
  "$url/v1/sandboxes" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
endpoint=$(os "$url/v1/sandboxes/$sandbox/endpoints/44772")
execd=$(sed -n 's/.*"endpoint":"\([^"]*\)".*/\1/p' <<<"$endpoint")
token=$(sed -n 's/.*"X-EXECD-ACCESS-TOKEN":"\([^"]*\)".*/\1/p' <<<"$endpoint")
said=$(curl -sS -N -H "X-EXECD-ACCESS-TOKEN: $token" -H 'Content-Type: application/json' \
  -d '{"command":"echo hello from an OpenSandbox sandbox"}' "http://$execd/command" | sed -n 's/.*"type":"stdout","text":"\([^"\\]*\).*/\1/p')
os -X DELETE "$url/v1/sandboxes/$sandbox" >/dev/null
echo "OpenSandbox: sandbox $sandbox said: $said"
if [[ $said != "hello from an OpenSandbox sandbox" ]]; then
  echo "run.sh: the OpenSandbox demonstration did not go as expected: $endpoint" >&2
  exit 1
fi

say "running"
cat <<TEXT
gate (sandbox profile):  unix://$gate_socket     audit log $state/proxy-audit.log
  metrics and health:    http://$metrics/metrics  http://$metrics/healthz
sidecar:                 $url   (key: $state/api-key)
  curl -H "Authorization: Bearer \$(cat $state/api-key)" -d '{}' $url/sessions
OpenSandbox (its SDKs, the same sidecar; the second spelling is the AIStor example's):
  export OPEN_SANDBOX_DOMAIN=127.0.0.1:$sidecar_port OPEN_SANDBOX_API_KEY=$key
  export OPENSANDBOX_DOMAIN=127.0.0.1:$sidecar_port OPENSANDBOX_API_KEY=$key
  use the server proxy (useServerProxy: true / use_server_proxy=True); host volumes
  (allowed_host_paths): ${SANDBOX_HOST_VOLUME_ROOT:-/mnt/aimem}/<name> with SANDBOX_WORKSPACE_MODE=fuse
engine:                  $engine
stop:                    scripts/run.sh stop
TEXT

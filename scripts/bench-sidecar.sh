#!/usr/bin/env bash
# Sidecar latency in one run: POST /sessions to the first /exec answer and the round trip
# of print(1), through dockgate-sidecar -> dockgate-proxy -> a private dockerd, against the
# same work with plain `docker run` + `docker exec` on the same engine. Needs root.
#
#   scripts/bench-sidecar.sh [ROUNDS]   (default 5)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target dockgate-proxy dockgate-sidecar >/dev/null

work=$(mktemp -d /tmp/dockgate-bench-sidecar.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  scripts/engine.sh stop "$work/engine" || true
  rm -rf "$work"
}
trap cleanup EXIT
scripts/engine.sh start "$work/engine" >/dev/null
source "$work/engine/env"
build/release/proxy/dockgate-proxy --upstream "$DOCKGATE_TEST_ENGINE" --listen "unix://$work/proxy.sock" \
  --policy compose/policies/sandbox.json >/dev/null 2>&1 &
pids+=($!)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
for _ in $(seq 100); do [[ -S $work/proxy.sock ]] && break; sleep 0.05; done
DOCKER_HOST=unix://$work/proxy.sock SANDBOX_LISTEN=127.0.0.1:$port SANDBOX_API_KEY=bench \
  SANDBOX_IMAGE=$DOCKGATE_TEST_RUNTIME_IMAGE build/release/sidecar/dockgate-sidecar >"$work/sidecar.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do curl -fs "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done

python3 - "$port" "$DOCKGATE_TEST_ENGINE" "$DOCKGATE_TEST_RUNTIME_IMAGE" "$rounds" <<'PY'
import json, statistics, subprocess, sys, time, urllib.request
port, engine, image, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
def call(method, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(), method=method,
                                 headers={"Authorization": "Bearer bench", "Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(req, timeout=120).read() or b"{}")
def docker(*args):
    subprocess.run(["docker", "-H", engine, *args], check=True, capture_output=True)
side_first, side_exec, plain_first, plain_exec = [], [], [], []
for i in range(rounds):
    t0 = time.perf_counter()
    sid = call("POST", "/sessions", {})["session_id"]
    out = call("POST", "/exec", {"session_id": sid, "code": "print(1)"})
    side_first.append(time.perf_counter() - t0)
    assert out["stdout"] == "1\n", out
    t0 = time.perf_counter(); call("POST", "/exec", {"session_id": sid, "code": "print(1)"}); side_exec.append(time.perf_counter() - t0)
    call("DELETE", f"/sessions/{sid}", {})
    name = f"bench-plain-{i}"
    t0 = time.perf_counter()
    docker("run", "-d", "--name", name, "--network", "none", "--read-only", "--tmpfs", "/tmp", "--user", "1000:1000",
           "--cap-drop", "ALL", "--security-opt", "no-new-privileges", image, "sleep", "infinity")
    docker("exec", name, "python3", "-c", "print(1)")
    plain_first.append(time.perf_counter() - t0)
    t0 = time.perf_counter(); docker("exec", name, "python3", "-c", "print(1)"); plain_exec.append(time.perf_counter() - t0)
    docker("rm", "-f", name)
m = lambda xs: statistics.median(xs) * 1000
print(f"{rounds} rounds, medians (ms)")
print(f"{'':34}{'sidecar':>10}{'docker CLI':>12}{'ratio':>8}")
print(f"{'POST /sessions -> first /exec':34}{m(side_first):10.0f}{m(plain_first):12.0f}{m(side_first)/m(plain_first):8.2f}")
print(f"{'print(1) round trip':34}{m(side_exec):10.0f}{m(plain_exec):12.0f}{m(side_exec)/m(plain_exec):8.2f}")
PY

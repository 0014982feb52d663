#!/usr/bin/env bash
# Sidecar latency and scale in one run, through dockgate-sidecar -> dockgate-proxy -> a
# private dockerd, against the same work with plain `docker run` + `docker exec` on the
# same engine (the docker CLI, as an application without the sidecar would do it):
#
# - POST /sessions -> first /exec answer, on a warm pool hit (SANDBOX_WARM_POOL) and on a
#   miss (a second sidecar with SANDBOX_WARM_POOL=0), vs `docker run -d` + `docker exec`;
# - the round trip of print(1) in a live session vs `docker exec`;
# - cells on the session's fork server (docs/sidecar.md): print(1), and `import pandas,
#   matplotlib; print(1)` (the heaviest stdlib imports where the image lacks them: the row
#   says which), each vs `docker exec -u 1000:1000 <the session's container> python3 -c`
#   of the same code;
# - OpenSandbox's own JS SDK (scripts/bench-opensandbox.js, one node process per round,
#   timed inside it): Sandbox.create (server proxy, the SDK's default body) -> the first
#   commands.run("echo 1") output, on a pool hit and a miss, vs `docker run -d` + `docker
#   exec sh -c 'echo 1'`; then `python3 -c 'import pandas'` through commands.run (the image
#   lacking pandas: the stdlib imports, said in the row) vs `docker exec` of the same; then
#   the first `import pandas` cell through /code (a context made, its kernel started, and
#   the cell) vs `docker exec python3 -c 'import pandas'`, and whether that kernel had pandas
#   already (it has not: a context's kernel starts with it; the warm pool holds containers,
#   not kernels). The /code rows need ipykernel in the image (the full one): skipped, and
#   said, without it (the smoke's small image). Skipped, and said, where node or the SDK
#   is missing (DOCKGATE_NODE_PATH, else scripts/node-clients.sh's cache); where
#   DOCKGATE_NODE_PATH is set (CI) a missing SDK is an error;
# - scale: SCALE sessions each running one cell at once: cells/s, p50 and p99, the
#   sidecar's threads and RSS (/proc/PID/status; peak while the cells ran), the Engine API
#   calls the gate relayed meanwhile (its audit log: a warm session's cell makes none), vs
#   SCALE concurrent `docker exec` in SCALE plain containers;
# - creates at concurrency: BURST (1, 10 and 50; --smoke 5) concurrent POST /sessions ->
#   first /exec answers on a sidecar whose pool (BURST_POOL, default the largest level) is
#   full (/healthz's warm_pool) before each burst: p50 and p99 per level; then how the pool
#   refills after the largest burst (time until /healthz says it is full again, and the
#   most pool starts in flight at once, from the gate's audit log), the Engine API calls
#   per hit (the audit log, the pool's own refill calls left out); the same levels with no
#   pool (misses) and, for reference, as many concurrent `docker run -d` + `docker exec`;
# - gVisor: where the engine has runsc (scripts/engine.sh registers Debian's), a runsc
#   session's create -> first answer and its print(1) and stdlib-import cells on its fork
#   server, beside a runc session's of the same sidecar (no pool for either): runsc's cost
#   per cell (skipped, and said, without runsc);
# - the memory of an idle warm container, read from its cgroup (memory.current on cgroup
#   v2, memory.usage_in_bytes on v1; said which), and docker stats.
#
# Rounds alternate sidecar and plain work, so load from elsewhere hits both alike; the
# figures are medians over rounds and every ratio is of numbers from this run. Needs root.
#
#   scripts/bench-sidecar.sh [ROUNDS]   (default 5; SCALE=50, POOL=2, BURST="1 10 50",
#                                        BURST_POOL=50 in the environment;
#                                        RUNTIME=full, the data-stack image run.sh uses, or
#                                        small, the tests' bare Python)
#   scripts/bench-sidecar.sh --smoke    (1 round, SCALE=5, the small image: finishes well
#                                        within 90 s; never fails on a ratio)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh  # free_port
rounds=5
scale=${SCALE:-50}
pool=${POOL:-2}
preset=${PRESET:-release}
runtime=${RUNTIME:-full}
burst=${BURST:-1 10 50}
if [[ ${1:-} == --smoke ]]; then
  rounds=1
  scale=${SCALE:-5}
  burst=${BURST:-5}
  runtime=${RUNTIME:-small}
elif [[ -n ${1:-} ]]; then
  rounds=$1
fi
[[ ${SKIP_DEPS:-0} == 1 ]] || scripts/install-deps.sh
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" --target dockgate-proxy dockgate-sidecar >/dev/null
bin=build/$preset

work=$(mktemp -d /tmp/dockgate-bench-sidecar.XXXXXX)
pids=()
cleanup() {
  # Sidecars before the gate they reach Docker through (the last started first); the
  # burst section's own (started by the Python part) first of all.
  for f in "$work"/burst-*.pid; do [[ -e $f ]] && kill "$(cat "$f")" 2>/dev/null || true; done
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[i]}" 2>/dev/null || true; wait "${pids[i]}" 2>/dev/null || true; done
  scripts/engine.sh stop "$work/engine" || true
  rm -rf "$work"
}
trap cleanup EXIT
scripts/engine.sh start "$work/engine" >/dev/null
source "$work/engine/env"
image=$DOCKGATE_TEST_RUNTIME_IMAGE
if [[ $runtime == full ]]; then
  image=dockgate/sandbox-runtime:full  # built once per machine, then imported from the cache
  scripts/runtime-image.sh "$DOCKGATE_TEST_ENGINE" "$image" --full >/dev/null
fi
# The gate reads only files root controls; the checkout may be its user's. The shipped
# profile lets a create name runc or runsc (its HostConfig.Runtime rule; runc by default).
install -m 0644 compose/policies/sandbox.json "$work/sandbox.json"
runsc_on=${DOCKGATE_TEST_RUNSC:-0}
if [[ $runsc_on != 1 ]]; then
  echo "bench-sidecar.sh: skipping the gVisor rows: runsc is not registered on the engine" >&2
fi
"$bin/proxy/dockgate-proxy" --upstream "$DOCKGATE_TEST_ENGINE" --listen "unix://$work/proxy.sock" \
  --policy "$work/sandbox.json" >"$work/proxy.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [[ -S $work/proxy.sock ]] && break; sleep 0.05; done

# sidecar NAME WARM_POOL: a sidecar of its own instance on a free port (sets port, pid).
sidecar() {
  port=$(free_port)
  DOCKER_HOST=unix://$work/proxy.sock SANDBOX_LISTEN=127.0.0.1:$port SANDBOX_API_KEY=bench \
    SANDBOX_IMAGE=$image SANDBOX_INSTANCE=$1 SANDBOX_WARM_POOL=$2 \
    SANDBOX_MAX_SESSIONS=$((scale + 8)) SANDBOX_MAX_CONCURRENT_EXECS=$((scale + 8)) \
    SANDBOX_MAX_CONCURRENT_CREATES=8 SANDBOX_RUNTIMES=${3:-} \
    "$bin/sidecar/dockgate-sidecar" >"$work/sidecar-$1.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  for _ in $(seq 100); do curl -fs "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
}
# OpenSandbox's JS SDK: DOCKGATE_NODE_PATH (CI: scripts/test.sh after node-clients.sh),
# else node-clients.sh's cache; missing on a user's machine, its rows are skipped.
os_node=${DOCKGATE_NODE_PATH:-${DOCKGATE_CACHE:-/var/cache/dockgate}/node-clients/node_modules}
os_skip=
if ! command -v node >/dev/null; then
  os_skip="node is not installed"
elif ! NODE_PATH=$os_node node -e 'require("@alibaba-group/opensandbox")' 2>/dev/null; then
  os_skip="the OpenSandbox SDK is not in $os_node (scripts/node-clients.sh DIR installs it)"
fi
if [[ -n $os_skip && -n ${DOCKGATE_NODE_PATH:-} ]]; then
  echo "bench-sidecar.sh: DOCKGATE_NODE_PATH is set but $os_skip" >&2
  exit 1
fi
[[ -z $os_skip ]] || echo "bench-sidecar.sh: skipping the OpenSandbox rows: $os_skip" >&2
sidecar warm "$pool"
warm_port=$port warm_pid=$pid
runtimes=
if [[ $runsc_on == 1 ]]; then runtimes=runc,runsc; fi
sidecar cold 0 "$runtimes"
cold_port=$port

python3 - "$DOCKGATE_TEST_ENGINE" "$image" "$rounds" "$scale" "$pool" \
  "$warm_port" "$warm_pid" "$cold_port" "$os_node" "$os_skip" "$burst" "$bin" "$work" "$work/proxy.log" "$runsc_on" <<'PY'
import calendar, json, os, socket, statistics, subprocess, sys, threading, time, urllib.request
from concurrent.futures import ThreadPoolExecutor

engine, image = sys.argv[1], sys.argv[2]
rounds, scale, pool = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
warm_port, warm_pid, cold_port = sys.argv[6], int(sys.argv[7]), sys.argv[8]
os_node, os_skip = sys.argv[9], sys.argv[10]
levels = [int(n) for n in sys.argv[11].split()]
bin_dir, work = sys.argv[12], sys.argv[13]
burst_pool = int(os.environ.get("BURST_POOL") or max(levels))
audit_log = sys.argv[14]  # the gate's audit log: one line per Engine API call it relayed
runsc_on = sys.argv[15] == "1"  # runsc registered on the engine (the gVisor rows)


def call(port, method, path, body=None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body or {}).encode(), method=method,
                                 headers={"Authorization": "Bearer bench", "Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(req, timeout=300).read() or b"{}")


def run_cell(port, sid, code="print(1)"):
    out = call(port, "POST", "/exec", {"session_id": sid, "code": code})
    assert out["stdout"] == "1\n", out
    return out


def docker(*args):
    return subprocess.run(["docker", "-H", engine, *args], check=True, capture_output=True, text=True).stdout


def timed(fn, *args):
    t0 = time.perf_counter()
    result = fn(*args)
    return time.perf_counter() - t0, result


def warm_containers():
    """Running containers of the warm sidecar: its warm pool plus its live sessions."""
    return len(docker("ps", "-q", "--filter", "label=sandbox.instance=warm").split())


def wait_for_pool(live_sessions=0, timeout=60):
    deadline = time.monotonic() + timeout
    while warm_containers() < pool + live_sessions and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # running is not ready yet: its workspace is made next


# Hardening as the gate's sandbox profile forces it, so the daemon does the same work.
PLAIN_RUN = ["run", "-d", "--network", "none", "--read-only", "--tmpfs", "/tmp", "--tmpfs", "/workspace",
             "--user", "1000:1000", "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--init",
             "--memory", "2g", "--pids-limit", "256"]


def plain_first(name):
    """docker run + the first docker exec: the plain equivalent of a new session's first
    cell. Returns the time of the run alone."""
    run_time = timed(docker, *PLAIN_RUN, "--name", name, image, "sleep", "infinity")[0]
    docker("exec", name, "python3", "-c", "print(1)")
    return run_time


def session_first(port):
    """A new session and its first cell. Returns the session and the time of the create alone."""
    create_time, created = timed(call, port, "POST", "/sessions")
    run_cell(port, created["session_id"])
    return created["session_id"], create_time


# Whether the image has the data stack (else the heaviest stdlib imports, said in the rows).
stack = subprocess.run(["docker", "-H", engine, "run", "--rm", "--network", "none", "--user", "1000:1000", image,
                        "python3", "-c", "import pandas, matplotlib"], capture_output=True).returncode == 0
os_heavy_code = "import pandas" if stack else "import json, decimal, asyncio, email.mime.multipart"
os_heavy_command = f"python3 -c '{os_heavy_code}'"
# /code needs an IPython kernel in the image (the full image has one, the small one not).
kernel = subprocess.run(["docker", "-H", engine, "run", "--rm", "--network", "none", "--user", "1000:1000", image,
                         "python3", "-c", "import ipykernel, jupyter_client"], capture_output=True).returncode == 0


def os_first(port):
    """One node process: the SDK's Sandbox.create -> first commands.run output, then the
    heavy command; the figures (seconds) as timed inside it."""
    out = subprocess.run(["node", "scripts/bench-opensandbox.js", port, image, "bench", os_heavy_command,
                          os_heavy_code if kernel else ""],
                         env={**os.environ, "NODE_PATH": os_node}, check=True, capture_output=True, text=True,
                         timeout=300).stdout
    figures = json.loads(out)
    assert figures["first"] == "1\n" and figures["heavy_exit"] == 0, figures
    assert not kernel or figures["cell_error"] is None, figures
    return (figures["create_ms"] / 1000, figures["first_ms"] / 1000, figures["heavy_ms"] / 1000, figures["phases"],
            figures.get("context_ms", 0) / 1000, figures.get("cell_ms", 0) / 1000, figures.get("cell_warm"))


def plain_os_first(name):
    """docker run + docker exec sh -c 'echo 1', then the heavy command by docker exec."""
    t0 = time.perf_counter()
    docker(*PLAIN_RUN, "--name", name, image, "sleep", "infinity")
    t1 = time.perf_counter()
    docker("exec", name, "sh", "-c", "echo 1")
    t2 = time.perf_counter()
    docker("exec", name, "python3", "-c", os_heavy_code)
    t3 = time.perf_counter()
    docker("rm", "-f", name)
    return t1 - t0, t2 - t0, t3 - t2


ms = lambda xs: statistics.median(xs) * 1000
p99 = lambda xs: sorted(xs)[min(len(xs) - 1, int(len(xs) * 0.99))] * 1000

# 1. New session -> first answer; a live session's print(1).
hit, miss, plain, side_rt, plain_rt = [], [], [], [], []
hit_create, miss_create, plain_run = [], [], []
os_hit, os_miss, os_plain = [], [], []  # (create, create -> first output, heavy command) each
os_wall = 0.0  # what the OpenSandbox rows add to the run (s)
for i in range(rounds):
    wait_for_pool()
    t, (sid, create_time) = timed(session_first, warm_port)
    hit.append(t)
    hit_create.append(create_time)
    side_rt.append(timed(run_cell, warm_port, sid)[0])
    call(warm_port, "DELETE", f"/sessions/{sid}")

    t, (sid, create_time) = timed(session_first, cold_port)
    miss.append(t)
    miss_create.append(create_time)
    call(cold_port, "DELETE", f"/sessions/{sid}")

    name = f"bench-plain-{i}"
    t, run_time = timed(plain_first, name)
    plain.append(t)
    plain_run.append(run_time)
    plain_rt.append(timed(docker, "exec", name, "python3", "-c", "print(1)")[0])
    docker("rm", "-f", name)

    if not os_skip:
        os_start = time.perf_counter()
        wait_for_pool()
        os_hit.append(os_first(warm_port))
        os_miss.append(os_first(cold_port))
        os_plain.append(plain_os_first(f"bench-os-plain-{i}"))
        os_wall += time.perf_counter() - os_start

# 1b. Cells on the fork server vs `docker exec ... python3 -c` of the same code in the same
# (session) container: print(1), and the data stack's imports where the image has them
# (else the heaviest stdlib imports, said in the row).
sid = call(warm_port, "POST", "/sessions")["session_id"]
container = f"dockgate-sbx-{sid}"
heavy_code = "import pandas, matplotlib; print(1)" if stack else "import json, decimal, asyncio, email.mime.multipart; print(1)"
heavy_label = "import pandas, matplotlib" if stack else "stdlib imports (no pandas)"
fork_rt, exec_rt, fork_heavy, exec_heavy = [], [], [], []
run_cell(warm_port, sid)  # the warm interpreter is up
for _ in range(rounds * 4):
    fork_rt.append(timed(run_cell, warm_port, sid)[0])
    exec_rt.append(timed(docker, "exec", "-u", "1000:1000", container, "python3", "-c", "print(1)")[0])
    fork_heavy.append(timed(run_cell, warm_port, sid, heavy_code)[0])
    exec_heavy.append(timed(docker, "exec", "-u", "1000:1000", container, "python3", "-c", heavy_code)[0])
call(warm_port, "DELETE", f"/sessions/{sid}")

# 1c. gVisor: a runsc session beside a runc session of the same sidecar (no pool): create ->
# first answer, then print(1) and the stdlib imports on each one's fork server.
gv = {"runc": {"first": [], "rt": [], "heavy": []}, "runsc": {"first": [], "rt": [], "heavy": []}}
gv_wall = 0.0
if runsc_on:
    gv_start = time.perf_counter()
    gv_heavy = "import json, decimal, asyncio, email.mime.multipart; print(1)"
    for i in range(rounds):
        for rt in ("runc", "runsc"):
            t0 = time.perf_counter()
            sid = call(cold_port, "POST", "/sessions", {"runtime": rt})["session_id"]
            run_cell(cold_port, sid)
            gv[rt]["first"].append(time.perf_counter() - t0)
            for _ in range(2):
                gv[rt]["rt"].append(timed(run_cell, cold_port, sid)[0])
                gv[rt]["heavy"].append(timed(run_cell, cold_port, sid, gv_heavy)[0])
            call(cold_port, "DELETE", f"/sessions/{sid}")
    gv_wall = time.perf_counter() - gv_start

# 2. Scale: `scale` sessions, one cell each, all at once (the warm sidecar; pool drained).
def proc_status(pid):
    """The process's thread count and resident memory (MiB)."""
    fields = dict(line.split(":", 1) for line in open(f"/proc/{pid}/status"))
    return int(fields["Threads"]), int(fields["VmRSS"].split()[0]) // 1024


def concurrently(fn, items):
    """Runs fn(item) for every item at once; per-item latencies and the wall time."""
    with ThreadPoolExecutor(max_workers=len(items)) as ex:
        t0 = time.perf_counter()
        latencies = list(ex.map(lambda item: timed(fn, item)[0], items))
        return latencies, time.perf_counter() - t0


with ThreadPoolExecutor(max_workers=8) as ex:
    sids = list(ex.map(lambda _: call(warm_port, "POST", "/sessions")["session_id"], range(scale)))
idle_threads, idle_rss = proc_status(warm_pid)
peak = {"threads": idle_threads, "rss": idle_rss}
sampling = True


def sample():
    while sampling:
        threads, rss = proc_status(warm_pid)
        peak["threads"], peak["rss"] = max(peak["threads"], threads), max(peak["rss"], rss)
        time.sleep(0.01)


def audit_lines():
    with open(audit_log, "rb") as f:
        return f.readlines()


sampler = threading.Thread(target=sample)
sampler.start()
audit_before = len(audit_lines())
side_lat, side_wall = concurrently(lambda sid: run_cell(warm_port, sid), sids)
# What the daemon was asked while the cells ran (a warm session's cell: nothing; the
# pool's refill and the reaper's listings may fall in the window).
calls = {}
for line in audit_lines()[audit_before:]:
    try:
        op = json.loads(line).get("operation", "?")
    except ValueError:
        continue
    calls[op] = calls.get(op, 0) + 1
sampling = False
sampler.join()
with ThreadPoolExecutor(max_workers=8) as ex:
    list(ex.map(lambda sid: call(warm_port, "DELETE", f"/sessions/{sid}"), sids))

names = [f"bench-scale-{i}" for i in range(scale)]
with ThreadPoolExecutor(max_workers=8) as ex:
    list(ex.map(lambda n: docker(*PLAIN_RUN, "--name", n, image, "sleep", "infinity"), names))
plain_lat, plain_wall = concurrently(lambda n: docker("exec", n, "python3", "-c", "print(1)"), names)
docker("rm", "-f", *names)

# 2b. Creates at concurrency (issue 43 item 2), on sidecars of their own started only now
# (their pools fill here, not during the rows above): `levels` concurrent POST /sessions ->
# first /exec, on a pool of `burst_pool` full before each burst (hits), with no pool
# (misses), and as many concurrent docker run -d + docker exec.
def start_sidecar(name, warm_pool, room):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "DOCKER_HOST": f"unix://{work}/proxy.sock", "SANDBOX_LISTEN": f"127.0.0.1:{port}",
           "SANDBOX_API_KEY": "bench", "SANDBOX_IMAGE": image, "SANDBOX_INSTANCE": name,
           "SANDBOX_WARM_POOL": str(warm_pool), "SANDBOX_MAX_SESSIONS": str(warm_pool + room),
           "SANDBOX_MAX_CONCURRENT_EXECS": str(room), "SANDBOX_MAX_CONCURRENT_CREATES": str(room)}
    with open(f"{work}/sidecar-{name}.log", "w") as log:
        proc = subprocess.Popen([f"{bin_dir}/sidecar/dockgate-sidecar"], env=env, stdout=log, stderr=subprocess.STDOUT)
    with open(f"{work}/burst-{name}.pid", "w") as f:
        f.write(str(proc.pid))
    for _ in range(200):
        try:
            health(port)
            break
        except OSError:
            time.sleep(0.1)
    return port, proc


def health(port):
    return json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10).read())


def wait_full(port, n, timeout=900):
    """Seconds until /healthz says `n` warm containers are ready (their runners warm)."""
    t0 = time.perf_counter()
    while health(port).get("warm_pool", 0) < n:
        if time.perf_counter() - t0 > timeout:
            raise SystemExit(f"bench-sidecar.sh: the pool did not fill to {n} within {timeout} s")
        time.sleep(0.1)
    return time.perf_counter() - t0


def at_once(fn, n):
    """fn(i) for i < n on n threads released together; each one's (latency, result)."""
    gate = threading.Barrier(n)

    def one(i):
        gate.wait()
        return timed(fn, i)

    with ThreadPoolExecutor(max_workers=n) as ex:
        return list(ex.map(one, range(n)))


def first_answer(port):
    """A new session and its first cell: the session."""
    sid = call(port, "POST", "/sessions")["session_id"]
    run_cell(port, sid)
    return sid


def end_sessions(port, sids):
    with ThreadPoolExecutor(max_workers=8) as ex:
        list(ex.map(lambda sid: call(port, "DELETE", f"/sessions/{sid}"), sids))


def audit(since, pid):
    """The gate's audit records of the client `pid` from `since` (time.time()) on."""
    out = []
    for line in open(f"{work}/proxy.log"):
        if not line.startswith("{"):
            continue
        rec = json.loads(line)
        t = calendar.timegm(time.strptime(rec["time"][:19], "%Y-%m-%dT%H:%M:%S")) + float("0" + rec["time"][19:-1])
        if rec.get("client", {}).get("pid") == pid and t >= since:
            out.append((t, rec))
    return out


def most_at_once(spans):
    events = sorted([(a, 1) for a, b in spans] + [(b, -1) for a, b in spans])
    most = now = 0
    for _, d in events:
        now += d
        most = max(most, now)
    return most


burst_start = time.perf_counter()
burst_room = max(levels) + 8
hot_port, hot = start_sidecar("burst", burst_pool, burst_room)
cold_burst_port, cold_burst = start_sidecar("burstcold", 0, burst_room)
first_fill = wait_full(hot_port, burst_pool)
burst_hit, burst_miss, burst_plain, refill, calls_per_hit, starts_in_flight = {}, {}, {}, {}, {}, {}
for n in levels:
    hits = []
    for _ in range(5 if n == 1 else 1):
        wait_full(hot_port, burst_pool)
        since = time.time()
        got = at_once(lambda i: first_answer(hot_port), n)
        refill[n] = wait_full(hot_port, burst_pool) + max(t for t, _ in got)  # from the burst's start
        records = audit(since - 0.05, hot.pid)
        sids = [sid for _, sid in got]
        hits += [t for t, _ in got]
        # A hit's own calls: its claim record, and anything on its container; the rest
        # (the list, create, start and runner exec of each refill) is the pool's.
        mine = {f"dockgate-sbx-{sid}" for sid in sids}
        claimed = {docker("inspect", "-f", "{{.Id}}", name).strip() for name in mine}
        own = [r for _, r in records if (r.get("object") or {}).get("name", "").removesuffix("-claim") in mine
               or (r.get("object") or {}).get("id") in claimed]
        calls_per_hit[n] = len(own) / n
        starts_in_flight[n] = most_at_once([(t, t + r.get("duration_ms", 0) / 1000) for t, r in records
                                            if r["operation"] == "ContainerStart"])
        end_sessions(hot_port, sids)
    burst_hit[n] = hits
    got = at_once(lambda i: first_answer(cold_burst_port), n)
    burst_miss[n] = [t for t, _ in got]
    end_sessions(cold_burst_port, [sid for _, sid in got])
    names = [f"bench-burst-{n}-{i}" for i in range(n)]
    burst_plain[n] = [t for t, _ in at_once(lambda i: plain_first(names[i]), n)]
    docker("rm", "-f", *names)

# 3. An idle warm container's memory, read from its cgroup (its limit is a cgroup limit
# only, not a reservation): the burst sidecar's full pool, every runner warm.
wait_full(hot_port, burst_pool)
warm_ids = docker("ps", "-q", "--filter", "label=sandbox.pool", "--filter", "label=sandbox.instance=burst").split()


def cgroup_memory(container):
    """(bytes, the file read) of the container's memory cgroup, from its init's /proc."""
    pid = docker("inspect", "-f", "{{.State.Pid}}", container).strip()
    for line in open(f"/proc/{pid}/cgroup"):
        num, controllers, path = line.rstrip("\n").split(":", 2)
        if num == "0" and os.path.exists(f"/sys/fs/cgroup{path}/memory.current"):
            return int(open(f"/sys/fs/cgroup{path}/memory.current").read()), "memory.current (cgroup v2)"
        if "memory" in controllers.split(","):
            return (int(open(f"/sys/fs/cgroup/memory{path}/memory.usage_in_bytes").read()),
                    "memory.usage_in_bytes (cgroup v1)")
    return 0, "no memory cgroup found"


memories = [cgroup_memory(c) for c in warm_ids]
burst_wall = time.perf_counter() - burst_start
stats = docker("stats", "--no-stream", "--format", "{{.MemUsage}}", *warm_ids[:3])

print(f"{rounds} round(s), medians (ms); warm pool {pool}; load average {open('/proc/loadavg').read().split()[0]}")
print(f"{'':40}{'sidecar':>10}{'docker CLI':>12}{'ratio':>8}   (POST /sessions alone vs docker run -d)")
row = lambda label, a, b: print(f"{label:40}{a:10.0f}{b:12.0f}{a / b:8.2f}")
row("POST /sessions -> first /exec, pool hit", ms(hit), ms(plain))
row("POST /sessions -> first /exec, pool miss", ms(miss), ms(plain))
row("  of which POST /sessions, pool hit", ms(hit_create), ms(plain_run))
row("  of which POST /sessions, pool miss", ms(miss_create), ms(plain_run))
row("print(1) round trip", ms(side_rt), ms(plain_rt))
if os_skip:
    print(f"OpenSandbox SDK rows skipped: {os_skip}")
else:
    col = lambda xs, k: [x[k] for x in xs]
    print(f"OpenSandbox JS SDK 0.1.11 (server proxy; Sandbox.create, commands.run), timed in node "
          f"(these rows took {os_wall:.1f} s of the run)")
    row("  create -> first echo 1, pool hit", ms(col(os_hit, 1)), ms(col(os_plain, 1)))
    row("  create -> first echo 1, pool miss", ms(col(os_miss, 1)), ms(col(os_plain, 1)))
    row("    of which Sandbox.create, pool hit", ms(col(os_hit, 0)), ms(col(os_plain, 0)))
    row("    of which Sandbox.create, pool miss", ms(col(os_miss, 0)), ms(col(os_plain, 0)))
    heavy = "'import pandas'" if stack else "stdlib imports"
    row(f"  python3 -c {heavy}, hit", ms(col(os_hit, 2)), ms(col(os_plain, 2)))
    row(f"  python3 -c {heavy}, miss", ms(col(os_miss, 2)), ms(col(os_plain, 2)))
    print("  (python3 -c by commands.run vs docker exec)")
    if kernel:
        # Sandbox.create, then a context and its first cell, vs docker run + docker exec.
        code_first = lambda xs: [x[0] + x[4] + x[5] for x in xs]
        plain_code = [x[0] + x[2] for x in os_plain]
        row(f"  create -> first {heavy} cell (/code), hit", ms(code_first(os_hit)), ms(plain_code))
        row(f"  create -> first {heavy} cell (/code), miss", ms(code_first(os_miss)), ms(plain_code))
        print(f"{'    of which POST /code/context, hit':40}{ms(col(os_hit, 4)):10.0f}   (the kernel's start; "
              f"miss {ms(col(os_miss, 4)):.0f})")
        row(f"    of which the {heavy} cell, hit", ms(col(os_hit, 5)), ms(col(os_plain, 2)))
        warm = sorted({x[6] for x in os_hit + os_miss})
        print(f"  (the first cell's kernel had pandas imported already: {', '.join(warm)}; the plain "
              f"column: docker run -d, then docker exec python3 -c)")
    else:
        print("  /code rows skipped: the image has no IPython kernel (RUNTIME=full has one)")
    for name, runs in (("hit", os_hit), ("miss", os_miss)):
        phase = lambda k: statistics.median(x[3][k] for x in runs)
        print(f"  Sandbox.create, {name}: SDK before its POST {phase('client_ms'):.0f}, POST /v1/sandboxes "
              f"{phase('post_ms'):.0f}, endpoint GETs {phase('endpoints_ms'):.0f}, execd ready "
              f"{phase('ready_ms'):.0f} ({phase('pings'):.0f} /ping)")
print(f"cells in one session ({rounds * 4} each) vs docker exec in the same container "
      f"(image {'with' if stack else 'without'} the data stack)")
row("  print(1) round trip", ms(fork_rt), ms(exec_rt))
row(f"  {heavy_label}; print(1)", ms(fork_heavy), ms(exec_heavy))
if runsc_on:
    print(f"gVisor (runsc, ptrace platform) vs runc, one sidecar, no pool ({rounds * 2} cells each; "
          f"these rows took {gv_wall:.0f} s)")
    print(f"{'':40}{'runsc':>10}{'runc':>12}{'ratio':>8}")
    row("  new session -> first answer", ms(gv["runsc"]["first"]), ms(gv["runc"]["first"]))
    row("  print(1) round trip", ms(gv["runsc"]["rt"]), ms(gv["runc"]["rt"]))
    row("  stdlib imports; print(1)", ms(gv["runsc"]["heavy"]), ms(gv["runc"]["heavy"]))
else:
    print("gVisor rows skipped: runsc is not registered on the engine (apt-get install runsc)")
print(f"scale: {scale} sessions, one cell each at once")
print(f"{'  cells/s':40}{scale / side_wall:10.1f}{scale / plain_wall:12.1f}{(scale / side_wall) / (scale / plain_wall):8.2f}")
row("  p50 latency", ms(side_lat), ms(plain_lat))
row("  p99 latency", p99(side_lat), p99(plain_lat))
print(f"  sidecar threads {idle_threads} idle, {peak['threads']} peak; RSS {idle_rss} MiB idle, {peak['rss']} MiB peak")
print(f"  Engine API calls through the gate while the {scale} cells ran: {sum(calls.values())}"
      + (f" ({', '.join(f'{op} {n}' for op, n in sorted(calls.items()))})" if calls else ""))
q = lambda xs, f: sorted(xs)[min(len(xs) - 1, int(len(xs) * f))] * 1000
print(f"creates at concurrency: POST /sessions -> first /exec answer (print(1)); pool of {burst_pool}, full before "
      f"each burst (first fill {first_fill:.0f} s); SANDBOX_MAX_CONCURRENT_CREATES and _EXECS {burst_room}; "
      f"this section took {burst_wall:.0f} s")
print(f"{'  at once':12}{'hit p50':>9}{'hit p99':>9}{'miss p50':>10}{'miss p99':>10}{'CLI p50':>9}{'CLI p99':>9}"
      f"{'refill s':>10}{'calls/hit':>11}{'starts at once':>16}")
for n in levels:
    print(f"{n:>12}{q(burst_hit[n], 0.5):9.0f}{q(burst_hit[n], 0.99):9.0f}{q(burst_miss[n], 0.5):10.0f}"
          f"{q(burst_miss[n], 0.99):10.0f}{q(burst_plain[n], 0.5):9.0f}{q(burst_plain[n], 0.99):9.0f}"
          f"{refill[n]:10.1f}{calls_per_hit[n]:11.1f}{starts_in_flight[n]:16d}")
print("  (refill: from the burst's start until /healthz says the pool is full again; calls/hit: the gate's "
      "audit records of a hit's own, the pool's refill left out; CLI: docker run -d + docker exec; 1 at once: "
      "5 in a row)")
sizes = sorted(m for m, _ in memories)
print(f"idle warm container memory, {memories[0][1] if memories else 'n/a'}: median "
      f"{statistics.median(sizes) / 2**20 if sizes else 0:.1f} MiB of {len(sizes)} (min {sizes[0] / 2**20 if sizes else 0:.1f}, "
      f"max {sizes[-1] / 2**20 if sizes else 0:.1f}); docker stats: {', '.join(stats.split(chr(10))[:3]) or 'n/a'}")
PY

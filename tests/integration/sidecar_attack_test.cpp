// The sidecar under attack and faults (issue 11): nothing a cell starts outlives its answer,
// artifacts cannot be forged by file names, and a kill is explained. Judged by the
// daemon's process table (`docker top`) and the container's own files.
#include <algorithm>
#include <fstream>
#include <iterator>
#include <set>

#include "sidecar_harness.hpp"

using namespace dockgate::test;
using namespace std::chrono_literals;

TEST_CASE(
    "cells: nothing a cell starts outlives its answer, whatever it did to its environment or PID",
    "[integration][sidecar][cells]") {
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy);
  const std::string sid = new_session(sidecar);
  const std::string container = "dockgate-sbx-" + sid;
  // A daemon that leaves the cell's session and process group, empties its environment
  // and re-execs, and a child that changes its PID all the time (fork, parent exits).
  const std::string escape = R"(import os, subprocess, time
subprocess.Popen(['sh', '-c', 'exec env -i sh -c "while :; do sleep 1; done"'], start_new_session=True, env={})
if os.fork() == 0:
    os.setsid()
    for k in list(os.environ): del os.environ[k]
    while True:
        if os.fork() != 0:
            os._exit(0)
        time.sleep(0.001)
subprocess.Popen(['nohup', 'sleep', '1000'], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=os.setpgrp)
time.sleep(0.5)
print('spawned')
)";
  for (int round = 0; round < 3; ++round) {
    auto ran = sidecar.call("POST", "/exec", exec_body(sid, escape, 10000));
    INFO(ran.body);
    REQUIRE(field(ran.body, "stdout") == "spawned\n");
    // Only the container's init, its sleep and the cell runner are left.
    const std::string left = processes(container);
    INFO(left);
    CHECK(left == "/sbin/docker-init -- sleep infinity\nsleep infinity\n<runner>\n");
  }
  // The session still works.
  CHECK(field(sidecar.call("POST", "/exec", exec_body(sid, "print(1)", 10000)).body, "stdout") ==
        "1\n");
}

TEST_CASE("cells: a process cannot hide from the kill sweep behind a forged comm (both paths)",
          "[integration][sidecar][cells]") {
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process fast(proxy);
  sidecar_process plain(proxy, {"SANDBOX_CELL_RUNNER=0", "SANDBOX_INSTANCE=plain" + fast.port()});
  // Left-behind children of PID 1 whose comm (/proc/self/comm, up to 15 bytes) cuts their
  // stat line short: "x) 1 1\n" once made the sweep's `shift 19` end its shell before it
  // killed anything; "x) 1 /*/*\n" expanded to a glob and could be taken for the kept sleep.
  const std::string hide = R"(import os, time
for comm in ('x) 1 1\n', 'x) 1 /*/*\n', 'x) 1 /*/*/*\n'):
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            open('/proc/self/comm', 'w').write(comm)
            time.sleep(1000)
        os._exit(0)
time.sleep(0.3)
print('hidden')
)";
  for (const auto* sidecar : {&fast, &plain}) {
    const std::string sid = new_session(*sidecar);
    const std::string container = "dockgate-sbx-" + sid;
    for (int round = 0; round < 2; ++round) {
      auto ran = sidecar->call("POST", "/exec", exec_body(sid, hide, 10000));
      INFO(ran.body);
      REQUIRE(field(ran.body, "stdout") == "hidden\n");
      const std::string left = processes(container);
      INFO(left);
      CHECK(left == std::string("/sbin/docker-init -- sleep infinity\nsleep infinity\n") +
                        (sidecar == &fast ? "<runner>\n" : ""));
    }
    CHECK(field(sidecar->call("POST", "/exec", exec_body(sid, "print(1)", 10000)).body, "stdout") ==
          "1\n");
    sidecar->call("DELETE", "/sessions/" + sid, "");
  }
}

namespace {

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// The container's processes not yet past killing, read from the kernel at once (no `docker
// top`, whose round trip is longer than a dying process takes): the members of its pids
// cgroup (v1's controller, or v2's one tree), each as its command line ("[comm]" once its
// memory is gone, as ps shows it), "<pid> <ppid> <args>" a line. Left out: a zombie of one thread,
// nothing else; a zombie with threads (a group leader that exited while its other threads run) is
// alive.
std::string live_processes(const std::string& init_pid) {
  std::istringstream groups(read_text("/proc/" + init_pid + "/cgroup"));
  std::string procs_file;
  for (std::string line; std::getline(groups, line);) {
    const auto a = line.find(':'), b = line.find(':', a + 1);
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (controllers == "pids") procs_file = "/sys/fs/cgroup/pids" + path + "/cgroup.procs";
    if (controllers.empty() && procs_file.empty())
      procs_file = "/sys/fs/cgroup" + path + "/cgroup.procs";
  }
  std::istringstream pids(read_text(procs_file));
  std::string out;
  for (std::string pid; std::getline(pids, pid);) {
    const std::string stat = read_text("/proc/" + pid + "/stat");
    const auto cut = stat.rfind(") ");
    if (stat.empty() || cut == std::string::npos) continue;  // gone
    std::istringstream fields(stat.substr(cut + 2));
    std::vector<std::string> f{std::istream_iterator<std::string>(fields), {}};
    if (f.size() >= 18 && (f[0] == "Z" || f[0] == "X") && f[17] == "1") continue;
    std::string args = read_text("/proc/" + pid + "/cmdline");
    while (!args.empty() && args.back() == '\0') args.pop_back();
    std::replace(args.begin(), args.end(), '\0', ' ');
    std::replace(args.begin(), args.end(), '\n', ' ');  // the runner's source has lines
    if (args.empty()) args = "[" + stat.substr(stat.find('(') + 1, cut - stat.find('(') - 1) + "]";
    out += pid + " " + (f.size() > 1 ? f[1] : "?") + " " + args + "\n";
  }
  return out;
}

}  // namespace

TEST_CASE("cells: what a cell started is dead when its answer comes, not still dying (both paths)",
          "[integration][sidecar][cells]") {
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process fast(proxy);
  sidecar_process plain(proxy, {"SANDBOX_CELL_RUNNER=0", "SANDBOX_INSTANCE=plain" + fast.port()});
  // A child slow to tear down (1.25 GiB of its own: a SIGKILLed process is gone only once
  // its memory is, ~150 ms here), and one whose main thread exited while another runs: a
  // zombie to /proc, alive all the same. The sweep once returned after 8 quick passes
  // whatever they left, so the answer came while a killed process still ran; one that
  // passed over zombies would keep the second.
  const std::string slow = R"(import ctypes, os, threading, time
exit_thread = {'x86_64': 60, 'aarch64': 93}[os.uname().machine]
r, w = os.pipe()
if os.fork() == 0:
    held = b'x' * (1280 << 20)
    os.write(w, b'.')
    time.sleep(1000)
    os._exit(0)
os.read(r, 1)
if os.fork() == 0:
    threading.Thread(target=time.sleep, args=(1000,)).start()
    ctypes.CDLL(None).syscall(exit_thread, 0)
time.sleep(0.2)
print('started')
)";
  for (const auto* sidecar : {&fast, &plain}) {
    const std::string sid = new_session(*sidecar);
    std::string init_pid =
        run(direct() + " inspect -f '{{.State.Pid}}' dockgate-sbx-" + sid).output;
    init_pid.erase(init_pid.find_last_not_of("\n ") + 1);
    REQUIRE(!init_pid.empty());
    for (int round = 0; round < 3; ++round) {
      auto ran = sidecar->call("POST", "/exec", exec_body(sid, slow, 10000));
      const std::string left = live_processes(init_pid);
      INFO(ran.body);
      REQUIRE(field(ran.body, "stdout") == "started\n");
      // init, its sleep and (on the runner's path) the runner and its pair for the next cell:
      // up to two of the runner's descendants, titled for the next cell or, for the instant
      // before they set their title, with the runner's (or a part of it: it is rewritten in
      // place).
      struct row {
        std::string pid, ppid, args;
      };
      std::vector<row> rows;
      std::istringstream lines(left);
      for (std::string line; std::getline(lines, line);) {
        std::istringstream fields(line);
        row r;
        fields >> r.pid >> r.ppid >> std::ws;
        std::getline(fields, r.args);
        rows.push_back(r);
      }
      std::string runner_title, runner;
      for (const auto& r : rows)
        if (r.args.ends_with(" dockgate-runner") && runner.empty())
          runner = r.pid, runner_title = r.args;
      std::set<std::string> pair;
      std::string unexpected;
      for (const auto& r : rows) {
        const bool pair_title = r.args.starts_with("timeout (next cell)") ||
                                r.args.starts_with("python3 (next cell)") ||
                                (!r.args.empty() && runner_title.starts_with(r.args));
        if (r.args.starts_with("/sbin/docker-init ") || r.args == "sleep infinity" ||
            (sidecar == &fast && r.pid == runner))
          continue;
        if (sidecar == &fast && pair_title && pair.size() < 2 &&
            (r.ppid == runner || pair.contains(r.ppid))) {
          pair.insert(r.pid);
          continue;
        }
        unexpected += r.args.substr(0, 200) + "\n";
      }
      CHECK(unexpected == "");
    }
    sidecar->call("DELETE", "/sessions/" + sid, "");
  }
}

TEST_CASE("cells: artifact names cannot forge the listing, limits hold whatever it says",
          "[integration][sidecar][cells]") {
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy, {"SANDBOX_MAX_ARTIFACT_BYTES=1000"});
  const std::string sid = new_session(sidecar);
  // File names that carry the old text listing's separators: a forged record for
  // /etc/passwd with a small size, and one that understates a large file.
  const std::string forge = R"(import os
d = '/workspace/outputs/'
os.makedirs(d + 'a\n/etc')
open(d + 'a\n/etc/passwd\t1.0\t10', 'w').write('innocent')
open(d + 'big\t1.0\t5', 'w').write('x' * 5000)
print('ok')
)";
  auto ran = sidecar.call("POST", "/exec", exec_body(sid, forge, 10000));
  INFO(ran.body);
  REQUIRE(field(ran.body, "stdout") == "ok\n");
  const std::string files = field(ran.body, "files");
  CHECK(files.find("cm9vdD") == std::string::npos);        // base64 of "root:" never comes back
  CHECK(files.find("aW5ub2NlbnQ=") != std::string::npos);  // the real file, under its own name
  CHECK(files.find("eHh4eHh4") == std::string::npos);      // the 5000-byte file is over the limit
  CHECK(field(ran.body, "stderr").find("skipped 1 output file") != std::string::npos);
}

TEST_CASE("cells: a kill is explained (a timeout past SIGTERM, the memory limit)",
          "[integration][sidecar][cells]") {
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(
      proxy, {"SANDBOX_MEMORY=256m", "SANDBOX_TMPFS_SIZE=16m", "SANDBOX_WORKSPACE_SIZE=64m"});
  const std::string sid = new_session(sidecar);
  auto stubborn = sidecar.call(
      "POST", "/exec",
      exec_body(
          sid, "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(60)",
          1000));
  INFO(stubborn.body);
  CHECK(field(stubborn.body, "exit_code") == "137");
  CHECK(field(stubborn.body, "stderr").find("ignored SIGTERM and was killed") != std::string::npos);
  auto hungry = sidecar.call(
      "POST", "/exec", exec_body(sid, "x = bytearray(1024 * 1024 * 1024)\nprint(len(x))", 10000));
  INFO(hungry.body);
  CHECK(field(hungry.body, "exit_code") == "137");
  CHECK(field(hungry.body, "stderr").find("out of memory") != std::string::npos);
}

TEST_CASE("server: 1000 slow or idle connections do not lock well-behaved clients out",
          "[integration][sidecar][server]") {
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy, {"SANDBOX_HEAD_TIMEOUT_S=3"});
  const std::string port = sidecar.port();
  // 1000 clients: half trickle a request head a byte at a time, half connect and say
  // nothing (idle keep-alive after one request would look the same to the server).
  const std::string slow = R"(
import resource, socket, sys, time
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
port = int(sys.argv[1]); held = []
for i in range(1000):
    try:
        s = socket.create_connection(('127.0.0.1', port)); s.setblocking(False); held.append(s)
    except OSError: pass
print('held', len(held), flush=True)
end = time.time() + float(sys.argv[2])
while time.time() < end:
    for i, s in enumerate(held[:500]):
        try: s.send(b'G' if i % 2 else b' ')
        except OSError: pass
    time.sleep(0.5)
)";
  std::ofstream(proxy.dir() + "/slow.py") << slow;
  background attackers("/usr/bin/python3 " + proxy.dir() + "/slow.py " + port + " 8");
  CHECK(attackers.read_line(std::chrono::seconds(30)).value_or("").starts_with("held"));
  // While they trickle, every well-behaved request is answered, and fast.
  int answered = 0;
  for (int i = 0; i < 10; ++i) {
    const auto started = std::chrono::steady_clock::now();
    auto health = sidecar.call("GET", "/healthz", "", "");
    if (health.status == 200 && std::chrono::steady_clock::now() - started < 2s) ++answered;
    std::this_thread::sleep_for(300ms);
  }
  CHECK(answered == 10);
  auto created = sidecar.call("POST", "/sessions", "{}");
  CHECK(created.status == 200);
  if (created.status == 200)
    CHECK(sidecar.call("DELETE", "/sessions/" + field(created.body, "session_id"), "").status ==
          200);
}

TEST_CASE(
    "files: opened once beneath /workspace, never through a symlink, never a FIFO, never past the "
    "limit",
    "[integration][sidecar][files]") {
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy, {"SANDBOX_MAX_BODY_BYTES=1048576"});
  const std::string sid = new_session(sidecar);
  auto setup = sidecar.call("POST", "/exec",
                            exec_body(sid, R"(import os
os.symlink('/etc', '/workspace/etc')
os.symlink('/etc/passwd', '/workspace/passwd')
os.makedirs('/workspace/d')
open('/workspace/d/real.txt', 'w').write('real')
os.symlink('/workspace/d/real.txt', '/workspace/inside-link')
os.mkfifo('/workspace/fifo')
with open('/workspace/sparse', 'wb') as f: f.truncate(4 << 30)
print('ready')
)",
                                      10000));
  REQUIRE(field(setup.body, "stdout") == "ready\n");
  auto get = [&](const std::string& path) {
    return sidecar.call("POST", "/files/get",
                        R"({"session_id":")" + sid + R"(","path":")" + path + R"("})");
  };
  CHECK(field(get("d/real.txt").body, "data_base64") == "cmVhbA==");
  for (const char* through_link :
       {"etc/passwd", "passwd", "inside-link", "/workspace/etc/hostname"}) {
    CAPTURE(through_link);
    auto r = get(through_link);
    CHECK(r.status == 400);
    CHECK(r.body.find("cm9vd") == std::string::npos);  // never the host's or the image's passwd
  }
  // A FIFO: refused at once (it would block a reader or writer for a minute).
  auto started = std::chrono::steady_clock::now();
  CHECK(get("fifo").status == 404);
  auto put = sidecar.call("POST", "/files",
                          R"({"session_id":")" + sid + R"(","path":"fifo","data_base64":"aGk="})");
  CHECK(put.status == 400);
  CHECK(std::chrono::steady_clock::now() - started < 5s);
  // Writing through a symlink is refused too; the target is untouched.
  CHECK(sidecar
            .call("POST", "/files",
                  R"({"session_id":")" + sid + R"(","path":"etc/x","data_base64":"aGk="})")
            .status == 400);
  CHECK(sidecar
            .call("POST", "/files",
                  R"({"session_id":")" + sid + R"(","path":"inside-link","data_base64":"aGk="})")
            .status == 400);
  CHECK(field(get("d/real.txt").body, "data_base64") == "cmVhbA==");
  // A 4 GiB sparse file: 413 before its bytes cross the daemon, the gate and the sidecar.
  started = std::chrono::steady_clock::now();
  CHECK(get("sparse").status == 413);
  CHECK(std::chrono::steady_clock::now() - started < 5s);
  // Writing a new file in a new directory still works.
  CHECK(sidecar
            .call("POST", "/files",
                  R"({"session_id":")" + sid +
                      R"(","path":"uploads/new/a.txt","data_base64":"aGk="})")
            .status == 200);
  CHECK(field(get("uploads/new/a.txt").body, "data_base64") == "aGk=");
}

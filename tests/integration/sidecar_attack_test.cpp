// The sidecar under attack and faults (issue 11): nothing a cell starts outlives its answer,
// artifacts cannot be forged by file names, and a kill is explained. Judged by the
// daemon's process table (`docker top`) and the container's own files.
#include <fstream>

#include "sidecar_harness.hpp"

using namespace dockgate::test;
using namespace std::chrono_literals;


TEST_CASE("cells: nothing a cell starts outlives its answer, whatever it did to its environment or PID",
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
  CHECK(field(sidecar.call("POST", "/exec", exec_body(sid, "print(1)", 10000)).body, "stdout") == "1\n");
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
    CHECK(field(sidecar->call("POST", "/exec", exec_body(sid, "print(1)", 10000)).body, "stdout") == "1\n");
    sidecar->call("DELETE", "/sessions/" + sid, "");
  }
}

TEST_CASE("cells: artifact names cannot forge the listing, limits hold whatever it says", "[integration][sidecar][cells]") {
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
  CHECK(files.find("cm9vdD") == std::string::npos);  // base64 of "root:" never comes back
  CHECK(files.find("aW5ub2NlbnQ=") != std::string::npos);  // the real file, under its own name
  CHECK(files.find("eHh4eHh4") == std::string::npos);  // the 5000-byte file is over the limit
  CHECK(field(ran.body, "stderr").find("skipped 1 output file") != std::string::npos);
}

TEST_CASE("cells: a kill is explained (a timeout past SIGTERM, the memory limit)", "[integration][sidecar][cells]") {
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy, {"SANDBOX_MEMORY=256m", "SANDBOX_TMPFS_SIZE=16m", "SANDBOX_WORKSPACE_SIZE=64m"});
  const std::string sid = new_session(sidecar);
  auto stubborn = sidecar.call(
      "POST", "/exec", exec_body(sid, "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(60)", 1000));
  INFO(stubborn.body);
  CHECK(field(stubborn.body, "exit_code") == "137");
  CHECK(field(stubborn.body, "stderr").find("ignored SIGTERM and was killed") != std::string::npos);
  auto hungry = sidecar.call("POST", "/exec", exec_body(sid, "x = bytearray(1024 * 1024 * 1024)\nprint(len(x))", 10000));
  INFO(hungry.body);
  CHECK(field(hungry.body, "exit_code") == "137");
  CHECK(field(hungry.body, "stderr").find("out of memory") != std::string::npos);
}

TEST_CASE("server: 1000 slow or idle connections do not lock well-behaved clients out", "[integration][sidecar][server]") {
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
  if (created.status == 200) CHECK(sidecar.call("DELETE", "/sessions/" + field(created.body, "session_id"), "").status == 200);
}

TEST_CASE("files: opened once beneath /workspace, never through a symlink, never a FIFO, never past the limit",
          "[integration][sidecar][files]") {
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy, {"SANDBOX_MAX_BODY_BYTES=1048576"});
  const std::string sid = new_session(sidecar);
  auto setup = sidecar.call("POST", "/exec", exec_body(sid, R"(import os
os.symlink('/etc', '/workspace/etc')
os.symlink('/etc/passwd', '/workspace/passwd')
os.makedirs('/workspace/d')
open('/workspace/d/real.txt', 'w').write('real')
os.symlink('/workspace/d/real.txt', '/workspace/inside-link')
os.mkfifo('/workspace/fifo')
with open('/workspace/sparse', 'wb') as f: f.truncate(4 << 30)
print('ready')
)", 10000));
  REQUIRE(field(setup.body, "stdout") == "ready\n");
  auto get = [&](const std::string& path) {
    return sidecar.call("POST", "/files/get", R"({"session_id":")" + sid + R"(","path":")" + path + R"("})");
  };
  CHECK(field(get("d/real.txt").body, "data_base64") == "cmVhbA==");
  for (const char* through_link : {"etc/passwd", "passwd", "inside-link", "/workspace/etc/hostname"}) {
    CAPTURE(through_link);
    auto r = get(through_link);
    CHECK(r.status == 400);
    CHECK(r.body.find("cm9vd") == std::string::npos);  // never the host's or the image's passwd
  }
  // A FIFO: refused at once (it would block a reader or writer for a minute).
  auto started = std::chrono::steady_clock::now();
  CHECK(get("fifo").status == 404);
  auto put = sidecar.call("POST", "/files", R"({"session_id":")" + sid + R"(","path":"fifo","data_base64":"aGk="})");
  CHECK(put.status == 400);
  CHECK(std::chrono::steady_clock::now() - started < 5s);
  // Writing through a symlink is refused too; the target is untouched.
  CHECK(sidecar.call("POST", "/files", R"({"session_id":")" + sid + R"(","path":"etc/x","data_base64":"aGk="})").status == 400);
  CHECK(sidecar.call("POST", "/files", R"({"session_id":")" + sid + R"(","path":"inside-link","data_base64":"aGk="})").status == 400);
  CHECK(field(get("d/real.txt").body, "data_base64") == "cmVhbA==");
  // A 4 GiB sparse file: 413 before its bytes cross the daemon, the gate and the sidecar.
  started = std::chrono::steady_clock::now();
  CHECK(get("sparse").status == 413);
  CHECK(std::chrono::steady_clock::now() - started < 5s);
  // Writing a new file in a new directory still works.
  CHECK(sidecar.call("POST", "/files", R"({"session_id":")" + sid + R"(","path":"uploads/new/a.txt","data_base64":"aGk="})").status == 200);
  CHECK(field(get("uploads/new/a.txt").body, "data_base64") == "aGk=");
}

// Kernel sessions (issue 21 item 3; docs/sidecar.md, "Kernel sessions"): POST /sessions
// {"kernel": "python"} gives the session a real IPython kernel (Debian's python3-ipykernel,
// in the full session image) whose state persists between cells, and nothing else does.
// Through the gate's sandbox profile. The kernel tests need the full image
// (DOCKGATE_TEST_FULL_RUNTIME_IMAGE, set by scripts/test.sh): skipped without it.
#include <set>
#include <sstream>

#include "dockgate/client/http_client.hpp"
#include "sidecar_harness.hpp"

using namespace dockgate::test;

namespace {

std::string full_image() {
  const char* v = std::getenv("DOCKGATE_TEST_FULL_RUNTIME_IMAGE");
  return v && *v ? v : "";
}

// Catch2 2 has no SKIP: the reason is a warning and the case returns.
#define REQUIRE_FULL_IMAGE()                                                                 \
  const std::string image = full_image();                                                    \
  if (image.empty()) {                                                                       \
    WARN(                                                                                    \
        "skipped: DOCKGATE_TEST_FULL_RUNTIME_IMAGE is unset (kernel sessions need the full " \
        "session image: scripts/runtime-image.sh DOCKER_HOST TAG --full)");                  \
    return;                                                                                  \
  }

std::string kernel_session(const sidecar_process& sidecar) {
  auto created = sidecar.create(R"({"kernel":"python"})");
  INFO(created.body << sidecar.log());
  REQUIRE(created.status == 200);
  return field(created.body, "session_id");
}

dockgate::client::http_response exec(const sidecar_process& sidecar, const std::string& sid,
                                     const std::string& code, int timeout_ms = 30000) {
  return sidecar.call("POST", "/exec", exec_body(sid, code, timeout_ms));
}

std::string kernel_field(const std::string& body, const char* key) {
  return field(field(body, "kernel"), key);
}

// The session container's processes as the host sees them: "<host pid> <args>" a line, zombies of
// one thread left out (the kernel reaps no child a cell forked: each killed one stays a zombie). A
// zombie with threads left (a group leader that exited while its other threads run) is alive and
// stays in.
std::string host_processes(const std::string& container) {
  return run(direct() + " top " + container +
             " -o pid,stat,nlwp,args | tail -n +2 | awk '!($2 ~ /^Z/ && $3 == 1)' | "
             "awk '{$2 = $3 = \"\"; print}'")
      .output;
}

// The host PID of the container's process whose command line contains `needle`.
std::string host_pid(const std::string& container, const std::string& needle) {
  std::istringstream in(host_processes(container));
  for (std::string line; std::getline(in, line);) {
    if (line.find(needle) == std::string::npos) continue;
    std::size_t start = line.find_first_not_of(' ');
    return line.substr(start, line.find(' ', start) - start);
  }
  return "";
}

// The pipe inodes a host process holds ("pipe:[123]" links under /proc/<pid>/fd).
std::set<std::string> pipes_of(const std::string& pid) {
  std::set<std::string> out;
  std::istringstream in(
      run("for f in /proc/" + pid + "/fd/*; do readlink \"$f\"; done | grep '^pipe:'").output);
  for (std::string line; std::getline(in, line);) out.insert(line);
  return out;
}

}  // namespace

TEST_CASE("kernel: variables imports and an open file persist across cells",
          "[integration][sidecar][kernel]") {
  REQUIRE_FULL_IMAGE();
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy, {"SANDBOX_IMAGE=" + image});
  const std::string sid = kernel_session(sidecar);
  auto first =
      exec(sidecar, sid, "x = 1\nimport json\nf = open('/tmp/kept.txt', 'w')\nprint('set')");
  INFO(first.body << sidecar.log());
  REQUIRE(first.status == 200);
  CHECK(field(first.body, "stdout") == "set\n");
  CHECK(field(first.body, "exit_code") == "0");
  CHECK(field(first.body, "kernel") ==
        R"({"name":"python","restarted":false,"execution_count":1})");
  auto second =
      exec(sidecar, sid, "f.write('kept'); f.flush()\nprint(x + 1, json.dumps({'a': x}))\nx * 10");
  INFO(second.body);
  REQUIRE(second.status == 200);
  // The execute_result's text/plain goes to stdout after the cell's own output.
  CHECK(field(second.body, "stdout") == "2 {\"a\": 1}\n10\n");
  CHECK(kernel_field(second.body, "execution_count") == "2");
  auto third = exec(sidecar, sid, "print(open('/tmp/kept.txt').read(), f.closed)");
  CHECK(field(third.body, "stdout") == "kept False\n");
  // An error: its traceback on stderr without ANSI colours, exit code 1; the state stays.
  auto error = exec(sidecar, sid, "1 / 0");
  CHECK(field(error.body, "exit_code") == "1");
  CHECK(field(error.body, "stderr").find("ZeroDivisionError: division by zero") !=
        std::string::npos);
  CHECK(field(error.body, "stderr").find('\x1b') == std::string::npos);
  CHECK(field(exec(sidecar, sid, "print(x)").body, "stdout") == "1\n");
}

TEST_CASE("kernel: without the field a session is plain and its answer unchanged",
          "[integration][sidecar][kernel]") {
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy);
  const std::string sid = new_session(sidecar);
  auto first = exec(sidecar, sid, "x = 1");
  auto second = exec(sidecar, sid, "print(x)");
  INFO(second.body);
  CHECK(field(first.body, "kernel") == "<absent>");
  CHECK(field(second.body, "exit_code") == "1");  // nothing survives a plain cell
  CHECK(field(second.body, "stderr").find("NameError") != std::string::npos);
  auto restart = sidecar.call("POST", "/sessions/" + sid + "/restart", "");
  CHECK(restart.status == 400);
  CHECK(field(restart.body, "detail").find("no kernel") != std::string::npos);
  auto unknown = sidecar.call("POST", "/sessions/0123456789abcdef0123456789abcdef/restart", "");
  CHECK(unknown.status == 404);
  CHECK(field(unknown.body, "detail") == "session not found or not running");
}

TEST_CASE("kernel: an unknown kernel name is refused with 400 and no container",
          "[integration][sidecar][kernel]") {
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy);
  const std::string before =
      run(direct() + " ps -aq --filter label=sandbox.session_id | sort").output;
  auto created = sidecar.create(R"({"kernel":"ruby"})");
  INFO(created.body);
  CHECK(created.status == 400);
  CHECK(field(created.body, "detail") == "unknown kernel: ruby (known: python)");
  CHECK(run(direct() + " ps -aq --filter label=sandbox.session_id | sort").output == before);
}

TEST_CASE("kernel: on an image without ipykernel the session is refused naming the package",
          "[integration][sidecar][kernel]") {
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy);  // the small image: python3 only
  auto created = sidecar.create(R"({"kernel":"python"})");
  INFO(created.body << sidecar.log());
  CHECK(created.status == 500);
  CHECK(field(created.body, "detail").find("python3-ipykernel") != std::string::npos);
}

TEST_CASE(
    "kernel: a cell past its timeout is interrupted and the state kept and one that ignores "
    "the interrupt is restarted",
    "[integration][sidecar][kernel]") {
  REQUIRE_FULL_IMAGE();
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy, {"SANDBOX_IMAGE=" + image});
  const std::string sid = kernel_session(sidecar);
  REQUIRE(exec(sidecar, sid, "x = 5").status == 200);
  auto slow = exec(sidecar, sid, "import time\ntime.sleep(600)", 1500);
  INFO(slow.body << sidecar.log());
  REQUIRE(slow.status == 200);
  CHECK(field(slow.body, "exit_code") == "124");
  CHECK(field(slow.body, "stderr").find("KeyboardInterrupt") != std::string::npos);
  CHECK(field(slow.body, "stderr").find("[sandbox] execution exceeded 1.500s and was killed") !=
        std::string::npos);
  CHECK(kernel_field(slow.body, "restarted") == "false");
  CHECK(field(exec(sidecar, sid, "print(x)").body, "stdout") == "5\n");

  auto stubborn =
      exec(sidecar, sid,
           "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass", 1000);
  INFO(stubborn.body);
  REQUIRE(stubborn.status == 200);
  CHECK(field(stubborn.body, "exit_code") == "124");
  CHECK(kernel_field(stubborn.body, "restarted") == "true");
  CHECK(field(stubborn.body, "stderr").find("restarted") != std::string::npos);
  auto after = exec(sidecar, sid, "print(x)");
  CHECK(field(after.body, "stderr").find("NameError") != std::string::npos);
  CHECK(kernel_field(after.body, "restarted") == "false");
  CHECK(kernel_field(after.body, "execution_count") == "1");
}

TEST_CASE("kernel: a kernel that dies answers 500 kernel died and the next cell gets a new one",
          "[integration][sidecar][kernel]") {
  REQUIRE_FULL_IMAGE();
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy, {"SANDBOX_IMAGE=" + image});
  const std::string sid = kernel_session(sidecar);
  REQUIRE(exec(sidecar, sid, "x = 1").status == 200);
  auto died = exec(sidecar, sid, "import os\nos._exit(1)");
  INFO(died.body << sidecar.log());
  CHECK(died.status == 500);
  CHECK(field(died.body, "detail").find("kernel died") != std::string::npos);
  auto next = exec(sidecar, sid, "print('fresh', 'x' in globals())");
  INFO(next.body);
  REQUIRE(next.status == 200);
  CHECK(field(next.body, "stdout") == "fresh False\n");
  CHECK(kernel_field(next.body, "restarted") == "true");
}

TEST_CASE(
    "kernel: a cell that kills the kernel's driver answers 500 and the next cell gets a "
    "new kernel",
    "[integration][sidecar][kernel][attack]") {
  REQUIRE_FULL_IMAGE();
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy, {"SANDBOX_IMAGE=" + image});
  const std::string sid = kernel_session(sidecar);
  const std::string container = "dockgate-sbx-" + sid;
  REQUIRE(exec(sidecar, sid, "x = 1").status == 200);
  const std::string driver = host_pid(container, "dockgate-kernel");
  REQUIRE(!driver.empty());
  // The kernel's parent is the driver: the same uid may signal it.
  auto killed = exec(sidecar, sid,
                     "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nprint('after')");
  INFO(killed.body << sidecar.log());
  CHECK(killed.status == 500);
  CHECK(field(killed.body, "detail").find("kernel died") != std::string::npos);
  auto next = exec(sidecar, sid, "print('x' in globals())");
  INFO(next.body);
  REQUIRE(next.status == 200);
  CHECK(field(next.body, "stdout") == "False\n");
  CHECK(kernel_field(next.body, "restarted") == "true");
  const std::string new_driver = host_pid(container, "dockgate-kernel");
  CHECK(!new_driver.empty());
  CHECK(new_driver != driver);
}

TEST_CASE("kernel: processes a cell starts are swept at its answer and the kernel's variables kept",
          "[integration][sidecar][kernel][attack]") {
  REQUIRE_FULL_IMAGE();
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy, {"SANDBOX_IMAGE=" + image});
  const std::string sid = kernel_session(sidecar);
  const std::string container = "dockgate-sbx-" + sid;
  auto started =
      exec(sidecar, sid,
           "import subprocess, os, time\n"
           "kept = 42\n"
           "p = subprocess.Popen(['sleep', '1234'], start_new_session=True)\n"
           "import ctypes, threading\n"
           "for i in range(20):\n"
           "    if os.fork() == 0:\n"
           "        time.sleep(1234)\n"
           "        os._exit(0)\n"
           "if os.fork() == 0:\n"
           "    threading.Thread(target=time.sleep, args=(1234,)).start()\n"
           "    ctypes.CDLL(None).syscall({'x86_64': 60, 'aarch64': 93}[os.uname().machine], 0)\n"
           "print('started')");
  INFO(started.body << sidecar.log());
  REQUIRE(started.status == 200);
  CHECK(field(started.body, "stdout") == "started\n");
  const std::string procs = host_processes(container);
  INFO(procs);
  CHECK(procs.find("sleep 1234") == std::string::npos);
  // What is left: init, its sleep, the driver and the kernel, nothing else.
  std::istringstream in(procs);
  int count = 0, forks = 0;
  for (std::string line; std::getline(in, line);) {
    ++count;
    if (line.find("ipykernel_launcher") != std::string::npos) ++forks;
  }
  CHECK(count == 4);
  CHECK(forks == 1);
  CHECK(field(exec(sidecar, sid, "print(kept, p.poll())").body, "stdout") == "42 -9\n");
}

TEST_CASE(
    "kernel: the kernel holds none of its driver's pipes and a cell cannot read the "
    "driver's fds",
    "[integration][sidecar][kernel][attack]") {
  REQUIRE_FULL_IMAGE();
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy, {"SANDBOX_IMAGE=" + image});
  const std::string sid = kernel_session(sidecar);
  const std::string container = "dockgate-sbx-" + sid;
  auto peek = exec(sidecar, sid,
                   "import os\n"
                   "try:\n"
                   "    print(os.listdir('/proc/%d/fd' % os.getppid()))\n"
                   "except PermissionError:\n"
                   "    print('denied')\n");
  INFO(peek.body);
  CHECK(field(peek.body, "stdout") == "denied\n");
  const std::string driver = host_pid(container, "dockgate-kernel");
  const std::string kernel = host_pid(container, "ipykernel_launcher");
  INFO(host_processes(container));
  REQUIRE(!driver.empty());
  REQUIRE(!kernel.empty());
  const auto driver_pipes = pipes_of(driver);
  const auto kernel_pipes = pipes_of(kernel);
  CHECK(driver_pipes.size() >= 2);  // its request and answer pipes (the exec's stdio)
  for (const auto& p : kernel_pipes) {
    INFO(p);
    CHECK(!driver_pipes.contains(p));
  }
}

TEST_CASE("kernel: output a thread prints between cells is not the next cell's",
          "[integration][sidecar][kernel][attack]") {
  REQUIRE_FULL_IMAGE();
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy, {"SANDBOX_IMAGE=" + image});
  const std::string sid = kernel_session(sidecar);
  // The thread waits for an upload (no cell runs meanwhile), then prints and says so. Its
  // output carries the first cell's msg_id (the kernel's parent header when it is sent).
  auto first = exec(sidecar, sid,
                    "import threading, os, time, sys\n"
                    "def late():\n"
                    "    while not os.path.exists('/workspace/uploads/go'):\n"
                    "        time.sleep(0.02)\n"
                    "    print('LEAKED', flush=True)\n"
                    "    sys.stderr.write('LEAKED\\n'); sys.stderr.flush()\n"
                    "    open('/tmp/printed', 'w').close()\n"
                    "threading.Thread(target=late, daemon=True).start()\n"
                    "print('first')");
  INFO(first.body);
  REQUIRE(first.status == 200);
  auto uploaded =
      sidecar.call("POST", "/files",
                   R"({"session_id":")" + sid + R"(","path":"uploads/go","data_base64":"eA=="})");
  REQUIRE(uploaded.status == 200);
  // The next cell only once the thread has printed (its flush is sent when it returns):
  // the print is between the cells, not during the next one.
  REQUIRE(run("timeout 60 " + direct() + " exec -u 1000:1000 dockgate-sbx-" + sid +
              " sh -c 'until [ -e /tmp/printed ]; do sleep 0.05; done'")
              .status == 0);
  auto second = exec(sidecar, sid, "print('second')");
  INFO(second.body);
  REQUIRE(second.status == 200);
  CHECK(field(second.body, "stdout") == "second\n");
  CHECK(field(second.body, "stderr").find("LEAKED") == std::string::npos);
}

TEST_CASE(
    "kernel: a cell's exit code and count are its own reply's, not an earlier one on the "
    "shell channel",
    "[integration][sidecar][kernel][attack]") {
  REQUIRE_FULL_IMAGE();
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy, {"SANDBOX_IMAGE=" + image});
  const std::string sid = kernel_session(sidecar);
  // The cell puts a reply to no request of the driver's ahead of its own on the shell
  // channel (as extra kernel_info replies are after a slow start), then fails: a driver
  // that takes the first reply as the cell's takes this one, and the next cell's answer
  // is this cell's (exit code 1, count 1).
  auto first = exec(sidecar, sid,
                    "k = get_ipython().kernel\n"
                    "k.session.send(k.shell_stream, 'kernel_info_reply', {'status': 'ok'}, "
                    "parent={}, ident=k._parent_ident['shell'])\n"
                    "raise ValueError('first fails')\n");
  INFO(first.body);
  REQUIRE(first.status == 200);
  CHECK(field(first.body, "exit_code") == "1");
  CHECK(kernel_field(first.body, "execution_count") == "1");
  auto second = exec(sidecar, sid, "print('second')");
  INFO(second.body);
  REQUIRE(second.status == 200);
  CHECK(field(second.body, "exit_code") == "0");
  CHECK(kernel_field(second.body, "execution_count") == "2");
}

TEST_CASE("kernel: session B cannot reach session A's kernel",
          "[integration][sidecar][kernel][attack]") {
  REQUIRE_FULL_IMAGE();
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy, {"SANDBOX_IMAGE=" + image});
  const std::string a = kernel_session(sidecar);
  const std::string b = kernel_session(sidecar);
  // A's kernel: its channels on ipc sockets in a 0700 directory; the only TCP listener is
  // ipykernel's own pipe for forked children's output, on the container's loopback.
  auto where = exec(
      sidecar, a,
      "import ipykernel.connect, json, os\n"
      "cf = ipykernel.connect.get_connection_file()\n"
      "d = os.path.dirname(cf)\n"
      "print(json.load(open(cf))['transport'], oct(os.stat(d).st_mode & 0o777))\n"
      "print(d)\n"
      "ls = [l.split()[1] for l in open('/proc/net/tcp').readlines()[1:] if l.split()[3] == '0A']\n"
      "ls += [l.split()[1] for l in open('/proc/net/tcp6').readlines()[1:] if l.split()[3] == "
      "'0A']\n"
      "print(' '.join(ls))");
  INFO(where.body);
  REQUIRE(where.status == 200);
  std::istringstream lines(field(where.body, "stdout"));
  std::string mode_line, dir, listening;
  std::getline(lines, mode_line);
  std::getline(lines, dir);
  std::getline(lines, listening);
  CHECK(mode_line == "ipc 0o700");
  REQUIRE(dir.starts_with("/tmp/dockgate-kernel-"));
  std::vector<std::string> ports;
  std::istringstream each(listening);
  for (std::string l; each >> l;) {
    CHECK(l.starts_with("0100007F:"));  // 127.0.0.1 only
    ports.push_back(std::to_string(std::stoi(l.substr(9), nullptr, 16)));
  }
  REQUIRE(ports.size() <= 1);
  std::string probe = "import os, glob, socket\nprint(os.path.exists('" + dir +
                      "'), glob.glob('/tmp/dockgate-kernel-*') != [])\n";
  for (const auto& port : ports)
    probe += "try:\n    socket.create_connection(('127.0.0.1', " + port +
             "), 2)\n    print('connected')\nexcept OSError as e:\n    print(type(e).__name__)\n";
  auto from_b = exec(sidecar, b, probe);
  INFO(from_b.body);
  // B sees its own kernel directory, not A's, and A's loopback port is not on its loopback.
  CHECK(field(from_b.body, "stdout") ==
        std::string("False True\n") + (ports.empty() ? "" : "ConnectionRefusedError\n"));
}

TEST_CASE("kernel: figures come back as artifacts with their mime type and SSE streams a cell",
          "[integration][sidecar][kernel]") {
  REQUIRE_FULL_IMAGE();
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy, {"SANDBOX_IMAGE=" + image});
  const std::string sid = kernel_session(sidecar);
  auto plot =
      exec(sidecar, sid,
           "import matplotlib.pyplot as plt\n"
           "from IPython.display import SVG, display\n"
           "plt.plot([1, 2, 3])\n"
           "plt.show()\n"
           "display(SVG('<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"4\" height=\"4\"/>'))\n",
           60000);
  INFO(plot.body << sidecar.log());
  REQUIRE(plot.status == 200);
  CHECK(field(plot.body, "exit_code") == "0");
  CHECK(plot.body.find(
            R"("name":"figure-1-1.png","mime_type":"image/png","data_base64":"iVBORw0KGgo)") !=
        std::string::npos);
  CHECK(plot.body.find(R"("name":"figure-1-2.svg","mime_type":"image/svg+xml")") !=
        std::string::npos);
  // Downloaded as any artifact is.
  auto got = sidecar.call("POST", "/files/get",
                          R"({"session_id":")" + sid + R"(","path":"outputs/figure-1-1.png"})");
  CHECK(got.status == 200);

  // Streamed: the output as events, then the same result object.
  using namespace dockgate::client;
  transport t{{dockgate::common::endpoint::kind::tcp, "", "127.0.0.1",
               static_cast<std::uint16_t>(std::stoi(sidecar.port()))},
              nullptr};
  const auto deadline = clock_type::now() + 60s;
  std::string error;
  auto c = connection::open(t, deadline, &error);
  REQUIRE(c);
  const std::string body = exec_body(sid, "print('streamed')\nx = 3\nx", 30000);
  REQUIRE(c->write_all("POST /exec HTTP/1.1\r\nHost: sidecar\r\nAuthorization: Bearer " + api_key +
                           "\r\nAccept: text/event-stream\r\nContent-Type: application/json\r\n"
                           "Connection: close\r\nContent-Length: " +
                           std::to_string(body.size()) + "\r\n\r\n" + body,
                       deadline));
  std::string raw;
  for (;;) {
    char chunk[4096];
    const long n = c->read_some(chunk, sizeof chunk, deadline);
    if (n <= 0) break;
    raw.append(chunk, static_cast<std::size_t>(n));
    if (raw.find("event: result") != std::string::npos && raw.ends_with("0\r\n\r\n")) break;
  }
  INFO(raw);
  CHECK(raw.find("content-type: text/event-stream") != std::string::npos);
  CHECK(raw.find("event: stdout\ndata: \"streamed\\n\"") != std::string::npos);
  CHECK(raw.find("event: result\ndata: {\"stdout\":\"streamed\\n3\\n\"") != std::string::npos);
  CHECK(raw.find(R"("kernel":{"name":"python","restarted":false,"execution_count":2})") !=
        std::string::npos);
}

TEST_CASE("kernel: POST /sessions/{id}/restart resets the kernel",
          "[integration][sidecar][kernel]") {
  REQUIRE_FULL_IMAGE();
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy, {"SANDBOX_IMAGE=" + image});
  const std::string sid = kernel_session(sidecar);
  const std::string container = "dockgate-sbx-" + sid;
  REQUIRE(exec(sidecar, sid, "x = 1").status == 200);
  const std::string kernel = host_pid(container, "ipykernel_launcher");
  auto restarted = sidecar.call("POST", "/sessions/" + sid + "/restart", "");
  INFO(restarted.body << sidecar.log());
  REQUIRE(restarted.status == 200);
  CHECK(restarted.body ==
        R"({"ok":true,"kernel":{"name":"python","restarted":true,"execution_count":0}})");
  CHECK(host_pid(container, "ipykernel_launcher") != kernel);
  auto after = exec(sidecar, sid, "print('x' in globals())");
  CHECK(field(after.body, "stdout") == "False\n");
  CHECK(kernel_field(after.body, "execution_count") == "1");
  CHECK(sidecar.call("GET", "/sessions/" + sid + "/restart", "").status == 405);
}

TEST_CASE("kernel: a kernel killed for memory answers 500 kernel died out of memory",
          "[integration][sidecar][kernel]") {
  REQUIRE_FULL_IMAGE();
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy, {"SANDBOX_IMAGE=" + image});
  const std::string sid = kernel_session(sidecar);
  REQUIRE(exec(sidecar, sid, "x = 1").status == 200);
  auto oom =
      exec(sidecar, sid, "chunks = []\nwhile True:\n    chunks.append(b'x' * (64 << 20))", 120000);
  INFO(oom.body << sidecar.log());
  CHECK(oom.status == 500);
  CHECK(field(oom.body, "detail").starts_with("kernel died: out of memory"));
  auto next = exec(sidecar, sid, "print('x' in globals())");
  CHECK(field(next.body, "stdout") == "False\n");
  CHECK(kernel_field(next.body, "restarted") == "true");
}

TEST_CASE(
    "kernel: a restarted sidecar adopts a kernel session and its first cell gets a new "
    "kernel",
    "[integration][sidecar][kernel]") {
  REQUIRE_FULL_IMAGE();
  proxy_process proxy("compose/policies/sandbox.json");
  std::string sid;
  {
    sidecar_process first(proxy, {"SANDBOX_IMAGE=" + image});
    sid = kernel_session(first);
    REQUIRE(exec(first, sid, "x = 1").status == 200);
    first.stop(SIGKILL);
  }
  sidecar_process second(proxy, {"SANDBOX_IMAGE=" + image});
  auto next = exec(second, sid, "print('x' in globals())");
  INFO(next.body << second.log());
  REQUIRE(next.status == 200);
  CHECK(field(next.body, "stdout") == "False\n");
  CHECK(kernel_field(next.body, "restarted") == "true");
  auto again = exec(second, sid, "x = 2\nx");
  CHECK(field(again.body, "stdout") == "2\n");
  CHECK(kernel_field(again.body, "restarted") == "false");
}

TEST_CASE(
    "kernel: a cell that stops the kernel's driver is answered at its timeout and the next "
    "cell gets a new kernel",
    "[integration][sidecar][kernel][attack]") {
  REQUIRE_FULL_IMAGE();
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy, {"SANDBOX_IMAGE=" + image});
  const std::string sid = kernel_session(sidecar);
  const std::string container = "dockgate-sbx-" + sid;
  REQUIRE(exec(sidecar, sid, "x = 1").status == 200);
  const std::string driver = host_pid(container, "dockgate-kernel");
  auto stopped =
      exec(sidecar, sid,
           "import os, signal, time\nos.kill(os.getppid(), signal.SIGSTOP)\ntime.sleep(600)", 2000);
  INFO(stopped.body << sidecar.log());
  CHECK(stopped.status == 500);
  CHECK(field(stopped.body, "detail").starts_with("kernel died: the kernel's driver was stopped"));
  // The stopped driver and the kernel are gone (the host's view), a new pair answers.
  CHECK(host_processes(container).find("sleep 600") == std::string::npos);
  auto next = exec(sidecar, sid, "print('x' in globals())");
  INFO(next.body);
  REQUIRE(next.status == 200);
  CHECK(field(next.body, "stdout") == "False\n");
  CHECK(kernel_field(next.body, "restarted") == "true");
  CHECK(host_pid(container, "dockgate-kernel") != driver);
}

TEST_CASE("kernel: output is capped as a plain cell's", "[integration][sidecar][kernel]") {
  REQUIRE_FULL_IMAGE();
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy, {"SANDBOX_IMAGE=" + image, "SANDBOX_MAX_OUTPUT_BYTES=2048"});
  const std::string sid = kernel_session(sidecar);
  auto loud =
      exec(sidecar, sid, "import sys\nprint('o' * 5000)\nsys.stderr.write('e' * 5000)\n'r' * 10");
  INFO(loud.body);
  REQUIRE(loud.status == 200);
  CHECK(field(loud.body, "stdout") ==
        std::string(2048, 'o') + "\n... [truncated, stdout exceeded 2KB]");
  CHECK(field(loud.body, "stderr") ==
        std::string(2048, 'e') + "\n... [truncated, stderr exceeded 2KB]");
}

TEST_CASE(
    "kernel: a cell that replaces the kernel's execute handler forges every later answer of that "
    "kernel as documented and a restart ends it",
    "[integration][sidecar][kernel]") {
  REQUIRE_FULL_IMAGE();
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy, {"SANDBOX_IMAGE=" + image});
  const std::string sid = kernel_session(sidecar);
  const std::string container = "dockgate-sbx-" + sid;
  // The kernel is one process the cells own: a cell can replace what runs the next ones.
  const std::string replace =
      "k = get_ipython().kernel\n"
      "def forged(stream, ident, parent):\n"
      "    k.session.send(k.iopub_socket, 'stream', {'name': 'stdout', 'text': 'FORGED\\n'}, "
      "parent=parent)\n"
      "    k.session.send(stream, 'execute_reply', {'status': 'ok', 'execution_count': 1, "
      "'user_expressions': {}, 'payload': []}, parent, ident=ident)\n"
      "k.shell_handlers['execute_request'] = forged\n"
      "print('replaced')\n";
  auto first = exec(sidecar, sid, replace);
  INFO(first.body << sidecar.log());
  REQUIRE(first.status == 200);
  CHECK(field(first.body, "stdout") == "replaced\n");
  const std::string write_mark = "open('/workspace/ran', 'w').write('yes')\nprint('real')\n1 / 0\n";
  auto seen = [&] {
    return run(direct() + " exec -u 1000:1000 " + container + " cat /workspace/ran 2>&1").output;
  };
  // What docs/sidecar.md says a kernel cell can do: the next answer is the forger's, exit
  // 0, and the code never ran (no file in the container, read through the engine).
  auto forged = exec(sidecar, sid, write_mark);
  INFO(forged.body);
  REQUIRE(forged.status == 200);
  CHECK(field(forged.body, "stdout") == "FORGED\n");
  CHECK(field(forged.body, "exit_code") == "0");
  CHECK(seen().find("No such file") != std::string::npos);
  // A restart is a new kernel process: the next cell's answer is its code's again.
  REQUIRE(sidecar.call("POST", "/sessions/" + sid + "/restart", "").status == 200);
  auto real = exec(sidecar, sid, write_mark);
  INFO(real.body);
  REQUIRE(real.status == 200);
  CHECK(field(real.body, "stdout") == "real\n");
  CHECK(field(real.body, "exit_code") == "1");
  CHECK(seen() == "yes");
}

// The in-container cell runner (sidecar/runner/runner.py) and streamed output, end to
// end: sidecar -> dockgate-proxy (sandbox.json) -> the real daemon. Each runner session
// is compared with a sidecar that runs every cell as plain Docker execs
// (SANDBOX_CELL_RUNNER=0) on the same engine; the daemon's own event record says which
// path ran.
#include <poll.h>

#include "dockgate/client/http_client.hpp"
#include "sidecar_harness.hpp"

using namespace dockgate::test;
using namespace std::chrono_literals;

namespace {

// An answer with the cell file's random name (in tracebacks) made constant.
std::string same_cell_name(std::string body) {
  for (std::size_t at = 0; (at = body.find("dockgate-cell-", at)) != std::string::npos;) {
    at += 14;
    if (body.size() >= at + 32) body.replace(at, 32, 32, '0');
  }
  return body;
}

// Kills the runner from outside (through the engine directly, as the session user: the
// container has no capability, so its root could not).
void kill_runner(const std::string& container) {
  run(direct() + " exec -u 1000:1000 " + container +
      " sh -c 'for p in /proc/[0-9]*; do case \"$(tr \"\\0\" \" \" < $p/cmdline)\" in *\" "
      "dockgate-runner \") kill -9 ${p#/proc/};; "
      "esac; done'");
}

// Cells whose answers must be the same on both paths, byte for byte.
const std::vector<std::pair<std::string, int>> parity_cells = {
    {"print(1)", 0},
    {"import sys\nprint('out')\nsys.stderr.write('err\\n')\nsys.exit(3)", 0},
    {"print('x' * 100000)\nimport sys; sys.stderr.write('y' * 50000)", 0},
    {"print('caf\\u00e9 \\U0001F600')\nimport sys; sys.stdout.flush(); "
     "sys.stdout.buffer.write(b'\\xff\\xfe')",
     0},
    {"import os, signal; os.kill(os.getpid(), signal.SIGTERM)", 0},
    {"import os; os.kill(os.getpid(), 9)", 0},
    {"import sys; print(repr(sys.stdin.read()))", 0},
    // What the cell's process sees: its environment (but the container's host name),
    // identity, working directory, umask, signal masks, capabilities, fds.
    {"import os\n"
     "env = {k: v for k, v in os.environ.items() if k != 'HOSTNAME'}\n"
     "print(sorted(env.items()), os.getcwd(), os.getuid(), os.getgid(), os.getgroups(), "
     "os.umask(0o22))\n"
     "print([l for l in open('/proc/self/status') if l.split(':')[0] in "
     "('SigBlk', 'SigIgn', 'CapEff', 'CapBnd', 'NoNewPrivs', 'Seccomp')])\n"
     "print(sorted(os.listdir('/proc/self/fd')), os.getpgid(0) == os.getpid(), os.getsid(0) == "
     "os.getpid())\n",
     0},
    {"open('/workspace/outputs/a.txt', 'w').write('artifact')\nprint('wrote')", 0},
    {"open('/workspace/outputs/a.txt', 'w').write('changed')\nopen('/workspace/outputs/b.csv', "
     "'w').write('1,2')",
     0},
    {"print('unchanged outputs are not returned')", 0},
    // (3 s: the interpreter must have started on a loaded machine too, on both paths.)
    {"import time\nprint('start', flush=True)\nwhile True: time.sleep(0.1)", 3000},
    {"import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True: "
     "time.sleep(0.1)",
     3000},
    {"import subprocess, time\nsubprocess.Popen(['sleep', '1000'], "
     "start_new_session=True)\nprint('left a child')",
     0},
    {"raise ValueError('boom')", 0},
};

}  // namespace

TEST_CASE(
    "sidecar runner: cells over one exec stream answer exactly as plain execs, a killed runner is "
    "replaced",
    "[integration][sidecar][runner]") {
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process fast(proxy);
  sidecar_process plain(proxy, {"SANDBOX_CELL_RUNNER=0", "SANDBOX_INSTANCE=plain" + fast.port()});
  const std::string fast_sid = new_session(fast);
  const std::string plain_sid = new_session(plain);
  const std::string fast_c = "dockgate-sbx-" + fast_sid;
  const std::string plain_c = "dockgate-sbx-" + plain_sid;

  // The first cell starts the runner: one exec. Every later cell: none.
  CHECK(fast.exec(fast_sid, "print(0)") == plain.exec(plain_sid, "print(0)"));
  const std::string t0 = now_stamp();
  std::vector<std::string> fast_answers, plain_answers;
  for (const auto& [code, timeout] : parity_cells) {
    auto a = fast.call("POST", "/exec", exec_body(fast_sid, code, timeout));
    auto b = plain.call("POST", "/exec", exec_body(plain_sid, code, timeout));
    INFO(code << "\nrunner: " << a.body << "\nplain:  " << b.body);
    CHECK(a.status == b.status);
    CHECK(same_cell_name(a.body) == same_cell_name(b.body));
    CHECK(a.content_type == b.content_type);
    fast_answers.push_back(same_cell_name(a.body));
    plain_answers.push_back(same_cell_name(b.body));
  }
  const std::string t1 = now_stamp();
  CHECK(exec_creates(fast_c, t0, t1) == 0);
  CHECK(exec_creates(plain_c, t0, t1) >= 2 * static_cast<int>(parity_cells.size()));
  // The answers say what they should (not only the same thing twice).
  CHECK(field(fast_answers[0], "stdout") == "1\n");
  CHECK(field(fast_answers[1], "exit_code") == "3");
  CHECK(field(fast_answers[2], "stdout").ends_with("\n... [truncated, stdout exceeded 32KB]"));
  CHECK(field(fast_answers[2], "stderr").ends_with("\n... [truncated, stderr exceeded 32KB]"));
  CHECK(field(fast_answers[4], "exit_code") == "143");
  CHECK(field(fast_answers[5], "exit_code") == "137");
  CHECK(field(fast_answers[5], "stderr") == "[sandbox] the cell was killed (SIGKILL)");
  CHECK(field(fast_answers[6], "stdout") == "''\n");
  CHECK(field(fast_answers[7], "stdout").find("['0', '1', '2', '3'] False False") !=
        std::string::npos);
  CHECK(field(fast_answers[8], "files") ==
        R"([{"name":"a.txt","mime_type":"text/plain","data_base64":"YXJ0aWZhY3Q="}])");
  CHECK(field(fast_answers[9], "files").find("b.csv") != std::string::npos);
  CHECK(field(fast_answers[10], "files") == "[]");
  CHECK(field(fast_answers[11], "exit_code") == "124");
  CHECK(field(fast_answers[11], "stdout") == "start\n");
  CHECK(field(fast_answers[11], "stderr") == "[sandbox] execution exceeded 3.000s and was killed");
  CHECK(field(fast_answers[12], "exit_code") == "137");
  CHECK(field(fast_answers[12], "stderr") ==
        "[sandbox] execution exceeded 3.000s, ignored SIGTERM and was killed");
  CHECK(field(fast_answers[14], "exit_code") == "1");

  // The kill sweep after each cell: init, its sleep and the runner remain, nothing else.
  const std::string left = processes(fast_c);
  INFO(left);
  CHECK(left.find("sleep 1000") == std::string::npos);
  CHECK(left.find("<runner>") != std::string::npos);
  CHECK(std::count(left.begin(), left.end(), '\n') == 3);

  // Cells sent at once to one session take turns on its one runner: each answer is its own.
  {
    std::vector<std::string> answers(4);
    std::vector<std::thread> threads;
    for (int i = 0; i < 4; ++i)
      threads.emplace_back([&, i] {
        answers[static_cast<std::size_t>(i)] =
            fast.exec(fast_sid, "import time\nfor k in range(3):\n  print(" + std::to_string(i) +
                                    ", k, flush=True)\n  time.sleep(0.05)");
      });
    for (auto& t : threads) t.join();
    for (int i = 0; i < 4; ++i) {
      const std::string n = std::to_string(i);
      CHECK(field(answers[static_cast<std::size_t>(i)], "stdout") ==
            n + " 0\n" + n + " 1\n" + n + " 2\n");
    }
    CHECK(processes(fast_c).find("<runner>") != std::string::npos);
  }

  // The runner killed between cells: the next cell notices before anything ran and runs
  // as plain execs with the same answer (after a sweep: no process of the session user
  // may meet a runner); the ones after it get a new runner.
  kill_runner(fast_c);
  CHECK(processes(fast_c).find("<runner>") == std::string::npos);
  const std::string t2 = now_stamp();
  for (std::size_t i : {0u, 1u, 7u, 11u}) {
    const auto& [code, timeout] = parity_cells[i];
    auto a = fast.call("POST", "/exec", exec_body(fast_sid, code, timeout));
    INFO(code << "\n" << a.body);
    CHECK(same_cell_name(a.body) == plain_answers[i]);
  }
  const std::string t3 = now_stamp();
  // The sweep, the cell and its clean-up as plain execs; then the new runner.
  CHECK(exec_creates(fast_c, t2, t3) == 4);
  CHECK(processes(fast_c).find("<runner>") != std::string::npos);
  CHECK(fast.log().find("cell runner dropped") != std::string::npos);

  fast.call("DELETE", "/sessions/" + fast_sid, "");
  plain.call("DELETE", "/sessions/" + plain_sid, "");
}

TEST_CASE("sidecar runner: a cell cannot forge its answer through fd 1/2 or the runner's fds",
          "[integration][sidecar][runner]") {
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy);
  const std::string sid = new_session(sidecar);
  const std::string container = "dockgate-sbx-" + sid;
  CHECK(field(sidecar.exec(sid, "print(1)"), "stdout") == "1\n");
  const std::string t0 = now_stamp();

  // The runner's own frames and Docker's multiplexing headers written to fd 1 and 2 are
  // just output: the answer is the cell's.
  const std::string forged =
      "import os, sys\n"
      "x = b'X\\x00\\x00\\x00\\x050 0 0'\n"
      "s = b'S\\x00\\x00\\x00\\x00'\n"
      "mux = b'\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x05' + x\n"
      "os.write(1, x + s + mux)\n"
      "os.write(2, mux + x)\n"
      "os.write(1, b'O\\xff\\xff\\xff\\xff')\n"
      "os._exit(7)\n";
  auto a = sidecar.call("POST", "/exec", exec_body(sid, forged));
  INFO(a.body);
  CHECK(field(a.body, "exit_code") == "7");
  CHECK(field(a.body, "stdout")
            .starts_with(std::string("X\0\0\0\x05"
                                     "0 0 0",
                                     10)));
  CHECK(field(a.body, "stdout").size() > 20);

  // A flood on both: capped with the note, and the runner still serves.
  auto flood =
      sidecar.call("POST", "/exec",
                   exec_body(sid,
                             "import os\nfor _ in range(160):\n  os.write(1, b'\\x00' * 65536)\n  "
                             "os.write(2, b'E\\x7f\\xff\\xff\\xff' * 10000)\nprint('done')"));
  INFO(flood.body);
  CHECK(field(flood.body, "exit_code") == "0");
  CHECK(field(flood.body, "stdout").ends_with("\n... [truncated, stdout exceeded 32KB]"));
  CHECK(field(flood.body, "stderr").ends_with("\n... [truncated, stderr exceeded 32KB]"));

  // Reaching the runner's pipes through /proc (its fd directory, each fd, its memory)
  // or ptrace: none of it works, the runner is not dumpable and the cell has no
  // capability.
  const std::string reach =
      "import os, ctypes\n"
      "runners = [p for p in os.listdir('/proc') if p.isdigit() and\n"
      "           open(f'/proc/{p}/cmdline', 'rb').read().endswith(b'\\0dockgate-runner\\0')]\n"
      "opened = 0\n"
      "for p in runners:\n"
      "  for path in [f'/proc/{p}/fd/{n}' for n in range(64)] + [f'/proc/{p}/mem']:\n"
      "    try:\n"
      "      w = os.open(path, os.O_WRONLY | os.O_NONBLOCK)\n"
      "      os.write(w, b'X\\x00\\x00\\x00\\x050 0 0'); opened += 1\n"
      "    except OSError: pass\n"
      "  try: os.listdir(f'/proc/{p}/fd'); opened += 1\n"
      "  except OSError: pass\n"
      "libc = ctypes.CDLL(None, use_errno=True)\n"
      "attached = sum(1 for p in runners if libc.ptrace(16, int(p), 0, 0) == 0)\n"
      "print('runners', len(runners), 'opened', opened, 'attached', attached)\n";
  auto r = sidecar.call("POST", "/exec", exec_body(sid, reach));
  INFO(r.body);
  CHECK(field(r.body, "stdout") == "runners 1 opened 0 attached 0\n");
  CHECK(field(r.body, "exit_code") == "0");

  // All of it ran on the runner, which is still in place.
  CHECK(field(sidecar.exec(sid, "print(2)"), "stdout") == "2\n");
  CHECK(exec_creates(container, t0, now_stamp()) == 0);
  CHECK(processes(container).find("<runner>") != std::string::npos);

  // A cell that kills the runner (it can: same user): that cell's answer says so, and
  // the next ones run as plain execs, correctly.
  auto killer = sidecar.call(
      "POST", "/exec",
      exec_body(sid,
                "import fcntl, os, struct, termios, time\n"
                "print('before', flush=True)\n"
                "while struct.unpack('i', fcntl.ioctl(1, termios.FIONREAD, b'0000'))[0]:\n"
                "  time.sleep(0.01)\n"
                "time.sleep(0.2)\n"
                "for p in os.listdir('/proc'):\n"
                "  if p.isdigit() and open(f'/proc/{p}/cmdline', "
                "'rb').read().endswith(b'\\0dockgate-runner\\0'):\n"
                "    os.kill(int(p), 9)\n"
                "time.sleep(0.5)\nprint('after')"));
  INFO(killer.body);
  CHECK(killer.status == 200);
  // What the runner forwarded before it died is kept. The cell waits until the runner
  // has read "before" from the pipe (FIONREAD on the pipe is 0), then a little more, so
  // the runner is not killed between reading it and passing it on (a run where it was
  // gave an empty stdout, and this check failed once in a few runs).
  CHECK(field(killer.body, "stdout").starts_with("before"));
  CHECK(field(killer.body, "exit_code") == "-1");
  CHECK(field(killer.body, "stderr").find("[sandbox] the cell's runner stopped answering") !=
        std::string::npos);
  CHECK(field(sidecar.exec(sid, "print(3)"), "stdout") == "3\n");
  CHECK(field(sidecar.exec(sid, "print(4)"), "stdout") == "4\n");
  sidecar.call("DELETE", "/sessions/" + sid, "");
}

namespace {

// POST /exec with Accept: text/event-stream, read as it arrives: the head, then each
// event with the time it arrived.
struct sse_answer {
  unsigned status = 0;
  std::string head;
  std::vector<std::tuple<std::string, std::string, std::chrono::steady_clock::time_point>>
      events;  // event, data, when
};

sse_answer stream_exec(const sidecar_process& sidecar, const std::string& body) {
  using namespace dockgate::client;
  sse_answer a;
  transport t{{dockgate::common::endpoint::kind::tcp, "", "127.0.0.1",
               static_cast<std::uint16_t>(std::stoi(sidecar.port()))},
              nullptr};
  const auto deadline = clock_type::now() + 60s;
  std::string error;
  auto c = connection::open(t, deadline, &error);
  REQUIRE(c);
  const std::string req =
      "POST /exec HTTP/1.1\r\nHost: sidecar\r\nAuthorization: Bearer " + api_key +
      "\r\nAccept: text/event-stream\r\nContent-Type: application/json\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  REQUIRE(c->write_all(req, deadline));
  std::string buffer;
  auto head = read_response_head(*c, buffer, deadline);
  REQUIRE(head);
  a.status = head->status;
  for (const auto& [k, v] : head->headers) a.head += k + ": " + v + "\n";
  if (!head->chunked) {
    // A plain answer (an error before any output).
    while (head->content_length && buffer.size() < *head->content_length) {
      char chunk[4096];
      const long n = c->read_some(chunk, sizeof chunk, deadline);
      if (n <= 0) break;
      buffer.append(chunk, static_cast<std::size_t>(n));
    }
    a.events.emplace_back("plain", buffer, std::chrono::steady_clock::now());
    return a;
  }
  // Chunked: decode as it comes, cut events at blank lines.
  std::string body_text, raw = buffer;
  bool done = false;
  while (!done) {
    for (;;) {
      const auto eol = raw.find("\r\n");
      if (eol == std::string::npos) break;
      const std::size_t size = std::stoul(raw.substr(0, eol), nullptr, 16);
      if (raw.size() < eol + 2 + size + 2) break;
      if (size == 0) {
        done = true;
        break;
      }
      body_text += raw.substr(eol + 2, size);
      raw.erase(0, eol + 2 + size + 2);
    }
    for (std::size_t end; (end = body_text.find("\n\n")) != std::string::npos;) {
      const std::string e = body_text.substr(0, end);
      body_text.erase(0, end + 2);
      const auto nl = e.find('\n');
      REQUIRE(e.starts_with("event: "));
      REQUIRE(e.substr(nl + 1).starts_with("data: "));
      a.events.emplace_back(e.substr(7, nl - 7), e.substr(nl + 7),
                            std::chrono::steady_clock::now());
    }
    if (done) break;
    char chunk[4096];
    const long n = c->read_some(chunk, sizeof chunk, deadline);
    if (n <= 0) break;
    raw.append(chunk, static_cast<std::size_t>(n));
  }
  return a;
}

std::string json_string(const std::string& data) {  // a JSON string's value
  return field("{\"v\":" + data + "}", "v");
}

}  // namespace

TEST_CASE(
    "sidecar: Accept text/event-stream streams a cell's output as it is printed, then the same "
    "result",
    "[integration][sidecar][runner][sse]") {
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process fast(proxy);
  sidecar_process plain(proxy, {"SANDBOX_CELL_RUNNER=0", "SANDBOX_INSTANCE=plain" + fast.port()});
  for (const sidecar_process* sidecar : {&fast, &plain}) {
    const std::string sid = new_session(*sidecar);
    const std::string code =
        "import sys, time\n"
        "print('first', flush=True)\n"
        "time.sleep(0.3)\n"  // two pipes have no order between them: the gap gives one
        "sys.stderr.write('warn\\n'); sys.stderr.flush()\n"
        "time.sleep(1)\n"
        "print('second \\u00e9')\n";
    auto s = stream_exec(*sidecar, exec_body(sid, code));
    INFO(s.head);
    REQUIRE(s.status == 200);
    CHECK(s.head.find("content-type: text/event-stream\n") != std::string::npos);
    REQUIRE(s.events.size() >= 3);
    std::string out, err;
    for (std::size_t i = 0; i + 1 < s.events.size(); ++i) {
      const auto& [event, data, when] = s.events[i];
      CHECK((event == "stdout" || event == "stderr"));
      (event == "stdout" ? out : err) += json_string(data);
    }
    CHECK(out == "first\nsecond \u00e9\n");
    CHECK(err == "warn\n");
    // The first output arrives as printed, a second before the answer ends.
    const auto& [first_event, first_data, first_at] = s.events.front();
    const auto& [last_event, result, result_at] = s.events.back();
    CHECK(first_event == "stdout");
    CHECK(json_string(first_data).starts_with("first"));  // print may write "first" and "\n" apart
    CHECK(result_at - first_at >= 900ms);
    // The result is the plain answer's object.
    CHECK(last_event == "result");
    auto plain_answer = sidecar->call("POST", "/exec", exec_body(sid, code));
    CHECK(result == plain_answer.body);

    // Timeouts and caps are those of a plain answer too.
    const std::string loud =
        "import time\nprint('x' * 100000, flush=True)\nwhile True: time.sleep(0.1)";
    auto t = stream_exec(*sidecar, exec_body(sid, loud, 3000));
    REQUIRE(!t.events.empty());
    CHECK(std::get<0>(t.events.back()) == "result");
    CHECK(std::get<1>(t.events.back()) ==
          sidecar->call("POST", "/exec", exec_body(sid, loud, 3000)).body);
    std::string streamed;
    for (const auto& [event, data, when] : t.events)
      if (event == "stdout") streamed += json_string(data);
    CHECK(streamed == std::string(32768, 'x'));

    // An error before any output is a plain error answer.
    auto missing = stream_exec(*sidecar, exec_body(std::string(32, 'a'), "print(1)"));
    CHECK(missing.status == 404);
    CHECK(std::get<1>(missing.events.front()) ==
          R"({"detail":"session not found or not running"})");
    sidecar->call("DELETE", "/sessions/" + sid, "");
  }
}

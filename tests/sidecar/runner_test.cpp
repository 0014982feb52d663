// The cell runner's framing and parsing (everything the sidecar reads from it is
// untrusted), the embedded runner program itself (run here with the host's python3),
// and the event stream's pieces.
#include "cells/runner.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "cells/kernel.hpp"
#include "engine/docker_engine.hpp"
#include "front/aivory/cell_answers.hpp"

using namespace dockgate::sidecar;
using dockgate::sidecar::aivory::cell_events;
using dockgate::sidecar::aivory::utf8_whole_prefix;
using dockgate::sidecar::aivory::wants_event_stream;

namespace {

std::string frame(char kind, std::string_view payload) {
  std::string f(1, kind);
  const auto n = static_cast<std::uint32_t>(payload.size());
  f += static_cast<char>(n >> 24);
  f += static_cast<char>((n >> 16) & 0xff);
  f += static_cast<char>((n >> 8) & 0xff);
  f += static_cast<char>(n & 0xff);
  return f + std::string(payload);
}

}  // namespace

TEST_CASE(
    "runner frames: whole frames only, split anywhere, unknown kinds and oversized headers fail",
    "[sidecar][runner]") {
  const std::string stream = frame('H', "dockgate-runner 2 42") + frame('S', "") +
                             frame('O', "out") + frame('E', "err") + frame('X', "0 0 0");
  // Fed one byte at a time, the same frames come out.
  runner_frames bytewise;
  std::vector<runner_frames::frame> got;
  for (char c : stream) {
    bytewise.feed(std::string_view(&c, 1));
    while (auto f = bytewise.next()) got.push_back(*f);
  }
  using k = runner_frames::kind;
  CHECK(got == std::vector<runner_frames::frame>{{k::hello, "dockgate-runner 2 42"},
                                                 {k::started, ""},
                                                 {k::out, "out"},
                                                 {k::err, "err"},
                                                 {k::exit, "0 0 0"}});
  CHECK_FALSE(bytewise.failed());

  runner_frames unknown;
  unknown.feed(frame('Z', "x"));
  CHECK_FALSE(unknown.next());
  CHECK(unknown.failed());

  // A header announcing more than the bound fails as soon as it is whole: nothing waits
  // for (or buffers) the payload.
  runner_frames huge;
  huge.feed(frame('O', "").substr(0, 1) + std::string("\x00\x10\x00\x00", 4));
  CHECK_FALSE(huge.next());
  CHECK(huge.failed());
  runner_frames at_bound;
  at_bound.feed(frame('O', std::string(max_runner_frame - runner_frame_header, 'x')));
  auto f = at_bound.next();
  REQUIRE(f);
  CHECK(f->payload.size() == max_runner_frame - runner_frame_header);
  runner_frames over_bound;
  over_bound.feed(frame('O', std::string(max_runner_frame - runner_frame_header + 1, 'x')));
  CHECK_FALSE(over_bound.next());
  CHECK(over_bound.failed());
}

TEST_CASE("runner hellos name a PID, stat lines say whether the runner runs, stopped or ended",
          "[sidecar][runner]") {
  CHECK(parse_runner_hello("dockgate-runner 2 1") == 1);
  CHECK(parse_runner_hello("dockgate-runner 2 4194304") == 4194304);
  for (std::string_view bad :
       {"dockgate-runner 1", "dockgate-runner 2", "dockgate-runner 2 ", "dockgate-runner 2 0",
        "dockgate-runner 2 07", "dockgate-runner 2 -1", "dockgate-runner 2 1 ",
        "dockgate-runner 2 +1", "dockgate-runner 2 99999999999", "dockgate-runner 2 1x"})
    CHECK_FALSE(parse_runner_hello(bad));
  using st = runner_state;
  CHECK(parse_runner_stat("12 (python3) S 1 12 12 0 -1") == st::running);
  CHECK(parse_runner_stat("12 (python3) R 1 12") == st::running);
  CHECK(parse_runner_stat("12 (python3) T 1 12") == st::stopped);
  CHECK(parse_runner_stat("12 (python3) t 1 12") == st::stopped);
  CHECK(parse_runner_stat("12 (python3) Z 1 12") == st::gone);
  // The comm is the process's to choose: only what follows the last ") " counts.
  CHECK(parse_runner_stat("12 (x) T 1) S 1 12") == st::running);
  CHECK(parse_runner_stat("12 (x) S 1) T 1 12") == st::stopped);
  CHECK(parse_runner_stat("") == st::unknown);
  CHECK(parse_runner_stat("12 (python3)") == st::unknown);
  CHECK(parse_runner_stat("12 (python3) ") == st::unknown);
}

TEST_CASE("runner exit frames are three plain decimals", "[sidecar][runner]") {
  CHECK(parse_runner_exit("0 0 0") == runner_exit{0, 0, 0});
  CHECK(parse_runner_exit("137 12 100000") == runner_exit{137, 12, 100000});
  for (auto bad :
       {"", "0", "0 0", "0 0 0 ", " 0 0 0", "0  0 0", "-1 0 0", "256 0 0", "01 0 0", "+1 0 0",
        "0 -1 0", "0 0 0\n", "a 0 0", "0 0 99999999999999999999999", "0x1 0 0"})
    CHECK_FALSE(parse_runner_exit(bad));
}

TEST_CASE("runner requests: op, cap, then lists of length-prefixed byte strings",
          "[sidecar][runner]") {
  const auto r = runner_request('R', 32768, {{"sh", "-c", "x"}, {std::string_view("a\0b", 3)}});
  const std::string want = std::string("\0\0\0\x29", 4) + "R" + std::string("\0\0\x80\0", 4) +
                           std::string("\0\0\0\x02", 4) + std::string("\0\0\0\x03", 4) +
                           std::string("\0\0\0\x02sh", 6) + std::string("\0\0\0\x02-c", 6) +
                           std::string("\0\0\0\x01x", 5) + std::string("\0\0\0\x01", 4) +
                           std::string(
                               "\0\0\0\x03"
                               "a\0b",
                               7);
  CHECK(r == want);
}

TEST_CASE("event streams: Accept, UTF-8 held back whole", "[sidecar][runner]") {
  CHECK(wants_event_stream("text/event-stream"));
  CHECK(wants_event_stream("application/json, Text/Event-Stream;q=0.9"));
  CHECK_FALSE(wants_event_stream(""));
  CHECK_FALSE(wants_event_stream("application/json"));
  CHECK_FALSE(wants_event_stream("text/event-streams"));
  CHECK(utf8_whole_prefix("abc") == 3);
  CHECK(utf8_whole_prefix("ab\xc3") == 2);
  CHECK(utf8_whole_prefix("ab\xc3\xa9") == 4);
  CHECK(utf8_whole_prefix("a\xe2\x82") == 1);
  CHECK(utf8_whole_prefix("a\xe2\x82\xac") == 4);
  CHECK(utf8_whole_prefix("\xf0\x9f\x98") == 0);
  CHECK(utf8_whole_prefix("\xf0\x9f\x98\x80") == 4);

  struct recording final : reply_stream {
    std::string text;
    bool is_open = false;
    bool open(unsigned, std::string_view, const header_fields&) override { return is_open = true; }
    bool write(std::string_view d) override {
      text += d;
      return true;
    }
    bool opened() const override { return is_open; }
  } out;
  cell_events events(&out);
  events.output(1, "caf\xc3");
  events.output(1, "\xa9!");
  events.output(2, "\xe2\x82");
  events.flush();
  events.send("result", R"({"exit_code":0})", true);
  CHECK(out.text ==
        "event: stdout\ndata: \"caf\"\n\n"
        "event: stdout\ndata: \"\xc3\xa9!\"\n\n"
        "event: stderr\ndata: \"\xef\xbf\xbd\xef\xbf\xbd\"\n\n"
        "event: result\ndata: {\"exit_code\":0}\n\n");
}

namespace {

// The embedded runner program under the host's python3, driven like the sidecar does.
struct local_runner {
  pid_t pid = -1;
  int to = -1, from = -1;
  explicit local_runner(std::string program = std::string(runner_program)) {
    int in[2], out[2];
    REQUIRE(::pipe2(in, O_CLOEXEC) == 0);
    REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
    pid = ::fork();
    if (pid == 0) {
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      ::execlp("python3", "python3", "-I", "-c", program.c_str(), "dockgate-runner", nullptr);
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    to = in[1];
    from = out[0];
  }
  ~local_runner() {
    ::close(to);
    ::close(from);
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  runner_frames frames;
  std::optional<runner_frames::frame> next() {
    for (;;) {
      if (auto f = frames.next()) return f;
      if (frames.failed()) return std::nullopt;
      char buf[65536];
      const ssize_t n = ::read(from, buf, sizeof buf);
      if (n <= 0) return std::nullopt;
      frames.feed(std::string_view(buf, static_cast<std::size_t>(n)));
    }
  }
  // Waits for the runner's warm-up to end (W), after which a cell sent with its timeout is
  // a fork where the host's python3 allows one.
  void warmed() {
    auto got = exchange(runner_request('W', 0, {}), runner_frames::kind::exit);
    REQUIRE(!got.empty());
  }
  // Runs a command: the frames of its answer up to the exit frame.
  std::vector<runner_frames::frame> run(const std::vector<std::string>& argv, std::string_view in,
                                        std::uint32_t cap) {
    std::vector<std::string_view> args(argv.begin(), argv.end());
    return exchange(runner_request('R', cap, {args, {in}}), runner_frames::kind::exit);
  }
  std::vector<runner_frames::frame> exchange(const std::string& req, runner_frames::kind last) {
    REQUIRE(::write(to, req.data(), req.size()) == static_cast<ssize_t>(req.size()));
    std::vector<runner_frames::frame> got;
    while (auto f = next()) {
      got.push_back(*f);
      if (f->type == last) break;
    }
    return got;
  }
};

std::string joined(const std::vector<runner_frames::frame>& frames, runner_frames::kind k) {
  std::string out;
  for (const auto& f : frames)
    if (f.type == k) out += f.payload;
  return out;
}

}  // namespace

TEST_CASE(
    "the runner program: hello, fresh processes, caps, exit statuses, no protocol fd for the "
    "command",
    "[sidecar][runner]") {
  local_runner r;
  auto hello = r.next();
  REQUIRE(hello);
  CHECK(hello->type == runner_frames::kind::hello);
  // Its PID, as the host sees it here (no PID namespace of its own).
  CHECK(parse_runner_hello(hello->payload) == r.pid);
  using k = runner_frames::kind;

  auto echo = r.run({"sh", "-c", "cat; echo err >&2; exit 3"}, "from stdin\n", 1024);
  REQUIRE(echo.size() >= 3);
  CHECK(echo.front().type == k::started);
  CHECK(joined(echo, k::out) == "from stdin\n");
  CHECK(joined(echo, k::err) == "err\n");
  CHECK(echo.back().payload == "3 0 0");

  // Over the cap: the rest is counted, not sent.
  auto loud = r.run({"sh", "-c", "head -c 100000 /dev/zero"}, {}, 1000);
  CHECK(joined(loud, k::out).size() == 1000);
  CHECK(loud.back().payload == "0 99000 0");

  // Killed by a signal: 128 + n, as docker reports it.
  CHECK(r.run({"sh", "-c", "kill -9 $$"}, {}, 1024).back().payload == "137 0 0");
  CHECK(r.run({"/nonexistent/program"}, {}, 1024).back().payload == "127 0 0");

  // The command holds its own pipes and nothing else: no fd of the runner's stream.
  auto fds = r.run({"sh", "-c", "ls /proc/$$/fd"}, {}, 1024);
  CHECK(joined(fds, k::out) == "0\n1\n2\n");

  // The answer ends when the command exits, even while a child it left holds its pipes.
  const auto start = std::chrono::steady_clock::now();
  auto left = r.run({"sh", "-c", "sleep 5 & echo gone"}, {}, 1024);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(3));
  CHECK(joined(left, k::out) == "gone\n");
  CHECK(left.back().payload == "0 0 0");

  // A request it does not know ends it.
  const auto bad = runner_request('Z', 0, {});
  REQUIRE(::write(r.to, bad.data(), bad.size()) == static_cast<ssize_t>(bad.size()));
  CHECK_FALSE(r.next());
}

TEST_CASE(
    "the runner program: a cell, its files, and the outputs listing exactly as find prints it",
    "[sidecar][runner]") {
  char tmpl[] = "/tmp/dockgate-runner-cell-XXXXXX";
  REQUIRE(::mkdtemp(tmpl));
  const std::string dir = tmpl;
  const std::string outputs = dir + "/outputs";
  auto sh = [](const std::string& cmd) { REQUIRE(std::system(cmd.c_str()) == 0); };
  sh("mkdir -p " + outputs + "/sub/deeper && printf abc > " + outputs + "/a.txt && printf '' > " +
     outputs + "/sub/deeper/empty && printf 12345 > '" + outputs +
     "/sub/odd name\\n' && ln -s /etc/passwd " + outputs + "/link && mkfifo " + outputs +
     "/fifo && touch -d @1700000000.123456789 " + outputs + "/a.txt");
  auto find_listing = [&] {
    std::string out;
    FILE* p = ::popen(
        ("find " + outputs + " -type f -printf '%p\\0%T@\\0%s\\0' 2>/dev/null").c_str(), "r");
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    ::pclose(p);
    return out;
  };
  // Records as a set: both walk the directory in readdir order, but only the set counts.
  auto records = [](std::string_view text) {
    std::set<std::string> out;
    while (!text.empty()) {
      std::string rec;
      for (int i = 0; i < 3; ++i) {
        const auto nul = text.find('\0');
        REQUIRE(nul != std::string_view::npos);
        rec += std::string(text.substr(0, nul + 1));
        text.remove_prefix(nul + 1);
      }
      out.insert(rec);
    }
    return out;
  };
  const std::string before = find_listing();

  local_runner r;
  REQUIRE(r.next());
  const std::string cell = dir + "/cell.py", before_file = dir + "/before", oom_file = dir + "/oom";
  // The "sweep" here only records that it ran after the cell: this runs on the host.
  const std::string code = "import os\nprint(open('" + before_file +
                           "').read().count('\\0'))\nopen('" + outputs +
                           "/new.bin', 'wb').write(b'x' * 7)\n";
  const auto req =
      runner_request('C', 1024,
                     {{"python3", cell},
                      {code},
                      {cell, before_file, oom_file, outputs},
                      {"sh", "-c", "test -e " + cell + " && touch " + dir + "/swept"}});
  auto got = r.exchange(req, runner_frames::kind::done);
  using k = runner_frames::kind;
  REQUIRE(got.size() >= 4);
  CHECK(got.front().type == k::started);
  CHECK(joined(got, k::out) == "9\n");  // three records, three fields each
  const auto exit_at =
      std::find_if(got.begin(), got.end(), [](const auto& f) { return f.type == k::exit; });
  REQUIRE(exit_at != got.end());
  CHECK(exit_at->payload == "0 0 0");
  CHECK(got.back().type == k::done);
  const std::string listing = joined(got, k::listing);
  // "<oom after>\n<oom before>\n<before>\0<after>", as the plain clean-up prints it.
  const auto first_nl = listing.find('\n');
  const auto second_nl = listing.find('\n', first_nl + 1);
  REQUIRE(second_nl != std::string::npos);
  const std::string rest = listing.substr(second_nl + 1);
  CHECK(records(rest.substr(0, before.size())) == records(before));
  CHECK(rest[before.size()] == '\0');
  CHECK(records(rest.substr(before.size() + 1)) == records(find_listing()));
  CHECK(rest.substr(before.size() + 1).find(outputs + "/new.bin") != std::string::npos);
  CHECK(listing.find("1700000000.1234567890") != std::string::npos);
  // The sweep ran while the cell file existed; the cell and both record files are gone.
  CHECK(::access((dir + "/swept").c_str(), F_OK) == 0);
  for (const auto& f : {cell, before_file, oom_file}) CHECK(::access(f.c_str(), F_OK) != 0);
  sh("rm -rf " + dir);
}

TEST_CASE(
    "the fork server: the stand-in ends with the status its cell queued as it exits, from no "
    "other process",
    "[sidecar][runner]") {
  char tmpl[] = "/tmp/dockgate-runner-report-XXXXXX";
  REQUIRE(::mkdtemp(tmpl));
  const std::string dir = tmpl;
  auto sh = [](const std::string& cmd) { REQUIRE(std::system(cmd.c_str()) == 0); };
  local_runner r;
  REQUIRE(r.next());
  r.warmed();
  int n = 0;
  // A cell as the sidecar sends it with its timeout (a fork of the warm interpreter where
  // the host's python3 allows one); the sweep here kills only what the cell recorded.
  auto cell = [&](const std::string& code, const std::string& timeout_ms = "60000") {
    const std::string path = dir + "/cell" + std::to_string(++n) + ".py";
    auto got = r.exchange(
        runner_request(
            'C', 1024,
            {{"python3", path},
             {code},
             {path, dir + "/before", dir + "/oom", dir + "/outputs"},
             {"sh", "-c",
              "kill -9 $(cat " + dir + "/pids 2>/dev/null) 2>/dev/null; rm -f " + dir + "/pids"},
             {timeout_ms}}),
        runner_frames::kind::done);
    const auto exit_at = std::find_if(
        got.begin(), got.end(), [](const auto& f) { return f.type == runner_frames::kind::exit; });
    return std::make_pair(joined(got, runner_frames::kind::out),
                          exit_at == got.end() ? std::string() : exit_at->payload);
  };
  const std::string queue =
      "import ctypes, os, signal, sys, time\n"
      "open('" +
      dir +
      "/pids', 'a').write('%d ' % os.getpid())\n"
      "def queue(pid, status):\n"
      "    ctypes.CDLL(None).sigqueue(pid, signal.SIGRTMIN, ctypes.c_long(status))\n"
      "print('ctypes' in sys.modules and 'fork', flush=True)\n";
  const std::string forked = cell(queue).first;
  if (forked != "fork\n") {
    WARN("the host's python3 runs cells as execs here (" << forked << "): nothing to check");
    sh("rm -rf " + dir);
    return;
  }
  // What finish() queues right before the cell's exit ends the stand-in with it, without
  // waiting for the cell's process to be reaped: this one would run to its timeout (124).
  auto [out, status] = cell(queue + "queue(os.getppid(), 7)\ntime.sleep(3600)\n", "2000");
  CHECK(out == "fork\n");
  CHECK(status == "7 0 0");
  // A status queued by any other process (here the cell's own child) is not the cell's.
  auto [out2, status2] = cell(queue +
                              "stand_in = os.getppid()\n"
                              "child = os.fork()\n"
                              "if child == 0:\n"
                              "    queue(stand_in, 9)\n"
                              "    os._exit(0)\n"
                              "os.waitpid(child, 0)\n"
                              "sys.exit(3)\n");
  CHECK(out2 == "fork\n");
  CHECK(status2 == "3 0 0");
  // A plain exit: its status, as before.
  CHECK(cell("import sys\nsys.exit(5)\n").second == "5 0 0");
  sh("rm -rf " + dir);
}

namespace {

// The PIDs whose parent is `parent` (/proc/PID/stat, the field after the state).
std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream f(e.path() / "stat");
    std::string line;
    std::getline(f, line);
    const auto cut = line.rfind(") ");
    if (cut == std::string::npos) continue;
    std::istringstream rest(line.substr(cut + 2));
    std::string state;
    pid_t ppid = 0;
    if (rest >> state >> ppid && ppid == parent) out.push_back(std::stoi(name));
  }
  return out;
}

}  // namespace

TEST_CASE(
    "the fork server: asked to, the runner makes the next cell's fork only after a pause "
    "without requests",
    "[sidecar][runner]") {
  char tmpl[] = "/tmp/dockgate-runner-pause-XXXXXX";
  REQUIRE(::mkdtemp(tmpl));
  const std::string dir = tmpl;
  local_runner r;
  REQUIRE(r.next());
  r.warmed();
  int n = 0;
  auto cell = [&](std::vector<std::string> fork) {
    const std::string path = dir + "/cell" + std::to_string(++n) + ".py";
    auto got = r.exchange(runner_request('C', 1024,
                                         {{"python3", path},
                                          {"import sys\nprint('ctypes' in sys.modules)\n"},
                                          {path, dir + "/before", dir + "/oom", dir + "/outputs"},
                                          {"true"},
                                          {fork.begin(), fork.end()}}),
                          runner_frames::kind::done);
    return joined(got, runner_frames::kind::out);
  };
  if (cell({"60000"}) != "True\n") {
    WARN("the host's python3 runs cells as execs here: nothing to check");
    REQUIRE(std::system(("rm -rf " + dir).c_str()) == 0);
    return;
  }
  // Asked for a pause of ten minutes: no fork waits after the answer...
  CHECK(cell({"60000", "600000"}) == "True\n");
  CHECK(children_of(r.pid).empty());
  // ...and the next cell, sooner, forks its own.
  CHECK(cell({"60000", "600000"}) == "True\n");
  CHECK(children_of(r.pid).empty());
  // Without the pause the next one's fork is made at once again.
  CHECK(cell({"60000"}) == "True\n");
  auto pair_made = [&] {
    bool made = false;
    for (int i = 0; i < 1000 && !(made = !children_of(r.pid).empty()); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return made;
  };
  CHECK(pair_made());
  // A command that comes in the pause (sent here with the cell, so it is there before the
  // pause begins: an artifact's read) does not end it: once it has been quiet as long
  // again, the fork is made.
  CHECK(cell({"60000", "1"}) == "True\n");
  const std::string cell_then_read =
      runner_request('C', 1024,
                     {{"python3", dir + "/last.py"},
                      {"print(1)\n"},
                      {dir + "/last.py", dir + "/before", dir + "/oom", dir + "/outputs"},
                      {"true"},
                      {"60000", "1"}}) +
      runner_request('R', 1024, {{"true"}, {""}});
  auto answers = r.exchange(cell_then_read, runner_frames::kind::done);
  CHECK(joined(answers, runner_frames::kind::out) == "1\n");
  auto read = r.exchange("", runner_frames::kind::exit);
  REQUIRE_FALSE(read.empty());
  CHECK(read.back().payload == "0 0 0");
  CHECK(pair_made());
  REQUIRE(std::system(("rm -rf " + dir).c_str()) == 0);
}

namespace {

// A fake Engine API on a unix socket: exec create answers an Id, exec start upgrades and
// then sends `script` (bytes of the hijacked stream, Docker's multiplexing included) and
// ends its output (as the daemon does when the process's output ends: stdin may still
// be written), or holds the stream open if `hold`.
struct fake_engine {
  std::string path;
  int listen_fd = -1;
  std::string script;
  std::string later;  // sent 300 ms after `script` (the stream held open)
  bool hold = false;
  std::thread thread;
  std::atomic<bool> stop{false};

  explicit fake_engine(std::string s, bool hold_open = false)
      : script(std::move(s)), hold(hold_open) {
    char dir[] = "/tmp/dockgate-runner-test-XXXXXX";
    REQUIRE(::mkdtemp(dir));
    path = std::string(dir) + "/engine.sock";
    listen_fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    REQUIRE(::bind(listen_fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::listen(listen_fd, 8) == 0);
    thread = std::thread([this] { serve(); });
  }
  ~fake_engine() {
    stop = true;
    ::shutdown(listen_fd, SHUT_RDWR);
    thread.join();
    ::close(listen_fd);
    ::unlink(path.c_str());
    ::rmdir(path.substr(0, path.rfind('/')).c_str());
  }
  void serve() {
    std::vector<int> held;
    while (!stop) {
      const int fd = ::accept(listen_fd, nullptr, nullptr);
      if (fd < 0) break;
      std::string in;
      char buf[4096];
      while (in.find("\r\n\r\n") == std::string::npos) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n <= 0) break;
        in.append(buf, static_cast<std::size_t>(n));
      }
      // The body too: a socket closed with unread bytes is reset, and the client may then
      // lose the answer before it reads it.
      if (const auto head_end = in.find("\r\n\r\n"); head_end != std::string::npos) {
        std::size_t length = 0;
        if (const auto at = in.find("Content-Length: "); at != std::string::npos && at < head_end)
          length = std::strtoul(in.c_str() + at + 16, nullptr, 10);
        while (in.size() < head_end + 4 + length) {
          const ssize_t n = ::read(fd, buf, sizeof buf);
          if (n <= 0) break;
          in.append(buf, static_cast<std::size_t>(n));
        }
      }
      std::string out;
      if (in.find("/start ") != std::string::npos) {
        out =
            "HTTP/1.1 101 UPGRADED\r\nContent-Type: "
            "application/vnd.docker.raw-stream\r\nConnection: Upgrade\r\n"
            "Upgrade: tcp\r\n\r\n" +
            script;
      } else {
        const std::string body = R"({"Id":"fake-exec"})";
        out = "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: " +
              std::to_string(body.size()) + "\r\n\r\n" + body;
      }
      (void)!::write(fd, out.data(), out.size());
      if (in.find("/start ") == std::string::npos) {
        ::close(fd);
        continue;
      }
      if (!later.empty()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        (void)!::write(fd, later.data(), later.size());
      }
      if (!hold) ::shutdown(fd, SHUT_WR);
      held.push_back(fd);
    }
    for (int fd : held) ::close(fd);
  }
  // The real engine seam over it (docker_engine: the client the sidecar uses).
  docker_engine engine() const {
    return docker_engine(dockgate::client::engine(dockgate::client::engine_config{
        {{dockgate::common::endpoint::kind::unix_socket, path, "", 0}, nullptr}}));
  }
};

// Docker's multiplexing header around `data` on `stream`.
std::string docker_frame(int stream, std::string_view data) {
  std::string f(4, '\0');
  f[0] = static_cast<char>(stream);
  const auto n = static_cast<std::uint32_t>(data.size());
  f += static_cast<char>(n >> 24);
  f += static_cast<char>((n >> 16) & 0xff);
  f += static_cast<char>((n >> 8) & 0xff);
  f += static_cast<char>(n & 0xff);
  return f + std::string(data);
}

// Runner frames carried on stdout, cut into Docker frames of at most 32 KiB.
std::string on_stdout(const std::string& runner_bytes) {
  std::string out;
  for (std::size_t i = 0; i < runner_bytes.size(); i += 32768)
    out += docker_frame(1, std::string_view(runner_bytes).substr(i, 32768));
  return out;
}

const std::string hello = frame('H', "dockgate-runner 2 42");

}  // namespace

TEST_CASE(
    "the runner program answers before its warm-up has ended: commands and cells run as execs "
    "until then but never while matplotlib's private directory is read, W waits for it, and "
    "cells are forks after",
    "[sidecar][runner]") {
  char tmpl[] = "/tmp/dockgate-runner-warm-XXXXXX";
  REQUIRE(::mkdtemp(tmpl));
  const std::string dir = tmpl;
  // A warm module that is imported only once the test lets it (the host has no data stack):
  // the program's WARM_MODULES replaced by it, found on a path put first for it.
  // (Not in the cell's directory: a module there by a name the runner imported makes the
  // cell an exec, forkserver.py fork_fits.)
  const std::string release = dir + "/release", modules_dir = dir + "/modules";
  std::filesystem::create_directories(modules_dir);
  std::ofstream(modules_dir + "/dockgate_slow_warm.py")
      << "import os, time\nwhile not os.path.exists('" << release << "'):\n    time.sleep(0.005)\n";
  // A stand-in for matplotlib: it says where it was imported from, then waits too.
  const std::string entered = dir + "/entered", release_mpl = dir + "/release-mpl";
  std::ofstream(modules_dir + "/matplotlib.py")
      << "import os, time\nopen('" << entered
      << "', 'w').write(os.getcwd() + ' ' + os.environ.get('MPLCONFIGDIR', ''))\nwhile not "
         "os.path.exists('"
      << release_mpl << "'):\n    time.sleep(0.005)\n";
  std::string program(runner_program);
  const std::string modules =
      R"(WARM_MODULES = ("numpy", "pandas", "matplotlib", "matplotlib.pyplot"))";
  const auto at = program.find(modules);
  REQUIRE(at != std::string::npos);
  program.replace(at, modules.size(),
                  R"(WARM_MODULES = ("dockgate_slow_warm", "matplotlib")\nsys.path.insert(0, \')" +
                      modules_dir + R"(\'))");
  // A runner that waits for its warm-up before it answers is let go after 30 s (and fails).
  std::mutex m;
  std::condition_variable cv;
  bool finished = false;
  std::thread watchdog([&] {
    std::unique_lock l(m);
    if (!cv.wait_for(l, std::chrono::seconds(30), [&] { return finished; })) {
      std::ofstream(release) << "";
      std::ofstream(release_mpl) << "";
    }
  });
  struct stop_watchdog {
    std::mutex& m;
    std::condition_variable& cv;
    bool& finished;
    std::thread& t;
    ~stop_watchdog() {
      {
        std::lock_guard l(m);
        finished = true;
      }
      cv.notify_all();
      t.join();
    }
  } stop{m, cv, finished, watchdog};
  local_runner r(program);
  REQUIRE(r.next());
  using k = runner_frames::kind;
  // A command while the module's import waits: answered, in the runner's own cwd and
  // environment (the warm-up's imports run from / with HOME=/nonexistent meanwhile).
  auto place = r.run({"sh", "-c", "pwd; echo \"$HOME\""}, {}, 1024);
  CHECK_FALSE(std::filesystem::exists(release));  // answered while the import waits
  const char* home = std::getenv("HOME");
  CHECK(joined(place, k::out) ==
        std::filesystem::current_path().string() + "\n" + (home ? home : "") + "\n");
  CHECK(place.back().payload == "0 0 0");
  // A cell sent with its timeout, before the warm-up has ended: an exec of python3 (a
  // fresh interpreter has not imported ctypes; a fork of the runner has).
  const std::string cell = dir + "/cell.py", outputs = dir + "/outputs";
  std::filesystem::create_directories(outputs);
  auto run_cell = [&] {
    return r.exchange(runner_request('C', 1024,
                                     {{"python3", cell},
                                      {"import sys\nprint('ctypes' in sys.modules)\n"},
                                      {cell, dir + "/before", dir + "/oom", outputs},
                                      {"true"},
                                      {"5000"}}),
                      k::done);
  };
  CHECK(joined(run_cell(), k::out) == "False\n");
  CHECK_FALSE(std::filesystem::exists(release));
  // matplotlib's import: from /, its configuration in a new private directory; a cell
  // sent meanwhile waits for its end (no process of a cell may touch that directory).
  std::ofstream(release) << "";
  for (int i = 0; i < 3000 && !std::filesystem::exists(entered); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::string where;
  std::getline(std::ifstream(entered), where);
  CHECK(where.starts_with("/ /tmp/dockgate-warm-"));
  const auto late = runner_request('C', 1024,
                                   {{"python3", cell},
                                    {"print(1)\n"},
                                    {cell, dir + "/before", dir + "/oom", outputs},
                                    {"true"},
                                    {"5000"}});
  REQUIRE(::write(r.to, late.data(), late.size()) == static_cast<ssize_t>(late.size()));
  pollfd quiet{r.from, POLLIN, 0};
  CHECK(::poll(&quiet, 1, 200) == 0);
  // W is answered only once the warm-up has ended.
  const auto wait = runner_request('W', 0, {});
  REQUIRE(::write(r.to, wait.data(), wait.size()) == static_cast<ssize_t>(wait.size()));
  std::ofstream(release_mpl) << "";
  std::vector<runner_frames::frame> late_answer;
  while (auto f = r.next()) {
    late_answer.push_back(*f);
    if (f->type == k::done) break;
  }
  CHECK(joined(late_answer, k::out) == "1\n");
  auto warmed = std::vector<runner_frames::frame>{};
  while (auto f = r.next()) {
    warmed.push_back(*f);
    if (f->type == k::exit) break;
  }
  REQUIRE(warmed.size() == 2);
  CHECK(warmed.front().type == k::started);
  CHECK(warmed.back().payload == "0 0 0");  // the fork server is on
  CHECK(joined(run_cell(), k::out) == "True\n");
  std::filesystem::remove_all(dir);
}

TEST_CASE("a runner that breaks the protocol is dropped, what it sends is capped and never trusted",
          "[sidecar][runner]") {
  using o = cell_runner::outcome;
  std::string error;
  auto start = [&](const fake_engine& fake) {
    return cell_runner::start(fake.engine(), "c", std::chrono::seconds(5), &error);
  };
  auto run = [](cell_runner& r, std::size_t cap = 1024) {
    return r.run({"true"}, {}, cap, {std::chrono::seconds(5), std::chrono::seconds(5), {}},
                 nullptr);
  };

  SECTION("a whole answer") {
    fake_engine fake(on_stdout(hello + frame('S', "") + frame('O', "hi") + frame('E', "ho") +
                               frame('X', "7 0 3")));
    auto r = start(fake);
    REQUIRE(r);
    auto got = run(*r);
    CHECK(got.state == o::done);
    CHECK(got.result.stdout_data == "hi");
    CHECK(got.result.stderr_data == "ho");
    CHECK(got.result.exit_code == 7);
    CHECK(got.result.stderr_dropped == 3);
    CHECK(r->usable());
  }
  SECTION("output past the cap is dropped here, whatever the runner claims") {
    fake_engine fake(on_stdout(hello + frame('S', "") + frame('O', std::string(60000, 'a')) +
                               frame('O', std::string(60000, 'b')) + frame('X', "0 0 0")));
    auto r = start(fake);
    REQUIRE(r);
    std::string streamed;
    auto got = r->run({"true"}, {}, 1000, {std::chrono::seconds(5), std::chrono::seconds(5), {}},
                      [&](int, std::string_view d) { streamed += d; });
    CHECK(got.state == o::done);
    CHECK(got.result.stdout_data == std::string(1000, 'a'));
    CHECK(streamed == got.result.stdout_data);
    CHECK(got.result.stdout_dropped == 119000);
  }
  SECTION("a frame over the bound") {
    std::string header =
        frame('O', "").substr(0, 1) + std::string("\x00\x20\x00\x00", 4);  // 2 MiB announced
    fake_engine fake(on_stdout(hello + frame('S', "") + header + std::string(100000, 'x')), true);
    auto r = start(fake);
    REQUIRE(r);
    auto got = run(*r);
    CHECK(got.state == o::lost);
    CHECK(got.result.stdout_data.empty());
    CHECK_FALSE(r->usable());
    CHECK(run(*r).state == o::not_started);  // closed for good, nothing sent
  }
  SECTION("a Docker frame over the bound, or not Docker's") {
    for (std::string bad : {std::string("\x01\x00\x00\x00\x01\x00\x00\x01", 8),
                            std::string("\x01\x01\x00\x00\x00\x00\x00\x01x", 9),
                            std::string("\x07\x00\x00\x00\x00\x00\x00\x01x", 9)}) {
      fake_engine fake(on_stdout(hello + frame('S', "")) + bad, true);
      auto r = start(fake);
      REQUIRE(r);
      CHECK(run(*r).state == o::lost);
      CHECK_FALSE(r->usable());
    }
  }
  SECTION("anything on the runner's stderr") {
    fake_engine fake(on_stdout(hello + frame('S', "")) + docker_frame(2, "Traceback"), true);
    auto r = start(fake);
    REQUIRE(r);
    CHECK(run(*r).state == o::lost);
  }
  SECTION("a malformed exit frame, an unknown kind, a second hello") {
    for (std::string bad : {frame('X', "0 0 0 "), frame('X', "-9 0 0"), frame('Q', ""), hello}) {
      fake_engine fake(on_stdout(hello + frame('S', "") + frame('O', "partial") + bad), true);
      auto r = start(fake);
      REQUIRE(r);
      auto got = run(*r);
      CHECK(got.state == o::lost);
      CHECK(got.result.stdout_data == "partial");
      CHECK_FALSE(r->usable());
    }
  }
  SECTION("the end of the stream before the command was acknowledged: it did not run") {
    fake_engine fake(on_stdout(hello));
    auto r = start(fake);
    REQUIRE(r);
    auto got = run(*r);
    CHECK(got.state == o::not_started);
    CHECK_FALSE(got.result.started);
  }
  SECTION("the end of the stream after it: lost") {
    fake_engine fake(on_stdout(hello + frame('S', "") + frame('O', "a")));
    auto r = start(fake);
    REQUIRE(r);
    CHECK(run(*r).state == o::lost);
  }
  SECTION("the host's deadline") {
    fake_engine fake(on_stdout(hello + frame('S', "")), true);
    auto r = start(fake);
    REQUIRE(r);
    auto got =
        r->run({"true"}, {}, 1024,
               {std::chrono::milliseconds(300), std::chrono::milliseconds(300), {}}, nullptr);
    CHECK(got.state == o::lost);
    CHECK(got.result.timed_out);
  }
  SECTION(
      "past the time a sound runner answers by, the probe decides: stopped or gone ends it there") {
    for (auto state : {runner_state::stopped, runner_state::gone}) {
      // Silent after the acknowledgement, the stream held open: only the probe ends it
      // before the hard deadline (a minute, which the test would otherwise wait out).
      fake_engine fake(on_stdout(hello + frame('S', "") + frame('O', "partial")), true);
      auto r = start(fake);
      REQUIRE(r);
      int asked = 0;
      cell_runner::patience wait{std::chrono::milliseconds(200), std::chrono::minutes(1),
                                 [&](int pid) {
                                   asked = pid;
                                   return state;
                                 }};
      auto got = r->run({"true"}, {}, 1024, wait, nullptr);
      CHECK(asked == 42);  // the PID its hello named
      CHECK(got.state == o::lost);
      CHECK(got.found == state);
      CHECK_FALSE(got.result.timed_out);  // the runner's fault, not the command's time
      CHECK(got.result.stdout_data == "partial");
      CHECK_FALSE(r->usable());
    }
  }
  SECTION(
      "a runner stopped before it acknowledged: the caller's probe is asked, the command did not "
      "run") {
    // A cell can stop its runner (SIGSTOP) between its fork and the acknowledgement. The
    // probe asked is the caller's own: the acknowledgement's wait once pointed at a copy
    // that was gone by then (ASan: stack-use-after-scope; the sidecar died mid-request).
    fake_engine fake(on_stdout(hello), true);
    auto r = start(fake);
    REQUIRE(r);
    int asked = 0;
    const cell_runner::patience wait{std::chrono::milliseconds(200), std::chrono::minutes(1),
                                     [&](int pid) {
                                       asked = pid;
                                       return runner_state::stopped;
                                     }};
    auto got = r->run({"true"}, {}, 1024, wait, nullptr);
    CHECK(asked == 42);
    CHECK(got.state == o::not_started);
    CHECK(got.found == runner_state::stopped);
    CHECK_FALSE(got.result.started);
    CHECK_FALSE(got.result.timed_out);
    CHECK_FALSE(r->usable());
  }
  SECTION("a runner found running is waited for up to the hard deadline, and its answer taken") {
    // The answer comes 300 ms after the acknowledgement; the probe is asked at 50 ms.
    fake_engine fake(on_stdout(hello + frame('S', "")), true);
    fake.later = on_stdout(frame('O', "late") + frame('X', "0 0 0"));
    auto r = start(fake);
    REQUIRE(r);
    int probes = 0;
    cell_runner::patience wait{std::chrono::milliseconds(50), std::chrono::minutes(1), [&](int) {
                                 ++probes;
                                 return runner_state::running;
                               }};
    auto got = r->run({"true"}, {}, 1024, wait, nullptr);
    CHECK(probes == 1);
    CHECK(got.state == o::done);
    CHECK(got.result.stdout_data == "late");
    CHECK(r->usable());
  }
  SECTION("no hello, or another program's") {
    for (std::string first :
         {frame('S', ""), frame('H', "dockgate-runner 1"), frame('H', "dockgate-runner 2 "),
          frame('H', "dockgate-runner 2 012"), docker_frame(2, "x")}) {
      fake_engine fake(first.starts_with('S') || first.starts_with('H') ? on_stdout(first) : first,
                       true);
      CHECK_FALSE(start(fake));
    }
  }
}

// The kernel driver (kernel.hpp) on the same reader: its hello, and its answers' one status
// frame between the exit and the listing, nothing else.
TEST_CASE("the kernel driver: hello by state, at most one status frame and only in its place",
          "[sidecar][runner][kernel]") {
  std::string error;
  SECTION("ready: a driver with its PID") {
    fake_engine fake(on_stdout(frame('H', "dockgate-kernel 1 9 ready")), true);
    auto d = start_kernel_driver(fake.engine(), "c", std::chrono::seconds(5), &error);
    REQUIRE(d);
    CHECK(d->pid() == 9);
  }
  SECTION("missing or failed: none, the error names the packages or the kernel") {
    fake_engine missing(on_stdout(frame('H', "dockgate-kernel 1 9 missing")));
    CHECK_FALSE(start_kernel_driver(missing.engine(), "c", std::chrono::seconds(5), &error));
    CHECK(error.find("python3-ipykernel") != std::string::npos);
    fake_engine failed(on_stdout(frame('H', "dockgate-kernel 1 9 failed")));
    CHECK_FALSE(start_kernel_driver(failed.engine(), "c", std::chrono::seconds(5), &error));
    CHECK(error == "kernel unavailable: the IPython kernel did not start");
    fake_engine runner(on_stdout(hello));  // the cell runner is no kernel driver
    CHECK_FALSE(start_kernel_driver(runner.engine(), "c", std::chrono::seconds(5), &error));
    CHECK(error.starts_with("kernel unavailable: the kernel driver did not start"));
  }
  const std::string ready = frame('H', "dockgate-kernel 1 9 ready");
  auto request = [](cell_runner& d, std::string& status) {
    return d.run_request(kernel_cell_request("x", 1000, 2000, "/workspace/outputs", 1024), 1024,
                         {std::chrono::seconds(5), std::chrono::seconds(5), {}}, nullptr, 1 << 20,
                         {std::chrono::seconds(5), std::chrono::seconds(5), {}}, &status);
  };
  SECTION("a whole answer: output, exit, status, listing, done") {
    fake_engine fake(on_stdout(ready + frame('S', "") + frame('O', "2\n") + frame('X', "0 0 0") +
                               frame('K', "0 0 1") + frame('L', "0\n0\n") + frame('D', "")),
                     true);
    auto d = start_kernel_driver(fake.engine(), "c", std::chrono::seconds(5), &error);
    REQUIRE(d);
    std::string status;
    auto got = request(*d, status);
    CHECK(got.run.state == cell_runner::outcome::done);
    CHECK(got.run.result.stdout_data == "2\n");
    CHECK(status == "0 0 1");
    CHECK(got.listing == std::optional<std::string>("0\n0\n"));
    CHECK(d->usable());
  }
  SECTION("a second status frame, one after the listing, one before the exit: a fault") {
    for (std::string bad :
         {frame('X', "0 0 0") + frame('K', "0 0 1") + frame('K', "1 0 0") + frame('D', ""),
          frame('X', "0 0 0") + frame('L', "0\n0\n") + frame('K', "0 0 1") + frame('D', ""),
          frame('K', "0 0 1") + frame('X', "0 0 0") + frame('D', "")}) {
      fake_engine fake(on_stdout(ready + frame('S', "") + bad), true);
      auto d = start_kernel_driver(fake.engine(), "c", std::chrono::seconds(5), &error);
      REQUIRE(d);
      std::string status;
      auto got = request(*d, status);
      CHECK_FALSE(got.listing);
      CHECK_FALSE(d->usable());
    }
  }
  SECTION("the runner's cells never take a status frame") {
    fake_engine fake(on_stdout(hello + frame('S', "") + frame('X', "0 0 0") + frame('K', "0 0 1") +
                               frame('D', "")),
                     true);
    auto r = cell_runner::start(fake.engine(), "c", std::chrono::seconds(5), &error);
    REQUIRE(r);
    runner_cell c{{"true"}, "x", "/tmp/c", "/tmp/b", "/tmp/o", "/workspace/outputs", {}};
    auto got = r->run_cell(c, 1024, {std::chrono::seconds(5), std::chrono::seconds(5), {}}, nullptr,
                           1 << 20, {std::chrono::seconds(5), std::chrono::seconds(5), {}});
    CHECK_FALSE(got.listing);
    CHECK_FALSE(r->usable());
  }
}

// execd's /code served by the sidecar (front/opensandbox/execd/code_routes.cpp over
// core/code_interpreter.cpp) on the fake engine, a context's kernel driver faked over a
// socketpair (fake_runner.hpp): each route's answer byte for byte (timestamps masked), what
// the sidecar asked the engine (the driver's argv, the signals it sent), its refusals; and
// the driver's value and fault frames parsed strictly (cells/kernel.hpp).
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <future>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "cells/kernel.hpp"
#include "core/session_core.hpp"
#include "fake_engine.hpp"
#include "fake_runner.hpp"
#include "front/opensandbox/execd/execd_routes.hpp"
#include "sessions/session.hpp"

using namespace dockgate;
using namespace dockgate::sidecar;
using namespace dockgate::sidecar::testing;
namespace execd = dockgate::sidecar::opensandbox::execd;

namespace {

const std::string sbx = "0123456789abcdef0123456789abcdef";

struct rig {
  config cfg;
  testing::fake_engine fake;
  std::unique_ptr<session_core> core;
  fake_runner driver;
  std::mutex m;
  std::vector<std::vector<std::string>> attached;  // every driver's argv
  std::vector<std::string> execs;                  // every plain exec's command, joined

  rig() {
    cfg.warm_pool = 0;
    cfg.queue_timeout_seconds = 0;
    cfg.cell_runner = false;
    core = std::make_unique<session_core>(cfg, fake, nullptr);
    driver.hello = frame('H', "dockgate-kernel 1 42 ready");
    fake.on_attach = [this](const auto&, const std::vector<std::string>& cmd, std::string*) {
      {
        std::lock_guard g(m);
        attached.push_back(cmd);
      }
      return driver.attach();
    };
    fake.on_exec = [this](const auto&, const client::exec_options& o) {
      std::string joined;
      for (const auto& a : o.cmd) joined += (joined.empty() ? "" : " ") + a;
      {
        std::lock_guard g(m);
        execs.push_back(joined);
      }
      client::exec_result r;
      r.started = true;
      r.exit_code = 0;
      return r;
    };
  }
  std::shared_ptr<session> add() {
    auto s = std::make_shared<session>();
    s->id = sbx;
    s->container = "sbx-" + sbx;
    fake.add_running(s->container, {});
    core->registry.add(s);
    return s;
  }
  http_reply call(const std::string& method, const std::string& path, const std::string& body = {},
                  const std::string& query = {}) {
    http_request r;
    r.method = method;
    r.path = "/v1/sandboxes/" + sbx + "/proxy/44772" + path;
    r.query = query;
    r.body = body;
    r.fields.push_back({"x-request-id", "req-1"});
    return execd::serve(*core, r, sbx, path);
  }
  std::vector<std::string> signals() {
    std::lock_guard g(m);
    std::vector<std::string> out;
    for (const auto& e : execs)
      if (e.find("kill -$1") != std::string::npos) out.push_back(e.substr(e.rfind(" sh ") + 4));
    return out;
  }
};

// A kept cell's whole answer, as the driver sends it.
std::string answer(const std::string& middle, const std::string& exit = "0 0 0",
                   const std::string& status = "0 0 1") {
  return frame('S', "") + middle + frame('X', exit) + frame('K', status) + frame('D', "");
}

std::string masked(const std::string& text) {
  static const std::regex ts("\"(timestamp|execution_time)\":[0-9]+");
  return std::regex_replace(text, ts, "\"$1\":0");
}

std::string context_id(const http_reply& made) {
  std::smatch m;
  static const std::regex id(R"re(^\{"id":"([0-9a-f]{32})","language":"python3?"\}$)re");
  return std::regex_search(made.body, m, id) ? m[1].str() : "";
}

}  // namespace

TEST_CASE(
    "execd /code: a context is a kept kernel driver, its run answers execd's events in the "
    "kernel's order",
    "[execd][code]") {
  rig r;
  r.add();
  r.driver.answer = [](const fake_runner::request& req) {
    REQUIRE(req.op == 'J');
    REQUIRE(req.lists == std::vector<std::vector<std::string>>{{"print('hi'); 41 + 1; 1/0"}});
    return answer(
        frame('O', "hi\n") + frame('V', R"(2 {"text/plain":"42","text/html":"<b>42</b>"})") +
            frame('V', R"(0 {"image/png":"iVBO"})") + frame('E', "careful\n") +
            frame('F', R"({"ename":"ZeroDivisionError","evalue":"division by zero",)"
                       R"("traceback":["Traceback","ZeroDivisionError: division by zero"]})"),
        "1 0 0", "0 0 2");
  };
  auto made = r.call("POST", "/code/context", R"({"language":"python3","cwd":"/workspace"})");
  REQUIRE(made.status == 200);
  const std::string id = context_id(made);
  REQUIRE(!id.empty());
  CHECK(made.body.ends_with(R"("language":"python3"})"));  // as asked, as execd answers
  // The driver in keep mode (no sweep), in the context's cwd; nothing swept, no top taken.
  REQUIRE(r.attached.size() == 1);
  CHECK(std::vector<std::string>(r.attached[0].end() - 3, r.attached[0].end()) ==
        std::vector<std::string>{"dockgate-kernel", "keep", "/workspace"});
  auto ran = r.call("POST", "/code",
                    R"({"context":{"id":")" + id +
                        R"(","language":"python"},"code":"print('hi'); 41 + 1; 1/0"})");
  CHECK(ran.status == 200);
  CHECK(ran.content_type == "text/event-stream");
  CHECK(masked(ran.body) ==
        R"({"type":"init","text":")" + id +
            R"(","timestamp":0})"
            "\n\n"
            R"({"type":"stdout","text":"hi\n","timestamp":0})"
            "\n\n"
            R"({"type":"execution_count","execution_count":2,"timestamp":0})"
            "\n\n"
            R"({"type":"result","results":{"text":"42","text/html":"<b>42</b>"},"timestamp":0})"
            "\n\n"
            R"({"type":"result","results":{"image/png":"iVBO"},"timestamp":0})"
            "\n\n"
            R"({"type":"stderr","text":"careful\n","timestamp":0})"
            "\n\n"
            R"({"type":"error","error":{"ename":"ZeroDivisionError","evalue":"division by zero",)"
            R"("traceback":["Traceback","ZeroDivisionError: division by zero"]},"timestamp":0})"
            "\n\n"
            R"({"type":"execution_complete","execution_time":0,"timestamp":0})"
            "\n\n");
  CHECK(r.execs.empty());
  CHECK(r.fake.count("top") == 0);
  // Listed, found, deleted (its driver sent SIGTERM by the PID its hello said), then gone.
  CHECK(r.call("GET", "/code/contexts").body == "[" + made.body + "]");
  CHECK(r.call("GET", "/code/contexts", {}, "language=python").body == "[" + made.body + "]");
  CHECK(r.call("GET", "/code/contexts/" + id).body == made.body);
  CHECK(r.call("DELETE", "/code/contexts/" + id).status == 200);
  CHECK(r.signals() == std::vector<std::string>{"TERM 42"});
  auto gone = r.call("GET", "/code/contexts/" + id);
  CHECK(gone.status == 404);
  CHECK(gone.body == R"({"code":"CONTEXT_NOT_FOUND","message":"context )" + id + R"( not found"})");
  CHECK(r.call("GET", "/code/contexts").body == "[]");
}

TEST_CASE("execd /code: refusals before any kernel starts, as execd's error bodies",
          "[execd][code]") {
  rig r;
  auto s = r.add();
  auto ruby = r.call("POST", "/code/context", R"({"language":"ruby"})");
  CHECK(ruby.status == 400);
  CHECK(
      ruby.body ==
      R"x({"code":"INVALID_REQUEST_BODY","message":"language ruby is not supported (known: python)"})x");
  CHECK(r.call("POST", "/code", R"({"context":{"language":"go"},"code":"1"})").status == 400);
  CHECK(r.call("POST", "/code/context", R"({"cwd":"relative"})").status == 400);
  CHECK(r.call("POST", "/code", R"({"context":{"language":"python"}})").body ==
        R"x({"code":"INVALID_REQUEST_BODY","message":"code is required (a non-empty string)"})x");
  CHECK(r.call("POST", "/code", R"({"context":"x","code":"1"})").status == 400);
  auto unknown = r.call("POST", "/code", R"({"context":{"id":"feed"},"code":"1"})");
  CHECK(unknown.status == 404);
  CHECK(unknown.body == R"({"code":"CONTEXT_NOT_FOUND","message":"context feed not found"})");
  CHECK(r.call("DELETE", "/code/contexts/feed").status == 404);
  CHECK(r.call("DELETE", "/code").body ==
        R"({"code":"MISSING_QUERY","message":"missing query parameter id"})");
  CHECK(r.call("DELETE", "/code/contexts").status == 400);
  CHECK(r.call("GET", "/code/contexts", {}, "language=ruby").status == 400);
  // A paused sandbox answers at once, nothing asked of its frozen container.
  s->paused = true;
  CHECK(r.call("POST", "/code/context", "{}").status == 409);
  auto paused = r.call("POST", "/code", R"({"context":{"language":"python"},"code":"1"})");
  CHECK(paused.status == 409);
  CHECK(paused.body == R"({"code":"RUNTIME_ERROR","message":"sandbox is paused"})");
  CHECK(r.call("DELETE", "/code", {}, "id=feed").status == 409);
  CHECK(r.attached.empty());
  CHECK(r.execs.empty());
  // An image without IPython: the create says what is missing.
  s->paused = false;
  r.driver.hello = frame('H', "dockgate-kernel 1 42 missing");
  auto missing = r.call("POST", "/code/context", R"({"language":"python"})");
  CHECK(missing.status == 500);
  CHECK(
      missing.body ==
      R"({"code":"RUNTIME_ERROR","message":"the sandbox image has no IPython kernel: /code )"
      R"x(needs python3 with the ipykernel and jupyter_client packages (pip install ipykernel)"})x");
  CHECK(r.call("GET", "/code/contexts").body == "[]");
}

TEST_CASE(
    "execd /code: a language's default context is made once, no language and no context is a "
    "plain command",
    "[execd][code]") {
  rig r;
  r.add();
  r.driver.answer = [](const fake_runner::request&) {
    return answer(frame('V', R"(1 {"text/plain":"1"})"));
  };
  auto first = r.call("POST", "/code", R"({"context":{"language":"python"},"code":"1"})");
  auto second = r.call("POST", "/code", R"({"context":{"language":"python3"},"code":"1"})");
  CHECK(first.body.find(R"("results":{"text":"1"})") != std::string::npos);
  CHECK(r.attached.size() == 1);
  auto listed = r.call("GET", "/code/contexts", {}, "language=python");
  CHECK(listed.body.find("\"language\":\"python\"") != std::string::npos);
  CHECK(std::count(listed.body.begin(), listed.body.end(), '{') == 1);
  // No context, no language: the commands room runs it (an exec, no driver).
  auto plain = r.call("POST", "/code", R"({"code":"echo hi"})");
  CHECK(plain.status == 200);
  CHECK(masked(plain.body).find(R"({"type":"execution_complete")") != std::string::npos);
  CHECK(r.attached.size() == 1);
  REQUIRE(!r.execs.empty());
  CHECK(r.execs.back().find("echo hi") != std::string::npos);
}

TEST_CASE(
    "execd /code: an interrupt signals the running cell's driver, a busy context refuses a "
    "second cell",
    "[execd][code]") {
  rig r;
  r.add();
  std::promise<void> running, interrupted;
  auto interrupt_seen = interrupted.get_future().share();
  r.fake.on_exec = [&, inner = r.fake.on_exec](const auto& c, const client::exec_options& o) {
    auto res = inner(c, o);
    if (o.cmd.size() > 4 && o.cmd[4] == "USR1") interrupted.set_value();
    return res;
  };
  r.driver.answer = [&](const fake_runner::request& req) {
    if (req.lists[0][0] == "sleep") {
      running.set_value();
      interrupt_seen.wait();
      return answer(frame('F', R"({"ename":"KeyboardInterrupt","evalue":"","traceback":[]})"),
                    "1 0 0");
    }
    return answer(frame('O', "ok\n"));
  };
  const std::string id = context_id(r.call("POST", "/code/context", "{}"));
  REQUIRE(!id.empty());
  CHECK(r.call("DELETE", "/code", {}, "id=" + id).status == 200);  // idle: nothing to do
  CHECK(r.signals().empty());
  auto cell = std::async(std::launch::async, [&] {
    return r.call("POST", "/code", R"({"context":{"id":")" + id + R"("},"code":"sleep"})");
  });
  running.get_future().wait();
  auto busy = r.call("POST", "/code", R"({"context":{"id":")" + id + R"("},"code":"x"})");
  CHECK(busy.status == 409);
  CHECK(busy.body ==
        R"({"code":"RUNTIME_ERROR","message":"context )" + id + R"( is running a cell"})");
  CHECK(r.call("DELETE", "/code", {}, "id=" + id).status == 200);
  auto ended = cell.get();
  CHECK(masked(ended.body).find(R"("ename":"KeyboardInterrupt")") != std::string::npos);
  CHECK(r.signals() == std::vector<std::string>{"USR1 42"});
  // The kernel survived: the next cell runs on the same driver.
  CHECK(
      r.call("POST", "/code", R"({"context":{"id":")" + id + R"("},"code":"x"})").body.find("ok") !=
      std::string::npos);
  CHECK(r.attached.size() == 1);
}

TEST_CASE(
    "execd /code: a malformed frame of the driver drops it, and the next run starts a new "
    "kernel and says its state is gone",
    "[execd][code]") {
  rig r;
  r.add();
  int cells = 0;
  r.driver.answer = [&](const fake_runner::request&) {
    return ++cells == 1 ? answer(frame('V', R"(1 {"text/plain":7})")) : answer(frame('O', "ok\n"));
  };
  const std::string id = context_id(r.call("POST", "/code/context", "{}"));
  REQUIRE(!id.empty());
  auto bad = r.call("POST", "/code", R"({"context":{"id":")" + id + R"("},"code":"1"})");
  CHECK(masked(bad.body).find(R"("ename":"KernelDied")") != std::string::npos);
  CHECK(bad.body.find("\"type\":\"result\"") == std::string::npos);  // never passed on
  CHECK(r.signals() == std::vector<std::string>{"TERM 42"});
  auto next = r.call("POST", "/code", R"({"context":{"id":")" + id + R"("},"code":"1"})");
  CHECK(r.attached.size() == 2);
  CHECK(next.body.find("its state is gone") != std::string::npos);
  CHECK(next.body.find(R"("text":"ok\n")") != std::string::npos);
}

TEST_CASE("kernel keep mode: value and fault frames are parsed strictly", "[sidecar][kernel]") {
  CHECK(parse_code_value(R"(3 {"text/plain":"42"})") == code_value{3, {{"text/plain", "42"}}});
  CHECK(parse_code_value(R"(0 {})") == code_value{0, {}});
  for (const char* bad : {R"(3{"a":"b"})", R"(03 {"a":"b"})", R"(-1 {"a":"b"})", R"(x {"a":"b"})",
                          R"(1 {"a":1})", R"(1 {"":"b"})", R"(1 ["a"])", R"(1 {"a":"b"} x)", "1 "})
    CHECK_FALSE(parse_code_value(bad));
  CHECK(parse_code_fault(R"({"ename":"E","evalue":"v","traceback":["a","b"]})") ==
        code_fault{"E", "v", {"a", "b"}});
  for (const char* bad :
       {R"({"ename":"E","evalue":"v"})", R"({"ename":"E","evalue":"v","traceback":[1]})",
        R"({"ename":"E","evalue":"v","traceback":[],"x":1})",
        R"({"ename":1,"evalue":"v","traceback":[]})", "[]"})
    CHECK_FALSE(parse_code_fault(bad));
}

TEST_CASE(
    "execd /code: a context's driver is signalled only while its PID is still a kernel "
    "driver's (the signal's script on a real sh)",
    "[execd][code]") {
  // Two host processes stand in for the container's: one whose command line names the
  // driver, one the client's own that took a PID a driver had.
  auto spawn = [](const char* name) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::setpgid(0, 0);  // its `sleep` goes with it at the end
      const int null = ::open("/dev/null", O_RDWR);
      for (int fd : {0, 1, 2}) ::dup2(null, fd);
      ::execl("/bin/sh", "sh", "-c", "sleep 30; :", name, static_cast<char*>(nullptr));
      ::_exit(127);
    }
    return pid;
  };
  auto alive = [](pid_t pid) {
    int status = 0;
    for (int i = 0; i < 100; ++i) {
      if (::waitpid(pid, &status, WNOHANG) == pid) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
  };
  const pid_t driver = spawn("dockgate-kernel"), client = spawn("the-clients-app");
  for (pid_t pid : {driver, client}) {
    rig r;
    r.add();
    r.driver.hello = frame('H', "dockgate-kernel 1 " + std::to_string(pid) + " ready");
    // The signal's script as the container's sh would run it, on the host's.
    r.fake.on_exec = [](const auto&, const client::exec_options& o) {
      client::exec_result res;
      res.started = true;
      std::string cmd = "'" + o.cmd[2] + "'";
      for (std::size_t i = 3; i < o.cmd.size(); ++i) cmd += " '" + o.cmd[i] + "'";
      res.exit_code = std::system(("sh -c " + cmd).c_str());
      return res;
    };
    const std::string id = context_id(r.call("POST", "/code/context", "{}"));
    REQUIRE(!id.empty());
    CHECK(r.call("DELETE", "/code/contexts/" + id).status == 200);
  }
  CHECK_FALSE(alive(driver));  // SIGTERM: its command line named the driver
  CHECK(alive(client));        // never signalled
  ::kill(-driver, SIGKILL);
  ::kill(-client, SIGKILL);
  ::waitpid(client, nullptr, 0);
}

TEST_CASE("execd /code: a client that stops reading gets its cell interrupted, once",
          "[execd][code]") {
  rig r;
  r.add();
  std::promise<void> interrupted;
  auto interrupt_seen = interrupted.get_future().share();
  r.fake.on_exec = [&, inner = r.fake.on_exec](const auto& c, const client::exec_options& o) {
    auto res = inner(c, o);
    if (o.cmd.size() > 4 && o.cmd[4] == "USR1") interrupted.set_value();
    return res;
  };
  r.driver.answer = [&](const fake_runner::request&) {
    // Output first (the client is found gone when it is written); the cell's end comes
    // after the interrupt (send_more below).
    return frame('S', "") + frame('O', "tick\n") + frame('O', "tick\n");
  };
  struct gone_client final : reply_stream {
    bool open(unsigned, std::string_view, const header_fields&) override { return true; }
    bool write(std::string_view) override { return false; }
    bool opened() const override { return true; }
  } gone;
  const std::string id = context_id(r.call("POST", "/code/context", "{}"));
  REQUIRE(!id.empty());
  std::thread finisher([&] {
    interrupt_seen.wait_for(std::chrono::seconds(5));  // none: the cell ends anyway, unsaid
    r.driver.send_more(frame('F', R"({"ename":"KeyboardInterrupt","evalue":"","traceback":[]})") +
                       frame('X', "1 0 0") + frame('K', "0 0 1") + frame('D', ""));
  });
  http_request req;
  req.method = "POST";
  req.body = R"x({"context":{"id":")x" + id + R"x("},"code":"while True: print('tick')"})x";
  req.stream = &gone;
  auto reply = execd::serve(*r.core, req, sbx, "/code");
  finisher.join();
  CHECK(reply.streamed);
  CHECK(r.signals() == std::vector<std::string>{"USR1 42"});
}

TEST_CASE("execd /code: a sandbox holds at most 32 contexts, the next is refused",
          "[execd][code]") {
  rig r;
  r.add();
  for (int i = 0; i < 32; ++i) REQUIRE(r.call("POST", "/code/context", "{}").status == 200);
  auto refused = r.call("POST", "/code/context", "{}");
  CHECK(refused.status == 429);
  CHECK(
      refused.body ==
      R"({"code":"RUNTIME_ERROR","message":"the sandbox holds 32 contexts, the most it may: delete one first"})");
  CHECK(r.attached.size() == 32);  // no driver started for it
  const std::string first = r.call("GET", "/code/contexts").body.substr(8, 32);
  CHECK(r.call("DELETE", "/code/contexts/" + first).status == 200);
  CHECK(r.call("POST", "/code/context", "{}").status == 200);
}

// Cells against the fake engine (no dockerd): which executor a cell runs on, the answer's
// fields from what an executor brought back, the timeout and the output caps, artifacts,
// a busy session, and the runner executor driven by a fake runner over a socketpair that
// speaks the runner's framing (runner.hpp, runner.py) inside Docker's stream multiplexing.
// The Aivory front's cell routes (cell_routes.cpp) are judged on the bytes they answer.
#include "cells/cells.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "cells/executors.hpp"
#include "core/session_core.hpp"
#include "engine/labels.hpp"
#include "fake_engine.hpp"
#include "fake_runner.hpp"
#include "front/aivory/cell_answers.hpp"
#include "front/aivory/routes.hpp"
#include "sessions/session.hpp"

using namespace dockgate::sidecar;
using namespace std::chrono_literals;
using namespace dockgate::sidecar::testing;
namespace client = dockgate::client;

namespace {

const std::string sid_a(32, 'a'), sid_b(32, 'b');

// A clean-up listing as the runner and the plain clean-up print it.
std::string listing(int oom_after, int oom_before, const std::string& before,
                    const std::string& after) {
  return std::to_string(oom_after) + "\n" + std::to_string(oom_before) + "\n" + before +
         std::string(1, '\0') + after;
}
std::string record(const std::string& path, const std::string& mtime, std::size_t size) {
  return path + '\0' + mtime + '\0' + std::to_string(size) + '\0';
}

// The session core over the fake engine: every room reaches Docker through it.
struct rig {
  config cfg;
  testing::fake_engine fake;
  std::unique_ptr<session_core> core;

  explicit rig(const std::function<void(config&)>& tune = {}) {
    cfg.warm_pool = 0;
    cfg.queue_timeout_seconds = 0;
    cfg.cell_runner = false;
    if (tune) tune(cfg);
    core = std::make_unique<session_core>(cfg, fake, nullptr);
  }
  std::shared_ptr<session> add(const std::string& id, const std::string& kernel = {}) {
    auto s = std::make_shared<session>();
    s->id = id;
    s->container = "sbx-" + id;
    s->kernel = kernel;
    fake.add_running(s->container, {});
    core->registry.add(s);
    return s;
  }
  outcome<cell_result> run(const std::string& id, const std::string& code,
                           std::optional<std::int64_t> timeout_ms = {},
                           cell_output* out = nullptr) {
    return core->cells.run({id, code, timeout_ms}, out);
  }
};

bool is_cell(const client::exec_options& o) {
  return o.cmd.size() == 3 && o.cmd[2].find("exec timeout --kill-after=2s") != std::string::npos;
}

struct collected final : cell_output {
  std::string text[3];
  void output(int stream, std::string_view data) override { text[stream == 2 ? 2 : 1] += data; }
};

}  // namespace

TEST_CASE(
    "cells: the executor is the kernel for a kernel session, the runner where one starts, "
    "else plain execs",
    "[cells]") {
  fake_runner runner;
  SECTION("the runner off (SANDBOX_CELL_RUNNER=0): plain, no held exec tried") {
    rig r;
    auto s = r.add(sid_a);
    auto e = r.core->cells.executor_for(*s);
    REQUIRE(e);
    CHECK(dynamic_cast<plain_executor*>(e.value()));
    CHECK(r.fake.count("exec_attach") == 0);
  }
  SECTION("the runner refused (no held exec): plain from now on, not tried again") {
    rig r([](config& c) { c.cell_runner = true; });
    auto s = r.add(sid_a);
    auto e = r.core->cells.executor_for(*s);
    REQUIRE(e);
    CHECK(dynamic_cast<plain_executor*>(e.value()));
    CHECK(s->runner_refused);
    CHECK(dynamic_cast<plain_executor*>(r.core->cells.executor_for(*s).value()));
    CHECK(r.fake.count("exec_attach") == 1);
  }
  SECTION("a runner that answers its hello: the runner") {
    rig r([](config& c) { c.cell_runner = true; });
    r.fake.on_attach = [&](const auto&, const auto& cmd, std::string*) {
      CHECK(cmd.at(0) == "python3");
      return runner.attach();
    };
    auto s = r.add(sid_a);
    auto e = r.core->cells.executor_for(*s);
    REQUIRE(e);
    CHECK(dynamic_cast<runner_executor*>(e.value()));
    REQUIRE(s->runner);
    CHECK(s->runner->pid() == 42);
  }
  SECTION("a runner whose hello is another program's: plain") {
    rig r([](config& c) { c.cell_runner = true; });
    runner.hello = frame('H', "dockgate-kernel 1 42 ready");
    r.fake.on_attach = [&](const auto&, const auto&, std::string*) { return runner.attach(); };
    auto s = r.add(sid_a);
    CHECK(dynamic_cast<plain_executor*>(r.core->cells.executor_for(*s).value()));
    CHECK(s->runner_refused);
  }
  SECTION("a kernel session: its kernel, whether or not runners are on") {
    rig r([](config& c) { c.cell_runner = true; });
    auto s = r.add(sid_a, "python");
    CHECK(dynamic_cast<kernel_executor*>(r.core->cells.executor_for(*s).value()));
    CHECK(r.fake.count("exec_attach") == 0);
  }
}

TEST_CASE("cells: a plain cell's answer from its exec, the timeout and output caps", "[cells]") {
  rig r([](config& c) { c.max_output_bytes = 2048; });
  r.add(sid_a);
  std::optional<client::exec_options> asked;
  client::exec_result answer;
  answer.started = true;
  r.fake.on_exec = [&](const auto&, const client::exec_options& o) {
    if (!is_cell(o)) {
      client::exec_result none;
      none.started = true;
      return none;
    }
    asked = o;
    return answer;
  };
  SECTION("what the exec said, and how it was asked") {
    answer.stdout_data = "hi\n";
    answer.stderr_data = "warn";
    answer.exit_code = 3;
    auto got = r.run(sid_a, "print('hi')", 10);
    REQUIRE(got);
    CHECK(got->stdout_text == "hi\n");
    CHECK(got->stderr_text == "warn");
    CHECK(got->exit_code == 3);
    CHECK(got->files.empty());
    CHECK_FALSE(got->kernel);
    CHECK_FALSE(got->timed_out);
    REQUIRE(asked);
    // A timeout under 1 s is 1 s; the host's wall clock 15 s more; the cap per stream.
    CHECK(asked->cmd[2].find("exec timeout --kill-after=2s 1.000s python3") != std::string::npos);
    CHECK(asked->timeout == 1000ms + 15s);
    CHECK(asked->stdin_data == "print('hi')");
    CHECK(asked->user == session_user);
    CHECK(asked->max_stdout == 2048);
    CHECK(asked->max_stderr == 2048);
  }
  SECTION("no timeout asked: the default; over the cap: the cap") {
    r.cfg.default_exec_timeout_ms = 2500;
    REQUIRE(r.run(sid_a, "1"));
    CHECK(asked->cmd[2].find(" 2.500s ") != std::string::npos);
    r.cfg.exec_timeout_cap_ms = 3000;
    REQUIRE(r.run(sid_a, "1", 999999));
    CHECK(asked->cmd[2].find(" 3.000s ") != std::string::npos);
  }
  SECTION("past the host's deadline: 124, and said") {
    answer.timed_out = true;
    answer.exit_code = -1;
    auto got = r.run(sid_a, "while True: pass", 1500);
    REQUIRE(got);
    CHECK(got->exit_code == 124);
    CHECK(got->timed_out);
    CHECK(got->stderr_text == "[sandbox] execution exceeded 1.500s and was killed");
  }
  SECTION("output past the cap: truncated, and said") {
    answer.stdout_data = "x";
    answer.stdout_dropped = 10;
    answer.stderr_dropped = 1;
    auto got = r.run(sid_a, "1");
    REQUIRE(got);
    CHECK(got->stdout_text == "x\n... [truncated, stdout exceeded 2KB]");
    CHECK(got->stderr_text == "... [truncated, stderr exceeded 2KB]");
  }
  SECTION("a SIGKILL before the timeout, no OOM seen") {
    answer.exit_code = 137;
    auto got = r.run(sid_a, "1", 60000);
    REQUIRE(got);
    CHECK(got->stderr_text == "[sandbox] the cell was killed (SIGKILL)");
    CHECK_FALSE(got->oom);
  }
  SECTION("the cell could not be written; the exec did not start; the container is gone") {
    answer.exit_code = 125;
    answer.stderr_data = "disk full";
    auto got = r.run(sid_a, "1");
    REQUIRE_FALSE(got);
    CHECK(got.error() == refusal{refusal_kind::failed, "write cell failed: disk full"});
    answer.started = false;
    answer.error = "exec create: 500 boom";
    CHECK(r.run(sid_a, "1").error() ==
          refusal{refusal_kind::failed, "exec failed: exec create: 500 boom"});
    answer.error = "exec create: 409 container is paused";
    CHECK(r.run(sid_a, "1").error().kind == refusal_kind::not_found);
  }
}

TEST_CASE("cells: unknown or ending session, a busy session, a full exec queue", "[cells]") {
  rig r([](config& c) { c.max_concurrent_execs = 1; });
  auto a = r.add(sid_a);
  auto b = r.add(sid_b);
  CHECK(r.run(std::string(32, 'c'), "1").error() ==
        refusal{refusal_kind::not_found, "session not found or not running"});
  a->terminating = true;
  CHECK(r.run(sid_a, "1").error().kind == refusal_kind::not_found);
  a->terminating = false;
  {
    std::unique_lock held(a->lock);  // another request holds it
    CHECK(std::async(std::launch::async, [&] { return r.run(sid_a, "1").error(); }).get() ==
          refusal{refusal_kind::busy, "session is busy"});
  }
  // One exec slot, taken by a's cell while b's comes.
  std::promise<void> entered, release;
  auto released = release.get_future().share();
  r.fake.on_exec = [&](const auto& c, const client::exec_options& o) {
    if (is_cell(o) && c.name == a->container) {
      entered.set_value();
      released.wait();
    }
    client::exec_result ok;
    ok.started = true;
    return ok;
  };
  auto first = std::async(std::launch::async, [&] { return r.run(sid_a, "1"); });
  entered.get_future().wait();
  CHECK(r.run(sid_b, "1").error() == refusal{refusal_kind::busy, "exec queue is full"});
  release.set_value();
  CHECK(first.get());
  CHECK(r.run(sid_b, "1"));  // the slot came back
}

TEST_CASE(
    "cells: the runner executor over a fake runner: one request, output capped and "
    "streamed, OOM said, artifacts read through it",
    "[cells][runner]") {
  fake_runner runner;
  rig r([](config& c) {
    c.cell_runner = true;
    c.max_output_bytes = 1024;
  });
  r.fake.on_attach = [&](const auto&, const auto&, std::string*) { return runner.attach(); };
  const std::string png = "/workspace/outputs/plot.png";
  runner.answer = [&](const fake_runner::request& q) -> std::string {
    if (q.op == 'C')
      return frame('S', "") + frame('O', std::string(3000, 'a')) + frame('E', "Killed") +
             frame('X', "137 0 0") +
             frame('L', listing(1, 0, record("/workspace/outputs/old.txt", "1.0", 1),
                                record("/workspace/outputs/old.txt", "1.0", 1) +
                                    record(png, "2.0", 3) + record("/etc/passwd", "2.0", 5) +
                                    record("/workspace/outputs/../x", "2.0", 1))) +
             frame('D', "");
    if (q.op == 'R' && q.lists.at(0) == std::vector<std::string>{"cat", "--", png})
      return frame('S', "") + frame('O', "PNG") + frame('X', "0 0 0");
    return {};
  };
  auto s = r.add(sid_a);
  collected streamed;
  auto got = r.run(sid_a, "import numpy", 2000, &streamed);
  REQUIRE(got);
  CHECK(got->stdout_text == std::string(1024, 'a') + "\n... [truncated, stdout exceeded 1KB]");
  CHECK(streamed.text[1] == std::string(1024, 'a'));
  CHECK(streamed.text[2] == "Killed");
  CHECK(got->exit_code == 137);
  CHECK(got->oom);
  CHECK(got->stderr_text.starts_with(
      "Killed\n[sandbox] the cell was killed: out of memory (the session's limit is 2g;"));
  REQUIRE(got->files.size() == 1);
  CHECK(got->files[0] == cell_artifact{"plot.png", "image/png", "PNG"});
  // No plain exec: the cell, its clean-up and the artifact all went through the runner.
  CHECK(r.fake.count("exec") == 0);
  const auto asked = runner.requests();
  REQUIRE(asked.size() == 2);
  CHECK(asked[0].op == 'C');
  CHECK(asked[0].lists.at(0).at(2).find("exec timeout --kill-after=2s 2.000s python3") == 0);
  CHECK(asked[0].lists.at(1) == std::vector<std::string>{"import numpy"});
  CHECK(asked[0].lists.at(4) == std::vector<std::string>{"2000"});  // the fork server's timeout
  CHECK(s->runner);
}

TEST_CASE(
    "cells: a cell that starts while another runs asks its runner to make the next fork only "
    "after a pause",
    "[cells][runner]") {
  fake_runner runner;
  rig r([](config& c) { c.cell_runner = true; });
  r.fake.on_attach = [&](const auto&, const auto&, std::string*) { return runner.attach(); };
  // Session a's cell runs until session b's has been asked for (each runner's stream is
  // served on a thread of its own).
  std::promise<void> b_asked;
  auto b_was_asked = b_asked.get_future().share();
  std::once_flag once;
  runner.answer = [&](const fake_runner::request& q) -> std::string {
    if (q.op != 'C') return {};
    if (q.lists.at(1).at(0) == "a")
      b_was_asked.wait();
    else
      std::call_once(once, [&] { b_asked.set_value(); });
    return frame('S', "") + frame('X', "0 0 0") + frame('L', listing(0, 0, "", "")) +
           frame('D', "");
  };
  r.add(sid_a);
  r.add(sid_b);
  std::thread a([&] { CHECK(r.run(sid_a, "a", 2000)); });
  auto asked_a = [&] {
    for (const auto& q : runner.requests())
      if (q.op == 'C' && q.lists.at(1).at(0) == "a") return true;
    return false;
  };
  while (!asked_a()) std::this_thread::yield();
  CHECK(r.run(sid_b, "b", 2000));
  a.join();
  CHECK(r.run(sid_b, "b alone", 2000));
  std::map<std::string, std::vector<std::string>> fork_list;
  for (const auto& q : runner.requests())
    if (q.op == 'C') fork_list[q.lists.at(1).at(0)] = q.lists.at(4);
  CHECK(fork_list["a"] == std::vector<std::string>{"2000"});  // alone when it started
  CHECK(fork_list["b"] == std::vector<std::string>{"2000", "1000"});
  CHECK(fork_list["b alone"] == std::vector<std::string>{"2000"});
}

TEST_CASE(
    "cells: a runner that fails: before the acknowledgement the cell runs once as a plain "
    "exec, after it never again",
    "[cells][runner]") {
  fake_runner runner;
  rig r([](config& c) { c.cell_runner = true; });
  r.fake.on_attach = [&](const auto&, const auto&, std::string*) { return runner.attach(); };
  int cells_run = 0;
  r.fake.on_exec = [&](const auto&, const client::exec_options& o) {
    client::exec_result res;
    res.started = true;
    if (is_cell(o)) {
      ++cells_run;
      res.stdout_data = "plain";
    }
    return res;
  };
  auto s = r.add(sid_a);
  SECTION("not acknowledged") {
    runner.answer = [](const auto&) { return std::string(); };  // the stream ends
    auto got = r.run(sid_a, "1");
    REQUIRE(got);
    CHECK(got->stdout_text == "plain");
    CHECK(cells_run == 1);
    CHECK_FALSE(s->runner);
  }
  SECTION("lost after it") {
    runner.answer = [](const auto&) { return frame('S', "") + frame('O', "part"); };
    runner.end_after_answer = true;  // the runner's end, mid-cell
    auto got = r.run(sid_a, "1");
    REQUIRE(got);
    CHECK(got->stdout_text == "part");
    CHECK(got->stderr_text.find("[sandbox] the cell's runner stopped answering while the cell "
                                "ran") == 0);
    CHECK(cells_run == 0);
    CHECK_FALSE(s->runner);
    // The clean-up's judgement from the host decides whether the next runner may start:
    // the engine showed only the keep-alive, so it may.
    CHECK(r.fake.count("top") >= 1);
    CHECK_FALSE(s->sweep_before_runner);
  }
  SECTION("lost after it, and the host cannot judge the sweep") {
    runner.answer = [](const auto&) { return frame('S', "") + frame('O', "part"); };
    runner.end_after_answer = true;
    r.fake.fail("top", 500, "injected", 10);
    auto got = r.run(sid_a, "1");
    REQUIRE(got);
    CHECK(cells_run == 0);
    CHECK_FALSE(s->runner);
    CHECK(s->sweep_before_runner);  // no runner starts before a sweep the engine confirmed
  }
}

TEST_CASE("cells: a kernel session's cell through its driver, a died kernel, restart",
          "[cells][kernel]") {
  fake_runner driver;
  driver.hello = frame('H', "dockgate-kernel 1 7 ready");
  std::string status = "0 0 5";
  driver.answer = [&](const fake_runner::request& q) -> std::string {
    if (q.op != 'K') return {};
    return frame('S', "") + frame('O', "3\n") + frame('X', "0 0 0") + frame('K', status) +
           frame('L', listing(0, 0, "", "")) + frame('D', "");
  };
  rig r;
  r.fake.on_attach = [&](const auto&, const auto&, std::string*) { return driver.attach(); };
  auto s = r.add(sid_a, "python");
  s->kernel_replaced = true;  // e.g. adopted: its old kernel's state is gone
  auto got = r.run(sid_a, "1+2");
  REQUIRE(got);
  CHECK(got->stdout_text == "3\n");
  REQUIRE(got->kernel);
  CHECK(*got->kernel == cell_kernel{"python", {true, false, 5}});
  CHECK_FALSE(s->kernel_replaced);
  status = "0 0 6";
  CHECK(r.run(sid_a, "1")->kernel->status == kernel_status{false, false, 6});
  status = "0 1 7";
  CHECK(r.run(sid_a, "1").error() ==
        refusal{refusal_kind::failed,
                "kernel died: the kernel's process ended while the cell ran; the next cell "
                "starts a new kernel"});
  // A plain session has no kernel to restart.
  auto plain = r.add(sid_b);
  CHECK(r.core->cells.restart_kernel(*plain).error().kind == refusal_kind::invalid);
}

TEST_CASE("cells: artifacts are new or changed files under outputs, within the limits", "[cells]") {
  config c;
  c.max_files_per_exec = 2;
  c.max_artifact_bytes = 10;
  std::vector<std::string> read;
  const artifact_reader reader = [&](std::vector<std::string> cmd, std::chrono::milliseconds,
                                     std::size_t) {
    read.push_back(cmd.at(2));
    client::exec_result r;
    r.started = true;
    r.exit_code = 0;
    r.stdout_data = "data";
    return r;
  };
  const auto l = parse_cell_listing(listing(
      0, 0,
      record("/workspace/outputs/same", "1", 4) + record("/workspace/outputs/changed", "1", 4),
      record("/workspace/outputs/same", "1", 4) + record("/workspace/outputs/changed", "2", 4) +
          record("/workspace/outputs/new.txt", "1", 4) + record("/workspace/outputs/big", "1", 11) +
          record("/workspace/x", "1", 1) + record("/workspace/outputs/./y", "1", 1) +
          record("/workspace/outputs/z", "1", 1)));
  std::string errs;
  const auto files = collect_artifacts(c, l, reader, errs);
  REQUIRE(files.size() == 2);
  CHECK(files[0] == cell_artifact{"changed", "application/octet-stream", "data"});
  CHECK(files[1] == cell_artifact{"new.txt", "text/plain", "data"});
  // Outside outputs: never read, never counted; over a limit: skipped and said.
  CHECK(read ==
        std::vector<std::string>{"/workspace/outputs/changed", "/workspace/outputs/new.txt"});
  CHECK(errs ==
        "\n[sandbox] skipped 2 output file(s) because artifact limits are 2 files, 10 bytes per "
        "file, 52428800 bytes total");
}

namespace {

struct recording final : reply_stream {
  std::string text;
  bool is_open = false;
  bool open(unsigned, std::string_view, const header_fields&) override { return is_open = true; }
  bool write(std::string_view d) override {
    text += d;
    return true;
  }
  bool opened() const override { return is_open; }
};

http_reply post_exec(rig& r, std::string body, reply_stream* stream = nullptr) {
  http_request q;
  q.method = "POST";
  q.path = "/exec";
  q.body = std::move(body);
  q.stream = stream;
  q.accept = stream ? "text/event-stream" : "";
  return aivory::exec(*r.core, q, "");
}

}  // namespace

TEST_CASE(
    "aivory /exec: the request's 422, 413 and 400 before the core, the answer byte for "
    "byte, plain and streamed",
    "[cells][front]") {
  rig r([](config& c) { c.max_code_bytes = 4; });
  r.add(sid_a);
  auto ok = [&](const std::string& code) {
    return R"({"session_id":")" + sid_a + R"(","code":")" + code + "\"}";
  };
  CHECK(
      post_exec(r, "[]").body ==
      R"({"detail":[{"loc":["body","body"],"msg":"value is not a valid JSON object","type":"value_error.jsondecode"}]})");
  CHECK(
      post_exec(r, R"({"code":"1"})").body ==
      R"({"detail":[{"loc":["body","session_id"],"msg":"field required","type":"value_error.missing"}]})");
  auto typed = post_exec(r, R"({"session_id":")" + sid_a + R"(","code":"1","timeout_ms":"x"})");
  CHECK(typed.status == 422);
  CHECK(typed.body.find(R"("type":"type_error.integer")") != std::string::npos);
  auto chars = post_exec(r, ok("12345"));
  CHECK(chars.status == 422);
  CHECK(
      chars.body ==
      R"({"detail":[{"loc":["body","code"],"msg":"ensure this value has at most 4 characters","type":"value_error.any_str.max_length"}]})");
  auto bytes = post_exec(r, ok("\xc3\xa9\xc3\xa9\xc3\xa9"));  // 3 characters, 6 bytes
  CHECK(bytes.status == 413);
  CHECK(bytes.body == R"({"detail":"code too large"})");
  auto id = post_exec(r, R"({"session_id":"nope","code":"1"})");
  CHECK(id.status == 400);
  CHECK(id.body == R"({"detail":"invalid session_id"})");
  CHECK(r.fake.count("exec") == 0);  // none of them reached the container

  r.fake.on_exec = [&](const auto&, const client::exec_options& o) {
    client::exec_result res;
    res.started = true;
    if (is_cell(o)) {
      if (o.on_output) o.on_output(1, "h\xc3");
      if (o.on_output) o.on_output(1, "\xa9");
      if (o.on_output) o.on_output(2, "\xe2\x82");  // cut short: held, then sent at the end
      res.stdout_data = "h\xc3\xa9";
      res.stderr_data = "\"q\"";
      res.exit_code = 1;
    }
    return res;
  };
  const std::string body = R"({"stdout":"hé","stderr":"\"q\"","exit_code":1,"files":[]})";
  auto plain = post_exec(r, ok("1"));
  CHECK(plain.status == 200);
  CHECK(plain.body == body);
  CHECK_FALSE(plain.streamed);

  recording stream;
  auto streamed = post_exec(r, ok("1"), &stream);
  CHECK(streamed.streamed);
  CHECK(stream.text ==
        "event: stdout\ndata: \"h\"\n\nevent: stdout\ndata: \"é\"\n\n"
        "event: stderr\ndata: \"\xef\xbf\xbd\xef\xbf\xbd\"\n\n"
        "event: result\ndata: " +
            body + "\n\n");
  // An error before any output: a plain answer, the stream never opened.
  recording unopened;
  auto missing = post_exec(r, R"({"session_id":")" + sid_b + R"(","code":"1"})", &unopened);
  CHECK(missing.status == 404);
  CHECK(missing.body == R"({"detail":"session not found or not running"})");
  CHECK_FALSE(unopened.is_open);
}

TEST_CASE("aivory cell body: files and the kernel block in the Aivory order", "[cells][front]") {
  cell_result r;
  r.stdout_text = "a";
  r.exit_code = 0;
  r.files = {{"a.txt", "text/plain", "hi"}, {"b", "application/octet-stream", ""}};
  CHECK(
      aivory::cell_body(r) ==
      R"({"stdout":"a","stderr":"","exit_code":0,"files":[{"name":"a.txt","mime_type":"text/plain","data_base64":"aGk="},{"name":"b","mime_type":"application/octet-stream","data_base64":""}]})");
  r.files.clear();
  r.kernel = cell_kernel{"python", {true, false, 2}};
  CHECK(
      aivory::cell_body(r) ==
      R"({"stdout":"a","stderr":"","exit_code":0,"files":[],"kernel":{"name":"python","restarted":true,"execution_count":2}})");
}

// execd's API served by the sidecar (front/opensandbox/execd, the commands room) over a
// session core on the fake engine: each route's answer byte for byte (the streams' events
// with their timestamps masked) and what it asked the engine (the exec's Cmd, User, Env);
// the commands room's shell scripts run by the host's sh in place of the container's
// (their timeouts, process groups and background state); the multipart parser.
#include <signal.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "commands/commands.hpp"
#include "core/session_core.hpp"
#include "fake_engine.hpp"
#include "front/opensandbox/execd/execd_routes.hpp"
#include "front/opensandbox/execd/multipart.hpp"
#include "front/opensandbox/execd/routes_inside.hpp"
#include "util/util.hpp"

using namespace dockgate;
using namespace dockgate::sidecar;
namespace execd = dockgate::sidecar::opensandbox::execd;

namespace {

const std::string sbx = "0123456789abcdef0123456789abcdef";

struct recording final : reply_stream {
  std::string text;
  unsigned status = 0;
  std::string type;
  header_fields fields;
  bool open(unsigned s, std::string_view t, const header_fields& f) override {
    status = s;
    type = std::string(t);
    fields = f;
    return true;
  }
  bool write(std::string_view d) override {
    text += d;
    return true;
  }
  bool opened() const override { return status != 0; }
};

struct rig {
  config cfg;
  testing::fake_engine fake;
  std::unique_ptr<session_core> core;
  std::mutex m;
  std::vector<client::exec_options> execs;  // every exec, as asked (without its callback)

  rig() {
    cfg.warm_pool = 0;
    cfg.queue_timeout_seconds = 0;
    cfg.cell_runner = false;
    core = std::make_unique<session_core>(cfg, fake, nullptr);
  }
  std::shared_ptr<session> add(const std::string& id = sbx) {
    auto s = std::make_shared<session>();
    s->id = id;
    s->container = "sbx-" + id;
    fake.add_running(s->container, {});
    core->registry.add(s);
    return s;
  }
  // Execs answered by `answer`, each recorded first.
  void answer(std::function<client::exec_result(const client::exec_options&)> answer) {
    fake.on_exec = [this, answer](const testing::fake_engine::container&,
                                  const client::exec_options& o) {
      {
        std::lock_guard g(m);
        execs.push_back(o);
        execs.back().on_output = nullptr;
      }
      return answer(o);
    };
  }
  http_reply call(const std::string& method, const std::string& path, const std::string& body = {},
                  const std::string& query = {}, reply_stream* stream = nullptr) {
    http_request r;
    r.method = method;
    r.path = "/v1/sandboxes/" + sbx + "/proxy/44772" + path;
    r.query = query;
    r.body = body;
    r.stream = stream;
    r.fields.push_back({"x-request-id", "req-1"});
    return execd::serve(*core, r, sbx, path);
  }
};

client::exec_result exited(std::int64_t code, std::string out = {}) {
  client::exec_result r;
  r.started = true;
  r.exit_code = code;
  r.stdout_data = std::move(out);
  return r;
}

// A stream's text with every timestamp and execution time as 0.
std::string masked(const std::string& text) {
  static const std::regex ts("\"(timestamp|execution_time)\":[0-9]+");
  return std::regex_replace(text, ts, "\"$1\":0");
}

std::string header(const http_reply& r, const std::string& name) {
  for (const auto& [n, v] : r.headers)
    if (n == name) return v;
  return "<none>";
}

std::string init_id(const std::string& text) {
  std::smatch m;
  static const std::regex init(R"re(\{"type":"init","text":"([0-9a-f]+)")re");
  return std::regex_search(text, m, init) ? m[1].str() : "";
}

}  // namespace

TEST_CASE("execd: GET /ping is 200 and empty, what is not served is 501 NOT_SUPPORTED", "[execd]") {
  rig r;
  r.add();
  auto ping = r.call("GET", "/ping");
  CHECK(ping.status == 200);
  CHECK(ping.body.empty());
  CHECK(header(ping, "X-Request-ID") == "req-1");
  auto pty = r.call("POST", "/pty", "{}");
  CHECK(pty.status == 501);
  CHECK(pty.body ==
        R"({"code":"NOT_SUPPORTED","message":"POST /pty is not served by dockgate-sidecar yet"})");
  CHECK(r.call("GET", "/pty").status == 501);
  CHECK(r.call("DELETE", "/ping").status == 501);
  CHECK(r.fake.count("exec") == 0);
}

TEST_CASE(
    "execd POST /command: init, stdout and stderr as they come, execution_complete, byte for "
    "byte, run as the session user with its cwd, timeout and envs",
    "[execd]") {
  rig r;
  r.add();
  r.answer([](const client::exec_options& o) {
    o.on_output(1, "hello\n");
    o.on_output(2, "warn \"x\"\n");
    o.on_output(1, "bye\n");
    return exited(0);
  });
  recording s;
  auto reply = r.call(
      "POST", "/command",
      R"({"command":"echo hello","cwd":"/workspace","timeout":1500,"envs":{"A":"b c"}})", {}, &s);
  CHECK(reply.streamed);
  CHECK(s.status == 200);
  CHECK(s.type == "text/event-stream");
  CHECK(s.fields == header_fields{{"X-Request-ID", "req-1"}});
  const std::string id = init_id(s.text);
  CHECK(id.size() == 32);
  CHECK(masked(s.text) ==
        "{\"type\":\"init\",\"text\":\"" + id +
            "\",\"timestamp\":0}\n\n"
            "{\"type\":\"stdout\",\"text\":\"hello\\n\",\"timestamp\":0}\n\n"
            "{\"type\":\"stderr\",\"text\":\"warn \\\"x\\\"\\n\",\"timestamp\":0}\n\n"
            "{\"type\":\"stdout\",\"text\":\"bye\\n\",\"timestamp\":0}\n\n"
            "{\"type\":\"execution_complete\",\"execution_time\":0,\"timestamp\":0}\n\n");
  REQUIRE(r.execs.size() == 1);
  const auto& e = r.execs[0];
  REQUIRE(e.cmd.size() == 8);
  CHECK(e.cmd[0] == "sh");
  CHECK(e.cmd[1] == "-c");
  CHECK(e.cmd[2].find("setsid sh -c \"$3\"") != std::string::npos);
  CHECK(std::vector<std::string>(e.cmd.begin() + 3, e.cmd.end()) ==
        std::vector<std::string>{"sh", "/workspace", "1.500", "echo hello", id});
  CHECK(e.user == "1000:1000");
  CHECK(e.env == std::vector<std::string>{"A=b c"});
  CHECK(e.max_stdout == static_cast<std::size_t>(r.cfg.max_output_bytes));
  CHECK(e.timeout == std::chrono::milliseconds(11500));
}

TEST_CASE(
    "execd POST /command: a non-zero exit is an error event with its code and no "
    "execution_complete, a missing cwd an error event, no stream gives the same bytes",
    "[execd]") {
  rig r;
  r.add();
  r.answer([](const client::exec_options& o) {
    if (o.cmd[4] == "/nowhere") {
      o.on_output(2, "dockgate:cwd-missing");
      return exited(200);
    }
    o.on_output(2, "boom\n");
    return exited(3);
  });
  recording s;
  r.call("POST", "/command", R"({"command":"exit 3"})", {}, &s);
  const std::string id = init_id(s.text);
  CHECK(masked(s.text) ==
        "{\"type\":\"init\",\"text\":\"" + id +
            "\",\"timestamp\":0}\n\n"
            "{\"type\":\"stderr\",\"text\":\"boom\\n\",\"timestamp\":0}\n\n"
            "{\"type\":\"error\",\"error\":{\"ename\":\"CommandExecError\",\"evalue\":\"3\","
            "\"traceback\":[]},\"timestamp\":0}\n\n");
  CHECK(r.execs[0].cmd[4].empty());
  CHECK(r.execs[0].cmd[5] == "0");
  auto plain = r.call("POST", "/command", R"({"command":"x","cwd":"/nowhere"})");
  CHECK(plain.status == 200);
  CHECK(!plain.streamed);
  CHECK(plain.content_type == "text/event-stream");
  CHECK(masked(plain.body) ==
        "{\"type\":\"init\",\"text\":\"" + init_id(plain.body) +
            "\",\"timestamp\":0}\n\n"
            "{\"type\":\"error\",\"error\":{\"ename\":\"CommandExecError\",\"evalue\":\"cwd "
            "/nowhere: no such directory\",\"traceback\":[]},\"timestamp\":0}\n\n");
}

TEST_CASE(
    "execd POST /command: a client that stops reading gets its command's group killed at the "
    "next output",
    "[execd]") {
  struct deaf final : reply_stream {
    int writes = 0;
    bool open(unsigned, std::string_view, const header_fields&) override { return true; }
    bool write(std::string_view) override { return ++writes == 1; }  // the init only
    bool opened() const override { return true; }
  } stream;
  rig r;
  r.add();
  r.answer([](const client::exec_options& o) {
    if (o.on_output) o.on_output(1, "tick\n");
    return exited(o.on_output ? 137 : 0);
  });
  r.call("POST", "/command", R"({"command":"while :; do echo tick; sleep 1; done"})", {}, &stream);
  REQUIRE(r.execs.size() == 2);
  CHECK(r.execs[1].cmd[2].find("kill -9 \"-$p\"") != std::string::npos);
  CHECK(r.execs[1].cmd[4] == r.execs[0].cmd[7]);
  CHECK(r.execs[1].user == "1000:1000");
}

TEST_CASE(
    "execd POST /command: bad requests are 400 before any exec, an unknown sandbox 404, a "
    "paused one 409 at once",
    "[execd]") {
  rig r;
  auto s = r.add();
  r.answer([](const client::exec_options&) { return exited(0); });
  auto bad = [&](const std::string& body) { return r.call("POST", "/command", body); };
  CHECK(bad("[]").body ==
        R"({"code":"INVALID_REQUEST_BODY","message":"body is not a JSON object"})");
  CHECK(bad("{}").status == 400);
  CHECK(bad(R"({"command":""})").status == 400);
  CHECK(
      bad(R"({"command":"id","uid":0})").body ==
      R"({"code":"INVALID_REQUEST_BODY","message":"uid is not accepted: every command runs as the sandbox's user"})");
  CHECK(bad(R"({"command":"id","gid":0})").status == 400);
  CHECK(bad(R"({"command":"id","timeout":0})").status == 400);
  CHECK(bad(R"({"command":"id","timeout":"5"})").status == 400);
  CHECK(bad(R"({"command":"id","envs":{"A":1}})").status == 400);
  CHECK(bad(R"({"command":"id","envs":{"A=B":"1"}})").status == 400);
  CHECK(bad(R"({"command":"id","background":"yes"})").status == 400);
  CHECK(r.execs.empty());
  s->paused = true;
  auto paused = bad(R"({"command":"id"})");
  CHECK(paused.status == 409);
  CHECK(paused.body == R"({"code":"RUNTIME_ERROR","message":"sandbox is paused"})");
  s->paused = false;
  s->terminating = true;
  CHECK(bad(R"({"command":"id"})").status == 404);
  CHECK(r.execs.empty());
}

TEST_CASE(
    "execd POST /command does not take the session's lock: a command runs while another "
    "holds it",
    "[execd]") {
  rig r;
  auto s = r.add();
  r.answer([](const client::exec_options&) { return exited(0); });
  std::unique_lock held(s->lock);
  auto reply = r.call("POST", "/command", R"({"command":"true"})");
  CHECK(reply.status == 200);
  CHECK(reply.body.find("execution_complete") != std::string::npos);
}

TEST_CASE(
    "execd background commands: init and execution_complete at once, then status, logs "
    "with their cursor, and DELETE, each an exec of the session user",
    "[execd]") {
  rig r;
  r.add();
  r.answer([](const client::exec_options& o) {
    const auto& script = o.cmd[2];
    if (script.find("mkdir \"$b/$1\"") != std::string::npos) return exited(0);
    if (o.cmd[4] == "ffff") return exited(44);
    if (script.find("kill -0") != std::string::npos)
      return exited(0, "0\n7\n2026-12-07T11:00:00Z\n2026-12-07T11:00:01Z\necho a\nb");
    if (script.find("tail -n") != std::string::npos) return exited(0, "l2\nl3\npart");
    return exited(0);
  });
  auto started = r.call("POST", "/command", R"({"command":"sleep 1","background":true})");
  const std::string id = init_id(started.body);
  CHECK(masked(started.body) ==
        "{\"type\":\"init\",\"text\":\"" + id +
            "\",\"timestamp\":0}\n\n"
            "{\"type\":\"execution_complete\",\"execution_time\":0,\"timestamp\":0}\n\n");
  REQUIRE(r.execs.size() == 1);
  CHECK(r.execs[0].cmd[4] == id);
  CHECK(r.execs[0].user == "1000:1000");
  CHECK(r.execs[0].cmd[7] == "sleep 1");

  auto status = r.call("GET", "/command/status/" + id);
  CHECK(
      status.body ==
      "{\"id\":\"" + id +
          R"(","content":"echo a\nb","running":false,"exit_code":7,"started_at":"2026-12-07T11:00:00Z","finished_at":"2026-12-07T11:00:01Z"})");
  auto logs = r.call("GET", "/command/" + id + "/logs", {}, "cursor=2");
  CHECK(logs.body == "l2\nl3\npart");
  CHECK(logs.content_type == "text/plain; charset=utf-8");
  CHECK(header(logs, "EXECD-COMMANDS-TAIL-CURSOR") == "5");
  CHECK(r.execs.back().cmd[5] == "2");
  CHECK(r.call("GET", "/command/" + id + "/logs", {}, "cursor=x").status == 400);

  CHECK(r.call("DELETE", "/command", {}, "id=" + id).status == 200);
  CHECK(r.execs.back().cmd[2].find("kill -9 \"-$p\"") != std::string::npos);
  CHECK(r.call("DELETE", "/command").body ==
        R"({"code":"MISSING_QUERY","message":"missing query parameter id"})");
  CHECK(r.call("DELETE", "/command", {}, "id=ffff").status == 404);
  CHECK(r.call("GET", "/command/status/ffff").body ==
        R"({"code":"CONTEXT_NOT_FOUND","message":"command not found"})");
  const auto before = r.execs.size();
  CHECK(r.call("GET", "/command/status/..%2F..").status == 404);
  CHECK(r.call("DELETE", "/command", {}, "id=..%2Fx").status == 404);
  CHECK(r.execs.size() == before);
}

TEST_CASE(
    "execd POST /command: a quiet command's stream gets execd's ping at each idle beat, and a "
    "client gone while it is quiet gets its command killed",
    "[execd]") {
  rig r;
  r.add();
  r.answer([](const client::exec_options& o) {
    if (o.cmd.size() == 8) {  // the command: quiet for two beats, then its end
      CHECK(o.idle_every == std::chrono::seconds(3));
      o.on_idle();
      o.on_idle();
      return exited(0);
    }
    return exited(0);  // the kill script
  });
  recording listening;
  r.call("POST", "/command", R"({"command":"sleep 7"})", {}, &listening);
  CHECK(masked(listening.text)
            .find("{\"type\":\"ping\",\"text\":\"pong\",\"timestamp\":0}\n\n"
                  "{\"type\":\"ping\",\"text\":\"pong\",\"timestamp\":0}\n\n"
                  "{\"type\":\"execution_complete\"") != std::string::npos);
  CHECK(r.execs.size() == 1);  // nobody left: nothing killed

  struct gone_after_init final : reply_stream {
    int writes = 0;
    bool open(unsigned, std::string_view, const header_fields&) override { return true; }
    bool write(std::string_view) override { return ++writes == 1; }
    bool opened() const override { return true; }
  } gone;
  r.execs.clear();
  r.call("POST", "/command", R"({"command":"sleep 7"})", {}, &gone);
  REQUIRE(r.execs.size() == 2);  // the command, then its group killed at the first beat
  CHECK(r.execs[1].cmd[2].find("kill -9") != std::string::npos);
}

TEST_CASE("execd GET /command/status: a running command's exit_code is null, no finished_at",
          "[execd]") {
  rig r;
  r.add();
  r.answer([](const client::exec_options&) {
    return exited(0, "1\n\n2026-12-07T11:00:00Z\n\nsleep 100");
  });
  CHECK(
      r.call("GET", "/command/status/abc").body ==
      R"({"id":"abc","content":"sleep 100","running":true,"exit_code":null,"started_at":"2026-12-07T11:00:00Z"})");
}

TEST_CASE("execd GET /metrics: the container's cgroup read through an exec", "[execd]") {
  rig r;
  r.add();
  r.answer([](const client::exec_options&) {
    return exited(0, "8 200000 100000 1000000 1050000 536870912 134217728 16000000\n");
  });
  auto m = r.call("GET", "/metrics");
  CHECK(
      std::regex_replace(m.body, std::regex("\"timestamp\":[0-9]+"), "\"timestamp\":0") ==
      R"({"cpu_count":2,"cpu_used_pct":25.00,"mem_total_mib":512.00,"mem_used_mib":128.00,"timestamp":0})");
  CHECK(r.execs[0].user == "1000:1000");
  r.answer([](const client::exec_options&) {
    return exited(0, "4 max 100000 0 10000 max 1048576 2097152\n");
  });
  auto unlimited = r.call("GET", "/metrics");
  CHECK(unlimited.body.find(
            R"("cpu_count":4,"cpu_used_pct":2.50,"mem_total_mib":2048.00,"mem_used_mib":1.00)") !=
        std::string::npos);
}

TEST_CASE(
    "execd GET /metrics/watch: a sample a second while the client reads, ended when it stops "
    "or the sandbox pauses",
    "[execd]") {
  struct counting final : reply_stream {
    std::vector<std::string> events;
    std::size_t stop_after = 2;
    bool open(unsigned, std::string_view, const header_fields&) override { return true; }
    bool write(std::string_view d) override {
      events.emplace_back(d);
      return events.size() < stop_after;
    }
    bool opened() const override { return true; }
  } stream;
  rig r;
  auto s = r.add();
  r.answer(
      [](const client::exec_options&) { return exited(0, "1 max 100000 0 0 max 1048576 1024\n"); });
  auto reply = r.call("GET", "/metrics/watch", {}, {}, &stream);
  CHECK(reply.streamed);
  REQUIRE(stream.events.size() == 2);
  CHECK(
      std::regex_replace(stream.events[1], std::regex("\"timestamp\":[0-9]+"), "\"timestamp\":0") ==
      "{\"cpu_count\":1,\"cpu_used_pct\":0.00,\"mem_total_mib\":1.00,\"mem_used_mib\":1.00,"
      "\"timestamp\":0}\n\n");
  s->paused = true;
  CHECK(r.call("GET", "/metrics/watch", {}, {}, &stream).status == 409);
}

// ---- the scripts themselves, run by the host's sh in place of the container's ----

namespace {

// Execs run on this host: `env -i` with the exec's Env, the exec's Cmd; the output handed
// to on_output once it is all there.
void run_on_host(rig& r) {
  r.answer([](const client::exec_options& o) {
    std::vector<std::string> argv{"env", "-i", "PATH=/usr/bin:/bin"};
    argv.insert(argv.end(), o.env.begin(), o.env.end());
    argv.insert(argv.end(), o.cmd.begin(), o.cmd.end());
    auto out = run_command(argv, o.timeout);
    if (o.on_output) {
      if (!out.out.empty()) o.on_output(1, out.out);
      if (!out.err.empty()) o.on_output(2, out.err);
    }
    client::exec_result res = exited(out.exit_code, out.out);
    res.stderr_data = out.err;
    return res;
  });
}

}  // namespace

TEST_CASE(
    "execd commands on a real sh: output, envs, cwd, a missing cwd, and a timeout that kills "
    "the command's whole process group",
    "[execd]") {
  rig r;
  r.add();
  run_on_host(r);
  auto ok =
      r.call("POST", "/command", R"({"command":"echo $A; pwd","cwd":"/tmp","envs":{"A":"x"}})");
  CHECK(masked(ok.body).find(R"({"type":"stdout","text":"x\n/tmp\n","timestamp":0})") !=
        std::string::npos);
  CHECK(ok.body.find("execution_complete") != std::string::npos);
  auto nocwd = r.call("POST", "/command", R"({"command":"echo never","cwd":"/nonexistent-dir"})");
  CHECK(nocwd.body.find("never") == std::string::npos);
  CHECK(nocwd.body.find(R"("evalue":"cwd /nonexistent-dir: no such directory")") !=
        std::string::npos);

  const auto mark =
      std::filesystem::temp_directory_path() / ("dg-execd-" + std::to_string(::getpid()));
  std::filesystem::remove(mark);
  const auto begun = std::chrono::steady_clock::now();
  auto slow =
      r.call("POST", "/command",
             R"({"command":"(sleep 2; touch )" + mark.string() + R"() & sleep 30","timeout":300})");
  const auto took = std::chrono::steady_clock::now() - begun;
  CHECK(took < std::chrono::seconds(5));
  CHECK(slow.body.find(R"("evalue":"137")") != std::string::npos);
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  CHECK(!std::filesystem::exists(mark));  // the group's other child was killed too
}

TEST_CASE(
    "execd a running foreground command on a real sh: its status while it runs, DELETE kills "
    "its group, its record goes when it ends",
    "[execd]") {
  rig r;
  r.add();
  run_on_host(r);
  const std::string unique = "sleep 30 # " + std::to_string(::getpid());
  http_reply reply;
  std::thread runner(
      [&] { reply = r.call("POST", "/command", R"({"command":")" + unique + "\"}"); });
  std::string id;
  for (int i = 0; i < 100 && id.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/tmp/.dockgate-commands", ec)) {
      std::ifstream in(e.path() / "content");
      if (std::string(std::istreambuf_iterator<char>(in), {}) == unique)
        id = e.path().filename().string();
    }
  }
  REQUIRE(!id.empty());
  CHECK(r.call("GET", "/command/status/" + id).body.find(R"("running":true)") != std::string::npos);
  const auto begun = std::chrono::steady_clock::now();
  CHECK(r.call("DELETE", "/command", {}, "id=" + id).status == 200);
  runner.join();
  CHECK(std::chrono::steady_clock::now() - begun < std::chrono::seconds(5));
  CHECK(init_id(reply.body) == id);
  CHECK(reply.body.find(R"("evalue":"137")") != std::string::npos);
  CHECK(!std::filesystem::exists("/tmp/.dockgate-commands/" + id));
}

TEST_CASE(
    "execd background commands on a real sh: state kept under /tmp, status while running and "
    "after, logs by cursor, DELETE kills the group",
    "[execd]") {
  rig r;
  r.add();
  run_on_host(r);
  auto started =
      r.call("POST", "/command", R"({"command":"echo one; echo two; sleep 30","background":true})");
  const std::string id = init_id(started.body);
  REQUIRE(!id.empty());
  // Polled, never a fixed sleep: under load the command may take a while to write.
  http_reply logs;
  for (int i = 0; i < 100 && logs.body != "two\n"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    logs = r.call("GET", "/command/" + id + "/logs", {}, "cursor=1");
  }
  auto running = r.call("GET", "/command/status/" + id);
  CHECK(running.body.find(R"("running":true,"exit_code":null)") != std::string::npos);
  CHECK(running.body.find(R"("content":"echo one; echo two; sleep 30")") != std::string::npos);
  CHECK(logs.body == "two\n");
  CHECK(header(logs, "EXECD-COMMANDS-TAIL-CURSOR") == "2");
  CHECK(r.call("DELETE", "/command", {}, "id=" + id).status == 200);
  auto killed = r.call("GET", "/command/status/" + id);
  CHECK(killed.body.find(R"("running":false,"exit_code":137)") != std::string::npos);
  CHECK(killed.body.find("finished_at") != std::string::npos);

  auto quick = r.call("POST", "/command", R"({"command":"exit 4","background":true})");
  const std::string quick_id = init_id(quick.body);
  std::string quick_status;
  for (int i = 0; i < 100 && quick_status.find(R"("running":false)") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    quick_status = r.call("GET", "/command/status/" + quick_id).body;
  }
  CHECK(quick_status.find(R"("running":false,"exit_code":4)") != std::string::npos);
  std::filesystem::remove_all("/tmp/.dockgate-commands/" + id);
  std::filesystem::remove_all("/tmp/.dockgate-commands/" + quick_id);
}

TEST_CASE(
    "execd background commands on a real sh: the log keeps the lines that fit "
    "SANDBOX_MAX_OUTPUT_BYTES, says the "
    "rest was dropped, its end is its own and not its children's",
    "[execd]") {
  rig r;
  r.cfg.max_output_bytes = 10;
  r.add();
  run_on_host(r);
  // 60 bytes of output, then an app left running that holds the output open.
  auto started = r.call("POST", "/command",
                        R"({"command":"for i in 1 2 3 4 5 6; do echo 123456789; done; )"
                        R"(sleep 30 & echo after","background":true})");
  const std::string id = init_id(started.body);
  REQUIRE(!id.empty());
  std::string status;
  for (int i = 0; i < 100 && status.find(R"("running":false)") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    status = r.call("GET", "/command/status/" + id).body;
  }
  CHECK(status.find(R"("running":false,"exit_code":0)") != std::string::npos);
  http_reply logs;
  for (int i = 0; i < 100 && logs.body.find("dropped") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    logs = r.call("GET", "/command/" + id + "/logs", {}, "cursor=0");
  }
  CHECK(logs.body == "123456789\n[dockgate: output past 10 bytes dropped]\n");
  // The app it left is still there (its group is the command's: DELETE ends it).
  std::ifstream pid_file("/tmp/.dockgate-commands/" + id + "/pid");
  int pgid = 0;
  pid_file >> pgid;
  REQUIRE(pgid > 0);
  CHECK(::kill(-pgid, 0) == 0);
  ::kill(-pgid, SIGKILL);
  std::filesystem::remove_all("/tmp/.dockgate-commands/" + id);
}

TEST_CASE(
    "execd bash sessions on a real sh: the cwd and exported variables kept between runs, an "
    "unknown or deleted session 404 before any stream",
    "[execd]") {
  rig r;
  r.add();
  run_on_host(r);
  namespace fs = std::filesystem;
  const auto base = fs::temp_directory_path() / ("dg-execd-sh-" + std::to_string(::getpid()));
  fs::create_directories(base / "sub");
  auto made = r.call("POST", "/session", R"({"cwd":")" + base.string() + R"("})");
  REQUIRE(made.status == 200);
  const std::string id = made.body.substr(made.body.find(':') + 2, 32);
  CHECK(made.body == R"({"session_id":")" + id + R"("})");
  auto first =
      r.call("POST", "/session/" + id + "/run", R"({"command":"cd sub; export X='a b'; Y=1"})");
  CHECK(first.body.find("execution_complete") != std::string::npos);
  auto second = r.call("POST", "/session/" + id + "/run", R"({"command":"pwd; echo \"$X\""})");
  CHECK(masked(second.body)
            .find(R"({"type":"stdout","text":")" + (base / "sub").string() +
                  R"(\na b\n","timestamp":0})") != std::string::npos);
  auto failed = r.call("POST", "/session/" + id + "/run", R"({"command":"false"})");
  CHECK(failed.body.find(R"("evalue":"1")") != std::string::npos);
  CHECK(r.call("POST", "/session", R"({"cwd":"/nonexistent-dir"})").status == 400);
  CHECK(r.call("POST", "/session/ffff/run", R"({"command":"true"})").body ==
        R"({"code":"CONTEXT_NOT_FOUND","message":"session not found"})");
  CHECK(r.call("DELETE", "/session/" + id).status == 200);
  CHECK(r.call("DELETE", "/session/" + id).status == 404);
  CHECK(r.call("POST", "/session/" + id + "/run", R"({"command":"true"})").status == 404);
  CHECK(r.call("POST", "/session/../run", R"({"command":"true"})").status == 404);
  fs::remove_all(base);
}

// ---- multipart ----

TEST_CASE("execd multipart: the SDK's upload body, parts in order with names and bodies",
          "[execd][multipart]") {
  CHECK(execd::multipart_boundary("multipart/form-data; boundary=abc") == "abc");
  CHECK(execd::multipart_boundary("Multipart/Form-Data; charset=x; boundary=\"a b\"") == "a b");
  CHECK(!execd::multipart_boundary("application/json"));
  CHECK(!execd::multipart_boundary("multipart/form-data"));
  CHECK(!execd::multipart_boundary("multipart/form-data; boundary=" + std::string(71, 'x')));
  const std::string body =
      "preamble\r\n--XY\r\n"
      "Content-Disposition: form-data; name=\"metadata\"; filename=\"metadata\"\r\n"
      "Content-Type: application/json\r\n\r\n"
      "{\"path\":\"/workspace/a.txt\"}\r\n--XY\r\n"
      "Content-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n\r\n"
      "line\r\n--X not the end\r\n--XY--\r\n";
  auto p = execd::parse_multipart(body, "XY");
  REQUIRE(p.error.empty());
  REQUIRE(p.parts.size() == 2);
  CHECK(p.parts[0].name == "metadata");
  CHECK(p.parts[0].filename == "metadata");
  CHECK(p.parts[0].content_type == "application/json");
  CHECK(p.parts[0].body == "{\"path\":\"/workspace/a.txt\"}");
  CHECK(p.parts[1].name == "file");
  CHECK(p.parts[1].filename == "a.txt");
  CHECK(p.parts[1].body == "line\r\n--X not the end");
  auto empty = execd::parse_multipart("--XY--\r\n", "XY");
  CHECK(empty.error.empty());
  CHECK(empty.parts.empty());
}

TEST_CASE("execd multipart: truncated, mismatched, malformed and oversized bodies are errors",
          "[execd][multipart]") {
  const std::string part = "--XY\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nDATA\r\n";
  CHECK(execd::parse_multipart(part + "--XY--", "XY").error.empty());
  CHECK(execd::parse_multipart(part, "XY").error == "multipart body cut inside a part");
  CHECK(execd::parse_multipart(part + "--X", "XY").error == "multipart body cut inside a part");
  CHECK(execd::parse_multipart("--XY\r\nContent-Disposition: form-data; name=\"f\"", "XY").error ==
        "multipart body cut inside a part's header");
  CHECK(execd::parse_multipart(part + "--XY--", "ZZ").error == "no multipart boundary in the body");
  CHECK(execd::parse_multipart("--XYjunk\r\n", "XY").error == "malformed multipart delimiter line");
  CHECK(execd::parse_multipart("--XY\r\nContent-Type: text/plain\r\n\r\nx\r\n--XY--", "XY").error ==
        "a part has no form-data Content-Disposition with a name");
  CHECK(execd::parse_multipart("--XY\r\nno colon\r\n\r\nx\r\n--XY--", "XY").error ==
        "a part has no form-data Content-Disposition with a name");
  execd::multipart_limits small;
  small.max_part_bytes = 3;
  auto big = execd::parse_multipart(part + "--XY--", "XY", small);
  CHECK(big.too_large);
  CHECK(big.error == "a part is too large");
  small = {};
  small.max_parts = 1;
  auto many = execd::parse_multipart(part + part + "--XY--", "XY", small);
  CHECK(many.too_large);
  CHECK(many.error == "too many parts");
  small = {};
  small.max_header_bytes = 10;
  CHECK(execd::parse_multipart(part + "--XY--", "XY", small).too_large);
}

// ---- files ----

namespace {

std::string upload_body(const std::vector<std::pair<std::string, std::string>>& pairs,
                        bool file_first = false) {
  std::string b;
  for (const auto& [meta, data] : pairs) {
    const std::string m =
        "--B0\r\nContent-Disposition: form-data; name=\"metadata\"; filename=\"metadata\"\r\n"
        "Content-Type: application/json\r\n\r\n" +
        meta + "\r\n";
    const std::string f =
        "--B0\r\nContent-Disposition: form-data; name=\"file\"; filename=\"x\"\r\n\r\n" + data +
        "\r\n";
    b += file_first ? f + m : m + f;
  }
  return b + "--B0--\r\n";
}

http_reply upload(rig& r, const std::string& body) {
  http_request q;
  q.method = "POST";
  q.path = "/files/upload";
  q.body = body;
  q.fields.push_back({"content-type", "multipart/form-data; boundary=B0"});
  return execd::serve(*r.core, q, sbx, "/files/upload");
}

http_reply with_range(rig& r, const std::string& query, const std::string& range) {
  http_request q;
  q.method = "GET";
  q.path = "/files/download";
  q.query = query;
  if (!range.empty()) q.fields.push_back({"range", range});
  return execd::serve(*r.core, q, sbx, "/files/download");
}

}  // namespace

TEST_CASE("execd Range: one range a-b or a- is read, anything else is ignored", "[execd][files]") {
  auto range = [](std::string_view h) { return execd::parse_range(h); };
  CHECK(range("bytes=0-4")->first == 0);
  CHECK(range("bytes=0-4")->last == 4);
  CHECK(range("bytes=7-")->first == 7);
  CHECK(!range("bytes=7-")->last);
  CHECK(!range("bytes=-5"));
  CHECK(!range("bytes=5-4"));
  CHECK(!range("bytes=0-1,3-4"));
  CHECK(!range("items=0-4"));
  CHECK(!range("bytes=a-b"));
  CHECK(!range("bytes=1"));
  CHECK(!range("bytes=99999999999999999999-"));
}

TEST_CASE(
    "execd POST /files/upload: metadata and file parts paired in order, each written by the "
    "workspace script as the session user, bad bodies 400 before any exec",
    "[execd][files]") {
  rig r;
  r.add();
  r.answer([](const client::exec_options& o) {
    if (o.cmd[5] == "denied") return exited(8);
    return exited(0);
  });
  auto ok = upload(r, upload_body({{R"({"path":"/workspace/a/b.txt","mode":640})", "DATA"},
                                   {R"({"path":"c.txt","owner":"1000"})", ""}}));
  CHECK(ok.status == 200);
  CHECK(ok.body.empty());
  REQUIRE(r.execs.size() == 2);
  CHECK(r.execs[0].cmd[0] == "sh");
  CHECK(r.execs[0].user == "1000:1000");
  CHECK(std::vector<std::string>(r.execs[0].cmd.begin() + 4, r.execs[0].cmd.end()) ==
        std::vector<std::string>{"write", "a/b.txt", std::to_string(r.cfg.max_upload_bytes), "640",
                                 "", ""});
  CHECK(r.execs[0].stdin_data == "DATA");
  CHECK(r.execs[1].cmd[5] == "c.txt");
  CHECK(r.execs[1].cmd[8] == "1000");

  auto bad = [&](const std::string& body) { return upload(r, body); };
  r.execs.clear();
  CHECK(bad(upload_body({{R"({"path":"/etc/passwd"})", "x"}})).body ==
        R"({"code":"INVALID_REQUEST_BODY","message":"path must be under /workspace"})");
  CHECK(bad(upload_body({{R"({"path":"/workspace/../etc/x"})", "x"}})).status == 400);
  CHECK(bad(upload_body({{R"({"path":"a","mode":981})", "x"}})).status == 400);
  CHECK(
      bad(upload_body({{R"({"nopath":1})", "x"}})).body ==
      R"({"code":"INVALID_FILE_METADATA","message":"metadata must be a JSON object with a path"})");
  CHECK(bad(upload_body({{R"({"path":"a","mode":"755"})", "x"}})).status == 400);
  std::string unpaired = upload_body({{R"({"path":"a"})", "x"}});
  unpaired.insert(unpaired.size() - 8,
                  "--B0\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\ny\r\n");
  CHECK(bad(unpaired).body ==
        R"({"code":"INVALID_FILE","message":"the metadata and file parts must come in pairs"})");
  std::string cut = upload_body({{R"({"path":"a"})", "x"}});
  CHECK(bad(cut.substr(0, cut.size() - 10)).status == 400);
  http_request json;
  json.method = "POST";
  json.body = "{}";
  json.fields.push_back({"content-type", "application/json"});
  CHECK(execd::serve(*r.core, json, sbx, "/files/upload").status == 400);
  CHECK(r.execs.empty());
  CHECK(bad(upload_body({{R"({"path":"denied","owner":"root"})", "x"}})).status == 400);
  r.cfg.max_upload_bytes = 3;
  CHECK(bad(upload_body({{R"({"path":"a"})", "four"}})).status == 413);
}

TEST_CASE(
    "execd GET /files/download: the whole file 200, one range 206 with Content-Range, past "
    "the end 416, a missing file 404 FILE_NOT_FOUND",
    "[execd][files]") {
  rig r;
  r.add();
  r.answer([](const client::exec_options& o) {
    if (o.cmd[5] == "gone") return exited(2);
    if (o.cmd[7] == "50") {
      auto e = exited(9);
      e.stderr_data = "10";
      return e;
    }
    if (o.cmd[7].empty()) return exited(0, "10 0 9\n0123456789");
    return exited(0, "10 2 4\n234");
  });
  auto whole = with_range(r, "path=%2Fworkspace%2Fd%2Ff.bin", "");
  CHECK(whole.status == 200);
  CHECK(whole.body == "0123456789");
  CHECK(whole.content_type == "application/octet-stream");
  CHECK(header(whole, "Content-Disposition") == "attachment; filename=\"f.bin\"");
  CHECK(r.execs[0].cmd[5] == "d/f.bin");
  auto part = with_range(r, "path=/workspace/d/f.bin", "bytes=2-4");
  CHECK(part.status == 206);
  CHECK(part.body == "234");
  CHECK(header(part, "Content-Range") == "bytes 2-4/10");
  CHECK(r.execs[1].cmd[7] == "2");
  CHECK(r.execs[1].cmd[8] == "4");
  auto past = with_range(r, "path=/workspace/f", "bytes=50-");
  CHECK(past.status == 416);
  CHECK(header(past, "Content-Range") == "bytes */10");
  CHECK(with_range(r, "path=/workspace/gone", "").body ==
        R"({"code":"FILE_NOT_FOUND","message":"file not found: /workspace/gone"})");
  CHECK(with_range(r, "", "").body ==
        R"({"code":"MISSING_QUERY","message":"missing query parameter path"})");
  CHECK(with_range(r, "path=/etc/passwd", "").status == 400);
  CHECK(with_range(r, "path=/workspace/f&offset=1", "bytes=0-1").status == 400);
  CHECK(with_range(r, "path=/workspace/f&offset=0", "").status == 400);
}

namespace {

// The workspace program run by the host's sh on a temporary directory in place of
// /workspace (its paths mapped back in what it prints): with the host's PATH (python3's
// program), or with `tools` as the whole PATH (a directory of busybox's applets and no
// python3: the sh program, as an image with only busybox runs it).
struct host_workspace {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("dg-execd-ws-" + std::to_string(::getpid()));
  explicit host_workspace(rig& r, std::string tools = {}) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    const std::string root = dir.string();
    r.answer([root, tools](const client::exec_options& o) {
      std::vector<std::string> cmd = o.cmd;
      cmd[2] = std::regex_replace(cmd[2], std::regex("/workspace"), root);
      std::vector<std::string> argv;
      if (!tools.empty()) argv = {"env", "-i", "PATH=" + tools, "/bin/busybox"};
      argv.insert(argv.end(), {"sh", "-c", "printf '%s' \"$0\" | exec \"$@\"", o.stdin_data});
      argv.insert(argv.end(), cmd.begin(), cmd.end());
      auto out = run_command(argv, std::chrono::seconds(20));
      auto res = exited(out.exit_code, std::regex_replace(out.out, std::regex(root), "/workspace"));
      res.stderr_data = out.err;
      return res;
    });
  }
  ~host_workspace() { std::filesystem::remove_all(dir); }
};

// A directory of busybox's applets, as a busybox-only image has them (no python3).
struct busybox_tools {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("dg-execd-bb-" + std::to_string(::getpid()));
  busybox_tools() {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    for (const char* applet : {"sh", "stat", "find", "head", "tail", "wc", "cat", "mv", "rm",
                               "mkdir", "chmod", "id", "tr", "rmdir", "env"})
      std::filesystem::create_symlink("/bin/busybox", dir / applet);
  }
  ~busybox_tools() { std::filesystem::remove_all(dir); }
};

}  // namespace

namespace {
void files_suite(rig& r, host_workspace& ws) {
  namespace fs = std::filesystem;
  CHECK(upload(r, upload_body({{R"({"path":"/workspace/d/f.txt","mode":600})", "hello world"}}))
            .status == 200);
  CHECK((fs::status(ws.dir / "d/f.txt").permissions() & fs::perms::all) ==
        (fs::perms::owner_read | fs::perms::owner_write));
  auto part = with_range(r, "path=/workspace/d/f.txt", "bytes=6-");
  CHECK(part.status == 206);
  CHECK(part.body == "world");
  CHECK(header(part, "Content-Range") == "bytes 6-10/11");
  CHECK(with_range(r, "path=/workspace/d/f.txt", "bytes=11-").status == 416);
  std::ofstream(ws.dir / "d/lines.txt") << "l1\nl2\nl3\nl4";
  auto window = with_range(r, "path=/workspace/d/lines.txt&offset=2&limit=2", "");
  CHECK(window.status == 200);
  CHECK(window.body == "l2\nl3\n");
  CHECK(window.content_type == "text/plain; charset=utf-8");
  CHECK(with_range(r, "path=/workspace/d/lines.txt&offset=3", "").body == "l3\nl4");
  CHECK(with_range(r, "path=/workspace/d/lines.txt&offset=9&limit=1", "").body.empty());
  std::filesystem::remove(ws.dir / "d/lines.txt");

  auto info = r.call("GET", "/files/info", {}, "path=/workspace/d/f.txt&path=d");
  CHECK(info.status == 200);
  CHECK(info.body.find(
            R"("/workspace/d/f.txt":{"path":"/workspace/d/f.txt","type":"file","size":11,)") !=
        std::string::npos);
  CHECK(info.body.find(R"("mode":600})") != std::string::npos);
  CHECK(info.body.find(R"("d":{"path":"/workspace/d","type":"directory")") != std::string::npos);
  CHECK(r.call("GET", "/files/info", {}, "path=/workspace/none").status == 404);

  CHECK(r.call("POST", "/directories", R"({"/workspace/d/e/f":{"mode":700}})").status == 200);
  CHECK((fs::status(ws.dir / "d/e/f").permissions() & fs::perms::all) == fs::perms::owner_all);
  fs::create_symlink("/etc", ws.dir / "d/link");
  auto listed = r.call("GET", "/directories/list", {}, "path=/workspace/d&depth=2");
  CHECK(listed.status == 200);
  const auto e = listed.body.find("\"/workspace/d/e\"");
  const auto ef = listed.body.find("\"/workspace/d/e/f\"");
  const auto f = listed.body.find("\"/workspace/d/f.txt\"");
  const auto l = listed.body.find(R"("/workspace/d/link","type":"symlink")");
  CHECK((e < ef && ef < f && f < l && l != std::string::npos));
  CHECK(listed.body.find("passwd") == std::string::npos);
  CHECK(r.call("GET", "/directories/list", {}, "path=/workspace/d/link").status == 400);

  // Through the symlink: refused, never followed.
  CHECK(upload(r, upload_body({{R"({"path":"/workspace/d/link/x"})", "x"}})).status == 400);
  CHECK(with_range(r, "path=/workspace/d/link/passwd", "").status == 400);
  CHECK(r.call("DELETE", "/directories", {}, "path=/workspace/d/link").status == 400);
  CHECK(upload(r, upload_body({{R"({"path":"/workspace/d/g","owner":"nobody"})", "x"}})).status ==
        400);
  CHECK(!fs::exists(ws.dir / "d/g"));

  CHECK(r.call("DELETE", "/files", {}, "path=/workspace/d").status == 400);  // a directory
  CHECK(r.call("DELETE", "/files", {}, "path=/workspace/d/f.txt").status == 200);
  CHECK(!fs::exists(ws.dir / "d/f.txt"));
  CHECK(r.call("DELETE", "/directories", {}, "path=/workspace").status == 400);
  CHECK(r.call("DELETE", "/directories", {}, "path=/workspace/d").status == 200);
  CHECK(!fs::exists(ws.dir / "d"));
  CHECK(fs::exists("/etc/passwd"));
}
}  // namespace

TEST_CASE(
    "execd files on a real python3: upload with mode, ranged download, info, directories "
    "made, listed and deleted, symlinks refused and never followed",
    "[execd][files]") {
  rig r;
  r.add();
  host_workspace ws(r);
  files_suite(r, ws);
}

TEST_CASE(
    "execd files in an image with busybox and no python3: the same answers from the sh program",
    "[execd][files]") {
  busybox_tools tools;
  rig r;
  r.add();
  host_workspace ws(r, tools.dir.string());
  files_suite(r, ws);
}

namespace {
void edits_suite(rig& r, host_workspace& ws, bool python) {
  namespace fs = std::filesystem;
  fs::create_directories(ws.dir / "src/sub");
  std::ofstream(ws.dir / "src/a.py") << "x = 1\nx = 2\n";
  std::ofstream(ws.dir / "src/sub/b.py") << "y\n";
  std::ofstream(ws.dir / "src/c.txt") << "z\n";
  fs::create_symlink("/etc", ws.dir / "src/etc");

  CHECK(r.call("POST", "/files/permissions", R"({"/workspace/src/a.py":{"mode":700}})").status ==
        200);
  CHECK((fs::status(ws.dir / "src/a.py").permissions() & fs::perms::all) == fs::perms::owner_all);
  CHECK(r.call("POST", "/files/permissions", R"({"/workspace/src/etc":{"mode":777}})").status ==
        400);
  CHECK(r.call("POST", "/files/permissions", R"({"/workspace/src/a.py":{"owner":"nobody"}})")
            .status == 400);
  CHECK(r.call("POST", "/files/permissions", R"({"/workspace/src/a.py":{"mode":"7"}})").status ==
        400);

  auto py = r.call("GET", "/files/search", {}, "path=/workspace/src&pattern=*.py");
  CHECK(py.status == 200);
  CHECK(py.body.find("\"/workspace/src/a.py\"") != std::string::npos);
  CHECK(py.body.find("\"/workspace/src/sub/b.py\"") != std::string::npos);
  CHECK(py.body.find("c.txt") == std::string::npos);
  CHECK(py.body.find("passwd") == std::string::npos);
  auto all = r.call("GET", "/files/search", {}, "path=/workspace/src");
  CHECK(all.body.find("c.txt") != std::string::npos);

  auto counts = r.call("POST", "/files/replace", R"({"/workspace/src/a.py":{"old":"x","new":"w"}})",
                       "verbose=true");
  if (!python) {  // replace needs python3: said, nothing changed
    CHECK(counts.status == 400);
    CHECK(counts.body.find("needs python3") != std::string::npos);
    std::ofstream(ws.dir / "src/a.py") << "w = 1\nw = 2\n";
  } else {
    CHECK(counts.body == R"({"/workspace/src/a.py":{"replacedCount":2}})");
  }
  std::ifstream in(ws.dir / "src/a.py");
  CHECK(std::string(std::istreambuf_iterator<char>(in), {}) == "w = 1\nw = 2\n");
  auto quiet = r.call("POST", "/files/replace", R"({"/workspace/src/a.py":{"old":"w","new":"v"}})");
  CHECK(quiet.status == (python ? 200 : 400));
  if (python) CHECK(quiet.body.empty());
  CHECK(
      r.call("POST", "/files/replace", R"({"/workspace/src/a.py":{"old":"","new":"v"}})").status ==
      400);
  CHECK(r.call("POST", "/files/replace", R"({"/workspace/src/etc/passwd":{"old":"r","new":"v"}})")
            .status == 400);

  CHECK(
      r.call("POST", "/files/mv", R"([{"src":"/workspace/src/c.txt","dest":"/workspace/c2.txt"}])")
          .status == 200);
  CHECK(fs::exists(ws.dir / "c2.txt"));
  CHECK(
      r.call("POST", "/files/mv", R"([{"src":"/workspace/c2.txt","dest":"/workspace/src/etc/x"}])")
          .status == 400);
  CHECK(r.call("POST", "/files/mv", R"([{"src":"/workspace/c2.txt","dest":"/tmp/x"}])").status ==
        400);
  CHECK(
      r.call("POST", "/files/mv", R"([{"src":"/workspace/none","dest":"/workspace/y"}])").status ==
      404);
  CHECK(fs::exists(ws.dir / "c2.txt"));
}
}  // namespace

TEST_CASE(
    "execd file edits on a real python3: permissions, mv, search by glob, replace with its "
    "counts, none through a symlink",
    "[execd][files]") {
  rig r;
  r.add();
  host_workspace ws(r);
  edits_suite(r, ws, true);
}

TEST_CASE(
    "execd file edits in an image with busybox and no python3: the same from the sh program, "
    "replace refused as needing python3",
    "[execd][files]") {
  busybox_tools tools;
  rig r;
  r.add();
  host_workspace ws(r, tools.dir.string());
  edits_suite(r, ws, false);
}

// Ownership under docker-cli.json: a client sees, execs into, stops and removes only the
// containers its profile created. Judged by the daemon (asked directly).
#include <catch2/catch.hpp>
#include <thread>

#include "harness.hpp"

using namespace dockgate::test;
using namespace std::chrono_literals;

namespace {
const std::string cli_policy = "compose/policies/docker-cli.json";
std::string direct() {
  return docker_cli() + " -H " + engine_host();
}
std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}
struct cleanup {
  std::vector<std::string> names;
  ~cleanup() {
    for (const auto& n : names) run(direct() + " rm -f " + n + " >/dev/null 2>&1");
  }
};
}  // namespace

TEST_CASE("docker-cli clients act only on their own containers", "[integration][ownership]") {
  proxy_process proxy(cli_policy);
  const auto mine = unique_name("dg-mine");
  const auto foreign = unique_name("dg-foreign");
  cleanup c{{mine, foreign}};
  REQUIRE(
      run(proxy.docker() + " run -d --name " + mine + " " + test_image() + " sleep 60").status ==
      0);
  REQUIRE(run(direct() + " run -d --name " + foreign + " " + test_image() + " sleep 60").status ==
          0);
  const std::string foreign_id =
      trim(run(direct() + " inspect --format '{{.Id}}' " + foreign).output);
  REQUIRE(foreign_id.size() == 64);

  // ps shows mine, not the foreign one (the label filter, and the response filter).
  auto ps = run(proxy.docker() + " ps -a --format '{{.Names}}'");
  CHECK(ps.output.find(mine) != std::string::npos);
  CHECK(ps.output.find(foreign) == std::string::npos);
  auto widened = run(proxy.docker() + " ps -a --filter label=dockgate.owner --format '{{.Names}}'");
  CHECK(widened.output.find(foreign) == std::string::npos);

  // Every way to name the foreign container is refused, and the daemon shows it untouched.
  for (const std::string& ref : {foreign, foreign_id, foreign_id.substr(0, 12)}) {
    CAPTURE(ref);
    for (const std::string& cmd :
         {"container inspect " + ref, "exec " + ref + " true", "logs " + ref, "kill " + ref,
          "stop -t 0 " + ref, "rm -f " + ref, "wait " + ref}) {
      CAPTURE(cmd);
      auto r = run("timeout 20 env " + proxy.docker() + " " + cmd);
      INFO(r.output);
      // The CLI words a 404 itself ("Error: No such container"), and `rm -f` ignores it.
      if (!cmd.starts_with("rm -f")) CHECK(r.status != 0);
      CHECK(r.output.find("such container") != std::string::npos);
    }
  }
  CHECK(trim(run(direct() + " inspect --format '{{.State.Running}}' " + foreign).output) == "true");
  CHECK(proxy.audit_contains(
      "\"operation\":\"ContainerKill\",\"verdict\":\"deny\",\"rule\":\"owner\""));

  // Mine works by name and by ID prefix.
  const std::string mine_id = trim(run(direct() + " inspect --format '{{.Id}}' " + mine).output);
  CHECK(run(proxy.docker() + " exec " + mine + " true").status == 0);
  CHECK(run(proxy.docker() + " inspect " + mine_id.substr(0, 12)).status == 0);
  CHECK(run(proxy.docker() + " kill " + mine).status == 0);
}

TEST_CASE("execs are tied to their container's owner", "[integration][ownership]") {
  proxy_process proxy(cli_policy);
  const auto foreign = unique_name("dg-foreign-exec");
  cleanup c{{foreign}};
  REQUIRE(run(direct() + " run -d --name " + foreign + " " + test_image() + " sleep 60").status ==
          0);
  // An exec created on the foreign container, directly on the daemon.
  auto created = run("curl -s --unix-socket " + engine_socket() +
                     " -H 'Content-Type: application/json' -d "
                     "'{\"Cmd\":[\"touch\",\"/pwned\"]}' http://d/v1.41/containers/" +
                     foreign + "/exec");
  const auto at = created.output.find("\"Id\":\"");
  REQUIRE(at != std::string::npos);
  const std::string exec_id = created.output.substr(at + 6, 64);
  for (const std::string& request :
       {"POST /v1.41/exec/" + exec_id +
            "/start HTTP/1.1\r\nHost: d\r\nContent-Type: application/json\r\n"
            "Content-Length: 15\r\n\r\n{\"Detach\":true}",
        "GET /v1.41/exec/" + exec_id + "/json HTTP/1.1\r\nHost: d\r\n\r\n",
        "POST /v1.41/exec/" + exec_id +
            "/resize?h=1&w=1 HTTP/1.1\r\nHost: d\r\nContent-Length: 0\r\n\r\n"}) {
    auto r = raw_exchange(proxy.socket_path(), request);
    INFO(r.bytes);
    CHECK(r.status() == 404);
    CHECK(r.bytes.find("dockgate: no such exec instance") != std::string::npos);
  }
  // The exec never ran: the daemon reports it not running and never started.
  auto inspect =
      run("curl -s --unix-socket " + engine_socket() + " http://d/v1.41/exec/" + exec_id + "/json");
  CHECK(inspect.output.find("\"Running\":false") != std::string::npos);
  CHECK(inspect.output.find("\"Pid\":0") != std::string::npos);
  CHECK(run(direct() + " exec " + foreign + " test -e /pwned").status != 0);
}

TEST_CASE("events show only the profile's own containers", "[integration][ownership]") {
  proxy_process proxy(cli_policy);
  const auto mine = unique_name("dg-ev-mine");
  const auto foreign = unique_name("dg-ev-foreign");
  cleanup c{{mine, foreign}};
  background events(proxy.docker() + " events --format '{{.Actor.Attributes.name}} {{.Action}}'");
  std::this_thread::sleep_for(500ms);
  REQUIRE(run(direct() + " run --name " + foreign + " " + test_image() + " true").status == 0);
  REQUIRE(run(proxy.docker() + " run --name " + mine + " " + test_image() + " true").status == 0);
  std::vector<std::string> lines;
  while (auto line = events.read_line(10s)) {
    lines.push_back(*line);
    if (*line == mine + " die") break;
  }
  INFO(Catch::Detail::stringify(lines));
  bool saw_mine = false;
  for (const auto& l : lines) {
    CHECK(l.find(foreign) == std::string::npos);
    saw_mine = saw_mine || l.starts_with(mine + " ");
  }
  CHECK(saw_mine);
}

TEST_CASE("read-only (not confined) sees every container", "[integration][ownership]") {
  proxy_process proxy("compose/policies/read-only.json");
  const auto foreign = unique_name("dg-ro-sees");
  cleanup c{{foreign}};
  REQUIRE(run(direct() + " run -d --name " + foreign + " " + test_image() + " sleep 60").status ==
          0);
  CHECK(run(proxy.docker() + " ps --format '{{.Names}}'").output.find(foreign) !=
        std::string::npos);
  CHECK(run(proxy.docker() + " inspect " + foreign).status == 0);
}

// A SIGHUP reloads the policy for new requests (docs/proxy.md); requests in flight keep the
// policy they started with, and every request still gets its one audit line. Judged by the
// audit log the gate wrote (stdout) and the answers the clients received.
#include <signal.h>

#include <catch2/catch.hpp>
#include <future>
#include <thread>

#include "harness.hpp"

using namespace dockgate::test;
using namespace std::chrono_literals;

namespace {

std::size_t occurrences(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("SIGHUP loses no audit line: requests in flight across reloads each get one",
          "[integration][signals][audit]") {
  proxy_process proxy("compose/policies/docker-cli.json");
  const std::string direct = docker_cli() + " -H " + engine_host();
  // Containers that run until the test ends them, after the reloads: their waits are in
  // flight across them.
  constexpr int waits = 4;
  std::vector<std::string> names;
  for (int i = 0; i < waits; ++i) {
    names.push_back(unique_name("dg-hup-wait"));
    REQUIRE(
        run(proxy.docker() + " run -d --name " + names.back() + " " + test_image() + " sleep 600")
            .status == 0);
  }
  std::vector<std::future<raw_response>> in_flight;
  for (const auto& name : names)
    in_flight.push_back(std::async(std::launch::async, [&proxy, name] {
      return raw_exchange(
          proxy.socket_path(),
          "POST /v1.41/containers/" + name +
              "/wait HTTP/1.1\r\nHost: d\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
          false, 20000ms);
    }));
  std::this_thread::sleep_for(500ms);  // the waits have reached the daemon
  for (int i = 0; i < 3; ++i) {
    ::kill(proxy.pid(), SIGHUP);
    std::this_thread::sleep_for(100ms);
  }
  // Bounded: the gate has said it reloaded, three times.
  for (int i = 0; i < 100 && occurrences(run("cat " + proxy.dir() + "/proxy.err").output,
                                         "SIGHUP: policy reloaded") < 3;
       ++i)
    std::this_thread::sleep_for(50ms);
  CHECK(occurrences(run("cat " + proxy.dir() + "/proxy.err").output, "SIGHUP: policy reloaded") ==
        3);

  // The waits were in flight across the reloads: their containers still run. Now they end.
  for (const auto& name : names) {
    CHECK(run(direct + " inspect --format '{{.State.Running}}' " + name).output == "true\n");
    run(direct + " kill " + name);
  }

  for (auto& f : in_flight) {
    auto r = f.get();
    INFO(r.bytes);
    CHECK(r.status() == 200);
    CHECK(r.bytes.find("\"StatusCode\":137") != std::string::npos);
  }
  // A request after the reloads, under the new policy.
  CHECK(raw_exchange(proxy.socket_path(),
                     "GET /_ping HTTP/1.1\r\nHost: d\r\nConnection: close\r\n\r\n")
            .status() == 200);

  // One line each: every wait (all in flight across the reloads), and the ping after.
  auto lines_of = [&](const std::string& log) {
    std::size_t waited = 0;
    for (const auto& name : names) waited += occurrences(log, "/containers/" + name + "/wait\"");
    return std::pair{waited, occurrences(log, "\"operation\":\"SystemPing\"")};
  };
  std::string log;
  for (int i = 0; i < 100; ++i) {  // bounded: the last lines are written after their answers
    log = proxy.audit_log();
    if (const auto [w, p] = lines_of(log); w >= waits && p >= 1) break;
    std::this_thread::sleep_for(50ms);
  }
  for (const auto& name : names) CHECK(occurrences(log, "/containers/" + name + "/wait\"") == 1);
  CHECK(occurrences(log, "\"operation\":\"SystemPing\"") == 1);
  for (const auto& name : names) run(direct + " rm -f " + name + " >/dev/null 2>&1");
}

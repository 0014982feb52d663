// Graceful shutdown: SIGTERM stops accepting, lets in-flight requests finish until the
// deadline, then closes what is left (long streams) and exits 0.
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <future>
#include <thread>

#include "harness.hpp"

using namespace dockgate::test;
using namespace std::chrono_literals;

namespace {
const std::string cli_policy = "compose/policies/docker-cli.json";
}

TEST_CASE("SIGTERM on an idle proxy exits at once and removes its socket",
          "[integration][shutdown]") {
  proxy_process proxy(cli_policy);
  // An idle keep-alive connection does not hold the shutdown up.
  auto idle = std::async(std::launch::async, [&] {
    return raw_exchange(proxy.socket_path(), "GET /_ping HTTP/1.1\r\nHost: d\r\n\r\n", false,
                        10000ms);
  });
  std::this_thread::sleep_for(300ms);
  auto [status, took] = proxy.terminate();
  CHECK(status == 0);
  CHECK(took < 2000ms);
  CHECK(idle.get().status() == 200);
  struct stat st {};
  CHECK(::stat(proxy.socket_path().c_str(), &st) != 0);
}

TEST_CASE("SIGTERM lets an in-flight request finish", "[integration][shutdown]") {
  proxy_process proxy(cli_policy, {"--shutdown-timeout", "10"});
  const auto name = unique_name("dg-term");
  REQUIRE(run(proxy.docker() + " run -d --name " + name + " " + dockgate::test::test_image() +
              " sh -c 'sleep 2; exit 7'")
              .status == 0);
  auto wait = std::async(std::launch::async, [&] {
    return raw_exchange(
        proxy.socket_path(),
        "POST /v1.41/containers/" + name + "/wait HTTP/1.1\r\nHost: d\r\nContent-Length: 0\r\n\r\n",
        false, 15000ms);
  });
  std::this_thread::sleep_for(500ms);
  auto [status, took] = proxy.terminate();
  auto response = wait.get();
  INFO(response.bytes);
  CHECK(status == 0);
  CHECK(response.status() == 200);
  CHECK(response.bytes.find("\"StatusCode\":7") != std::string::npos);
  CHECK(took < 9000ms);
  run(docker_cli() + " -H " + engine_host() + " rm -f " + name);
}

TEST_CASE("SIGTERM closes long streams at the deadline", "[integration][shutdown]") {
  const std::string port = free_tcp_port();
  proxy_process proxy(cli_policy,
                      {"--shutdown-timeout", "1", "--metrics", "tcp://127.0.0.1:" + port});
  background events(proxy.docker() + " events");
  // The stream is open at the gate before the signal (on a busy machine the CLI takes a
  // while to get there).
  bool open = false;
  for (int i = 0; i < 100 && !open; ++i) {
    open = run("curl -s http://127.0.0.1:" + port + "/metrics")
               .output.find("dockgate_open_streams 1\n") != std::string::npos;
    if (!open) std::this_thread::sleep_for(100ms);
  }
  REQUIRE(open);
  auto [status, took] = proxy.terminate();
  CHECK(status == 0);
  CHECK(took >= 900ms);
  CHECK(took < 5000ms);
  CHECK(events.wait(5000ms) != -1);  // the CLI saw its stream end
}

TEST_CASE("SIGTERM loses no audit line", "[integration][shutdown][audit]") {
  proxy_process proxy(cli_policy);
  // 200 requests on one connection, the signal right behind the last answer: every line
  // reaches stdout, though lines are batched per event-loop turn.
  std::string requests;
  for (int i = 0; i < 199; ++i) requests += "GET /_ping HTTP/1.1\r\nHost: d\r\n\r\n";
  requests += "GET /_ping HTTP/1.1\r\nHost: d\r\nConnection: close\r\n\r\n";
  auto answers = raw_exchange(proxy.socket_path(), requests, false, 20000ms);
  auto [status, took] = proxy.terminate();
  CHECK(status == 0);
  std::size_t answered = 0;
  for (auto at = answers.bytes.find("HTTP/1.1 200"); at != std::string::npos;
       at = answers.bytes.find("HTTP/1.1 200", at + 1))
    ++answered;
  CHECK(answered == 200);
  const std::string log = proxy.audit_log();
  std::size_t lines = 0;
  for (auto at = log.find("\"operation\":\"SystemPing\""); at != std::string::npos;
       at = log.find("\"operation\":\"SystemPing\"", at + 1))
    ++lines;
  CHECK(lines == 200);
  CHECK(std::count(log.begin(), log.end(), '\n') == static_cast<long>(lines));
}

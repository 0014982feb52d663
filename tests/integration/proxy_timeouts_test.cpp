// --body-timeout (docs/proxy.md): a client that sends a request head and part of its body
// and then stalls is cut once the gate has waited that long for the next bytes, and
// nothing of the request reaches the daemon. Judged by the connection (closed by the
// gate) and the daemon's record (no container of the request's name).
#include <catch2/catch.hpp>

#include "harness.hpp"

using namespace dockgate::test;
using namespace std::chrono_literals;

namespace {

std::string create_head(const std::string& name, std::size_t length) {
  return "POST /v1.41/containers/create?name=" + name +
         " HTTP/1.1\r\nHost: d\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(length) + "\r\n\r\n";
}

}  // namespace

TEST_CASE(
    "body timeout: a request body that stalls is cut (--body-timeout), nothing reaches the daemon",
    "[integration][limits]") {
  // A head timeout far above the body's: only --body-timeout can cut the stalled body.
  proxy_process proxy("compose/policies/docker-cli.json",
                      {"--body-timeout", "1", "--head-timeout", "120"});
  const std::string body = R"({"Image":")" + test_image() + R"(","Cmd":["true"]})";

  // The control: the same request whole creates the container.
  {
    const auto whole = unique_name("dg-body-ok");
    auto created = raw_exchange(proxy.socket_path(), create_head(whole, body.size()) + body, true);
    INFO(created.bytes);
    CHECK(created.status() == 201);
    CHECK(container_exists(whole));
    run(docker_cli() + " -H " + engine_host() + " rm -f " + whole + " >/dev/null 2>&1");
  }

  // The head and half the body, then nothing (the client keeps its side open). The read
  // waits far longer than the body timeout for a byte or the end of the connection.
  const auto name = unique_name("dg-body-stall");
  auto cut = raw_exchange(proxy.socket_path(),
                          create_head(name, body.size()) + body.substr(0, body.size() / 2), false,
                          20000ms);
  INFO(cut.bytes);
  CHECK(cut.closed);  // the gate ended the connection, not the test's read timeout
  CHECK(cut.bytes.find("HTTP/1.1 201") == std::string::npos);
  CHECK_FALSE(container_exists(name));
  run(docker_cli() + " -H " + engine_host() + " rm -f " + name + " >/dev/null 2>&1");
}

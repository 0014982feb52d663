// Hijacked streams at the byte level: stdin sent right behind the upgrade request (before
// the daemon's 101) is forwarded after it, and the legacy 200 raw-stream answer of
// ExecStart (no Upgrade header) is spliced too.
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

std::string json_request(const std::string& target, const std::string& body,
                         const std::string& extra = "") {
  return "POST " + target + " HTTP/1.1\r\nHost: d\r\nContent-Type: application/json\r\n" + extra +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}
}  // namespace

TEST_CASE("stdin sent before the 101 is forwarded after it", "[integration][hijack]") {
  proxy_process proxy(cli_policy);
  const auto name = unique_name("dg-early");
  REQUIRE(run(proxy.docker() + " create -i --name " + name + " " + test_image() +
              " sh -c 'read line; echo got:$line'")
              .status == 0);
  REQUIRE(run(proxy.docker() + " start " + name).status == 0);
  // The upgrade request and the stdin bytes leave in one write.
  const std::string request = "POST /v1.41/containers/" + name +
                              "/attach?stream=1&stdin=1&stdout=1 HTTP/1.1\r\nHost: d\r\n"
                              "Connection: Upgrade\r\nUpgrade: tcp\r\nContent-Length: 0\r\n\r\n"
                              "early-bird\n";
  auto r = raw_exchange(proxy.socket_path(), request, false, 5000ms);
  INFO(r.bytes);
  CHECK(r.status() == 101);
  CHECK(r.bytes.find("got:early-bird") != std::string::npos);
  CHECK(proxy.audit_contains(
      "\"operation\":\"ContainerAttach\",\"verdict\":\"allow\",\"status\":101"));
  run(direct() + " rm -f " + name);
}

TEST_CASE("ExecStart without Upgrade: the legacy 200 raw stream is spliced",
          "[integration][hijack]") {
  proxy_process proxy(cli_policy);
  const auto name = unique_name("dg-legacy");
  REQUIRE(
      run(proxy.docker() + " run -d --name " + name + " " + test_image() + " sleep 60").status ==
      0);
  auto created = raw_exchange(
      proxy.socket_path(),
      json_request(
          "/v1.41/containers/" + name + "/exec",
          R"({"AttachStdout":true,"AttachStderr":true,"Tty":true,"Cmd":["echo","legacy-stream"]})",
          "Connection: close\r\n"));
  INFO(created.bytes);
  REQUIRE(created.status() == 201);
  const auto id_at = created.bytes.find("\"Id\":\"");
  REQUIRE(id_at != std::string::npos);
  const std::string exec_id = created.bytes.substr(id_at + 6, 64);
  auto started = raw_exchange(
      proxy.socket_path(),
      json_request("/v1.41/exec/" + exec_id + "/start", R"({"Detach":false,"Tty":true})"), false,
      5000ms);
  INFO(started.bytes);
  CHECK(started.status() == 200);
  CHECK(started.bytes.find("application/vnd.docker.raw-stream") != std::string::npos);
  CHECK(started.bytes.find("legacy-stream") != std::string::npos);
  CHECK(started.closed);
  run(direct() + " rm -f " + name);
}

TEST_CASE("an attach answered with an error is not spliced", "[integration][hijack]") {
  // Not confined to owned containers, so that the daemon itself answers the attach.
  proxy_process proxy(
      R"({"profiles":{"raw":{"confine_to_owned":false,"allow":["ContainerAttach","SystemPing"]}}})");
  auto r = raw_exchange(
      proxy.socket_path(),
      "POST /v1.41/containers/no-such-container-dg/attach?stream=1&stdout=1 HTTP/1.1\r\n"
      "Host: d\r\nConnection: Upgrade\r\nUpgrade: tcp\r\nContent-Length: 0\r\n\r\n"
      "GET /v1.41/_ping HTTP/1.1\r\nHost: d\r\nConnection: close\r\n\r\n");
  INFO(r.bytes);
  CHECK(r.status() == 404);
  // dockerd ends this answer by closing; the proxy relays it as a plain response and closes,
  // without ever switching the connection to a stream.
  CHECK(r.count() == 1);
  CHECK(r.closed);
  CHECK(proxy.audit_contains(
      "\"operation\":\"ContainerAttach\",\"verdict\":\"allow\",\"status\":404"));
  CHECK(proxy.audit_log().find("hijacked") == std::string::npos);
}

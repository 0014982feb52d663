// Operator features against a real daemon: audit mode, per-client profiles, the
// plaintext-TCP opt-in.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <thread>

#include "harness.hpp"

using namespace dockgate::test;
using namespace std::chrono_literals;

TEST_CASE("audit mode lets refused requests through and records what it would do", "[integration][operator]") {
  proxy_process proxy(R"({"profiles":{"learn":{"mode":"audit","allow":["SystemPing","SystemPingHead","ContainerCreate",
      "ContainerDelete"],"images":{"allow":["docker.io/library/*"]},"container_create":{"HostConfig.Memory":{"max":1000000000}}}}})");
  // VolumeList is not allowed: in audit mode it goes through, and the log says so.
  auto r = raw_exchange(proxy.socket_path(), "GET /v1.41/volumes HTTP/1.1\r\nHost: d\r\nConnection: close\r\n\r\n");
  CHECK(r.status() == 200);
  CHECK(proxy.audit_contains("\"would\":\"dockgate: VolumeList is not allowed by profile learn\""));
  // A create the profile would refuse (image) and change (memory) goes up as sent.
  const auto name = unique_name("dg-audit");
  const std::string body = R"({"Image":")" + test_image() + R"(","HostConfig":{"Memory":0}})";
  auto created = raw_exchange(proxy.socket_path(),
                              "POST /v1.41/containers/create?name=" + name + " HTTP/1.1\r\nHost: d\r\nContent-Type: "
                              "application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
  INFO(created.bytes);
  CHECK(created.status() == 201);
  CHECK(run(docker_cli() + " -H " + engine_host() + " inspect --format '{{.HostConfig.Memory}}' " + name).output == "0\n");
  CHECK(proxy.audit_contains("is not in the image allowlist"));
  // Malformed requests are refused in audit mode too.
  auto dup = raw_exchange(proxy.socket_path(), "GET /v1.41/_ping?a=%zz HTTP/1.1\r\nHost: d\r\n\r\n");
  CHECK(dup.status() == 400);
  run(docker_cli() + " -H " + engine_host() + " rm -f " + name);
}

TEST_CASE("the unix peer's uid selects its profile", "[integration][operator]") {
  proxy_process proxy(R"({"clients":[{"uid":4242,"profile":"ro"}],"default_profile":"cli",
      "profiles":{"cli":{"allow":["SystemPing","SystemPingHead","SystemVersion"]},
                  "ro":{"allow":["SystemPing","SystemPingHead"]}}})",
                      {"--socket-mode", "0666"});
  ::chmod(proxy.dir().c_str(), 0755);  // let uid 4242 reach the socket
  const std::string as_4242 = "HOME=/tmp setpriv --reuid 4242 --regid 4242 --clear-groups ";
  auto other = run(as_4242 + "env " + proxy.docker() + " version --format '{{.Server.APIVersion}}'");
  INFO(other.output);
  CHECK(other.output.find("dockgate: SystemVersion is not allowed by profile ro") != std::string::npos);
  auto root = run(proxy.docker() + " version --format '{{.Server.APIVersion}}'");
  CHECK(root.output == "1.41\n");
  CHECK(proxy.audit_contains("\"client\":\"unix:uid=4242,gid=4242"));
}

TEST_CASE("a client no rule matches is refused when there is no default", "[integration][operator]") {
  proxy_process proxy(R"({"clients":[{"uid":4242,"profile":"ro"}],"profiles":{"ro":{"allow":["SystemPing"]}}})");
  auto r = raw_exchange(proxy.socket_path(), "GET /v1.41/_ping HTTP/1.1\r\nHost: d\r\n\r\n");
  CHECK(r.status() == 403);
  CHECK(r.bytes.find("dockgate: no profile for client unix:uid=0") != std::string::npos);
}

TEST_CASE("plaintext TCP on a non-loopback address needs an explicit opt-in", "[integration][operator]") {
  CHECK_THROWS_WITH(proxy_process("compose/policies/read-only.json", {"--listen", "tcp://0.0.0.0:" + free_tcp_port()}),
                    Catch::Contains("--allow-insecure-tcp"));
}

TEST_CASE("metrics and health on their own listener", "[integration][operator][metrics]") {
  const std::string port = free_tcp_port();
  proxy_process proxy("compose/policies/docker-cli.json", {"--metrics", "tcp://127.0.0.1:" + port});
  const std::string base = "curl -s http://127.0.0.1:" + port;
  CHECK(run(base + "/healthz").output == R"({"status":"ok","daemon":"answers"})");
  CHECK(run(proxy.docker() + " ps").status == 0);
  CHECK(run(proxy.docker() + " volume create x").status != 0);
  // A held events stream counts as an open stream while it lasts.
  background events(proxy.docker() + " events");
  std::string text;
  for (int i = 0; i < 50; ++i) {
    text = run(base + "/metrics").output;
    if (text.find("dockgate_open_streams 1\n") != std::string::npos) break;
    std::this_thread::sleep_for(100ms);
  }
  INFO(text);
  CHECK(text.find("dockgate_open_streams 1\n") != std::string::npos);
  CHECK(text.find("dockgate_requests_total{profile=\"docker-cli\",operation=\"ContainerList\",verdict=\"allow\",status=\"200\"}") != std::string::npos);
  CHECK(text.find("dockgate_requests_total{profile=\"docker-cli\",operation=\"VolumeCreate\",verdict=\"deny\",status=\"403\"} 1") != std::string::npos);
  CHECK(text.find("dockgate_refusals_total{profile=\"docker-cli\",rule=\"operation\"} 1") != std::string::npos);
  events.kill();
  // The gate's listeners do not serve metrics, and the health check asks the daemon.
  CHECK(run("curl -s --unix-socket " + proxy.socket_path() + " http://d/metrics").output.find("dockgate_requests_total") ==
        std::string::npos);
  const std::string port2 = free_tcp_port();
  proxy_process orphan("compose/policies/docker-cli.json", {"--metrics", "tcp://127.0.0.1:" + port2}, {},
                       "unix:///nonexistent/docker.sock");
  CHECK(run("curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:" + port2 + "/healthz").output == "503");
}

TEST_CASE("systemd socket activation: the listener systemd opened is used, and left to it", "[integration][operator]") {
  if (run("command -v systemd-socket-activate").status != 0) FAIL("systemd-socket-activate is missing (package systemd)");
  std::string dir = run("mktemp -d").output;
  dir.pop_back();  // the newline
  const std::string sock = dir + "/activated.sock";
  // systemd-socket-activate listens, then execs the proxy with LISTEN_FDS=1 on the first
  // connection, as systemd does for dockgate-proxy.socket.
  background activated("systemd-socket-activate -l " + sock + " " + std::string(DOCKGATE_PROXY_BIN) + " --upstream " +
                       engine_host() + " --listen unix://" + sock + " --policy " + repo_root() +
                       "/compose/policies/read-only.json");
  for (int i = 0; i < 100 && run("test -S " + sock).status != 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  auto ping = raw_exchange(sock, "GET /_ping HTTP/1.1\r\nHost: d\r\nConnection: close\r\n\r\n");
  CHECK(ping.status() == 200);
  auto refused = raw_exchange(sock, "POST /v1.41/containers/create HTTP/1.1\r\nHost: d\r\nContent-Length: 2\r\n\r\n{}");
  CHECK(refused.status() == 403);  // the policy holds on the inherited socket
  activated.kill();
  CHECK(run("test -S " + sock).status == 0);  // systemd's file: the proxy does not remove it
  run("rm -rf " + dir);
}

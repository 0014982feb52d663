// HTTP behaviour of the request path: timeouts, keep-alive, HTTP/1.0, HEAD, TCP upstream,
// an unreachable daemon.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "harness.hpp"
#include "unix_daemon.hpp"

using namespace dockgate::test;
using namespace std::chrono_literals;

namespace {
const std::string cli_policy = "compose/policies/docker-cli.json";

// A daemon that answers from a script, on a unix socket of its own: /version and /info
// as the gate needs them to learn the API version, every other request with `answer`
// (keep-alive), or with `pieces` sent 30 ms apart, the connection then closed if
// `close_after`. Each connection on a thread; all end with it.
class scripted_daemon {
 public:
  explicit scripted_daemon(std::string answer)
      : scripted_daemon(std::vector<std::string>{std::move(answer)}) {}
  explicit scripted_daemon(std::vector<std::string> pieces, bool close_after = false)
      : pieces_(std::move(pieces)), close_after_(close_after) {}
  std::string upstream() const { return daemon_.upstream(); }

 private:
  void serve(int fd) {
    std::string in;
    while (auto request = read_request(fd, in)) {
      const bool learning = is_learning(request->target);
      if (!send_pieces(
              fd, learning ? std::vector<std::string>{learning_answer(request->target)} : pieces_))
        return;
      if (close_after_ && !learning) {
        ::shutdown(fd, SHUT_RDWR);
        return;
      }
    }
  }

  std::vector<std::string> pieces_;
  bool close_after_ = false;
  unix_daemon daemon_{[this](int fd, int) { serve(fd); }};  // last: its threads end first
};

}  // namespace

TEST_CASE("a slow or unfinished head is cut at the head timeout", "[integration][http]") {
  proxy_process proxy(cli_policy, {"--head-timeout", "1"});
  const auto start = std::chrono::steady_clock::now();
  auto r = raw_exchange(proxy.socket_path(), "GET /v1.41/_ping HTTP/1.1\r\nHost", false, 5000ms);
  CHECK(r.closed);
  CHECK(r.bytes.empty());
  CHECK(std::chrono::steady_clock::now() - start < 3s);
}

TEST_CASE("keep-alive: pipelined requests are answered in order on one connection",
          "[integration][http]") {
  proxy_process proxy(cli_policy);
  auto r = raw_exchange(proxy.socket_path(),
                        "GET /v1.41/_ping HTTP/1.1\r\nHost: d\r\n\r\n"
                        "HEAD /v1.41/_ping HTTP/1.1\r\nHost: d\r\n\r\n"
                        "GET /v1.41/version HTTP/1.1\r\nHost: d\r\nConnection: close\r\n\r\n");
  INFO(r.bytes);
  CHECK(r.count() == 3);
  CHECK(r.closed);
  CHECK(r.bytes.find("\"ApiVersion\":\"1.41\"") != std::string::npos);
  // The HEAD answer carries no body: the third response follows the second head directly.
  const auto second = r.bytes.find("HTTP/1.1 200", 1);
  const auto third = r.bytes.find("HTTP/1.1 200", second + 1);
  const auto second_head_end = r.bytes.find("\r\n\r\n", second) + 4;
  CHECK(second_head_end == third);
}

TEST_CASE("HTTP/1.0 requests without Host are answered and closed", "[integration][http]") {
  proxy_process proxy(cli_policy);
  auto r = raw_exchange(proxy.socket_path(), "GET /v1.41/_ping HTTP/1.0\r\n\r\n");
  INFO(r.bytes);
  CHECK(r.status() == 200);
  CHECK(r.closed);
  CHECK(r.bytes.ends_with("OK"));
}

TEST_CASE("the upstream may be tcp://", "[integration][http]") {
  const auto port = free_tcp_port();
  proxy_process front(cli_policy, {"--listen", "tcp://127.0.0.1:" + port});
  proxy_process chained(cli_policy, {}, {}, "tcp://127.0.0.1:" + port);
  auto r = run("{ " + chained.docker() + " run --rm " + test_image() + " echo via-tcp 2>" +
               chained.dir() + "/cli.err; }");
  INFO(r.output);
  CHECK(r.output == "via-tcp\n");
  CHECK(front.audit_contains(
      "\"client\":{\"transport\":\"tcp\",\"address\":\"127.0.0.1\",\"port\":"));
}

TEST_CASE("an unreachable daemon gives 502 with Docker's error body", "[integration][http]") {
  proxy_process proxy(cli_policy, {}, {}, "unix:///nonexistent/docker.sock");
  auto r = raw_exchange(proxy.socket_path(), "GET /v1.41/_ping HTTP/1.1\r\nHost: d\r\n\r\n");
  INFO(r.bytes);
  CHECK(r.status() == 502);
  CHECK(r.bytes.find("{\"message\":\"dockgate: cannot reach the Docker daemon\"}") !=
        std::string::npos);
  CHECK(proxy.audit_contains("\"verdict\":\"allow\",\"rule\":\"upstream\""));
}

TEST_CASE("registry credentials and bodies never reach the audit log", "[integration][http]") {
  proxy_process proxy(cli_policy);
  const std::string secret = "c2VjcmV0LXBhc3N3b3JkLWRvY2tnYXRl";  // base64 of a fake credential
  auto r = raw_exchange(
      proxy.socket_path(),
      "POST /v1.41/images/create?fromImage=" + registry() +
          "/dockgate/test-busybox&tag=latest HTTP/1.1\r\nHost: d\r\nX-Registry-Auth: " + secret +
          "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
      false, 20000ms);
  CHECK(r.status() == 200);
  const std::string name = unique_name("dg-secret-body");
  raw_exchange(proxy.socket_path(), "POST /v1.41/containers/create?name=" + name +
                                        " HTTP/1.1\r\nHost: d\r\nContent-Type: application/json\r\n"
                                        "Content-Length: 2\r\nConnection: close\r\n\r\n{}");
  REQUIRE(proxy.audit_contains("\"operation\":\"ImageCreate\""));
  REQUIRE(proxy.audit_contains("\"operation\":\"ContainerCreate\""));
  const auto log = proxy.audit_log();
  CHECK(log.find(secret) == std::string::npos);
  CHECK(log.find("fromImage") == std::string::npos);  // query strings are not logged either
  CHECK(log.find("{}") == std::string::npos);
}

TEST_CASE("stream bodies go through in either framing (docker cp's archive upload)",
          "[integration][http]") {
  // (with ping, the CLI negotiates the daemon's version; without, it falls back to 1.24)
  proxy_process proxy(
      R"({"profiles":{"cp":{"allow":["SystemPing","SystemPingHead","ContainerCreate","ContainerStart","PutContainerArchive"],
      "images":{"allow":["*"]}}}})");
  const auto name = unique_name("dg-cp");
  REQUIRE(
      run(proxy.docker() + " create --name " + name + " " + test_image() + " sleep 60").status ==
      0);
  REQUIRE(run(proxy.docker() + " start " + name).status == 0);
  const std::string dir = "/tmp/" + unique_name("dg-cp-src");
  run("mkdir -p " + dir + " && head -c 300000 /dev/urandom > " + dir +
      "/payload && printf hello > " + dir + "/small");
  const std::string tar = run("tar -C " + dir + " -cf - payload small").output;
  REQUIRE(tar.size() > 300000);
  // Chunked, in uneven pieces.
  std::string chunked;
  for (std::size_t at = 0; at < tar.size();) {
    const std::size_t n = std::min<std::size_t>(tar.size() - at, 7000 + at % 1000);
    char size_line[32];
    std::snprintf(size_line, sizeof size_line, "%zx\r\n", n);
    chunked += size_line + tar.substr(at, n) + "\r\n";
    at += n;
  }
  chunked += "0\r\n\r\n";
  auto r = raw_exchange(
      proxy.socket_path(),
      "PUT /v1.41/containers/" + name +
          "/archive?path=%2Ftmp HTTP/1.1\r\nHost: d\r\nContent-Type: "
          "application/x-tar\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n" +
          chunked);
  INFO(r.bytes.substr(0, 300));
  CHECK(r.status() == 200);
  const std::string direct = docker_cli() + " -H " + engine_host();
  CHECK(run(direct + " exec " + name + " cat /tmp/small").output == "hello");
  CHECK(run(direct + " exec " + name + " md5sum /tmp/payload").output.substr(0, 32) ==
        run("md5sum " + dir + "/payload").output.substr(0, 32));
  // Content-Length framing, into another directory.
  auto sized = raw_exchange(proxy.socket_path(),
                            "PUT /v1.41/containers/" + name +
                                "/archive?path=%2F HTTP/1.1\r\nHost: d\r\nContent-Type: "
                                "application/x-tar\r\nContent-Length: " +
                                std::to_string(tar.size()) + "\r\nConnection: close\r\n\r\n" + tar);
  CHECK(sized.status() == 200);
  CHECK(run(direct + " exec " + name + " cat /small").output == "hello");
  run(direct + " rm -f " + name + "; rm -rf " + dir);
}

TEST_CASE(
    "the daemon's hop-by-hop fields and its Dockgate-Request-Id do not reach the client, its other "
    "fields do",
    "[integration][http]") {
  scripted_daemon daemon(
      "HTTP/1.1 200 OK\r\nApi-Version: 1.41\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\n"
      "Proxy-Connection: keep-alive\r\nTE: trailers\r\nTrailer: X-After\r\nUpgrade: tcp\r\n"
      "Dockgate-Request-Id: forged-by-the-daemon\r\nX-Kept-First: 1\r\nX-Kept-Spaced:  a  b \r\n"
      "Content-Length: 2\r\nX-Kept-Last: 3\r\n\r\nOK");
  proxy_process proxy(cli_policy, {}, {}, daemon.upstream());
  auto r = raw_exchange(
      proxy.socket_path(),
      "GET /v1.41/_ping HTTP/1.1\r\nHost: d\r\n\r\nGET /v1.41/_ping HTTP/1.1\r\nHost: d\r\n"
      "Connection: close\r\n\r\n");
  INFO(r.bytes);
  CHECK(r.count() == 2);  // the same connection went on after the first answer
  const std::string first = r.bytes.substr(0, r.bytes.find("HTTP/1.1", 1));
  CHECK(first.starts_with("HTTP/1.1 200 OK\r\nApi-Version: 1.41\r\n"));
  for (const char* dropped : {"Connection:", "Keep-Alive:", "Proxy-Connection:", "TE:", "Trailer:",
                              "Upgrade:", "forged-by-the-daemon"})
    CHECK(first.find(dropped) == std::string::npos);
  // The others as the daemon wrote them, in its order, and the gate's own request ID once.
  CHECK(
      first.find(
          "X-Kept-First: 1\r\nX-Kept-Spaced:  a  b \r\nContent-Length: 2\r\nX-Kept-Last: 3\r\n") !=
      std::string::npos);
  const auto id = first.find("Dockgate-Request-Id: ");
  CHECK(id != std::string::npos);
  CHECK(first.find("Dockgate-Request-Id: ", id + 1) == std::string::npos);
  CHECK(first.ends_with("\r\n\r\nOK"));
  // Asked to close, the gate says so itself.
  CHECK(r.bytes.substr(r.bytes.find("HTTP/1.1", 1)).find("Connection: close\r\n") !=
        std::string::npos);
}

// An answer that is one document (request_shape::document: SystemVersion here) whose chunks
// come apart is relayed to its end at once, and the connection goes on.
TEST_CASE("a document whose chunks come apart arrives whole, and the connection goes on",
          "[integration][http]") {
  const std::string body = R"({"Version":"20.10.24","ApiVersion":"1.41","Os":"linux"})";
  const std::string head =
      "HTTP/1.1 200 OK\r\nApi-Version: 1.41\r\nContent-Type: "
      "application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
  auto chunk = [](std::string_view data) {
    char size[16];
    std::snprintf(size, sizeof size, "%zx\r\n", data.size());
    return std::string(size) + std::string(data) + "\r\n";
  };
  const std::string_view b = body;
  scripted_daemon daemon(
      {head + chunk(b.substr(0, 20)), chunk(b.substr(20, 20)), chunk(b.substr(40)) + "0\r\n\r\n"});
  proxy_process proxy(cli_policy, {}, {}, daemon.upstream());

  SECTION("HTTP/1.1, a pipelined request after it") {
    auto r = raw_exchange(
        proxy.socket_path(),
        "GET /v1.41/version HTTP/1.1\r\nHost: d\r\n\r\nGET /v1.41/version HTTP/1.1\r\nHost: d\r\n"
        "Connection: close\r\n\r\n");
    INFO(r.bytes);
    CHECK(r.count() == 2);
    CHECK(r.status() == 200);
    // Each answer's body, whatever the chunks the gate made of it, is the daemon's whole.
    for (std::size_t at = 0, n = 0; n < 2; ++n) {
      at = r.bytes.find("\r\n\r\n", at);
      REQUIRE(at != std::string::npos);
      std::string got;
      std::size_t p = at + 4;
      for (;;) {
        const std::size_t len = std::strtoul(r.bytes.c_str() + p, nullptr, 16);
        p = r.bytes.find("\r\n", p) + 2;
        if (len == 0) break;
        got += r.bytes.substr(p, len);
        p += len + 2;
      }
      CHECK(got == body);
      at = p;
    }
  }
  SECTION("HTTP/1.0: the body as it is, until the gate closes") {
    auto r = raw_exchange(proxy.socket_path(), "GET /v1.41/version HTTP/1.0\r\nHost: d\r\n\r\n");
    INFO(r.bytes);
    CHECK(r.closed);
    CHECK(r.status() == 200);
    CHECK(r.bytes.ends_with("\r\n\r\n" + body));
  }
}

TEST_CASE("a document the daemon cuts off is cut off for the client, and the gate serves on",
          "[integration][http]") {
  scripted_daemon daemon({"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: "
                          "chunked\r\n\r\n10\r\n{\"Version\":",
                          "\"20."},
                         true);
  proxy_process proxy(cli_policy, {}, {}, daemon.upstream());
  auto r = raw_exchange(proxy.socket_path(), "GET /v1.41/version HTTP/1.1\r\nHost: d\r\n\r\n");
  INFO(r.bytes);
  CHECK(r.closed);  // the client's connection ends: its answer is not complete
  CHECK(r.status() == 200);
  CHECK(r.bytes.find("\r\n0\r\n\r\n") == std::string::npos);  // no last chunk: not an end
  // The gate goes on serving (a new connection to the daemon).
  auto again = raw_exchange(proxy.socket_path(), "GET /v1.41/version HTTP/1.1\r\nHost: d\r\n\r\n");
  CHECK(again.status() == 200);
}

TEST_CASE("system_info: every way of asking /info gets only the kept members",
          "[integration][http][redteam]") {
  // The daemon's /info is chunked (it is longer than Go's buffer); asked over HTTP/1.0,
  // without a version, with a query, asking gzip, as HEAD, and under an audit-mode
  // profile: nothing of the host (its name, counts, ID) comes back.
  for (const char* mode : {"enforce", "audit"}) {
    proxy_process proxy(std::string(R"({"profiles":{"p":{"mode":")") + mode +
                        R"(","allow":["SystemInfo","SystemPing","SystemVersion"],)"
                        R"("system_info":{"keep":["OSType","Architecture"]}}}})");
    for (const char* request :
         {"GET /v1.41/info HTTP/1.1\r\nHost: d\r\nConnection: close\r\n\r\n",
          "GET /info HTTP/1.0\r\n\r\n",
          "GET /v1.24/info?x=1 HTTP/1.1\r\nHost: d\r\nConnection: close\r\n\r\n",
          "GET /v1.41/info HTTP/1.1\r\nHost: d\r\nAccept-Encoding: gzip\r\nConnection: "
          "close\r\n\r\n",
          "HEAD /v1.41/info HTTP/1.1\r\nHost: d\r\nConnection: close\r\n\r\n"}) {
      auto r = raw_exchange(proxy.socket_path(), request);
      INFO(mode << ": " << request << " -> " << r.bytes);
      CHECK(r.status() != 0);
      CHECK(r.bytes.find("\"Name\"") == std::string::npos);
      CHECK(r.bytes.find("\"ID\"") == std::string::npos);
      CHECK(r.bytes.find("\"Containers\"") == std::string::npos);
      CHECK(r.bytes.find("\"RegistryConfig\"") == std::string::npos);
      if (std::string_view(request).starts_with("GET") && r.status() == 200)
        CHECK(r.bytes.find("\"OSType\":\"linux\"") != std::string::npos);
    }
  }
}

// The gate's threads (--threads, server.cpp): clients are handed to the threads in turn and
// each connection is served by one thread to its end; a SIGHUP's policy reaches every
// thread; /metrics counts the requests of all of them; SIGTERM ends the connections of
// every thread. Judged by what the clients receive (each answer's Dockgate-Request-Id
// names the thread that served it: its prefix is the process's plus the thread's index),
// the metrics the gate exposes and how the process ends.
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <set>
#include <thread>

#include "harness.hpp"

using namespace dockgate::test;
using namespace std::chrono_literals;

namespace {

// One keep-alive request on `fd` and its whole answer (head, and a Content-Length or
// chunked body: a long container list comes chunked); empty if the connection ended first.
std::string exchange(int fd, const std::string& request) {
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size()))
    return {};
  std::string got;
  char buf[4096];
  for (;;) {
    const auto head_end = got.find("\r\n\r\n");
    if (head_end != std::string::npos) {
      const std::string head = got.substr(0, head_end + 2);
      if (head.find("\r\nTransfer-Encoding: chunked\r\n") != std::string::npos) {
        if (got.size() >= head_end + 9 && got.ends_with("\r\n0\r\n\r\n")) return got;
      } else {
        const auto at = head.find("\r\nContent-Length: ");
        const std::size_t length = at != std::string::npos ? std::stoul(head.substr(at + 18)) : 0;
        if (got.size() >= head_end + 4 + length) return got;
      }
    }
    const auto n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return {};
    got.append(buf, static_cast<std::size_t>(n));
  }
}

unsigned status_of(const std::string& answer) {
  return raw_response{answer}.status();
}

// The thread part of an answer's request ID: its first 8 hex digits.
std::string thread_of(const std::string& answer) {
  const auto at = answer.find("Dockgate-Request-Id: ");
  return at == std::string::npos ? std::string() : answer.substr(at + 21, 8);
}

}  // namespace

TEST_CASE(
    "the gate's threads: connections are spread over the threads, each served by one, and reloads, "
    "metrics and shutdown reach every thread",
    "[integration][server][signals][metrics]") {
  const std::string port = free_tcp_port();
  proxy_process proxy(
      R"({"default_profile":"p","profiles":{"p":{"confine_to_owned":false,"allow":["SystemPing"]}}})",
      {"--threads", "3", "--metrics", "tcp://127.0.0.1:" + port});
  const std::string ping = "GET /_ping HTTP/1.1\r\nHost: d\r\n\r\n";
  const std::string list = "GET /v1.41/containers/json HTTP/1.1\r\nHost: d\r\n\r\n";

  // Six clients, each connected (and accepted: its first answer came) before the next.
  constexpr int clients = 6, pings = 3;
  std::vector<int> fds;
  std::vector<std::string> thread_of_client;
  for (int i = 0; i < clients; ++i) {
    fds.push_back(connect_unix(proxy.socket_path()));
    REQUIRE(fds.back() >= 0);
    const auto first = exchange(fds.back(), ping);
    REQUIRE(status_of(first) == 200);
    thread_of_client.push_back(thread_of(first));
  }
  // Each connection stays on its thread; the threads take the clients in turn.
  for (int i = 0; i < clients; ++i)
    for (int k = 1; k < pings; ++k) {
      const auto again = exchange(fds[i], ping);
      CHECK(status_of(again) == 200);
      CHECK(thread_of(again) == thread_of_client[i]);
    }
  CHECK(std::set(thread_of_client.begin(), thread_of_client.end()).size() == 3);
  for (int i = 0; i + 3 < clients; ++i) CHECK(thread_of_client[i] == thread_of_client[i + 3]);

  // Before the reload no thread allows ContainerList (three new clients, one per thread; a
  // refusal closes its connection); after it every thread does, on the connections it
  // already serves.
  for (int i = 0; i < 3; ++i) {
    const int fd = connect_unix(proxy.socket_path());
    const auto refused = exchange(fd, list);
    CHECK(status_of(refused) == 403);
    CHECK(thread_of(refused) == thread_of_client[i]);
    ::close(fd);
  }
  std::ofstream(proxy.dir() + "/policy.json")
      << R"({"default_profile":"p","profiles":{"p":{"confine_to_owned":false,"allow":["SystemPing","ContainerList"]}}})";
  ::kill(proxy.pid(), SIGHUP);
  for (int i = 0;
       i < 100 && run("grep -c 'policy reloaded' " + proxy.dir() + "/proxy.err").output != "1\n";
       ++i)
    std::this_thread::sleep_for(20ms);
  for (int i = 0; i < clients; ++i) {
    unsigned status = 0;
    for (int tries = 0; tries < 50 && (status = status_of(exchange(fds[i], list))) == 403; ++tries)
      std::this_thread::sleep_for(20ms);  // the thread takes the policy when it next runs
    CHECK(status == 200);
  }

  // /metrics: every thread's requests and connections.
  const std::string text = run("curl -s http://127.0.0.1:" + port + "/metrics").output;
  INFO(text);
  CHECK(text.find("dockgate_requests_total{profile=\"p\",operation=\"SystemPing\",verdict="
                  "\"allow\",status=\"200\"} " +
                  std::to_string(clients * pings) + "\n") != std::string::npos);
  CHECK(text.find("dockgate_refusals_total{profile=\"p\",rule=\"operation\"} ") !=
        std::string::npos);
  CHECK(text.find("dockgate_connections " + std::to_string(clients) + "\n") != std::string::npos);

  // SIGTERM: the idle connections of every thread are closed (EOF, not a hang to the
  // shutdown deadline) and the process exits cleanly.
  const auto [status, took] = proxy.terminate();
  CHECK(status == 0);
  CHECK(took < 5s);  // the default deadline is 10 s: nothing waited for it
  for (int fd : fds) {
    char c;
    CHECK(::recv(fd, &c, 1, 0) == 0);
    ::close(fd);
  }
}

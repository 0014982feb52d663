// The sidecar's own HTTP API against request smuggling (docs/security.md, framing): a head
// with more than one reading (Content-Length with Transfer-Encoding, a bare LF, a repeated
// Content-Length, obs-fold, a head over the limit) is refused with 400 and the connection
// closed, and a request pipelined behind it is never served. Raw TCP to the sidecar; the
// judges are the bytes the client received and the daemon's record (no session container).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "sidecar_harness.hpp"

using namespace dockgate::test;
using namespace std::chrono_literals;

namespace {

// Connects to 127.0.0.1:`port`, writes `request` and reads until the peer closes (or
// resets) or `timeout` passes without data.
raw_response raw_tcp_exchange(const std::string& port, const std::string& request,
                              std::chrono::milliseconds timeout = 5000ms) {
  raw_response r;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<std::uint16_t>(std::stoi(port)));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    throw std::runtime_error("cannot connect to 127.0.0.1:" + port);
  }
  for (std::size_t sent = 0; sent < request.size();) {
    const ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server may close early on a refused head
    sent += static_cast<std::size_t>(n);
  }
  char buf[8192];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) break;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {
      r.closed = true;
      break;
    }
    r.bytes.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return r;
}

// The session containers of `instance` as the daemon records them (running or not).
std::string session_containers(const std::string& instance) {
  return run(direct() + " ps -aq --filter label=sandbox.instance=" + instance +
             " --filter name=dockgate-sbx-")
      .output;
}

const std::string auth = "Authorization: Bearer " + api_key + "\r\n";

// A well-formed POST /sessions: served, it makes a session container.
const std::string create_session = "POST /sessions HTTP/1.1\r\nHost: sidecar\r\n" + auth +
                                   "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}";

}  // namespace

TEST_CASE(
    "sidecar HTTP: an ambiguous head is refused with 400 and closed, nothing pipelined "
    "behind it is served",
    "[integration][sidecar][server]") {
  proxy_process proxy("compose/policies/sandbox.json");
  const std::string instance = unique_name("http");
  sidecar_process sidecar(proxy, {"SANDBOX_WARM_POOL=0", "SANDBOX_INSTANCE=" + instance});
  REQUIRE(session_containers(instance).empty());

  // The judge sees a second answer when there is one: two pipelined well-formed requests
  // are both answered on one connection.
  {
    const std::string health = "GET /healthz HTTP/1.1\r\nHost: sidecar\r\n\r\n";
    auto both = raw_tcp_exchange(sidecar.port(), health + health, 3000ms);
    INFO(both.bytes);
    REQUIRE(both.count() == 2);
  }

  struct attack {
    const char* what;
    std::string head;  // each a POST /sessions that, read one way, is a complete request
  };
  const std::string post = "POST /sessions HTTP/1.1\r\nHost: sidecar\r\n" + auth;
  const attack attacks[] = {
      {"Content-Length and Transfer-Encoding",
       post + "Content-Length: 7\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"},
      {"Transfer-Encoding and Content-Length",
       post + "Transfer-Encoding: chunked\r\nContent-Length: 7\r\n\r\n2\r\n{}\r\n0\r\n\r\n"},
      {"a bare LF ends a line",
       "POST /sessions HTTP/1.1\nHost: sidecar\r\n" + auth + "Content-Length: 2\r\n\r\n{}"},
      {"a bare LF inside the head", post + "X-A: 1\nContent-Length: 2\r\n\r\n{}"},
      {"a repeated Content-Length", post + "Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}"},
      {"two Content-Lengths that differ",
       post + "Content-Length: 2\r\nContent-Length: 0\r\n\r\n{}"},
      {"a listed Content-Length", post + "Content-Length: 2, 2\r\n\r\n{}"},
      {"obs-fold", post + "X-Folded: a\r\n b\r\nContent-Length: 2\r\n\r\n{}"},
      {"obs-fold continuing Content-Length", post + "Content-Length:\r\n 2\r\n\r\n{}"},
      {"whitespace before the colon", post + "Content-Length : 2\r\n\r\n{}"},
      {"a transfer coding other than chunked",
       post + "Transfer-Encoding: gzip, chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"},
      {"a head over 64 KiB",
       post + "X-Pad: " + std::string(70 * 1024, 'a') + "\r\nContent-Length: 2\r\n\r\n{}"},
  };
  for (const auto& a : attacks) {
    INFO(a.what);
    // The refused request, then a well-formed create on the same connection.
    auto r = raw_tcp_exchange(sidecar.port(), a.head + create_session);
    INFO("received: " << r.bytes.substr(0, 300));
    CHECK((r.status() == 400 || r.status() == 431));
    CHECK(r.closed);        // closed after the refusal
    CHECK(r.count() == 1);  // one answer: the pipelined create was never served
    CHECK(r.bytes.find("session_id") == std::string::npos);
    CHECK(session_containers(instance).empty());  // the daemon's record: no session made
  }

  // The control: the same create, alone and well-formed, makes one session container.
  auto created = raw_tcp_exchange(sidecar.port(), create_session, 3000ms);
  INFO(created.bytes);
  CHECK(created.status() == 200);
  const std::string made = session_containers(instance);
  CHECK(std::count(made.begin(), made.end(), '\n') == 1);
}

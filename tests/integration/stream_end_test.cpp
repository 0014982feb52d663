// How a held stream ends (proxy/src/held_streams.cpp), judged by the bytes the client
// receives: chunked framing whole, the terminating chunk last, the connection closed.
// dockerd is the reference: the same request is made to the engine's socket directly and
// through the gate, side by side. A client that shuts down its write side mid-stream (its
// request's end: `GET …/logs` from a client that then closes its half) is a cancelled
// request to dockerd, which ends its answer at once; the gate must answer the same.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <thread>

#include "harness.hpp"

using namespace dockgate::test;
using namespace std::chrono_literals;

namespace {

// Every operation the cases use, on containers this profile does not own (made directly).
constexpr const char* stream_policy =
    R"({"default_profile":"p","profiles":{"p":{"confine_to_owned":false,)"
    R"("allow":["SystemPing","SystemEvents","ContainerLogs","ContainerStats","ContainerWait"]}}})";

std::string direct_cli() {
  return docker_cli() + " -H " + engine_host();
}

// What a client read of one response: its status, its body decoded, whether the framing
// was whole and ended with the terminating chunk (and nothing after it), and whether the
// peer closed the connection.
struct stream_read {
  unsigned status = 0;
  std::string body;
  bool well_formed = false;
  bool terminated = false;
  bool closed = false;
  std::string problem;
  std::chrono::milliseconds end_after{0};  // from the client's end to the connection's close
};

void parse(const std::string& bytes, stream_read& r) {
  const auto head_end = bytes.find("\r\n\r\n");
  if (head_end == std::string::npos || bytes.size() < 12) {
    r.problem = "no response head";
    return;
  }
  r.status = static_cast<unsigned>(std::atoi(bytes.c_str() + 9));
  const std::string head = bytes.substr(0, head_end);
  if (head.find("Transfer-Encoding: chunked") == std::string::npos) {
    r.problem = "not chunked";
    return;
  }
  std::size_t at = head_end + 4;
  for (;;) {
    const auto eol = bytes.find("\r\n", at);
    if (eol == std::string::npos) {
      r.well_formed = at == bytes.size();  // cut between two chunks
      r.problem = r.well_formed ? "no terminating chunk" : "cut in a chunk-size line";
      return;
    }
    const std::string size_line = bytes.substr(at, eol - at);
    if (size_line.empty() ||
        size_line.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) {
      r.problem = "bad chunk-size line '" + size_line + "'";
      return;
    }
    const std::size_t size = std::stoul(size_line, nullptr, 16);
    at = eol + 2;
    if (size == 0) {
      r.well_formed = true;
      r.terminated = bytes.compare(at, std::string::npos, "\r\n") == 0;
      if (!r.terminated) r.problem = "bytes after the terminating chunk, or no final CRLF";
      return;
    }
    if (bytes.size() < at + size + 2) {
      r.problem = "cut in the middle of a chunk of " + std::to_string(size);
      return;
    }
    if (bytes.compare(at + size, 2, "\r\n") != 0) {
      r.problem = "a chunk not ended by CRLF";
      return;
    }
    r.body.append(bytes, at, size);
    at += size + 2;
  }
}

// Sends `request` on a new connection to `socket`, reads until `first` bytes of the body
// (with their chunk framing) are in (0: not waiting), then shuts down the write side and reads
// until the peer closes (or nothing comes for `timeout`).
stream_read ended_by_client(const std::string& socket, const std::string& request,
                            std::size_t first, std::chrono::milliseconds timeout = 15000ms) {
  stream_read r;
  const int fd = connect_unix(socket);
  REQUIRE(fd >= 0);
  REQUIRE(::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(request.size()));
  std::string bytes;
  char buf[16384];
  auto read_some = [&](int wait_ms) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, wait_ms) <= 0) return -1;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n > 0) bytes.append(buf, static_cast<std::size_t>(n));
    return static_cast<int>(n);
  };
  if (first > 0) {
    const auto until = std::chrono::steady_clock::now() + 15s;
    for (;;) {
      const auto head_end = bytes.find("\r\n\r\n");
      if (head_end != std::string::npos && bytes.size() >= head_end + 4 + first) break;
      if (std::chrono::steady_clock::now() > until || read_some(1000) == 0) break;
    }
  }
  ::shutdown(fd, SHUT_WR);
  const auto ended = std::chrono::steady_clock::now();
  for (;;) {
    const int n = read_some(static_cast<int>(timeout.count()));
    if (n == 0) r.closed = true;
    if (n <= 0) break;
  }
  r.end_after = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - ended);
  ::close(fd);
  parse(bytes, r);
  return r;
}

std::string describe(const stream_read& r) {
  return "status " + std::to_string(r.status) + ", body " + std::to_string(r.body.size()) +
         " bytes, well-formed " + std::to_string(r.well_formed) + ", terminated " +
         std::to_string(r.terminated) + ", closed " + std::to_string(r.closed) + ", after " +
         std::to_string(r.end_after.count()) + " ms" + (r.problem.empty() ? "" : ": " + r.problem);
}

// A container that writes a line every 20 ms until removed.
struct chatter {
  std::string name = unique_name("dg-chatter");
  chatter() {
    REQUIRE(run(direct_cli() + " run -d --name " + name + " --network none " + test_image() +
                " sh -c 'i=0; while :; do i=$((i+1)); echo line $i; sleep 0.02; done'")
                .status == 0);
  }
  ~chatter() { run(direct_cli() + " rm -f " + name); }
};

std::string get(const std::string& target, const std::string& method = "GET") {
  return method + " " + target + " HTTP/1.1\r\nHost: d\r\n\r\n";
}

}  // namespace

TEST_CASE(
    "a client that ends its side mid-stream gets the daemon's end, whole, through the gate as "
    "directly",
    "[integration][stream][half-close]") {
  chatter c;
  proxy_process proxy(stream_policy);
  struct request_case {
    std::string what, request;
    std::size_t first;  // body bytes read before the client's end
  };
  const std::vector<request_case> cases = {
      {"logs -f, ended at once", get("/v1.41/containers/" + c.name + "/logs?stdout=1&follow=1"), 0},
      {"logs -f, ended mid-stream", get("/v1.41/containers/" + c.name + "/logs?stdout=1&follow=1"),
       4000},
      {"events", get("/v1.41/events"), 0},
      {"stats, ended mid-stream", get("/v1.41/containers/" + c.name + "/stats"), 100},
      {"wait", get("/v1.41/containers/" + c.name + "/wait", "POST"), 0},
  };
  for (const auto& rc : cases) {
    SECTION(rc.what) {
      const stream_read daemon = ended_by_client(engine_socket(), rc.request, rc.first);
      const stream_read gate = ended_by_client(proxy.socket_path(), rc.request, rc.first);
      INFO("dockerd: " << describe(daemon));
      INFO("gate: " << describe(gate));
      // dockerd's answer is the reference: a 200, ended at once and whole.
      REQUIRE(daemon.status == 200);
      REQUIRE(daemon.terminated);
      REQUIRE(daemon.closed);
      CHECK(gate.status == 200);
      CHECK(gate.well_formed);
      CHECK(gate.terminated);
      CHECK(gate.closed);
      CHECK(gate.end_after < 3000ms);  // the daemon's end, not the gate's grace
      if (rc.first > 0) CHECK(gate.body.size() > rc.first / 2);  // ended mid-stream, after data
      // A wait ends with the daemon's own words (its JSON document: context canceled).
      if (rc.what == "wait") CHECK(gate.body == daemon.body);
    }
  }
  // The container ran on (a client's end cancels its request, not the container).
  CHECK(run(direct_cli() + " inspect -f '{{.State.Running}}' " + c.name).output == "true\n");
}

// A daemon behind something that does not pass the client's end on (here a relay that
// drops it) never ends the stream: the gate cuts that daemon off after its grace and ends
// an endless stream itself, whole.
TEST_CASE(
    "a stream whose daemon never hears the client's end is ended whole by the gate after its grace",
    "[integration][stream][half-close]") {
  chatter c;
  std::string dir = run("mktemp -d").output;
  dir.pop_back();
  const std::string relay_sock = dir + "/daemon.sock";
  std::ofstream(dir + "/relay.py") << R"(
import socket, sys, threading
up, path = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX); s.bind(path); s.listen(64)
print('up', flush=True)
def to_daemon(c, u):
    while True:
        d = c.recv(65536)
        if not d: return  # the client's end stops here
        u.sendall(d)
def to_client(u, c):
    try:
        while True:
            d = u.recv(65536)
            if not d: break
            c.sendall(d)
    except OSError: pass
    for x in (c, u):
        try: x.close()
        except OSError: pass
while True:
    c, _ = s.accept(); u = socket.socket(socket.AF_UNIX); u.connect(up)
    threading.Thread(target=to_daemon, args=(c, u), daemon=True).start()
    threading.Thread(target=to_client, args=(u, c), daemon=True).start()
)";
  background relay("exec /usr/bin/python3 " + dir + "/relay.py " + engine_socket() + " " +
                   relay_sock);
  REQUIRE(relay.read_line(10s).value_or("") == "up");
  proxy_process proxy(stream_policy, {}, {}, "unix://" + relay_sock);
  const stream_read gate = ended_by_client(
      proxy.socket_path(), get("/v1.41/containers/" + c.name + "/logs?stdout=1&follow=1"), 2000);
  INFO("gate: " << describe(gate));
  CHECK(gate.status == 200);
  CHECK(gate.well_formed);
  CHECK(gate.terminated);
  CHECK(gate.closed);
  CHECK(gate.body.size() > 1000);
  // The grace (5 s, seen by the once-a-second watchdog), not at once and not never.
  CHECK(gate.end_after >= 4000ms);
  CHECK(gate.end_after < 9000ms);
  run("rm -rf " + dir);
}

// SIGTERM: held streams run to --shutdown-timeout, then each is ended between two chunks
// with the terminating chunk, as when the daemon goes away; the client sees an end.
TEST_CASE("at the shutdown deadline a held stream gets its end, not a cut",
          "[integration][stream][shutdown]") {
  chatter c;
  proxy_process proxy(stream_policy, {"--shutdown-timeout", "1"});
  const int fd = connect_unix(proxy.socket_path());
  REQUIRE(fd >= 0);
  const std::string request = get("/v1.41/containers/" + c.name + "/logs?stdout=1&follow=1");
  REQUIRE(::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(request.size()));
  std::string bytes;
  char buf[16384];
  pollfd p{fd, POLLIN, 0};
  while (bytes.find("\r\n\r\n") == std::string::npos && ::poll(&p, 1, 10000) > 0) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    bytes.append(buf, static_cast<std::size_t>(n));
  }
  REQUIRE(bytes.starts_with("HTTP/1.1 200"));
  auto [status, took] = proxy.terminate();
  CHECK(status == 0);
  CHECK(took < 5000ms);
  stream_read r;
  for (;;) {
    if (::poll(&p, 1, 5000) <= 0) break;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n == 0) r.closed = true;
    if (n <= 0) break;
    bytes.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  parse(bytes, r);
  INFO(describe(r));
  CHECK(r.body.find("line ") != std::string::npos);
  CHECK(r.well_formed);
  CHECK(r.terminated);
  CHECK(r.closed);
}

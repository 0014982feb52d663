// The pool of idle daemon connections (proxy/src/upstream_pool.hpp): what the daemon sees.
// Against the test engine, the sockets dockerd holds to the gate (ss -x: the engine
// socket's end of each connection whose peer is one of the gate's descriptors); against a
// daemon of the test's own, which connection each request arrived on.
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "harness.hpp"
#include "unix_daemon.hpp"

using namespace dockgate::test;
using namespace std::chrono_literals;

namespace {

const std::string cli_policy = "compose/policies/docker-cli.json";

// The socket inodes among a process's descriptors.
std::set<std::string> socket_inodes(pid_t pid) {
  std::set<std::string> out;
  std::error_code ec;
  for (const auto& e :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    const std::string link = std::filesystem::read_symlink(e.path(), ec).string();
    if (!ec && link.starts_with("socket:[")) out.insert(link.substr(8, link.size() - 9));
  }
  return out;
}

// The daemon's ends of its connections from the gate: the sockets `ss -x` lists with the
// engine socket's path as their address and one of the gate's sockets as their peer.
std::set<std::string> daemon_ends(pid_t gate) {
  const auto mine = socket_inodes(gate);
  std::set<std::string> out;
  std::istringstream lines(run("ss -x -H state established").output);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream f(line);
    std::string netid, recvq, sendq, local, inode, peer, peer_inode;
    f >> netid >> recvq >> sendq >> local >> inode >> peer >> peer_inode;
    if (local == engine_socket() && mine.count(peer_inode)) out.insert(inode);
  }
  return out;
}

// Waits until the gate holds `n` sockets besides its listener: its client connections
// have ended and what it keeps of the daemon's is what is left.
bool gate_sockets_settle(pid_t gate, std::size_t n) {
  for (int i = 0; i < 300; ++i) {
    if (socket_inodes(gate).size() == n + 1) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

// One request on a connection of its own, its whole answer read (Content-Length, or
// chunked to its last chunk), then closed: the docker CLI's way.
std::string one_request(const std::string& socket_path, const std::string& request) {
  const int fd = connect_unix(socket_path);
  REQUIRE(fd >= 0);
  REQUIRE(::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(request.size()));
  std::string in;
  char buf[4096];
  for (;;) {
    const auto head_end = in.find("\r\n\r\n");
    if (head_end != std::string::npos) {
      const auto cl = in.find("Content-Length: ");
      if (cl != std::string::npos && cl < head_end &&
          in.size() >= head_end + 4 + std::strtoul(in.c_str() + cl + 16, nullptr, 10))
        break;
      if (in.find("\r\n0\r\n\r\n", head_end) != std::string::npos) break;
    }
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 3000) <= 0) break;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    in.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return in;
}

std::string get(std::string_view target, std::string_view extra = {}) {
  return "GET " + std::string(target) + " HTTP/1.1\r\nHost: d\r\n" + std::string(extra) + "\r\n";
}

// A daemon of the test's own on a unix socket: /version and /info as the gate learns
// them; a ping answered with `ping_answer`; events with a stream that ends (its last chunk
// 30 ms after its first, or with it if `events_whole`); any POST with {}. Each request is recorded
// with the number of the connection it came on. With `drop_reused`, a request on a connection that
// has already answered one of the client's (not the gate's learning) is read and the connection
// closed without an answer: the daemon closing an idle connection as the request arrives.
class recording_daemon {
 public:
  explicit recording_daemon(bool drop_reused = false,
                            std::string ping_answer =
                                "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
                                "Content-Type: text/plain\r\n\r\nOK",
                            bool events_whole = false)
      : drop_reused_(drop_reused),
        ping_answer_(std::move(ping_answer)),
        events_whole_(events_whole) {}
  std::string upstream() const { return daemon_.upstream(); }
  // "<connection> <method> <target>[ dropped]" per request, in the order they came.
  std::vector<std::string> log() {
    std::lock_guard g(m_);
    return log_;
  }

 private:
  void serve(int fd, int number) {
    std::string in;
    bool answered_client = false;
    while (auto request = read_request(fd, in)) {
      const auto& [method, target] = *request;
      const bool learning = is_learning(target);
      const bool drop = drop_reused_ && answered_client && !learning;
      {
        std::lock_guard g(m_);
        log_.push_back(std::to_string(number) + " " + method + " " + target +
                       (drop ? " dropped" : ""));
      }
      if (drop) {
        ::shutdown(fd, SHUT_RDWR);
        return;
      }
      std::vector<std::string> pieces;
      if (learning)
        pieces = {learning_answer(target)};
      else if (target.find("/_ping") != std::string::npos)
        pieces = {ping_answer_};
      else if (target.find("/events") != std::string::npos)
        pieces = {
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: "
            "chunked\r\n\r\n3\r\n{}\n\r\n",
            "0\r\n\r\n"};
      else
        pieces = {json_answer("{}")};
      if (events_whole_ && pieces.size() == 2) pieces = {pieces[0] + pieces[1]};
      if (!send_pieces(fd, pieces)) return;
      answered_client = answered_client || !learning;
    }
  }

  bool drop_reused_;
  std::string ping_answer_;
  bool events_whole_;
  std::mutex m_;
  std::vector<std::string> log_;
  unix_daemon daemon_{[this](int fd, int number) { serve(fd, number); }};  // last: ends first
};

// The connection number of each request the daemon saw for `target`.
std::vector<std::string> seen(recording_daemon& d, std::string_view target) {
  std::vector<std::string> out;
  for (const auto& line : d.log())
    if (line.find(target) != std::string::npos) out.push_back(line);
  return out;
}

}  // namespace

TEST_CASE("upstream pool: docker CLI calls, each on a connection of its own, reach dockerd on one",
          "[integration][upstream-pool]") {
  proxy_process proxy(cli_policy, {"--threads", "1"});
  std::set<std::string> first;
  for (int i = 0; i < 5; ++i) {
    // HEAD /_ping, GET /version: the CLI's one connection, closed as it exits.
    const auto r = run(proxy.docker() + " version --format '{{.Server.APIVersion}}'");
    INFO(r.output);
    REQUIRE(r.status == 0);
    REQUIRE(gate_sockets_settle(proxy.pid(), 1));  // the client gone, one daemon connection
    const auto now = daemon_ends(proxy.pid());
    CHECK(now.size() == 1);
    if (i == 0) first = now;
    CHECK(now == first);  // the same connection dockerd accepted for the first call
  }
}

TEST_CASE("upstream pool: a hijacked exec's daemon connection is never kept",
          "[integration][upstream-pool]") {
  proxy_process proxy(cli_policy, {"--threads", "1"});
  const std::string name = unique_name("pool-exec");
  REQUIRE(
      run(proxy.docker() + " run -d --name " + name + " " + test_image() + " sleep 60").status ==
      0);
  REQUIRE(gate_sockets_settle(proxy.pid(), 1));
  // exec create and inspect on the CLI's connection, its start hijacked on a second one.
  const auto r = run(proxy.docker() + " exec " + name + " echo hijacked");
  run(docker_cli() + " -H " + engine_host() + " rm -f " + name + " >/dev/null");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find("hijacked") != std::string::npos);
  // The hijacked connection is gone on dockerd's side; one clean connection is kept.
  REQUIRE(gate_sockets_settle(proxy.pid(), 1));
  CHECK(daemon_ends(proxy.pid()).size() == 1);
}

TEST_CASE(
    "upstream pool: a GET on a kept connection the daemon dropped goes again on a new one, "
    "a POST never",
    "[integration][upstream-pool]") {
  recording_daemon daemon(true);
  proxy_process proxy(cli_policy, {"--threads", "1"}, {}, daemon.upstream());
  CHECK(one_request(proxy.socket_path(), get("/v1.41/_ping")).ends_with("OK"));
  REQUIRE(gate_sockets_settle(proxy.pid(), 1));  // daemon connection 1 kept
  // Connection 1 reads the next request and closes: the ping is sent again on connection 2.
  const auto again = one_request(proxy.socket_path(), get("/v1.41/_ping"));
  INFO(again);
  CHECK(again.starts_with("HTTP/1.1 200 "));
  CHECK(seen(daemon, "/_ping") == std::vector<std::string>{"1 GET /v1.41/_ping",
                                                           "1 GET /v1.41/_ping dropped",
                                                           "2 GET /v1.41/_ping"});
  REQUIRE(gate_sockets_settle(proxy.pid(), 1));  // connection 2 kept
  // A POST the daemon may have read is never sent twice: the client gets the 502.
  const auto post = one_request(proxy.socket_path(),
                                "POST /v1.41/containers/prune HTTP/1.1\r\nHost: d\r\n"
                                "Content-Length: 0\r\n\r\n");
  INFO(post);
  CHECK(post.starts_with("HTTP/1.1 502 "));
  CHECK(seen(daemon, "/containers/prune").size() == 1);
  CHECK(seen(daemon, "/containers/prune").front().ends_with(" dropped"));
}

TEST_CASE("upstream pool: only a connection whose last answer ended whole and framed is kept",
          "[integration][upstream-pool]") {
  SECTION("an event stream, held or not, to its last chunk") {
    const bool whole = GENERATE(false, true);  // held, or ended in its first read
    recording_daemon daemon(false, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOK", whole);
    proxy_process proxy(cli_policy, {"--threads", "1"}, {}, daemon.upstream());
    const auto events = one_request(proxy.socket_path(), get("/v1.41/events"));
    INFO(events);
    CHECK(events.ends_with("\r\n0\r\n\r\n"));
    REQUIRE(gate_sockets_settle(proxy.pid(), 0));  // its daemon connection closed with it
    CHECK(one_request(proxy.socket_path(), get("/v1.41/_ping")).ends_with("OK"));
    CHECK(seen(daemon, "/_ping") == std::vector<std::string>{"2 GET /v1.41/_ping"});
  }
  SECTION("an answer with bytes past its Content-Length") {
    recording_daemon daemon(false, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOKHTTP/1.1 200 OK");
    proxy_process proxy(cli_policy, {"--threads", "1"}, {}, daemon.upstream());
    CHECK(one_request(proxy.socket_path(), get("/v1.41/_ping")).ends_with("\r\n\r\nOK"));
    REQUIRE(gate_sockets_settle(proxy.pid(), 0));
    CHECK(one_request(proxy.socket_path(), get("/v1.41/_ping")).ends_with("\r\n\r\nOK"));
    CHECK(seen(daemon, "/_ping") ==
          std::vector<std::string>{"1 GET /v1.41/_ping", "2 GET /v1.41/_ping"});
  }
  SECTION("a request whose client asked to close") {
    recording_daemon daemon;
    proxy_process proxy(cli_policy, {"--threads", "1"}, {}, daemon.upstream());
    CHECK(one_request(proxy.socket_path(), get("/v1.41/_ping", "Connection: close\r\n"))
              .ends_with("OK"));
    REQUIRE(gate_sockets_settle(proxy.pid(), 0));
    CHECK(one_request(proxy.socket_path(), get("/v1.41/_ping")).ends_with("OK"));
    CHECK(seen(daemon, "/_ping") ==
          std::vector<std::string>{"1 GET /v1.41/_ping", "2 GET /v1.41/_ping"});
  }
  SECTION("a whole answer, kept for the next client") {
    recording_daemon daemon;
    proxy_process proxy(cli_policy, {"--threads", "1"}, {}, daemon.upstream());
    for (int i = 0; i < 3; ++i) {
      CHECK(one_request(proxy.socket_path(), get("/v1.41/_ping")).ends_with("OK"));
      REQUIRE(gate_sockets_settle(proxy.pid(), 1));
    }
    CHECK(seen(daemon, "/_ping") == std::vector<std::string>{"1 GET /v1.41/_ping",
                                                             "1 GET /v1.41/_ping",
                                                             "1 GET /v1.41/_ping"});
  }
}

// Held GET /events streams of one profile share one daemon stream (proxy/src/events_hub.hpp),
// judged by the daemon's own record (NEventsListener in /info: its events subscribers) and
// by the bytes each client receives: every holder gets the events made after its head,
// none made before, never another profile's; a client that stops reading is cut off
// between two chunks and the others go on.
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <thread>

#include "harness.hpp"

using namespace dockgate::test;
using namespace std::chrono_literals;

namespace {

// Profile a: root's; b: uid 4242's. Each sees only the containers carrying its owner label.
constexpr const char* two_profiles =
    R"({"clients":[{"uid":4242,"profile":"b"}],"default_profile":"a","profiles":{)"
    R"("a":{"owner":"a","allow":["SystemPing","SystemEvents"]},)"
    R"("b":{"owner":"b","allow":["SystemPing","SystemEvents"]}}})";

// The daemon's events subscribers now, asked of it directly.
int daemon_listeners() {
  const auto r = run("curl -s --unix-socket " + engine_socket() +
                     " http://d/v1.41/info | python3 -c 'import json,sys; "
                     "print(json.load(sys.stdin)[\"NEventsListener\"])'");
  return std::atoi(r.output.c_str());
}

// Polls the daemon's count until it is `want` (the gate's close reaches dockerd a moment later).
int daemon_listeners_become(int want) {
  int n = daemon_listeners();
  for (int i = 0; i < 100 && n != want; ++i) {
    std::this_thread::sleep_for(50ms);
    n = daemon_listeners();
  }
  return n;
}

// A client holding GET /events on a raw socket: what it has read so far.
struct holder {
  int fd = -1;
  std::string bytes;
  bool closed = false;
  explicit holder(const std::string& socket, int rcvbuf = 0) {
    fd = connect_unix(socket);
    if (rcvbuf > 0) ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    const std::string request = "GET /v1.41/events HTTP/1.1\r\nHost: d\r\n\r\n";
    (void)::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  }
  ~holder() {
    if (fd >= 0) ::close(fd);
  }
  holder(const holder&) = delete;
  holder& operator=(const holder&) = delete;
  // Reads until `text` has arrived (true), the peer closed, or `timeout` passed.
  bool wait_for(const std::string& text, std::chrono::milliseconds timeout) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (bytes.find(text) == std::string::npos && !closed) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          until - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[65536];
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0)
        closed = true;
      else
        bytes.append(buf, static_cast<std::size_t>(n));
    }
    return bytes.find(text) != std::string::npos;
  }
  // The body's chunks decoded; false if the framing is broken: a chunk cut and more bytes
  // after it. A stream cut off inside its last chunk (a client that did not take it) is whole
  // up to there.
  bool body(std::string& out) const {
    const auto head_end = bytes.find("\r\n\r\n");
    if (head_end == std::string::npos) return false;
    std::size_t at = head_end + 4;
    while (at < bytes.size()) {
      const auto eol = bytes.find("\r\n", at);
      if (eol == std::string::npos) return closed && eol - at < 16;  // cut in a size line
      if (eol == at || eol - at > 15 || bytes.find_first_not_of("0123456789abcdef", at) < eol)
        return false;
      const std::size_t size = std::stoul(bytes.substr(at, eol - at), nullptr, 16);
      if (size == 0) return bytes.compare(eol, 4, "\r\n\r\n") == 0 && eol + 4 == bytes.size();
      if (eol + 2 + size + 2 > bytes.size()) return closed;  // cut inside its last chunk
      if (bytes.compare(eol + 2 + size, 2, "\r\n") != 0) return false;
      out.append(bytes, eol + 2, size);
      at = eol + 2 + size + 2;
    }
    return true;
  }
};

std::string create_direct(const std::string& name, const std::string& owner,
                          const std::string& more = "") {
  const auto r =
      run(docker_cli() + " -H " + engine_host() + " create --name " + name +
          " --label dockgate.owner=" + owner + " " + more + " " + test_image() + " true");
  return r.status == 0 ? r.output.substr(0, 64) : std::string();
}

void remove_direct(const std::string& names) {
  run(docker_cli() + " -H " + engine_host() + " rm -f " + names + " >/dev/null 2>&1");
}

}  // namespace

TEST_CASE("held GET /events of one profile share one daemon stream, each from its own head",
          "[integration][stream][shared]") {
  proxy_process proxy(two_profiles, {"--threads", "1", "--socket-mode", "0666"});
  ::chmod(proxy.dir().c_str(), 0755);  // let uid 4242 reach the socket
  const int before = daemon_listeners();
  const auto first = unique_name("dg-shared-1");
  const auto second = unique_name("dg-shared-2");
  const auto foreign = unique_name("dg-shared-b");

  std::vector<std::unique_ptr<holder>> early;
  for (int i = 0; i < 4; ++i) {
    early.push_back(std::make_unique<holder>(proxy.socket_path()));
    REQUIRE(early.back()->wait_for("\r\n\r\n", 10s));
    CHECK(early.back()->bytes.starts_with("HTTP/1.1 200 OK\r\n"));
  }
  // Four clients of profile a: one subscription of the daemon's.
  CHECK(daemon_listeners_become(before + 1) == before + 1);
  // Profile b's client gets a stream of its own.
  background other(
      "HOME=/tmp setpriv --reuid 4242 --regid 4242 --clear-groups curl -sN "
      "--unix-socket " +
      proxy.socket_path() + " http://d/v1.41/events");
  CHECK(daemon_listeners_become(before + 2) == before + 2);

  // An event made before the late clients' heads: the early ones get it.
  const std::string first_id = create_direct(first, "a");
  REQUIRE(!first_id.empty());
  for (auto& h : early) CHECK(h->wait_for(first_id, 10s));
  std::vector<std::unique_ptr<holder>> late;
  for (int i = 0; i < 4; ++i) {
    late.push_back(std::make_unique<holder>(proxy.socket_path()));
    REQUIRE(late.back()->wait_for("\r\n\r\n", 10s));
    CHECK(late.back()->bytes.starts_with("HTTP/1.1 200 OK\r\n"));
  }
  CHECK(daemon_listeners() == before + 2);  // they joined: the daemon has no new subscriber
  // One made after: every holder of a gets it, the late ones nothing before it; b nothing.
  const std::string foreign_id = create_direct(foreign, "b");
  const std::string second_id = create_direct(second, "a");
  REQUIRE(!second_id.empty());
  for (auto& h : early) CHECK(h->wait_for(second_id, 10s));
  for (auto& h : late) {
    CHECK(h->wait_for(second_id, 10s));
    std::string body;
    CHECK(h->body(body));
    CHECK(body.find(first_id) == std::string::npos);
    CHECK(body.find(foreign_id) == std::string::npos);
  }
  const auto b_line = other.read_line(10s).value_or("");
  CHECK(b_line.find(foreign_id) != std::string::npos);
  CHECK(b_line.find(first_id) == std::string::npos);
  for (auto& h : early) {
    std::string body;
    CHECK(h->body(body));
    CHECK(body.find(foreign_id) == std::string::npos);
  }
  // The last holder of a gone: so is the daemon's subscription.
  early.clear();
  late.clear();
  other.kill();
  CHECK(daemon_listeners_become(before) == before);
  remove_direct(first + " " + second + " " + foreign);
}

TEST_CASE("a holder that stops reading is cut off, and the others go on",
          "[integration][stream][shared]") {
  proxy_process proxy(two_profiles, {"--threads", "1"});
  holder stalled(proxy.socket_path(), 4096);
  REQUIRE(stalled.wait_for("\r\n\r\n", 10s));
  holder reading(proxy.socket_path());
  REQUIRE(reading.wait_for("\r\n\r\n", 10s));
  // Events of ~300 KiB each (labels are in every event of their container; the CLI reads a
  // label file's lines up to 64 KiB): past what the stalled client's socket and the gate's
  // bound for it hold.
  const std::string label_file = proxy.dir() + "/labels";
  {
    std::ofstream labels(label_file);
    for (int i = 0; i < 5; ++i) labels << "big" << i << "=" << std::string(60 * 1024, 'x') << "\n";
  }
  std::vector<std::string> names;
  std::string last_id;
  for (int i = 0; i < 12; ++i) {
    names.push_back(unique_name("dg-shared-big"));
    last_id = create_direct(names.back(), "a", "--label-file " + label_file);
    REQUIRE(!last_id.empty());
    CHECK(reading.wait_for(last_id, 10s));  // the reading client is never held up
  }
  // The stalled client, read now: whole chunks, then the gate's close (no end of its own).
  CHECK(!stalled.wait_for(last_id, 10s));
  CHECK(stalled.closed);
  std::string body;
  CHECK(stalled.body(body));
  std::string all;
  for (const auto& n : names) all += n + " ";
  remove_direct(all);
}

TEST_CASE("at the shutdown deadline every holder of a shared events stream gets its end",
          "[integration][stream][shared]") {
  proxy_process proxy(two_profiles, {"--threads", "1", "--shutdown-timeout", "1"});
  std::vector<std::unique_ptr<holder>> holders;
  for (int i = 0; i < 3; ++i) {
    holders.push_back(std::make_unique<holder>(proxy.socket_path()));
    REQUIRE(holders.back()->wait_for("\r\n\r\n", 10s));
  }
  const auto [status, took] = proxy.terminate();
  CHECK(status == 0);
  CHECK(took < 5s);
  for (auto& h : holders) {
    h->wait_for("never", 5s);  // to the close
    CHECK(h->closed);
    std::string body;
    CHECK(h->body(body));
    CHECK(h->bytes.ends_with("\r\n0\r\n\r\n"));
  }
}

// readiness.hpp: before a request goes to the daemon, the relay tells Asio's epoll reactor
// that its answer cannot be there yet. Checked on a real socket pair and a real reactor:
// that the reactor honours it (a read marked so makes no attempt and waits for the next
// arrival: the first test makes that state on purpose, with data already there), that no
// answer is lost in the orders the loop can run in, that a daemon which closed first is
// still noticed, and why clients are never marked (a short read does not show a drained
// socket: an end that came with the last bytes is seen only by a read tried at once).
#include "readiness.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <optional>
#include <string>

#include "socket_io.hpp"

namespace {

using namespace dockgate::proxy;
using namespace std::chrono_literals;

struct pair_of_sockets {
  net::io_context ioc{1};
  protocol::socket ours{ioc};
  int peer = -1;

  pair_of_sockets() {
    int fds[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
    ours.assign(protocol(AF_UNIX, SOCK_STREAM), fds[0]);
    ours.non_blocking(true);
    peer = fds[1];
  }
  ~pair_of_sockets() {
    if (peer >= 0) ::close(peer);
  }
  void send(std::string_view bytes) const {
    REQUIRE(::send(peer, bytes.data(), bytes.size(), 0) == ssize_t(bytes.size()));
  }
  // Runs the loop a little: every event the kernel has is taken in and handled (the
  // guard keeps the loop polling epoll when nothing else is queued).
  void turn() {
    ioc.restart();
    auto busy = net::make_work_guard(ioc);
    ioc.run_for(20ms);
  }
};

// A read through asio (as the relay reads the daemon's answer), its result once done.
struct pending_read {
  std::optional<std::string> got;
  boost::system::error_code ec;
  char buf[64];
  void start(protocol::socket& s) {
    s.async_read_some(net::buffer(buf), [this](boost::system::error_code e, std::size_t n) {
      ec = e;
      got.emplace(buf, n);
    });
  }
};

std::string read_now_from(pair_of_sockets& p, std::size_t room) {
  std::string got;
  net::co_spawn(
      p.ioc,
      [&]() -> net::awaitable<void> {
        std::string buf(room, '\0');
        auto [ec, n] = co_await read_now(p.ours, net::buffer(buf));
        REQUIRE_FALSE(ec);
        got = buf.substr(0, n);
      },
      net::detached);
  p.turn();
  return got;
}

}  // namespace

TEST_CASE("readiness: the reactor honours 'nothing yet': no read is tried until the next arrival",
          "[readiness]") {
  pair_of_sockets p;
  p.send("stale");
  p.turn();  // the arrival's event is taken in with no read queued: "try at once"
  REQUIRE(maybe_readable(p.ours));
  not_readable_yet(p.ours);
  CHECK_FALSE(maybe_readable(p.ours));
  pending_read r;
  r.start(p.ours);
  p.turn();
  CHECK_FALSE(r.got);  // without the mark, asio reads "stale" at once
  p.send("+new");
  p.turn();
  REQUIRE(r.got);
  CHECK(*r.got == "stale+new");
}

TEST_CASE("readiness: an answer that comes after the request is read, in any order of the loop",
          "[readiness]") {
  pair_of_sockets p;
  SECTION("the answer arrives after the read is queued") {
    not_readable_yet(p.ours);
    pending_read r;
    r.start(p.ours);
    p.turn();
    CHECK_FALSE(r.got);
    p.send("HTTP/1.1 200 OK");
    p.turn();
    REQUIRE(r.got);
    CHECK(*r.got == "HTTP/1.1 200 OK");
  }
  SECTION("the answer arrives and is taken in by the loop before the read is queued") {
    not_readable_yet(p.ours);
    p.send("HTTP/1.1 200 OK");
    p.turn();
    pending_read r;
    r.start(p.ours);
    p.turn();
    REQUIRE(r.got);
    CHECK(*r.got == "HTTP/1.1 200 OK");
  }
  SECTION("the daemon closes instead") {
    not_readable_yet(p.ours);
    pending_read r;
    r.start(p.ours);
    p.turn();
    ::close(p.peer);
    p.peer = -1;
    p.turn();
    REQUIRE(r.got);
    CHECK(r.ec == net::error::eof);
  }
}

TEST_CASE("readiness: a daemon that closed the idle connection before the request is noticed",
          "[readiness]") {
  pair_of_sockets p;
  ::close(p.peer);
  p.peer = -1;
  p.turn();  // the end's event is taken in with no read queued
  not_readable_yet(p.ours);
  const char request[] = "GET /_ping HTTP/1.1\r\n\r\n";
  errno = 0;
  CHECK(::send(p.ours.native_handle(), request, sizeof request - 1, MSG_NOSIGNAL | MSG_DONTWAIT) ==
        -1);
  CHECK(errno == EPIPE);  // the relay answers 502 and drops the connection; nothing waits
}

TEST_CASE("readiness: a client's end that came with its last bytes is seen after a short read",
          "[readiness]") {
  pair_of_sockets p;
  p.send("POST /containers/create HTTP/1.1\r\nContent-Length: 4096\r\n\r\n{\"Im");
  REQUIRE(::shutdown(p.peer, SHUT_WR) == 0);
  p.turn();
  CHECK(read_now_from(p, 4096).size() == 62);  // the bytes, not the end: a short read
  pending_read r;
  r.start(p.ours);  // the body's next read, as request_body_stage makes it
  p.turn();
  REQUIRE(r.got);  // had read_now marked the socket drained, this read would wait forever
  CHECK(r.ec == net::error::eof);
}

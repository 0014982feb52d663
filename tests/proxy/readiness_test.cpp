// readiness.hpp: before a request goes to the daemon, the relay tells Asio's epoll reactor
// that its answer cannot be there yet, and a client's next request is awaited with no
// system call. Checked on a real socket pair and a real reactor: that the reactor honours
// the mark (a read marked so makes no attempt and waits for the next arrival: the first
// test makes that state on purpose, with data already there), that no answer is lost in the
// orders the loop can run in, that a daemon which closed first is still noticed, and that a
// client's end is never lost: a short read does not show a drained socket when the end came
// with the last bytes, so a client is marked only when epoll's last report said it had not
// ended (EPOLLRDHUP, registered by report_end). What only readiness.cpp does (the marks) is
// checked where it is built (DOCKGATE_ASIO_REACTOR_PEEK); the rest holds for the portable
// path too, which the asan-ubsan preset builds.
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
  std::string buf(room, '\0');
  auto [ec, n] = read_now(p.ours, net::buffer(buf));
  REQUIRE_FALSE(ec);
  return buf.substr(0, n);
}

// until_readable, its outcome once done.
struct pending_wait {
  bool done = false;
  boost::system::error_code ec;
  void start(pair_of_sockets& p) {
    net::co_spawn(
        p.ioc,
        [this, &p]() -> net::awaitable<void> {
          auto [e] = co_await until_readable(p.ours);
          ec = e;
          done = true;
        },
        net::detached);
  }
};

// The relay's read of a client (request_head_stage.cpp): the bytes there now, then the
// mark if the read left room.
std::string read_client(pair_of_sockets& p, std::size_t room) {
  std::string got = read_now_from(p, room);
  if (got.size() < room) drained_unless_ended(p.ours);
  return got;
}

}  // namespace

#if DOCKGATE_ASIO_REACTOR_PEEK
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

#endif

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
  CHECK(maybe_readable(p.ours));
  pending_read r;
  r.start(p.ours);  // the body's next read, as request_body_stage makes it
  p.turn();
  REQUIRE(r.got);  // had read_now marked the socket drained, this read would wait forever
  CHECK(r.ec == net::error::eof);
}

#if DOCKGATE_ASIO_REACTOR_PEEK
TEST_CASE("readiness: a client's end is reported with its readability once asked for",
          "[readiness]") {
  pair_of_sockets p;
  REQUIRE(report_end(p.ours));
  REQUIRE(report_end(p.ours));  // once is enough; again changes nothing
  SECTION("its end came with its last bytes: not marked, the next wait ends at once") {
    p.send("GET /_ping HTTP/1.1\r\n\r\n");
    REQUIRE(::shutdown(p.peer, SHUT_WR) == 0);
    p.turn();
    CHECK(read_client(p, 4096).size() == 23);
    CHECK(maybe_readable(p.ours));  // without the EPOLLRDHUP check the end would be lost
    pending_wait w;
    w.start(p);
    p.turn();
    REQUIRE(w.done);
    CHECK_FALSE(w.ec);
    std::string buf(16, '\0');
    CHECK(std::get<0>(read_now(p.ours, net::buffer(buf))) == net::error::eof);
  }
  SECTION("its end came after the bytes were read: the wait ends with the end's event") {
    p.send("GET /_ping HTTP/1.1\r\n\r\n");
    p.turn();
    CHECK(read_client(p, 4096).size() == 23);
    CHECK_FALSE(maybe_readable(p.ours));  // drained, and epoll said no end: marked
    pending_wait w;
    w.start(p);
    p.turn();
    CHECK_FALSE(w.done);  // queued, nothing to read
    REQUIRE(::shutdown(p.peer, SHUT_WR) == 0);
    p.turn();
    REQUIRE(w.done);
    CHECK_FALSE(w.ec);
  }
  SECTION("its end came while the relay was busy, before the wait was queued") {
    p.send("GET /_ping HTTP/1.1\r\n\r\n");
    p.turn();
    CHECK(read_client(p, 4096).size() == 23);
    REQUIRE(::shutdown(p.peer, SHUT_WR) == 0);
    p.turn();  // the end's event, with no read or wait queued: "try at once" again
    CHECK(maybe_readable(p.ours));
    pending_wait w;
    w.start(p);
    p.turn();
    CHECK(w.done);
  }
  SECTION("a read that filled its buffer marks nothing: more may be there") {
    p.send("GET /_ping HTTP/1.1\r\n\r\n");
    p.turn();
    CHECK(read_client(p, 10).size() == 10);
    CHECK(maybe_readable(p.ours));
  }
}

TEST_CASE("readiness: the end that came before it was asked for is still reported", "[readiness]") {
  pair_of_sockets p;
  p.send("GET /_ping HTTP/1.1\r\n\r\n");
  REQUIRE(::shutdown(p.peer, SHUT_WR) == 0);
  p.turn();  // taken in while the end is not reported: the last event says nothing of it
  REQUIRE(report_end(p.ours));
  p.turn();  // the registration's change re-arms the socket: epoll reports it again, end and all
  CHECK(read_client(p, 4096).size() == 23);
  CHECK(maybe_readable(p.ours));
}

#endif

TEST_CASE("readiness: a client whose end is not reported is never marked", "[readiness]") {
  pair_of_sockets p;
  p.send("GET /_ping HTTP/1.1\r\n\r\n");
  p.turn();
  CHECK(read_client(p, 4096).size() == 23);
  CHECK(maybe_readable(p.ours));
}

// Both paths (readiness.cpp and readiness_portable.cpp): the wait for a client's next
// request ends for bytes and for an end, whether they came before it or after it.
TEST_CASE("readiness: the wait for the next request sees what came before it and after it",
          "[readiness]") {
  pair_of_sockets p;
  report_end(
      p.ours);  // as each connection asks when it is made (true only on readiness.cpp's path)
  SECTION("bytes there before the wait") {
    p.send("GET");
    p.turn();  // the arrival's event is taken in with no read or wait queued
    pending_wait w;
    w.start(p);
    p.turn();
    REQUIRE(w.done);
    CHECK_FALSE(w.ec);
    CHECK(read_now_from(p, 16) == "GET");
  }
  SECTION("an end that came with the last bytes read") {
    p.send("GET /_ping HTTP/1.1\r\n\r\n");
    REQUIRE(::shutdown(p.peer, SHUT_WR) == 0);
    p.turn();
    CHECK(read_client(p, 4096).size() == 23);
    pending_wait w;
    w.start(p);
    p.turn();
    REQUIRE(w.done);
    std::string buf(16, '\0');
    CHECK(std::get<0>(read_now(p.ours, net::buffer(buf))) == net::error::eof);
  }
  SECTION("nothing there: it waits, and ends with the client's end") {
    p.send("GET /_ping HTTP/1.1\r\n\r\n");
    p.turn();
    CHECK(read_client(p, 4096).size() == 23);
    pending_wait w;
    w.start(p);
    p.turn();
    CHECK_FALSE(w.done);
    REQUIRE(::shutdown(p.peer, SHUT_WR) == 0);
    p.turn();
    REQUIRE(w.done);
    CHECK_FALSE(w.ec);
  }
}

TEST_CASE("readiness: until_readable waits for epoll's word, and is cancelled like a read",
          "[readiness]") {
  pair_of_sockets p;
#if DOCKGATE_ASIO_REACTOR_PEEK
  SECTION("the flag set: at once, though nothing is there") {
    REQUIRE(maybe_readable(p.ours));
    pending_wait w;
    w.start(p);
    p.turn();
    CHECK(w.done);
    std::string buf(16, '\0');
    CHECK(std::get<0>(read_now(p.ours, net::buffer(buf))) == net::error::would_block);
  }
#endif
  SECTION("the flag clear: at the next arrival") {
    not_readable_yet(p.ours);
    pending_wait w;
    w.start(p);
    p.turn();
    CHECK_FALSE(w.done);
    p.send("GET");
    p.turn();
    REQUIRE(w.done);
    CHECK_FALSE(w.ec);
    CHECK(read_now_from(p, 16) == "GET");
  }
  // A queued wait ended from outside; its outcome.
  auto ended_by = [&p](void (*end)(protocol::socket&)) {
    not_readable_yet(p.ours);
    pending_wait w;
    w.start(p);
    p.turn();
    end(p.ours);
    p.turn();
    REQUIRE(w.done);
    return w.ec;
  };
  SECTION("cancelled (the gate stopping)") {
    CHECK(ended_by([](protocol::socket& s) { s.cancel(); }) == net::error::operation_aborted);
  }
  SECTION("closed (a deadline)") {
    CHECK(ended_by([](protocol::socket& s) { s.close(); }) == net::error::operation_aborted);
  }
  SECTION("on a closed socket") {
    p.ours.close();
    pending_wait w;
    w.start(p);
    p.turn();
    REQUIRE(w.done);
    CHECK(w.ec == net::error::bad_descriptor);
  }
}

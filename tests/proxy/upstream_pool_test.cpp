// The thread's idle daemon connections (proxy/src/upstream_pool.hpp), each on one end of a
// socketpair whose other end plays the daemon: what it closes, resets or writes is seen.
#include "upstream_pool.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <vector>

using namespace dockgate::proxy;

namespace {

struct daemon_end {
  int fd = -1;
  ~daemon_end() {
    if (fd >= 0) ::close(fd);
  }
  // Whether the gate's side closed the connection: an end, or a reset (a unix socket
  // closed with bytes unread resets its peer).
  bool closed() const {
    char c;
    const ssize_t n = ::recv(fd, &c, 1, MSG_DONTWAIT | MSG_PEEK);
    return n == 0 || (n < 0 && errno == ECONNRESET);
  }
};

// A gate-side upstream_socket on `ioc` and the daemon's end of it.
void connect(net::io_context& ioc, upstream_socket& gate, daemon_end& daemon) {
  int fds[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
  gate.emplace(ioc).assign(protocol(AF_UNIX, SOCK_STREAM), fds[0]);
  daemon.fd = fds[1];
}

}  // namespace

TEST_CASE("upstream pool: a connection given back is taken again, the most recent first",
          "[upstream_pool]") {
  net::io_context ioc;
  upstream_pool pool;
  const auto now = upstream_pool::clock::now();
  upstream_socket a, b, got;
  daemon_end da, db;
  connect(ioc, a, da);
  connect(ioc, b, db);
  const int a_fd = a->native_handle(), b_fd = b->native_handle();
  pool.give_back(a, now);
  pool.give_back(b, now);
  CHECK(!a);  // moved into the pool
  CHECK(pool.idle() == 2);
  REQUIRE(pool.take(got));
  CHECK(got->native_handle() == b_fd);
  got.reset();
  REQUIRE(pool.take(got));
  CHECK(got->native_handle() == a_fd);
  CHECK(!pool.take(got));  // `got` is left as it was: the caller connects
  CHECK(!da.closed());     // neither was closed while pooled
}

TEST_CASE("upstream pool: one the daemon closed, reset or wrote to is never taken",
          "[upstream_pool]") {
  net::io_context ioc;
  upstream_pool pool;
  const auto now = upstream_pool::clock::now();
  upstream_socket good, closed, wrote, reset, got;
  daemon_end dgood, dclosed, dwrote, dreset;
  connect(ioc, good, dgood);
  connect(ioc, closed, dclosed);
  connect(ioc, wrote, dwrote);
  connect(ioc, reset, dreset);
  const int good_fd = good->native_handle();
  pool.give_back(good, now);  // the oldest: taken only after the three above it are dropped
  pool.give_back(closed, now);
  pool.give_back(wrote, now);
  pool.give_back(reset, now);
  ::close(std::exchange(dclosed.fd, -1));  // an idle timeout, a restart
  REQUIRE(::send(dwrote.fd, "HTTP/1.1 200 OK\r\n", 17, MSG_NOSIGNAL) == 17);  // unasked bytes
  ::shutdown(dreset.fd, SHUT_WR);  // an end in one direction is an end
  REQUIRE(pool.take(got));
  CHECK(got->native_handle() == good_fd);
  CHECK(pool.idle() == 0);
  CHECK(dwrote.closed());  // the gate closed the ones it dropped
  CHECK(dreset.closed());
}

TEST_CASE("upstream pool: at most idle_cap idle, none past the idle timeout, none after clear",
          "[upstream_pool]") {
  net::io_context ioc;
  upstream_pool pool;
  const auto start = upstream_pool::clock::now();
  const std::size_t n = upstream_pool::idle_cap + 2;
  std::vector<daemon_end> daemons(n);
  for (std::size_t i = 0; i < n; ++i) {
    upstream_socket s;
    connect(ioc, s, daemons[i]);
    pool.give_back(s, start + std::chrono::seconds(i));
  }
  CHECK(pool.idle() == upstream_pool::idle_cap);
  CHECK(daemons[0].closed());  // the oldest two closed
  CHECK(daemons[1].closed());
  CHECK(!daemons[2].closed());
  // Idle for the timeout since it was given back (at start + 2 s): closed; the next not yet.
  pool.expire(start + std::chrono::seconds(2) + upstream_pool::idle_timeout);
  CHECK(pool.idle() == upstream_pool::idle_cap - 1);
  CHECK(daemons[2].closed());
  CHECK(!daemons[3].closed());
  pool.clear();
  CHECK(pool.idle() == 0);
  CHECK(daemons[n - 1].closed());
  upstream_socket got;
  CHECK(!pool.take(got));
}

// See readiness.hpp: its portable path, built when DOCKGATE_ASIO_REACTOR_PEEK is OFF (a Boost
// other than the one readiness.cpp reads, or the asan-ubsan preset, which CI runs the whole
// integration suite on). Public Asio only, so any Boost builds it; the cost is two system
// calls per request that readiness.cpp saves:
// - nothing is marked: the read of the daemon's answer, queued right after its request, is
//   first tried at once and meets EAGAIN (one recv(2));
// - a client's next request is awaited with async_wait, which re-arms the socket with
//   epoll_ctl(2) (one more call). Its end is not lost either way: the re-arm makes epoll
//   report whatever the socket holds now, an end included.
#include "readiness.hpp"

namespace dockgate::proxy {

void not_readable_yet(protocol::socket&) noexcept {}

// Asio's own reading: every read is tried at once.
bool maybe_readable(protocol::socket&) noexcept {
  return true;
}

// Not asked: nothing here reads the reactor's last report.
bool report_end(protocol::socket&) noexcept {
  return false;
}

void drained_unless_ended(protocol::socket&) noexcept {}

net::awaitable<std::tuple<boost::system::error_code>> until_readable(protocol::socket& s) {
  return s.async_wait(net::socket_base::wait_read, use_tuple);
}

}  // namespace dockgate::proxy

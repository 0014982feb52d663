// Idle daemon connections of one gate thread: upstream_pool.hpp says what may be kept and
// why.
#include "upstream_pool.hpp"

#include <sys/socket.h>

#include <cerrno>

namespace dockgate::proxy {

bool upstream_pool::still_usable(int fd) noexcept {
  char byte;
  for (;;) {
    const ssize_t n = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    // 0: the daemon ended it; > 0: bytes no request asked for; an error: reset or gone.
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
}

bool upstream_pool::take(upstream_socket& into) {
  // The most recent first: the least likely to have been closed by the daemon.
  while (!idle_.empty()) {
    entry e = std::move(idle_.back());
    idle_.pop_back();
    if (e.socket && e.socket->is_open() && still_usable(e.socket->native_handle())) {
      into = std::move(e.socket);
      return true;
    }
  }
  return false;
}

void upstream_pool::give_back(upstream_socket& from, clock::time_point now) {
  if (!from || !from->is_open()) {
    from.reset();
    return;
  }
  if (idle_.size() >= idle_cap) idle_.pop_front();
  idle_.push_back({std::move(from), now});
}

void upstream_pool::expire(clock::time_point now) {
  while (!idle_.empty() && now - idle_.front().since >= idle_timeout) idle_.pop_front();
}

}  // namespace dockgate::proxy

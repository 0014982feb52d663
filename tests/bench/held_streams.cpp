#include "held_streams.hpp"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>

#include "bench_net.hpp"

namespace dockgate::bench {

namespace {
constexpr int max_in_flight = 512;  // connections opened and still waiting for their head
}

held_streams::held_streams(const common::endpoint& ep, std::string request)
    : ep_(ep), request_(std::move(request)), epoll_fd_(::epoll_create1(EPOLL_CLOEXEC)) {
  if (epoll_fd_ < 0) throw std::runtime_error("epoll_create1 failed");
}

held_streams::~held_streams() {
  for (auto& c : connections_)
    if (c.fd >= 0) ::close(c.fd);
  ::close(epoll_fd_);
}

bool held_streams::open_one() {
  bool backlog_full = false;
  int fd = connect_to(ep_, /*nonblocking=*/true, &backlog_full);
  if (fd < 0) {
    if (backlog_full) return false;
    ++failed_;
    connections_.emplace_back();
    return true;
  }
  connections_.push_back({fd, {}, false});
  // Writable once connected (at once for a unix socket); the request goes out then.
  epoll_event ev{};
  ev.events = EPOLLOUT;
  ev.data.u64 = connections_.size() - 1;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  return true;
}

void held_streams::finish(connection& c, bool ok) {
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
  c.buf.clear();
  c.buf.shrink_to_fit();
  if (ok) {
    ++held_;  // the stream stays open; nothing more is read from it
    return;
  }
  ++failed_;
  ::close(c.fd);
  c.fd = -1;
}

void held_streams::on_event(std::size_t index, unsigned events) {
  auto& c = connections_[index];
  if (!c.sent) {
    if ((events & (EPOLLERR | EPOLLHUP)) || !send_all(c.fd, request_)) return finish(c, false);
    c.sent = true;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = index;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &ev);
    return;
  }
  char tmp[4096];
  ssize_t n = ::recv(c.fd, tmp, sizeof tmp, 0);
  if (n <= 0) return finish(c, false);
  c.buf.append(tmp, static_cast<std::size_t>(n));
  if (c.buf.find("\r\n\r\n") != std::string::npos) finish(c, status_of(c.buf) == 200);
}

void held_streams::hold(int count, std::chrono::milliseconds stall) {
  using clock_type = std::chrono::steady_clock;
  connections_.reserve(connections_.size() + static_cast<std::size_t>(count));
  const int target_held = held_ + count;
  const std::size_t last = connections_.size() + static_cast<std::size_t>(count);
  auto last_progress = clock_type::now();
  std::vector<epoll_event> events(256);
  while (held_ < target_held && held_ + failed_ < static_cast<int>(last)) {
    while (connections_.size() < last &&
           static_cast<int>(connections_.size()) - held_ - failed_ < max_in_flight && open_one()) {
    }
    int n = ::epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), 100);
    const int before = held_ + failed_;
    for (int i = 0; i < n; ++i)
      on_event(events[static_cast<std::size_t>(i)].data.u64,
               events[static_cast<std::size_t>(i)].events);
    if (held_ + failed_ != before)
      last_progress = clock_type::now();
    else if (clock_type::now() - last_progress > stall)
      break;
  }
}

}  // namespace dockgate::bench

// A daemon events stream shared by the held streams of one gate thread (the invariants:
// events_hub.hpp). No coroutine: one waiting callback on the daemon's socket, which reads
// what is there with recv(2) into a block on its stack and gives it to the fan-out.
#include "events_hub.hpp"

#include <sys/epoll.h>
#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <cstdio>

namespace dockgate::proxy {

std::string_view events_hub::key(proxy_context& ctx, const policy::profile& profile,
                                 std::string_view target) {
  std::array<char, 2 + 2 * sizeof(void*) + 2> id{};
  const int n = std::snprintf(id.data(), id.size(), "%p ", static_cast<const void*>(&profile));
  ctx.hub_key.assign(id.data(), static_cast<std::size_t>(n));
  ctx.hub_key += target;
  return ctx.hub_key;
}

events_hub* events_hub::find(proxy_context& ctx, std::string_view key) {
  const auto it = ctx.events_hubs.find(key);
  return it == ctx.events_hubs.end() ? nullptr : it->second;
}

events_hub& events_hub::open(proxy_context& ctx, std::string key, protocol::socket upstream,
                             std::string head, std::shared_ptr<const policy::policy> policy,
                             const policy::profile& profile, bool filter_owned) {
  auto* hub = new events_hub(ctx, std::move(key), std::move(upstream), std::move(head),
                             std::move(policy), profile, filter_owned);
  ctx.events_hubs.emplace(hub->key_, hub);
  return *hub;
}

events_hub::events_hub(proxy_context& ctx, std::string key, protocol::socket upstream,
                       std::string head, std::shared_ptr<const policy::policy> policy,
                       const policy::profile& profile, bool filter_owned)
    : ctx_(ctx),
      key_(std::move(key)),
      upstream_(std::move(upstream)),
      head_(std::move(head)),
      policy_(std::move(policy)),
      fanout_(profile.rules.owner, filter_owned) {
  // Its socket to the daemon and its epoll set: two descriptors of the process's budget
  // (server.cpp).
  ctx_.process.descriptors.fetch_add(2, std::memory_order_relaxed);
  const int epoll = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll >= 0) clients_.emplace(upstream_.get_executor(), epoll);
}

events_hub::~events_hub() {
  ctx_.process.descriptors.fetch_sub(2, std::memory_order_relaxed);
}

bool events_hub::watch(events_subscriber& s, int fd) {
  if (!clients_ || over_) return false;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT;
  ev.data.ptr = &s;
  if (::epoll_ctl(clients_->native_handle(), s.in_epoll_ ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd,
                  &ev) != 0)
    return false;
  s.in_epoll_ = true;
  if (!clients_waiting_ && !in_clients_) wait_clients();
  return true;
}

void events_hub::unwatch(events_subscriber& s, int fd) {
  if (!s.in_epoll_) return;
  s.in_epoll_ = false;
  if (clients_) ::epoll_ctl(clients_->native_handle(), EPOLL_CTL_DEL, fd, nullptr);
}

void events_hub::wait_clients() {
  clients_waiting_ = true;
  clients_->async_wait(net::posix::descriptor_base::wait_read, [this](beast::error_code ec) {
    clients_waiting_ = false;
    if (!ec && !over_) {
      // A holder may leave (unwatch, leave) from its callback: the hub stays until the end.
      in_clients_ = true;
      std::array<epoll_event, 64> ready;
      int n;
      do {
        n = ::epoll_wait(clients_->native_handle(), ready.data(), ready.size(), 0);
        for (int i = 0; i < n && !over_; ++i)
          static_cast<events_subscriber*>(ready[static_cast<std::size_t>(i)].data.ptr)
              ->client_readable();
      } while (n == static_cast<int>(ready.size()) && !over_);
      in_clients_ = false;
      if (!over_ && !fanout_.empty()) wait_clients();
    }
    delete_if_done();
  });
}

bool events_hub::join(events_subscriber& s, std::int64_t joined_ns) {
  // What the daemon sent before this holder came goes to those already here: an event on
  // its way in the socket now was made before the join. (Not for the holder whose request
  // opened the stream: all of it is its own, and there is no one else yet.)
  if (joined_ns > 0 && !over_) pump();
  if (over_) {
    delete_if_done();
    return false;
  }
  fanout_.join(s, joined_ns);
  if (!waiting_) wait();
  return true;
}

void events_hub::leave(events_subscriber& s) {
  fanout_.leave(s);
  if (fanout_.empty() && !over_) {
    // The last holder went: the daemon's subscription ends with its connection.
    forget();
    over_ = true;
    close();  // the pending waits' callbacks delete the hub
  }
  delete_if_done();
}

void events_hub::close() {
  beast::error_code ignored;
  upstream_.close(ignored);
  if (clients_) clients_->close(ignored);
}

void events_hub::wait() {
  waiting_ = true;
  upstream_.async_wait(net::socket_base::wait_read, [this](beast::error_code ec) {
    waiting_ = false;
    if (!over_) {
      if (ec)
        over(false);
      else
        pump();
    }
    if (!over_ && !waiting_) wait();
    delete_if_done();
  });
}

// What the daemon has now, one recv(2) after another until it has no more.
void events_hub::pump() {
  std::array<char, 16 * 1024> block;
  for (;;) {
    const ssize_t n = ::recv(upstream_.native_handle(), block.data(), block.size(), MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) return over(false);  // the daemon went away mid-stream
    const auto state = fanout_.feed({block.data(), static_cast<std::size_t>(n)});
    if (state != events_fanout::state::open) return over(state == events_fanout::state::ended);
  }
}

void events_hub::over(bool clean) {
  over_ = true;
  forget();  // new requests open a stream of their own
  close();
  fanout_.end(clean);  // every holder gets its end
}

void events_hub::forget() {
  if (!listed_) return;
  listed_ = false;
  ctx_.events_hubs.erase(key_);
}

void events_hub::delete_if_done() {
  if (over_ && !waiting_ && !clients_waiting_ && !in_clients_ && fanout_.empty()) delete this;
}

}  // namespace dockgate::proxy

// A daemon events stream shared by the held streams of one gate thread (the invariants:
// events_hub.hpp). No coroutine: one waiting callback on the daemon's socket, which reads
// what is there with recv(2) into a block on its stack and gives it to the fan-out.
#include "events_hub.hpp"

#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <cstdio>

namespace dockgate::proxy {

std::string events_hub::key(const policy::profile& profile, std::string_view target) {
  std::array<char, 2 + 2 * sizeof(void*) + 2> id{};
  const int n = std::snprintf(id.data(), id.size(), "%p ", static_cast<const void*>(&profile));
  std::string k(id.data(), static_cast<std::size_t>(n));
  k += target;
  return k;
}

events_hub* events_hub::find(proxy_context& ctx, std::string_view key) {
  const auto it = ctx.events_hubs.find(std::string(key));
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
  // Its socket to the daemon: one descriptor of the process's budget (server.cpp).
  ctx_.process.descriptors.fetch_add(1, std::memory_order_relaxed);
}

events_hub::~events_hub() {
  ctx_.process.descriptors.fetch_sub(1, std::memory_order_relaxed);
}

bool events_hub::join(events_subscriber& s, std::int64_t joined_ns) {
  // What the daemon sent before this holder came goes to those already here: an event on
  // its way in the socket now was made before the join.
  if (!over_) pump();
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
    beast::error_code ignored;
    upstream_.close(ignored);  // a pending wait's callback deletes the hub
  }
  delete_if_done();
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
  beast::error_code ignored;
  upstream_.close(ignored);
  fanout_.end(clean);  // every holder gets its end
}

void events_hub::forget() {
  if (!listed_) return;
  listed_ = false;
  ctx_.events_hubs.erase(key_);
}

void events_hub::delete_if_done() {
  if (over_ && !waiting_ && fanout_.empty()) delete this;
}

}  // namespace dockgate::proxy

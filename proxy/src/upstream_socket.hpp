#pragma once
// The connection's socket to the daemon. For unix:// and tcp:// upstreams it is the
// socket itself; for tls:// it is the plaintext end of a socketpair whose other end a
// relay (upstream_tls.cpp) pumps through the TLS stream to the daemon. Every stage reads
// and writes a plain socket either way (recv, sendmsg, splice(2), async_wait), so the
// unix and tcp paths cost exactly what they did: the one extra test is in reset(), when
// the socket is dropped, never per byte.

#include <memory>
#include <optional>
#include <utility>

#include "net.hpp"

namespace dockgate::proxy {

class upstream_tls_relay;
// Ends a relay now: its TLS connection to the daemon is closed (upstream_tls.cpp).
void stop_upstream_tls_relay(upstream_tls_relay& relay) noexcept;

class upstream_socket {
 public:
  upstream_socket() = default;
  ~upstream_socket() { reset(); }
  upstream_socket(const upstream_socket&) = delete;
  upstream_socket& operator=(const upstream_socket&) = delete;
  // Moved between a connection and its thread's pool of idle ones (upstream_pool.hpp): the
  // socket stays on the same event loop, a tls:// relay goes with it.
  upstream_socket(upstream_socket&& o) noexcept
      : socket_(std::move(o.socket_)), relay_(std::move(o.relay_)) {
    o.socket_.reset();
  }
  upstream_socket& operator=(upstream_socket&& o) noexcept {
    if (this != &o) {
      reset();
      socket_ = std::move(o.socket_);
      o.socket_.reset();
      relay_ = std::move(o.relay_);
    }
    return *this;
  }

  explicit operator bool() const noexcept { return socket_.has_value(); }
  protocol::socket& operator*() noexcept { return *socket_; }
  protocol::socket* operator->() noexcept { return &*socket_; }

  // A plain socket to the daemon (unix:// or tcp://), not yet connected.
  template <class... Args>
  protocol::socket& emplace(Args&&... args) {
    reset();
    return socket_.emplace(std::forward<Args>(args)...);
  }
  // The plaintext end of a tls:// relay, which lives as long as this holds it.
  void adopt(protocol::socket plaintext, std::shared_ptr<upstream_tls_relay> relay) {
    reset();
    socket_.emplace(std::move(plaintext));
    relay_ = std::move(relay);
  }
  // Closes the socket; a relay behind it closes its TLS connection too, so that no TLS
  // connection outlives the request path's use of it (a silent daemon would hold it).
  void reset() noexcept {
    socket_.reset();
    if (relay_) [[unlikely]] {
      stop_upstream_tls_relay(*relay_);
      relay_.reset();
    }
  }

 private:
  std::optional<protocol::socket> socket_;
  std::shared_ptr<upstream_tls_relay> relay_;  // tls:// only
};

}  // namespace dockgate::proxy

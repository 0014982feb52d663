#pragma once
// The sidecar's HTTP/1.1 server: a thread per connection (bounded, per peer too), the
// proxy's strict head parser, a deadline for every whole head and body, body-size limits
// answered before the body is read.

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dockgate/common/endpoint.hpp"

namespace dockgate::sidecar {

// Header fields of a request or a reply: name (lower case for a request's), value.
using header_fields = std::vector<std::pair<std::string, std::string>>;

// A reply written while it is produced (Transfer-Encoding: chunked). The handler opens
// it, writes, and returns an http_reply with `streamed` set; the server ends it. A write
// that cannot complete within the server's send timeout (a client that stopped reading)
// fails, and every later write fails at once: the handler finishes its work regardless.
class reply_stream {
 public:
  virtual ~reply_stream() = default;
  bool open(unsigned status, std::string_view content_type) {
    return open(status, content_type, {});
  }
  // `extra`: more header fields of the reply (an API's request id).
  virtual bool open(unsigned status, std::string_view content_type, const header_fields& extra) = 0;
  virtual bool write(std::string_view data) = 0;
  virtual bool opened() const = 0;
  // The connection switched to another protocol (a WebSocket through a proxy): "101
  // Switching Protocols" with `fields` sent, then the client's bytes both ways are the
  // handler's until it returns, through `fd` (with `pending`, what the client sent after
  // its request); the server closes the connection then. nullopt where it cannot be.
  struct raw_connection {
    int fd = -1;
    std::string pending;
  };
  virtual std::optional<raw_connection> switch_protocols(const header_fields& fields) {
    (void)fields;
    return std::nullopt;
  }
};

struct http_request {
  std::string method;
  std::string path;   // without the query
  std::string query;  // what follows the '?', as sent ("" if none)
  std::string authorization;
  std::string accept;  // the Accept field, as sent
  // X-Dockgate-Forwarded: the instance that forwarded this call to the session's holder
  // (fleet.cpp); a forwarded call is never forwarded again.
  std::string forwarded;
  // X-Dockgate-Fleet: the forwarding member's signature of this call (fleet_auth.hpp).
  std::string fleet_auth;
  // Every other field, its name in lower case, in the order sent.
  header_fields fields;
  std::string body;
  reply_stream* stream = nullptr;  // for a handler that answers as it goes

  // The value of the first field `name` (lower case) among `fields`, or nullopt.
  std::optional<std::string_view> field(std::string_view name) const {
    for (const auto& [n, v] : fields)
      if (n == name) return std::string_view(v);
    return std::nullopt;
  }
};

struct http_reply {
  http_reply() = default;
  http_reply(unsigned s, std::string b = {}, bool stream = false)
      : status(s), body(std::move(b)), streamed(stream) {}
  unsigned status = 200;
  std::string body;
  bool streamed = false;  // written through http_request::stream
  std::string content_type = "application/json";
  header_fields headers;  // more fields of the reply (an API's request id, Content-Range)
};

struct server_limits {
  // Largest body for a path (Content-Length checked before reading; chunked as read).
  std::function<std::size_t(std::string_view path)> max_body;
  std::size_t max_connections = 64;
  // A request head (and the wait for the next one on a kept-alive connection) must
  // arrive whole within this; a body within body_timeout.
  std::chrono::milliseconds head_timeout{10'000};
  std::chrono::milliseconds body_timeout{120'000};
  // Connections one peer address may hold at once.
  std::size_t max_per_peer = 16;
  // A streamed reply's write must complete within this, or the stream is dropped.
  std::chrono::milliseconds stream_send_timeout{30'000};
};

class http_server {
 public:
  using handler = std::function<http_reply(const http_request&)>;
  http_server(const common::endpoint& listen, handler h, server_limits limits);
  ~http_server();
  // Serves until stop(). Throws at start-up if it cannot listen.
  void run();
  void stop();
  std::uint16_t port() const { return port_; }

 private:
  void serve_connection(int fd);
  // Admission of a new connection from `peer`: when the peer or the server is full, the
  // oldest connection of that scope still waiting for its request head is dropped (a slow
  // or idle client never locks the others out); false when none can be (503).
  bool admit(int fd, const std::string& peer);
  void set_phase(int fd, bool waiting_head);
  void forget(int fd);
  struct tracked {
    std::string peer;
    bool waiting_head = true;
    std::chrono::steady_clock::time_point since;
  };
  std::mutex table_mutex_;
  std::map<int, tracked> table_;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  std::uint16_t port_ = 0;
  handler handler_;
  server_limits limits_;
  std::atomic<int> active_{0};
  std::atomic<bool> stopping_{false};
};

// "host:port" (SANDBOX_LISTEN) as an endpoint.
common::endpoint listen_endpoint(const std::string& text);

}  // namespace dockgate::sidecar

#pragma once
// The sidecar's HTTP/1.1 server: a thread per connection (bounded), the proxy's strict
// head parser, body-size limits answered before the body is read.

#include <atomic>
#include <functional>
#include <string>

#include "dockgate/common/endpoint.hpp"

namespace dockgate::sidecar {

struct http_request {
  std::string method;
  std::string path;   // without the query
  std::string authorization;
  std::string body;
};

struct http_reply {
  unsigned status = 200;
  std::string body;  // JSON
};

struct server_limits {
  // Largest body for a path (Content-Length checked before reading; chunked as read).
  std::function<std::size_t(std::string_view path)> max_body;
  std::size_t max_connections = 64;
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

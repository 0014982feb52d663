#include "dockgate/sidecar/http_server.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>
#include <thread>

#include "dockgate/proxy/chunked.hpp"
#include "dockgate/proxy/http_head.hpp"

namespace dockgate::sidecar {

namespace {

std::string reason(unsigned status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 413: return "Payload Too Large";
    case 422: return "Unprocessable Entity";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Status";
  }
}

bool send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      return false;
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

bool send_reply(int fd, const http_reply& r, bool keep_alive) {
  std::string out = "HTTP/1.1 " + std::to_string(r.status) + " " + reason(r.status) +
                    "\r\ncontent-type: application/json\r\ncontent-length: " + std::to_string(r.body.size()) +
                    (keep_alive ? "\r\n\r\n" : "\r\nconnection: close\r\n\r\n");
  out += r.body;
  return send_all(fd, out);
}

}  // namespace

common::endpoint listen_endpoint(const std::string& text) {
  std::string error;
  if (text.starts_with("unix://") || text.starts_with("tcp://")) {
    auto ep = common::parse_endpoint(text, &error);
    if (!ep) throw std::runtime_error("SANDBOX_LISTEN: " + error);
    return *ep;
  }
  auto ep = common::parse_endpoint("tcp://" + text, &error);
  if (!ep) throw std::runtime_error("SANDBOX_LISTEN \"" + text + "\": " + error);
  return *ep;
}

http_server::http_server(const common::endpoint& listen, handler h, server_limits limits)
    : handler_(std::move(h)), limits_(std::move(limits)) {
  if (::pipe2(wake_, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  if (listen.scheme == common::endpoint::kind::unix_socket) {
    listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, listen.path.c_str(), sizeof addr.sun_path - 1);
    ::unlink(listen.path.c_str());
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
      throw std::runtime_error("bind " + listen.to_string() + ": " + std::strerror(errno));
  } else {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    addrinfo* res = nullptr;
    if (::getaddrinfo(listen.host.c_str(), std::to_string(listen.port).c_str(), &hints, &res) != 0 || !res)
      throw std::runtime_error("cannot resolve " + listen.host);
    listen_fd_ = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    const int rc = ::bind(listen_fd_, res->ai_addr, res->ai_addrlen);
    ::freeaddrinfo(res);
    if (rc != 0) throw std::runtime_error("bind " + listen.to_string() + ": " + std::strerror(errno));
    sockaddr_storage bound{};
    socklen_t len = sizeof bound;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &len);
    port_ = ntohs(bound.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&bound)->sin_port
                                             : reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
  }
  if (::listen(listen_fd_, 128) != 0) throw std::runtime_error(std::string("listen: ") + std::strerror(errno));
}

http_server::~http_server() {
  if (listen_fd_ >= 0) ::close(listen_fd_);
  for (int fd : wake_)
    if (fd >= 0) ::close(fd);
}

void http_server::stop() {
  stopping_ = true;
  const char b = 1;
  (void)!::write(wake_[1], &b, 1);  // async-signal-safe
}

void http_server::run() {
  while (!stopping_) {
    pollfd p[2] = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    if (::poll(p, 2, -1) < 0) continue;
    if (p[1].revents) break;
    if (!(p[0].revents & POLLIN)) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    if (active_.load() >= static_cast<int>(limits_.max_connections)) {
      send_reply(fd, {503, R"({"detail":"too many connections"})"}, false);
      ::close(fd);
      continue;
    }
    ++active_;
    std::thread([this, fd] {
      serve_connection(fd);
      ::close(fd);
      --active_;
    }).detach();
  }
  // Let requests in flight finish (bounded).
  for (int i = 0; i < 600 && active_.load() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

void http_server::serve_connection(int fd) {
  timeval tv{60, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string buffer;
  char chunk[65536];
  auto fill = [&]() {
    const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n > 0) buffer.append(chunk, static_cast<std::size_t>(n));
    return n > 0;
  };
  while (!stopping_) {
    std::size_t head_size;
    while ((head_size = proxy::find_head_end(buffer)) == 0) {
      if (buffer.size() > proxy::max_head_bytes) {
        send_reply(fd, {400, R"({"error":"request head too large"})"}, false);
        return;
      }
      if (!fill()) return;
    }
    proxy::request_head head;
    if (auto err = proxy::parse_request_head(std::string_view(buffer).substr(0, head_size), head)) {
      send_reply(fd, {400, R"({"error":"malformed request"})"}, false);
      return;
    }
    http_request req;
    req.method = std::string(policy::method_name(head.method));
    req.path = std::string(head.target.substr(0, head.target.find('?')));
    for (std::size_t i = 0; i < head.field_count; ++i)
      if (proxy::iequals(head.fields[i].name, "authorization")) req.authorization = std::string(head.fields[i].value);
    const bool keep = head.keep_alive;
    buffer.erase(0, head_size);
    // Body limits are answered before the body is read (the seed's middleware, which also
    // runs before auth); a chunked body is limited as it is read.
    const std::size_t limit = limits_.max_body(req.path);
    if (head.content_length && *head.content_length > limit) {
      send_reply(fd, {413, "{\"error\":\"request body exceeds " + std::to_string(limit) + " bytes\"}"}, false);
      return;
    }
    if (head.chunked) {
      proxy::chunked_decoder decoder;
      for (;;) {
        auto res = decoder.feed(buffer);
        if (res.state == proxy::chunked_decoder::status::data) req.body.append(res.data);
        buffer.erase(0, res.consumed);
        if (req.body.size() > limit) {
          send_reply(fd, {413, "{\"error\":\"request body exceeds " + std::to_string(limit) + " bytes\"}"}, false);
          return;
        }
        if (res.state == proxy::chunked_decoder::status::done) break;
        if (res.state == proxy::chunked_decoder::status::error) {
          send_reply(fd, {400, R"({"error":"invalid chunked body"})"}, false);
          return;
        }
        if (res.state == proxy::chunked_decoder::status::need_more && !fill()) return;
      }
    } else {
      const std::size_t length = static_cast<std::size_t>(head.content_length.value_or(0));
      while (buffer.size() < length)
        if (!fill()) return;
      req.body = buffer.substr(0, length);
      buffer.erase(0, length);
    }
    http_reply reply;
    try {
      reply = handler_(req);
    } catch (const std::exception& e) {
      reply = {500, "{\"detail\":\"internal error\"}"};
    }
    if (!send_reply(fd, reply, keep) || !keep) return;
  }
}

}  // namespace dockgate::sidecar

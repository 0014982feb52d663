#include "dockgate/client/http_client.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "dockgate/proxy/chunked.hpp"

namespace dockgate::client {

namespace {

int remaining_ms(clock_type::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
}

bool wait_for(int fd, short events, clock_type::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int ms = remaining_ms(deadline);
    if (ms == 0) return false;
    const int r = ::poll(&p, 1, ms);
    if (r > 0) return true;
    if (r == 0) return false;
    if (errno != EINTR) return false;
  }
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::optional<connection> connection::open(const common::endpoint& ep, clock_type::time_point deadline,
                                           std::string* error) {
  auto fail = [&](std::string why) -> std::optional<connection> {
    if (error) *error = std::move(why);
    return std::nullopt;
  };
  int fd = -1;
  if (ep.scheme == common::endpoint::kind::unix_socket) {
    fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, ep.path.c_str(), sizeof addr.sun_path - 1);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 && errno != EINPROGRESS &&
        errno != EAGAIN) {
      ::close(fd);
      return fail("connect " + ep.to_string() + ": " + std::strerror(errno));
    }
  } else {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (::getaddrinfo(ep.host.c_str(), std::to_string(ep.port).c_str(), &hints, &res) != 0 || !res)
      return fail("cannot resolve " + ep.host);
    fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    const int rc = ::connect(fd, res->ai_addr, res->ai_addrlen);
    ::freeaddrinfo(res);
    if (rc != 0 && errno != EINPROGRESS) {
      ::close(fd);
      return fail("connect " + ep.to_string() + ": " + std::strerror(errno));
    }
  }
  connection c(fd);
  if (!wait_for(fd, POLLOUT, deadline)) return fail("connect " + ep.to_string() + ": timed out");
  int err = 0;
  socklen_t len = sizeof err;
  ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) return fail("connect " + ep.to_string() + ": " + std::strerror(err));
  return c;
}

connection::~connection() {
  if (fd_ >= 0) ::close(fd_);
}

bool connection::write_all(std::string_view data, clock_type::time_point deadline) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (!wait_for(fd_, POLLOUT, deadline)) return false;
      continue;
    }
    return false;
  }
  return true;
}

long connection::read_some(char* buf, std::size_t size, clock_type::time_point deadline) {
  for (;;) {
    const ssize_t n = ::recv(fd_, buf, size, 0);
    if (n >= 0) return static_cast<long>(n);
    if (errno == EAGAIN || errno == EINTR) {
      if (!wait_for(fd_, POLLIN, deadline)) return -1;
      continue;
    }
    return -1;
  }
}

void connection::shutdown_write() { ::shutdown(fd_, SHUT_WR); }

std::optional<response_head> read_response_head(connection& c, std::string& buffer, clock_type::time_point deadline) {
  char chunk[16384];
  std::size_t end;
  while ((end = buffer.find("\r\n\r\n")) == std::string::npos) {
    if (buffer.size() > 64 * 1024) return std::nullopt;
    const long n = c.read_some(chunk, sizeof chunk, deadline);
    if (n <= 0) return std::nullopt;
    buffer.append(chunk, static_cast<std::size_t>(n));
  }
  const std::string head = buffer.substr(0, end + 2);
  buffer.erase(0, end + 4);
  response_head h;
  if (head.size() < 12 || head.compare(0, 5, "HTTP/") != 0) return std::nullopt;
  h.status = static_cast<unsigned>(std::atoi(head.c_str() + 9));
  std::size_t pos = head.find("\r\n") + 2;
  while (pos < head.size()) {
    const auto eol = head.find("\r\n", pos);
    const std::string line = head.substr(pos, eol - pos);
    pos = eol + 2;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string name = lower(line.substr(0, colon));
    std::string value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.erase(0, 1);
    if (name == "content-length") h.content_length = std::strtoull(value.c_str(), nullptr, 10);
    else if (name == "transfer-encoding" && lower(value).find("chunked") != std::string::npos) h.chunked = true;
    else if (name == "content-type") h.content_type = value;
  }
  return h;
}

http_response http_request(const common::endpoint& ep, std::string_view method, std::string_view target,
                           std::string_view body, std::chrono::milliseconds timeout, std::size_t max_body,
                           std::string_view extra_headers) {
  http_response r;
  const auto deadline = clock_type::now() + timeout;
  auto c = connection::open(ep, deadline, &r.error);
  if (!c) return r;
  std::string request;
  request.reserve(256 + body.size());
  request += method;
  request += ' ';
  request += target;
  request += " HTTP/1.1\r\nHost: docker\r\nConnection: close\r\n";
  request += extra_headers;
  if (!body.empty() || method == "POST" || method == "PUT") {
    request += "Content-Type: application/json\r\nContent-Length: ";
    request += std::to_string(body.size());
    request += "\r\n";
  }
  request += "\r\n";
  request += body;
  if (!c->write_all(request, deadline)) {
    r.error = "write failed or timed out";
    return r;
  }
  std::string buffer;
  auto head = read_response_head(*c, buffer, deadline);
  if (!head) {
    r.error = "no response (or timed out)";
    return r;
  }
  r.content_type = head->content_type;
  char chunk[65536];
  auto fill = [&]() {
    const long n = c->read_some(chunk, sizeof chunk, deadline);
    if (n > 0) buffer.append(chunk, static_cast<std::size_t>(n));
    return n;
  };
  if (head->chunked) {
    proxy::chunked_decoder decoder;
    for (;;) {
      auto res = decoder.feed(buffer);
      if (res.state == proxy::chunked_decoder::status::data) r.body.append(res.data);
      buffer.erase(0, res.consumed);
      if (res.state == proxy::chunked_decoder::status::done) break;
      if (res.state == proxy::chunked_decoder::status::error) {
        r.error = "malformed chunked response";
        return r;
      }
      if (r.body.size() > max_body) {
        r.error = "response too large";
        return r;
      }
      if (res.state == proxy::chunked_decoder::status::need_more && fill() <= 0) {
        r.error = "response cut short (or timed out)";
        return r;
      }
    }
  } else if (head->content_length) {
    if (*head->content_length > max_body) {
      r.error = "response too large";
      return r;
    }
    while (buffer.size() < *head->content_length)
      if (fill() <= 0) {
        r.error = "response cut short (or timed out)";
        return r;
      }
    r.body = buffer.substr(0, static_cast<std::size_t>(*head->content_length));
  } else if (head->status != 204 && head->status != 304) {
    for (long n; (n = fill()) > 0;)
      if (buffer.size() > max_body) {
        r.error = "response too large";
        return r;
      }
    r.body = std::move(buffer);
  }
  r.status = head->status;
  return r;
}

}  // namespace dockgate::client

#include "bench_net.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace dockgate::bench {

namespace {

int connect_unix(const std::string& path, bool nonblocking, bool* would_block) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0), 0);
  if (fd < 0) return -1;
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return fd;
  // A unix listener whose accept queue is full refuses a non-blocking connect with EAGAIN
  // (a blocking one would wait): the caller tries again once some heads have arrived.
  if (errno == EAGAIN && would_block) *would_block = true;
  ::close(fd);
  return -1;
}

int connect_tcp(const common::endpoint& ep, bool nonblocking) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(ep.host.c_str(), std::to_string(ep.port).c_str(), &hints, &res) != 0) return -1;
  int fd =
      ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0), 0);
  if (fd >= 0) {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (::connect(fd, res->ai_addr, res->ai_addrlen) != 0 &&
        !(nonblocking && errno == EINPROGRESS)) {
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(res);
  return fd;
}

bool fill(int fd, std::string& buf) {
  char tmp[65536];
  ssize_t n = ::recv(fd, tmp, sizeof tmp, 0);
  if (n <= 0) return false;
  buf.append(tmp, static_cast<std::size_t>(n));
  return true;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Skips a chunked body starting at `pos` in `buf`; returns the offset after it.
bool skip_chunked(int fd, std::string& buf, std::size_t& pos) {
  for (;;) {
    std::size_t eol;
    while ((eol = buf.find("\r\n", pos)) == std::string::npos)
      if (!fill(fd, buf)) return false;
    std::size_t size = std::strtoull(buf.c_str() + pos, nullptr, 16);
    while (buf.size() < eol + 2 + size + 2)
      if (!fill(fd, buf)) return false;
    pos = eol + 2 + size + 2;
    if (size == 0) return true;
  }
}

}  // namespace

int connect_to(const common::endpoint& ep, bool nonblocking, bool* would_block) {
  if (would_block) *would_block = false;
  return ep.scheme == common::endpoint::kind::unix_socket
             ? connect_unix(ep.path, nonblocking, would_block)
             : connect_tcp(ep, nonblocking);
}

bool send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

int status_of(std::string_view head) {
  if (head.size() < 12 || head.substr(0, 7) != "HTTP/1." || head[8] != ' ') return 0;
  return std::atoi(std::string(head.substr(9, 3)).c_str());
}

std::string read_head(int fd, std::string& buf) {
  std::size_t end;
  while ((end = buf.find("\r\n\r\n")) == std::string::npos)
    if (!fill(fd, buf)) return {};
  std::string head = buf.substr(0, end + 4);
  buf.erase(0, end + 4);
  return head;
}

int read_response(int fd, std::string& buf, std::string* body) {
  const std::string head = read_head(fd, buf);
  const int status = status_of(head);
  if (status == 0) return 0;
  const std::string fields = lower(head);
  std::size_t end = 0;
  if (auto cl = fields.find("\r\ncontent-length:"); cl != std::string::npos) {
    end = std::strtoull(fields.c_str() + cl + 17, nullptr, 10);
    while (buf.size() < end)
      if (!fill(fd, buf)) return 0;
  } else if (fields.find("\r\ntransfer-encoding: chunked") != std::string::npos) {
    if (!skip_chunked(fd, buf, end)) return 0;
  } else if (status != 204 && status != 304) {
    return 0;  // a body delimited by the end of the connection: not a keep-alive answer
  }
  if (body) body->assign(buf, 0, end);  // chunked: the raw chunks, enough to find an Id
  buf.erase(0, end);
  return status;
}

std::string request(std::string_view method, std::string_view target, std::string_view json_body,
                    std::string_view extra_fields) {
  std::string r;
  r.append(method).append(" ").append(target).append(" HTTP/1.1\r\nHost: docker\r\n");
  r.append(extra_fields);
  if (!json_body.empty() || method == "POST")
    r.append("Content-Type: application/json\r\nContent-Length: ")
        .append(std::to_string(json_body.size()))
        .append("\r\n");
  r.append("\r\n").append(json_body);
  return r;
}

}  // namespace dockgate::bench

// Sockets of the audit sinks that are not files: connecting them, and datagrams sent many
// to a system call (a batch's flush is one sendmmsg, not one send per line).
#include <netdb.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "audit_outputs.hpp"

namespace dockgate::proxy {

std::size_t send_datagrams(int fd, std::string_view bytes, std::span<const std::size_t> ends,
                           std::size_t first, int& err) {
  err = 0;
  std::size_t sent = first, done = first == 0 ? 0 : ends[first - 1];
  while (sent < ends.size()) {
    std::array<iovec, 64> iov{};
    std::array<mmsghdr, 64> msgs{};
    unsigned n = 0;
    std::size_t start = done;
    for (std::size_t i = sent; i < ends.size() && n < msgs.size(); ++i, ++n) {
      iov[n].iov_base = const_cast<char*>(bytes.data() + start);
      iov[n].iov_len = ends[i] - start;
      msgs[n].msg_hdr.msg_iov = &iov[n];
      msgs[n].msg_hdr.msg_iovlen = 1;
      start = ends[i];
    }
    const int r = ::sendmmsg(fd, msgs.data(), n, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      err = r < 0 ? errno : EAGAIN;
      return done;
    }
    sent += static_cast<std::size_t>(r);
    done = ends[sent - 1];
  }
  return done;
}

int connect_unix_datagram(const std::string& path, std::string& error) {
  sockaddr_un addr{};
  if (path.size() >= sizeof addr.sun_path) {
    error = path + ": path too long";
    return -1;
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    error = "cannot connect to " + path + ": " + std::strerror(errno);
    if (fd >= 0) ::close(fd);
    return -1;
  }
  return fd;
}

int connect_inet(const std::string& host, const std::string& port, bool tcp, std::string& error) {
  addrinfo hints{};
  hints.ai_socktype = tcp ? SOCK_STREAM : SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    error = host + ":" + port + ": " + ::gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  for (auto* a = found; a; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd >= 0 && ::connect(fd, a->ai_addr, a->ai_addrlen) == 0) break;
    error = "cannot connect to " + host + ":" + port + ": " + std::strerror(errno);
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(found);
  if (fd >= 0 && tcp) {
    timeval limit{1, 0};  // a peer that stops reading holds the gate at most a second a flush
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
  }
  return fd;
}

}  // namespace dockgate::proxy

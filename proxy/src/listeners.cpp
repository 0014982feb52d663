// Listeners: where the gate is reachable, and by whom.
//
// Invariants kept here:
// - A unix socket is never reachable with wider permissions than asked for, even for an
//   instant (bound under umask 0177, then chown/chmod); a path that is not a socket, or a
//   socket another process accepts on, is never replaced.
// - A TCP listener hands the Docker API to whoever reaches it: only on loopback, with
//   client certificates, or with the operator's explicit --allow-insecure-tcp; the same
//   rule holds for a socket systemd opened.
#include "listeners.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <stdexcept>

namespace dockgate::proxy {

namespace {

beast::error_code& ec_ignored() {
  static thread_local beast::error_code ec;
  return ec;
}

// A TCP listener hands the Docker API to whoever reaches it: loopback, or client
// certificates, or the operator's explicit --allow-insecure-tcp.
void require_safe_tcp(const common::endpoint& a, const serve_options& opts) {
  auto tcp = net::ip::make_address(a.host, ec_ignored());
  const bool loopback = !tcp.is_unspecified() && tcp.is_loopback();
  const bool authenticated = a.scheme == common::endpoint::kind::tls && !opts.tls_client_ca.empty();
  if (!loopback && !authenticated && !opts.allow_insecure_tcp)
    throw std::runtime_error(
        "refusing " + a.to_string() +
        ": not a loopback address and no client certificates required (anyone who "
        "reaches it gets the Docker API); use tls:// with --tls-client-ca, or pass "
        "--allow-insecure-tcp to insist");
}

// systemd socket activation (sd_listen_fds(3)): a listening socket systemd opened for this
// process at exactly this address, if any. LISTEN_PID must name this process.
std::optional<int> inherited_listener(const common::endpoint& a) {
  const char* pid = std::getenv("LISTEN_PID");
  const char* fds = std::getenv("LISTEN_FDS");
  if (!pid || !fds || std::to_string(::getpid()) != pid) return std::nullopt;
  const int n = std::atoi(fds);
  for (int fd = 3; fd < 3 + n && fd < 3 + 64; ++fd) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    int listening = 0;
    socklen_t optlen = sizeof listening;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0 ||
        ::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &optlen) != 0 || !listening)
      continue;
    char host[INET6_ADDRSTRLEN] = {};
    if (a.scheme == common::endpoint::kind::unix_socket && ss.ss_family == AF_UNIX) {
      const auto* un = reinterpret_cast<const sockaddr_un*>(&ss);
      if (a.path == un->sun_path) return fd;
    } else if (a.scheme != common::endpoint::kind::unix_socket && ss.ss_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(&ss);
      ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
      if (ntohs(in->sin_port) == a.port && a.host == host) return fd;
    } else if (a.scheme != common::endpoint::kind::unix_socket && ss.ss_family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&ss);
      ::inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
      if (ntohs(in6->sin6_port) == a.port && a.host == host) return fd;
    }
  }
  return std::nullopt;
}

}  // namespace

protocol::endpoint resolve(net::io_context& ioc, const common::endpoint& ep) {
  if (ep.scheme == common::endpoint::kind::unix_socket)
    return protocol::endpoint(net::local::stream_protocol::endpoint(ep.path));
  net::ip::tcp::resolver resolver(ioc);
  auto results =
      resolver.resolve(ep.host, std::to_string(ep.port), net::ip::tcp::resolver::numeric_service);
  if (results.empty()) throw std::runtime_error("cannot resolve " + ep.to_string());
  return protocol::endpoint(results.begin()->endpoint());
}

// The name of process `pid` (/proc/<pid>/comm), empty if it cannot be read: read once per
// connection, at accept. It is what the process calls itself, for an investigator to read
// (the kernel's uid and pid are what decides).
static std::string process_name(pid_t pid) {
  if (pid <= 0) return {};
  char path[32];
  std::snprintf(path, sizeof path, "/proc/%d/comm", static_cast<int>(pid));
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  char name[64];
  const ssize_t n = ::read(fd, name, sizeof name);
  ::close(fd);
  if (n <= 0) return {};
  std::string out(name, static_cast<std::size_t>(n));
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Identity of the peer, for the audit line and profile selection: the kernel's word for a
// unix socket (SO_PEERCRED, taken at connect time), the peer address for TCP.
std::string peer_identity(protocol::socket& s, bool is_unix, policy::client_identity& identity,
                          audit_client& who) {
  if (is_unix) {
    who.transport = "unix";
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(s.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
      return "unix:unknown";
    identity.uid = cred.uid;
    identity.gid = cred.gid;
    who.uid = cred.uid;
    who.gid = cred.gid;
    who.pid = cred.pid;
    who.process = process_name(cred.pid);
    return "unix:uid=" + std::to_string(cred.uid) + ",gid=" + std::to_string(cred.gid) +
           ",pid=" + std::to_string(cred.pid);
  }
  who.transport = "tcp";
  beast::error_code ec;
  auto ep = s.remote_endpoint(ec);
  if (ec) return "tcp:unknown";
  char host[NI_MAXHOST];
  char port[NI_MAXSERV];
  if (::getnameinfo(ep.data(), static_cast<socklen_t>(ep.size()), host, sizeof host, port,
                    sizeof port, NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return "tcp:unknown";
  identity.address = host;
  who.address = host;
  who.port = static_cast<std::uint16_t>(std::atoi(port));
  return std::string("tcp:") + host + ":" + port;
}

void open_listener(listener& l, net::io_context& ioc, const serve_options& opts) {
  const auto& a = l.address;
  auto ep = resolve(ioc, a);
  if (auto fd = inherited_listener(a)) {
    // systemd made it (and owns the socket file: shutdown leaves it); its mode and owner
    // are the .socket unit's. The TCP rule below still applies.
    if (a.scheme != common::endpoint::kind::unix_socket) require_safe_tcp(a, opts);
    ::fcntl(*fd, F_SETFD, FD_CLOEXEC);
    l.socket.assign(ep.protocol(), *fd);
    return;
  }
  if (a.scheme == common::endpoint::kind::unix_socket) {
    struct stat st {};
    if (::lstat(a.path.c_str(), &st) == 0) {
      if (!S_ISSOCK(st.st_mode))
        throw std::runtime_error(a.path + " exists and is not a socket; not replacing it");
      // A socket file: in use if something accepts on it, stale otherwise.
      protocol::socket probe(ioc);
      beast::error_code ec;
      probe.connect(ep, ec);
      if (!ec) throw std::runtime_error(a.path + " is in use by another process");
      ::unlink(a.path.c_str());
    }
    l.socket.open(ep.protocol());
    // Bind with a restrictive umask so the socket is never reachable with wider
    // permissions than asked for, even for an instant.
    const mode_t old = ::umask(0177);
    beast::error_code ec;
    l.socket.bind(ep, ec);
    ::umask(old);
    if (ec) throw std::runtime_error("bind " + a.to_string() + ": " + ec.message());
    if (opts.socket_uid || opts.socket_gid) {
      if (::chown(a.path.c_str(), opts.socket_uid ? *opts.socket_uid : static_cast<uid_t>(-1),
                  opts.socket_gid ? *opts.socket_gid : static_cast<gid_t>(-1)) != 0)
        throw std::runtime_error("chown " + a.path + ": " + std::strerror(errno));
    }
    if (::chmod(a.path.c_str(), opts.socket_mode) != 0)
      throw std::runtime_error("chmod " + a.path + ": " + std::strerror(errno));
    struct stat bound {};
    if (::lstat(a.path.c_str(), &bound) == 0) {
      l.socket_dev = bound.st_dev;
      l.socket_ino = bound.st_ino;
    }
  } else {
    require_safe_tcp(a, opts);
    l.socket.open(ep.protocol());
    l.socket.set_option(net::socket_base::reuse_address(true));
    beast::error_code ec;
    l.socket.bind(ep, ec);
    if (ec) throw std::runtime_error("bind " + a.to_string() + ": " + ec.message());
  }
}

void start_listening(listener& l) {
  l.socket.listen(net::socket_base::max_listen_connections);
}

}  // namespace dockgate::proxy

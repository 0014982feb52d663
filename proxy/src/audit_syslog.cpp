// The syslog audit sink: RFC 5424 messages, facility authpriv (10), severity notice (5) for
// a deny and info (6) otherwise:
//   <85>1 2026-12-01T20:14:11.123456Z HOST dockgate-proxy PID ContainerCreate - {"time":...}
// (MSGID the operation, "-" when routing failed; no structured data; the JSON line as MSG).
// Over a unix datagram socket (/dev/log, the default) or UDP: one message a datagram
// (RFC 5426); over TCP: octet-counted frames, "LEN SP MESSAGE" (RFC 6587 3.4.1), the
// connection made again when the peer has gone.
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "audit_outputs.hpp"

namespace dockgate::proxy {

namespace {

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "-";
  std::string h(name);
  for (char& c : h)
    if (c <= 32 || c >= 127) c = '_';  // PRINTUSASCII
  return h;
}

class syslog_output : public audit_output {
 public:
  syslog_output(int fd, const audit_target& t)
      : audit_output(t.spec),
        fd_(fd),
        target_(t),
        header_tail_(" " + host_name() + " dockgate-proxy " + std::to_string(::getpid()) + " ") {}
  ~syslog_output() override {
    flush();
    if (fd_ >= 0) ::close(fd_);
  }

 protected:
  void encode(std::string& out, const audit_record& r, std::string_view line) override {
    const bool tcp = target_.via == audit_target::transport::tcp;
    const std::size_t frame = out.size();
    out += r.verdict == "deny" ? "<85>1 " : "<86>1 ";
    append_rfc3339(out, r.time);
    out += header_tail_;
    out += r.operation.empty() ? std::string_view("-") : r.operation.substr(0, 32);
    out += " - ";
    out += line;
    if (tcp) out.insert(frame, std::to_string(out.size() - frame) + ' ');
  }

  std::size_t write(std::string_view bytes, std::span<const std::size_t> ends) override {
    if (target_.via == audit_target::transport::tcp && fd_ >= 0 && peer_closed()) {
      ::close(fd_);  // a collector that closed (or restarted): a new connection
      fd_ = -1;
    }
    if (fd_ < 0 && !connect()) return 0;
    if (target_.via == audit_target::transport::tcp) {
      std::size_t done = 0;
      while (done < bytes.size()) {
        const ssize_t n = ::send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
        if (n > 0) {
          done += static_cast<std::size_t>(n);
        } else if (n < 0 && errno == EINTR) {
          continue;
        } else {
          // The peer has gone (or stopped reading): the frame cut short is sent again,
          // whole, on the next connection.
          last_error = n < 0 ? std::strerror(errno) : "closed";
          ::close(fd_);
          fd_ = -1;
          std::size_t whole = 0;
          for (auto e : ends)
            if (e <= done) whole = e;
          return whole;
        }
      }
      return done;
    }
    int err = 0;
    std::size_t done = send_datagrams(fd_, bytes, ends, 0, err);
    if (err == ECONNREFUSED || err == ENOTCONN) {  // the syslog daemon restarted
      ::close(fd_);
      fd_ = -1;
      if (!connect()) return done;
      std::size_t first = 0;
      while (first < ends.size() && ends[first] <= done) ++first;
      done = send_datagrams(fd_, bytes, ends, first, err);
    }
    if (err != 0) last_error = std::strerror(err);
    return done;
  }

 private:
  // The collector never sends: a readable end of stream (or a reset) means it has gone, and
  // what would be sent now would be lost unseen.
  bool peer_closed() const {
    char c;
    const ssize_t n = ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
  }

  bool connect() {
    fd_ = target_.host.empty()
              ? connect_unix_datagram(target_.path, last_error)
              : connect_inet(target_.host, target_.port,
                             target_.via == audit_target::transport::tcp, last_error);
    return fd_ >= 0;
  }

  int fd_;
  audit_target target_;
  std::string header_tail_;
};

}  // namespace

std::unique_ptr<audit_output> open_syslog_output(const audit_target& t, std::string& error) {
  const int fd = t.host.empty()
                     ? connect_unix_datagram(t.path, error)
                     : connect_inet(t.host, t.port, t.via == audit_target::transport::tcp, error);
  if (fd < 0) return nullptr;
  return std::make_unique<syslog_output>(fd, t);
}

}  // namespace dockgate::proxy

// The journald audit sink: systemd's native journal protocol (systemd.io/JOURNAL_NATIVE_PROTOCOL/).
// Each line is one datagram to /run/systemd/journal/socket (DOCKGATE_JOURNAL_SOCKET names
// another, for tests) of FIELD=value lines: MESSAGE is the JSON line, and the record's
// fields are journal fields of their own (DOCKGATE_OPERATION, DOCKGATE_VERDICT, ...) so
// that `journalctl DOCKGATE_VERDICT=deny` selects. A value with a newline is sent in the
// protocol's binary form (name, newline, 64-bit little-endian length, value, newline). An
// entry too large for a datagram goes as the protocol says: written to a sealed memfd, whose
// descriptor is sent alone (SCM_RIGHTS).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "audit_outputs.hpp"

namespace dockgate::proxy {

namespace {

void append_field(std::string& out, std::string_view name, std::string_view value) {
  out += name;
  if (value.find('\n') == std::string_view::npos) {
    out += '=';
    out += value;
  } else {
    out += '\n';
    std::uint64_t n = value.size();
    for (int i = 0; i < 8; ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
    out += value;
  }
  out += '\n';
}

bool send_memfd(int socket, std::string_view entry, std::string& error) {
  const int fd = ::memfd_create("dockgate-audit", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) {
    error = std::string("memfd_create: ") + std::strerror(errno);
    return false;
  }
  std::size_t done = 0;
  while (done < entry.size()) {
    const ssize_t n = ::write(fd, entry.data() + done, entry.size() - done);
    if (n <= 0 && errno != EINTR) break;
    if (n > 0) done += static_cast<std::size_t>(n);
  }
  ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  const bool ok = done == entry.size() && ::sendmsg(socket, &msg, MSG_DONTWAIT | MSG_NOSIGNAL) >= 0;
  if (!ok) error = std::string("journal memfd: ") + std::strerror(errno);
  ::close(fd);
  return ok;
}

class journald_output : public audit_output {
 public:
  journald_output(int fd, std::string path, std::string name)
      : audit_output(std::move(name)), fd_(fd), path_(std::move(path)) {}
  ~journald_output() override {
    flush();
    ::close(fd_);
  }

 protected:
  void encode(std::string& out, const audit_record& r, std::string_view line) override {
    append_field(out, "MESSAGE", line);
    append_field(out, "PRIORITY", r.verdict == "deny" ? "5" : "6");  // notice, info
    append_field(out, "SYSLOG_IDENTIFIER", "dockgate-proxy");
    append_field(out, "DOCKGATE_REQUEST_ID", r.request_id);
    append_field(out, "DOCKGATE_PROFILE", r.profile);
    append_field(out, "DOCKGATE_METHOD", r.method);
    append_field(out, "DOCKGATE_PATH", r.path);
    if (!r.operation.empty()) append_field(out, "DOCKGATE_OPERATION", r.operation);
    append_field(out, "DOCKGATE_VERDICT", r.verdict);
    if (!r.rule.empty()) append_field(out, "DOCKGATE_RULE", r.rule);
    append_field(out, "DOCKGATE_STATUS", std::to_string(r.status));
    if (!r.object_type.empty()) append_field(out, "DOCKGATE_OBJECT_TYPE", r.object_type);
    if (!r.object_name.empty()) append_field(out, "DOCKGATE_OBJECT_NAME", r.object_name);
    if (!r.object_id.empty()) append_field(out, "DOCKGATE_OBJECT_ID", r.object_id);
  }

  std::size_t write(std::string_view bytes, std::span<const std::size_t> ends) override {
    std::size_t done = 0, first = 0;
    for (bool retried = false;;) {
      int err = 0;
      done = send_datagrams(fd_, bytes, ends, first, err);
      while (first < ends.size() && ends[first] <= done) ++first;
      if (err == 0) return done;
      if (err == EMSGSIZE || err == ENOBUFS) {  // too large for a datagram: a memfd
        if (!send_memfd(fd_, bytes.substr(done, ends[first] - done), last_error)) return done;
        done = ends[first++];
        continue;
      }
      last_error = std::strerror(err);
      // journald restarted: its socket is a new one at the same path.
      if (retried || (err != ECONNREFUSED && err != ENOTCONN)) return done;
      retried = true;
      std::string error;
      const int fd = connect_unix_datagram(path_, error);
      if (fd < 0) return done;
      ::close(fd_);
      fd_ = fd;
    }
  }

 private:
  int fd_;
  std::string path_;
};

}  // namespace

std::unique_ptr<audit_output> open_journald_output(const audit_target& t, std::string& error) {
  const char* env = std::getenv("DOCKGATE_JOURNAL_SOCKET");
  std::string path = env && *env ? env : "/run/systemd/journal/socket";
  const int fd = connect_unix_datagram(path, error);
  if (fd < 0) return nullptr;
  return std::make_unique<journald_output>(fd, std::move(path), t.spec);
}

}  // namespace dockgate::proxy

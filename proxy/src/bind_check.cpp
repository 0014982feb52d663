// Bind-source checks on the host. Which kernel behaviour each step relies on:
// - openat(O_PATH|O_DIRECTORY|O_NOFOLLOW) on every component refuses a symlink anywhere
//   in the path (ELOOP on the last component, ENOTDIR/ELOOP before it), so the path that
//   is checked is the path dockerd will bind — as long as nobody swaps a component between
//   this check and the daemon's mount (the workspace root must be writable only by the
//   sidecar; a sandbox's own symlinks live inside its FUSE mount, below the checked path).
// - fstatfs on an O_PATH descriptor (Linux >= 3.12) reports the file system type;
//   a FUSE mount whose daemon died answers ENOTCONN: not live.
// - fstatvfs's f_flag carries the mount's ST_NOSUID / ST_NODEV.
#include "bind_check.hpp"

#include <fcntl.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace dockgate::proxy {

namespace {
constexpr long fuse_super_magic = 0x65735546;

struct fd_guard {
  int fd = -1;
  ~fd_guard() {
    if (fd >= 0) ::close(fd);
  }
};
}  // namespace

std::optional<std::string> check_bind_source(std::string_view source, bool require_fuse) {
  const std::string path(source);
  if (path.empty() || path.front() != '/') return "\"" + path + "\" is not an absolute path";
  fd_guard current{::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)};
  if (current.fd < 0) return std::string("cannot open /: ") + std::strerror(errno);
  std::string_view rest = std::string_view(path).substr(1);
  while (!rest.empty()) {
    const auto slash = rest.find('/');
    const std::string component(rest.substr(0, slash));
    rest = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash + 1);
    if (component.empty() || component == "." || component == "..")
      return "\"" + path + "\" is not a clean path";
    const int next = ::openat(current.fd, component.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0) {
      if (errno == ELOOP || errno == ENOTDIR) return "\"" + path + "\" passes through a symlink or a non-directory";
      return "\"" + path + "\": " + std::strerror(errno);
    }
    ::close(current.fd);
    current.fd = next;
  }
  if (!require_fuse) return std::nullopt;
  struct statfs fs {};
  if (::fstatfs(current.fd, &fs) != 0) return "\"" + path + "\" is not a live mount: " + std::strerror(errno);
  if (fs.f_type != fuse_super_magic) return "\"" + path + "\" is not a FUSE mount";
  struct statvfs vfs {};
  if (::fstatvfs(current.fd, &vfs) != 0) return "\"" + path + "\": " + std::strerror(errno);
  if (!(vfs.f_flag & ST_NOSUID) || !(vfs.f_flag & ST_NODEV)) return "\"" + path + "\" is not mounted nosuid,nodev";
  return std::nullopt;
}

}  // namespace dockgate::proxy

// Bind-source checks on the host. Which kernel behaviour each step relies on:
// - common::open_directory_nofollow opens every component with O_NOFOLLOW, so the path
//   that is checked is the path dockerd will bind; with only_owner_replaceable no
//   component can be renamed or replaced by anyone but root, which closes the window
//   between this check and the daemon's mount to everyone who is not root already.
// - fstatfs on an O_PATH descriptor (Linux >= 3.12) reports the file system type;
//   a FUSE mount whose daemon died answers ENOTCONN: not live.
// - fstatvfs's f_flag carries the mount's ST_NOSUID / ST_NODEV.
#include "bind_check.hpp"

#include <sys/statfs.h>
#include <sys/statvfs.h>

#include <cerrno>
#include <cstring>

#include "dockgate/common/host_path.hpp"

namespace dockgate::proxy {

namespace {
constexpr long fuse_super_magic = 0x65735546;
}  // namespace

std::optional<std::string> check_bind_source(std::string_view source, bind_check_options options) {
  const std::string path(source);
  std::string error;
  auto fd = common::open_directory_nofollow(path, error, {options.only_owner_replaceable});
  if (!fd) return error;
  if (!options.require_fuse) return std::nullopt;
  struct statfs fs {};
  if (::fstatfs(fd->get(), &fs) != 0)
    return "\"" + path + "\" is not a live mount: " + std::strerror(errno);
  if (fs.f_type != fuse_super_magic) return "\"" + path + "\" is not a FUSE mount";
  struct statvfs vfs {};
  if (::fstatvfs(fd->get(), &vfs) != 0) return "\"" + path + "\": " + std::strerror(errno);
  if (!(vfs.f_flag & ST_NOSUID) || !(vfs.f_flag & ST_NODEV))
    return "\"" + path + "\" is not mounted nosuid,nodev";
  return std::nullopt;
}

}  // namespace dockgate::proxy

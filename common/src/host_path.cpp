// See host_path.hpp.
#include "dockgate/common/host_path.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace dockgate::common {

fd_handle& fd_handle::operator=(fd_handle&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

fd_handle::~fd_handle() {
  if (fd_ >= 0) ::close(fd_);
}

std::optional<fd_handle> open_directory_nofollow(std::string_view path, std::string& error, walk_options options) {
  const std::string shown = "\"" + std::string(path) + "\"";
  if (path.empty() || path.front() != '/') {
    error = shown + " is not an absolute path";
    return std::nullopt;
  }
  fd_handle current(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!current) {
    error = std::string("cannot open /: ") + std::strerror(errno);
    return std::nullopt;
  }
  const uid_t me = ::geteuid();
  auto trusted_owner = [me](const struct stat& st) { return st.st_uid == 0 || st.st_uid == me; };
  struct stat parent {};
  if (options.only_owner_replaceable && ::fstat(current.get(), &parent) != 0) {
    error = std::string("cannot stat /: ") + std::strerror(errno);
    return std::nullopt;
  }
  std::string_view rest = path.substr(1);
  while (!rest.empty()) {
    const auto slash = rest.find('/');
    const std::string component(rest.substr(0, slash));
    rest = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash + 1);
    if (component.empty() || component == "." || component == "..") {
      error = shown + " is not a clean path";
      return std::nullopt;
    }
    fd_handle next(::openat(current.get(), component.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next) {
      error = errno == ELOOP || errno == ENOTDIR ? shown + " passes through a symlink or a non-directory"
                                                 : shown + ": " + std::strerror(errno);
      return std::nullopt;
    }
    if (options.only_owner_replaceable) {
      struct stat st {};
      if (::fstat(next.get(), &st) != 0) {
        error = shown + ": " + std::strerror(errno);
        return std::nullopt;
      }
      // Who may rename or remove `component` inside its parent.
      const bool others_write_parent = (parent.st_mode & (S_IWGRP | S_IWOTH)) != 0;
      if (!trusted_owner(parent) || (others_write_parent && !((parent.st_mode & S_ISVTX) && trusted_owner(st)))) {
        error = shown + ": a component of it can be replaced by a user other than root";
        return std::nullopt;
      }
      parent = st;
    }
    current = std::move(next);
  }
  return current;
}

}  // namespace dockgate::common

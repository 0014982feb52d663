#pragma once
// Host directory paths opened without following a symlink anywhere in them: the one
// walker behind the gate's bind-source checks and dockgate-mount's mountpoints.
//
// Kernel behaviour relied on: openat(O_PATH|O_DIRECTORY|O_NOFOLLOW) refuses a symlink as
// the last component (ELOOP) and a non-directory (ENOTDIR); walking one component at a
// time from "/" makes that true of every component. What was checked is what is open.

#include <optional>
#include <string>
#include <string_view>

namespace dockgate::common {

// An open file descriptor, closed with the handle.
class fd_handle {
 public:
  fd_handle() = default;
  explicit fd_handle(int fd) : fd_(fd) {}
  fd_handle(fd_handle&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  fd_handle& operator=(fd_handle&& o) noexcept;
  fd_handle(const fd_handle&) = delete;
  fd_handle& operator=(const fd_handle&) = delete;
  ~fd_handle();
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

struct walk_options {
  // Refuse a path where someone other than root (or this process's user) could replace a
  // component: every directory on the way is owned by root (or us), and one that others
  // may write is sticky and holds the next component owned by root (or us) — /tmp's case.
  // With this, swapping a component between a check and its use needs root.
  bool only_owner_replaceable = false;
};

// Opens the directory `path` (absolute, no empty, "." or ".." component) as O_PATH,
// every component a real directory. nullopt with the reason otherwise.
std::optional<fd_handle> open_directory_nofollow(std::string_view path, std::string& error, walk_options options = {});

}  // namespace dockgate::common

#pragma once
// Host paths walked one component at a time from "/": the one walker behind the gate's
// bind-source checks, dockgate-mount's mountpoints and the files the gate trusts (its
// policy, its TLS key, certificate and CA).
//
// Kernel behaviour relied on: openat(O_PATH|O_NOFOLLOW) opens a symlink itself instead of
// its target, and O_DIRECTORY refuses a non-directory (ENOTDIR); walking one component at
// a time from "/" makes every component something this process looked at. What was
// checked is what is open, and what is read is read from that descriptor.
//
// Who can replace a component (the one rule, `only_owner_replaceable`): the owner of its
// directory, and anyone who may write that directory unless it is sticky and the
// component belongs to root (or us) — /tmp's case: rename(2) and unlink(2) in a sticky
// directory need the entry's or the directory's owner. Group write counts as anyone's:
// which users a group holds is not the kernel's to say here (NSS, LDAP), as OpenSSH's
// StrictModes and sudo decide.

#include <cstddef>
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
std::optional<fd_handle> open_directory_nofollow(std::string_view path, std::string& error,
                                                 walk_options options = {});

// Opens the directory `path` (absolute, clean) as O_PATH when no one but root (or this
// process's user) can change which names it holds: the walk of open_directory_nofollow
// with only_owner_replaceable, and the directory itself owned by root (or us) and writable
// by no group and no other user, sticky or not (in a sticky directory others may still
// create a name that is not there yet: the one a rename or a rotation is about to use).
// For a directory the gate creates and replaces files in (the audit file's); the walk's
// other callers (bind sources, mountpoints) keep open_directory_nofollow's rule, under
// which the last component may be any user's.
std::optional<fd_handle> open_root_controlled_directory(std::string_view path, std::string& error);

// A file the gate's configuration comes from, read whole, or why not.
struct file_contents {
  std::string bytes;
  std::string error;  // empty: read
  explicit operator bool() const { return error.empty(); }
};

// Reads the regular file `path` (relative: to the working directory) when no one but root
// (or this process's user, who holds the daemon's socket already) can change what it
// holds: every directory from / down and every symlink on the way (followed as the
// kernel follows them, at most 40) only_owner_replaceable, the file itself owned by root
// (or us) and writable by no group and no other user. A file that changes hands between
// two SIGHUPs is refused at the second.
file_contents read_root_controlled_file(std::string_view path,
                                        std::size_t max_bytes = std::size_t{16} << 20);

}  // namespace dockgate::common

// See host_path.hpp.
#include "dockgate/common/host_path.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <vector>

namespace dockgate::common {

namespace {

bool trusted_owner(const struct stat& st) {
  return st.st_uid == 0 || st.st_uid == ::geteuid();
}

// Whether someone other than root (or us) can rename, remove or replace `child` inside
// `parent` (see host_path.hpp).
bool replaceable(const struct stat& parent, const struct stat& child) {
  const bool others_write_parent = (parent.st_mode & (S_IWGRP | S_IWOTH)) != 0;
  return !trusted_owner(parent) ||
         (others_write_parent && !((parent.st_mode & S_ISVTX) && trusted_owner(child)));
}

std::string quoted(std::string_view path) {
  return "\"" + std::string(path) + "\"";
}

}  // namespace

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

std::optional<fd_handle> open_directory_nofollow(std::string_view path, std::string& error,
                                                 walk_options options) {
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
    fd_handle next(
        ::openat(current.get(), component.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next) {
      error = errno == ELOOP || errno == ENOTDIR
                  ? shown + " passes through a symlink or a non-directory"
                  : shown + ": " + std::strerror(errno);
      return std::nullopt;
    }
    if (options.only_owner_replaceable) {
      struct stat st {};
      if (::fstat(next.get(), &st) != 0) {
        error = shown + ": " + std::strerror(errno);
        return std::nullopt;
      }
      if (replaceable(parent, st)) {
        error = shown + ": a component of it can be replaced by a user other than root";
        return std::nullopt;
      }
      parent = st;
    }
    current = std::move(next);
  }
  return current;
}

std::optional<fd_handle> open_root_controlled_directory(std::string_view path, std::string& error) {
  walk_options walk;
  walk.only_owner_replaceable = true;
  auto dir = open_directory_nofollow(path, error, walk);
  if (!dir) return dir;
  struct stat st {};
  if (::fstat(dir->get(), &st) != 0) {
    error = quoted(path) + ": " + std::strerror(errno);
    return std::nullopt;
  }
  // Its owner may unlink, rename and plant what it holds whatever its mode; group or other
  // write lets them do so too (the sticky bit still lets them create a free name).
  if (!trusted_owner(st)) {
    error = quoted(path) + " is owned by uid " + std::to_string(st.st_uid) +
            ", not root: that user can remove or replace what the gate keeps in it";
    return std::nullopt;
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    error = quoted(path) + " is writable by group or others (mode " + mode +
            "): they can remove or replace what the gate keeps in it";
    return std::nullopt;
  }
  return dir;
}

namespace {

// One directory of the walk: open, its status, and the path it was reached by (for the
// reasons given).
struct walked {
  fd_handle fd;
  struct stat st {};
  std::string path;
};

std::string child_path(const std::string& dir, std::string_view name) {
  return dir == "/" ? "/" + std::string(name) : dir + "/" + std::string(name);
}

// `path`'s components, in order, put in front of `pending` (a symlink's target goes
// before what followed the symlink).
void push_components(std::vector<std::string>& pending, std::string_view path) {
  std::vector<std::string> parts;
  while (!path.empty()) {
    const auto slash = path.find('/');
    auto part = path.substr(0, slash);
    path = slash == std::string_view::npos ? std::string_view{} : path.substr(slash + 1);
    if (!part.empty() && part != ".") parts.emplace_back(part);
  }
  pending.insert(pending.end(), parts.rbegin(), parts.rend());  // `pending` is a stack
}

std::string owner_reason(const std::string& path, const struct stat& st, std::string_view what) {
  return quoted(path) + " (" + std::string(what) + ") is owned by uid " +
         std::to_string(st.st_uid) + ", not root: that user can replace what the gate reads";
}

}  // namespace

file_contents read_root_controlled_file(std::string_view path, std::size_t max_bytes) {
  file_contents out;
  const std::string shown = quoted(path);
  auto fail = [&](std::string why) {
    out.bytes.clear();
    out.error = std::move(why);
    return out;
  };
  if (path.empty()) return fail("empty path");
  std::vector<std::string> pending;
  push_components(pending, path);
  std::vector<walked> dirs;  // dirs.back(): the directory the next component is in
  auto start_at_root = [&]() -> bool {
    dirs.clear();
    walked root{fd_handle(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)), {}, "/"};
    if (!root.fd || ::fstat(root.fd.get(), &root.st) != 0) return false;
    dirs.push_back(std::move(root));
    return true;
  };
  if (!start_at_root()) return fail(std::string("cannot open /: ") + std::strerror(errno));
  if (path.front() != '/') {
    // Relative to the working directory, whose own path is walked too (getcwd(3) gives
    // it without symlinks).
    char cwd[PATH_MAX];
    if (!::getcwd(cwd, sizeof cwd))
      return fail(std::string("cannot read the working directory: ") + std::strerror(errno));
    push_components(pending, cwd);
  }
  int symlinks = 0;
  while (!pending.empty()) {
    const std::string name = std::move(pending.back());
    pending.pop_back();
    if (name == "..") {
      if (dirs.size() > 1)
        dirs.pop_back();  // the walk holds real directories only: ".." is the one below
      continue;
    }
    const walked& dir = dirs.back();
    const std::string here = child_path(dir.path, name);
    // "<path>" or, where the walk is elsewhere (a directory above, a symlink's target),
    // "<path>: <here>".
    const std::string at = here == path ? shown : shown + ": " + quoted(here);
    fd_handle fd(::openat(dir.fd.get(), name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    struct stat st {};
    if (!fd || ::fstat(fd.get(), &st) != 0) return fail(at + ": " + std::strerror(errno));
    if (replaceable(dir.st, st)) {
      if (!trusted_owner(dir.st))
        return fail(shown + ": " + owner_reason(dir.path, dir.st, "a directory above it"));
      return fail(at + " can be replaced by a user other than root: its directory " +
                  quoted(dir.path) + " is writable by group or others" +
                  ((dir.st.st_mode & S_ISVTX)
                       ? " and it is owned by uid " + std::to_string(st.st_uid)
                       : " and not sticky"));
    }
    if (S_ISLNK(st.st_mode)) {
      // A symlink no one else can replace, in a directory no one else can write: its
      // target is walked by the same rule, from its own directory.
      if (++symlinks > 40) return fail(shown + ": too many symlinks");
      char target[PATH_MAX];
      const ssize_t n = ::readlinkat(fd.get(), "", target, sizeof target);
      if (n <= 0 || static_cast<std::size_t>(n) >= sizeof target)
        return fail(shown + ": cannot read the symlink " + quoted(here) + ": " +
                    std::strerror(errno));
      const std::string_view to(target, static_cast<std::size_t>(n));
      if (to.front() == '/' && !start_at_root())
        return fail(std::string("cannot open /: ") + std::strerror(errno));
      push_components(pending, to);
      continue;
    }
    if (S_ISDIR(st.st_mode)) {
      dirs.push_back({std::move(fd), st, here});
      continue;
    }
    if (!pending.empty()) return fail(at + " is not a directory");
    if (!S_ISREG(st.st_mode)) return fail(shown + " is not a regular file");
    // Open for reading the very file looked at (O_NOFOLLOW; the same inode), and judge
    // the descriptor that is read.
    fd_handle file(::openat(dir.fd.get(), name.c_str(),
                            O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
    struct stat opened {};
    if (!file || ::fstat(file.get(), &opened) != 0)
      return fail(shown + ": " + std::strerror(errno));
    if (opened.st_dev != st.st_dev || opened.st_ino != st.st_ino || !S_ISREG(opened.st_mode))
      return fail(shown + " changed while it was opened");
    if (!trusted_owner(opened))
      return fail(at + " is owned by uid " + std::to_string(opened.st_uid) +
                  ", not root: that user can change what the gate reads");
    if (opened.st_mode & (S_IWGRP | S_IWOTH)) {
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(opened.st_mode & 07777));
      return fail(shown + " is writable by group or others (mode " + mode +
                  "): they can change what the gate reads");
    }
    char buf[65536];
    for (;;) {
      const ssize_t n = ::read(file.get(), buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return fail(shown + ": " + std::strerror(errno));
      if (n == 0) return out;
      if (out.bytes.size() + static_cast<std::size_t>(n) > max_bytes)
        return fail(shown + " is larger than " + std::to_string(max_bytes) + " bytes");
      out.bytes.append(buf, static_cast<std::size_t>(n));
    }
  }
  return fail(shown + " is a directory");
}

}  // namespace dockgate::common

// Audit sinks that are files: stdout (a descriptor as it is) and file:PATH, rotated by
// size (PATH.1 the newest of --audit-keep rotated files) and opened again at PATH on SIGHUP
// (logrotate's create mode: it renames PATH, then signals; the lines queued before the
// signal go to the renamed file, the later ones to the new PATH).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "audit_outputs.hpp"
#include "dockgate/common/host_path.hpp"

namespace dockgate::proxy {

namespace {

// Writes all of `bytes` (a short write is continued); returns how many were written.
std::size_t write_fully(int fd, std::string_view bytes, std::string& error) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      error = n < 0 ? std::strerror(errno) : "wrote nothing";
      break;
    }
  }
  return done;
}

class fd_output : public audit_output {
 public:
  fd_output(int fd, std::string name) : audit_output(std::move(name)), fd_(fd) {}

 protected:
  void encode(std::string& out, const audit_record&, std::string_view line) override {
    out += line;
    out += '\n';
  }
  std::size_t write(std::string_view bytes, std::span<const std::size_t>) override {
    return write_fully(fd_, bytes, last_error);
  }
  int fd_;
};

// The gate (root, as a rule) appends to PATH only where no one else can choose what PATH
// is or read and edit what it holds: its directory walked from / as host_path.hpp walks
// (every component root's or ours, one others may write sticky), the directory itself
// root's or ours and writable by no group or other user (its owner, or anyone who may
// write it, could unlink the trail, plant a file of their own at PATH before a SIGHUP,
// or take the name a rotation is about to use), PATH opened relative to that directory's
// descriptor without following a symlink, a regular file root or we own that no group or
// other user may write. Otherwise a user could point PATH at /etc/shadow and have the
// gate append to it, or rewrite or remove the trail. Checked at every (re)open.
int open_append(const std::string& path, std::string& error) {
  const auto slash = path.rfind('/');  // absolute: options.cpp refuses a relative PATH
  const std::string dir = slash == 0 ? std::string("/") : path.substr(0, slash);
  const std::string base = path.substr(slash + 1);
  std::string why;
  auto d = common::open_root_controlled_directory(dir, why);
  if (!d) {
    error = "cannot open " + path + ": its directory: " + why;
    return -1;
  }
  // O_NONBLOCK: a FIFO without a reader fails here instead of holding the start.
  const int fd = ::openat(
      d->get(), base.c_str(),
      O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, 0640);
  if (fd < 0) {
    error = "cannot open " + path + ": " +
            (errno == ELOOP ? std::string("a symlink") : std::string(std::strerror(errno)));
    return -1;
  }
  struct stat st {};
  const char* problem = nullptr;
  if (::fstat(fd, &st) != 0)
    problem = "cannot stat it";
  else if (!S_ISREG(st.st_mode))
    problem = "not a regular file";
  else if (st.st_uid != 0 && st.st_uid != ::geteuid())
    problem = "owned by another user";
  else if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    problem = "writable by its group or others";
  if (problem) {
    ::close(fd);
    error = "cannot open " + path + ": " + problem;
    return -1;
  }
  return fd;
}

// Whether the file open at `fd` still has a name (st_nlink: 0 once the last name is
// unlinked). Lines written into a nameless inode reach no one and vanish at close.
bool linked(int fd) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 && st.st_nlink > 0;
}

std::uint64_t size_of(int fd) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
}

class file_output : public fd_output {
 public:
  file_output(int fd, const audit_target& t, std::uint64_t max_bytes, unsigned keep)
      : fd_output(fd, t.spec), path_(t.path), max_(max_bytes), keep_(keep), size_(size_of(fd)) {}
  ~file_output() override {
    flush();
    ::close(fd_);
  }

  std::string reopen() override {
    std::string error;
    const int fd = open_append(path_, error);
    if (fd < 0)
      return error + (linked(fd_) ? " (the open file stays in use)"
                                  : " (the open file was removed: lines are kept in memory)");
    ::close(fd_);
    fd_ = fd;
    size_ = size_of(fd);
    return {};
  }

 protected:
  // Whole lines go to a file while it stays within max_ bytes (a line longer than max_ alone
  // in a file); then the file is rotated.
  //
  // Never into a file that lost its last name (removed, or renamed over, by root: no one
  // else may write the directory): PATH is opened again first, and while that fails
  // nothing is written, so the lines stay queued, the sink reports down and blocking mode
  // refuses requests. A file that was renamed (logrotate before its SIGHUP) keeps a name
  // and is written until the signal.
  std::size_t write(std::string_view bytes, std::span<const std::size_t> ends) override {
    if (!linked(fd_)) {
      const std::string error = reopen();
      if (!error.empty()) {
        last_error = path_ + " was removed and cannot be created again: " + error;
        return 0;
      }
    }
    std::size_t done = 0, line = 0;
    while (done < bytes.size()) {
      std::size_t end = done;
      while (line < ends.size() &&
             (max_ == 0 || size_ + (ends[line] - done) <= max_ || (end == done && size_ == 0)))
        end = ends[line++];
      if (end == done) {  // the next line does not fit: a new file
        if (!rotate()) return done;
        continue;
      }
      const std::size_t n = write_fully(fd_, bytes.substr(done, end - done), last_error);
      size_ += n;
      done += n;
      if (done < end) return done;
    }
    return done;
  }

 private:
  bool rotate() {
    for (unsigned k = keep_; k > 1; --k)
      ::rename((path_ + "." + std::to_string(k - 1)).c_str(),
               (path_ + "." + std::to_string(k)).c_str());
    if (::rename(path_.c_str(), (path_ + ".1").c_str()) != 0) {
      last_error = "cannot rotate " + path_ + ": " + std::strerror(errno);
      return false;
    }
    const std::string error = reopen();
    if (!error.empty()) last_error = error;
    return error.empty();
  }

  std::string path_;
  std::uint64_t max_;
  unsigned keep_;
  std::uint64_t size_;
};

}  // namespace

std::unique_ptr<audit_output> open_fd_output(int fd, std::string name) {
  return std::make_unique<fd_output>(fd, std::move(name));
}

std::unique_ptr<audit_output> open_file_output(const audit_target& t, std::uint64_t max_bytes,
                                               unsigned keep, std::string& error) {
  const int fd = open_append(t.path, error);
  if (fd < 0) return nullptr;
  return std::make_unique<file_output>(fd, t, max_bytes, keep);
}

}  // namespace dockgate::proxy

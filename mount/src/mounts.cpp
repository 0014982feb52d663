// Mounting, cleaning and finding FUSE workspaces. See mount.hpp for the invariants kept.
// Kernel behaviour each step relies on:
// - /proc/self/mountinfo lists every mount, a dead FUSE mount included; it is the record
//   of what is mounted where (mount points octal-escaped).
// - statfs on a FUSE mount whose driver died fails with ENOTCONN: stale, not live.
// - umount2(UMOUNT_NOFOLLOW) does not follow a symlink as the last component; MNT_DETACH
//   (lazy) detaches a busy mount now and frees it when its last user goes.
// - mkdirat/unlinkat on the root's descriptor act on the directory that was checked.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "dockgate/common/host_path.hpp"
#include "dockgate/mount/mount.hpp"

namespace dockgate::mount {

namespace {

constexpr long fuse_super_magic = 0x65735546;
constexpr std::string_view state_dir =
    ".dockgate-mount";  // logs; hidden from ids (they start alnum)

// The mount points of /proc/self/mountinfo, unescaped, with their file system type.
std::vector<std::pair<std::string, std::string>> mounted() {
  std::vector<std::pair<std::string, std::string>> out;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  auto unescape = [](const std::string& s) {
    std::string o;
    for (std::size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '\\' && i + 3 < s.size()) {
        o += static_cast<char>(std::stoi(s.substr(i + 1, 3), nullptr, 8));
        i += 3;
      } else {
        o += s[i];
      }
    }
    return o;
  };
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, point;
    fields >> id >> parent >> dev >> root >> point;
    const auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream tail(line.substr(dash + 3));
    std::string fstype;
    tail >> fstype;
    out.emplace_back(unescape(point), fstype);
  }
  return out;
}

// Whether the driver forks a daemon and exits 0 (then a missing mount is not yet final).
bool daemonizes(const driver_command& d) {
  for (const auto& a : d.argv)
    if (a == "-f" || a == "--foreground") return false;
  return d.argv.front() != "rclone" ||
         std::find(d.argv.begin(), d.argv.end(), "--daemon") != d.argv.end();
}

bool is_mounted(const std::string& path) {
  for (const auto& [point, type] : mounted())
    if (point == path) return true;
  return false;
}

// Live: a FUSE file system answers statfs at the path, mounted nosuid,nodev.
std::optional<std::string> liveness_problem(const std::string& path) {
  std::string error;
  auto fd = common::open_directory_nofollow(path, error, {true});
  if (!fd) return error;
  struct statfs fs {};
  if (::fstatfs(fd->get(), &fs) != 0) return std::string("statfs: ") + std::strerror(errno);
  if (fs.f_type != fuse_super_magic) return std::string("not a FUSE mount");
  struct statvfs vfs {};
  if (::fstatvfs(fd->get(), &vfs) != 0) return std::string("statvfs: ") + std::strerror(errno);
  if (!(vfs.f_flag & ST_NOSUID) || !(vfs.f_flag & ST_NODEV))
    return std::string("mounted without nosuid,nodev");
  return std::nullopt;
}

// What the driver said about its failure: its error lines (s3fs "[ERR]"/"[CRT]", rclone
// "ERROR"), else the end of its log; one line, at most `max` bytes.
std::string tail_of(const std::string& file, std::size_t max = 900) {
  std::ifstream in(file);
  std::vector<std::string> lines, errors;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    if (line.find("[ERR]") != std::string::npos || line.find("[CRT]") != std::string::npos ||
        line.find("ERROR") != std::string::npos)
      errors.push_back(line);
    lines.push_back(std::move(line));
  }
  const auto& chosen = errors.empty() ? lines : errors;
  std::string text;
  for (std::size_t i = chosen.size() > 3 ? chosen.size() - 3 : 0; i < chosen.size(); ++i)
    text += (text.empty() ? "" : " | ") + chosen[i];
  if (text.size() > max) text = "..." + text.substr(text.size() - max);
  return text;
}

std::optional<common::fd_handle> open_root(const mount_config& c, bool create, std::string& error) {
  if (create) {
    std::error_code ec;
    if (!std::filesystem::exists(c.root, ec)) {
      std::filesystem::create_directories(c.root, ec);
      ::chmod(c.root.c_str(), 0755);
    }
  }
  return common::open_directory_nofollow(c.root, error, {true});
}

bool unmount(const std::string& path, std::string& error) {
  for (int i = 0; i < 8 && is_mounted(path); ++i) {  // mounts may be stacked
    if (::umount2(path.c_str(), UMOUNT_NOFOLLOW) == 0) continue;
    if (::umount2(path.c_str(), UMOUNT_NOFOLLOW | MNT_DETACH) == 0) continue;  // busy: lazily
    error = "umount " + path + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

}  // namespace

std::string_view to_string(state s) {
  switch (s) {
    case state::live:
      return "live";
    case state::stale:
      return "stale";
    case state::unmounted:
      return "unmounted";
  }
  return "unmounted";
}

outcome cleanup(const mount_config& c, std::string_view id) {
  outcome o;
  if (!valid_id(id)) {
    o.error = "invalid sandbox id";
    return o;
  }
  o.path = c.root + "/" + std::string(id);
  std::string error;
  auto root = open_root(c, false, error);
  if (!root) {
    std::error_code ec;
    if (!std::filesystem::exists(c.root, ec)) {  // no root, nothing mounted under it
      o.ok = true;
      return o;
    }
    o.error = error;
    return o;
  }
  if (!unmount(o.path, error)) {
    o.error = error;
    return o;
  }
  if (::unlinkat(root->get(), std::string(id).c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
    o.error = "rmdir " + o.path + ": " + std::strerror(errno);
    return o;
  }
  ::unlinkat(root->get(), (std::string(state_dir) + "/" + std::string(id) + ".log").c_str(), 0);
  o.ok = true;
  return o;
}

outcome mount(const mount_config& c, std::string_view id, std::string_view key) {
  outcome o;
  if (!valid_id(id)) {
    o.error = "invalid sandbox id";
    return o;
  }
  if (key.empty()) key = id;
  for (std::string_view part = key; !part.empty();) {
    const auto slash = part.find('/');
    if (!valid_id(part.substr(0, slash))) {
      o.error = "invalid key";
      return o;
    }
    part = slash == std::string_view::npos ? std::string_view{} : part.substr(slash + 1);
  }
  o.path = c.root + "/" + std::string(id);
  std::string error;
  auto root = open_root(c, true, error);
  if (!root) {
    o.error = "mount root: " + error;
    return o;
  }
  if (is_mounted(o.path)) {
    if (!liveness_problem(o.path)) {
      o.ok = true;  // already live: nothing to do
      return o;
    }
    if (auto cleaned = cleanup(c, id); !cleaned.ok) return cleaned;
  }
  if (::mkdirat(root->get(), std::string(id).c_str(), 0755) != 0 && errno != EEXIST) {
    o.error = "mkdir " + o.path + ": " + std::strerror(errno);
    return o;
  }
  std::string path_error;
  if (!common::open_directory_nofollow(o.path, path_error, {true})) {
    o.error = path_error;
    return o;
  }
  ::mkdirat(root->get(), std::string(state_dir).c_str(), 0700);
  const std::string log = c.root + "/" + std::string(state_dir) + "/" + std::string(id) + ".log";
  {
    const int fd =
        ::openat(root->get(), (std::string(state_dir) + "/" + std::string(id) + ".log").c_str(),
                 O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) ::close(fd);
  }
  auto command = driver_for(c, key, o.path, log, error);
  if (!command) {
    o.error = error;
    cleanup(c, id);
    return o;
  }

  const pid_t child = ::fork();
  if (child < 0) {
    o.error = std::string("fork: ") + std::strerror(errno);
    cleanup(c, id);
    return o;
  }
  if (child == 0) {
    ::setsid();  // its own session: no signal meant for the caller's process group reaches it
    const int devnull = ::open("/dev/null", O_RDONLY);
    const int out = ::open(log.c_str(), O_WRONLY | O_APPEND | O_NOFOLLOW);
    ::dup2(devnull, 0);
    ::dup2(out >= 0 ? out : devnull, 1);
    ::dup2(out >= 0 ? out : devnull, 2);
    std::vector<char*> argv, envp;
    for (auto& a : command->argv) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : command->env) envp.push_back(e.data());
    envp.push_back(nullptr);
    ::execvpe(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  // Success is a live FUSE mount at the path, whatever the driver's exit status says: a
  // driver that daemonises exits 0 before (or without) mounting; one that stays in the
  // foreground (s3fs -f, rclone) never exits while it serves, and its exit before the
  // mount is live is the failure, seen at once. A live driver is left running on its own.
  const auto deadline = std::chrono::steady_clock::now() + c.timeout;
  bool exited = false;
  int status = 0;
  std::string last = "nothing mounted";
  for (;;) {
    if (!exited && ::waitpid(child, &status, WNOHANG) == child) {
      exited = true;
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !is_mounted(o.path)) {
        last = "the driver " + command->argv[0] + " exited (" +
               (WIFEXITED(status) ? "status " + std::to_string(WEXITSTATUS(status))
                                  : std::string("killed")) +
               ")";
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !daemonizes(*command)) break;
        last = "nothing mounted";  // a daemonising driver: its daemon may still be mounting
      }
    }
    if (is_mounted(o.path)) {
      auto problem = liveness_problem(o.path);
      if (!problem) {
        o.ok = true;
        return o;
      }
      last = *problem;
      if (last == "mounted without nosuid,nodev") break;
      // The kernel's FUSE connection is gone: the driver mounted and then died (s3fs does
      // this for a bucket or key it cannot use, after exiting 0).
      struct statfs fs {};
      if (::statfs(o.path.c_str(), &fs) != 0 && (errno == ENOTCONN || errno == ECONNABORTED)) {
        last = "the driver exited after mounting (" + std::string(std::strerror(errno)) + ")";
        break;
      }
    }
    if (std::chrono::steady_clock::now() > deadline) {
      last += " after " + std::to_string(c.timeout.count()) + " s";
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!exited) {
    ::kill(child, SIGTERM);
    ::waitpid(child, &status, 0);
  }
  const std::string driver_log = tail_of(log);
  o.error = "mount of " + c.bucket + ":/" + (c.prefix.empty() ? "" : c.prefix + "/") +
            std::string(key) + " at " + o.path + " failed: " + last +
            (driver_log.empty() ? "" : "; driver log: " + driver_log);
  cleanup(c, id);  // never a silent empty workspace left behind
  return o;
}

std::vector<entry> list(const mount_config& c) {
  std::vector<entry> out;
  std::string error;
  auto root = open_root(c, false, error);
  if (!root) return out;
  const std::string prefix = c.root + "/";
  for (const auto& [point, type] : mounted()) {
    if (!point.starts_with(prefix)) continue;
    const std::string id = point.substr(prefix.size());
    if (!valid_id(id)) continue;
    entry e{id, point, state::live, type};
    struct statfs fs {};
    if (::statfs(point.c_str(), &fs) != 0) {
      e.what = state::stale;
      e.detail = std::strerror(errno);
    } else if (fs.f_type != fuse_super_magic) {
      e.what = state::stale;
      e.detail = "not FUSE (" + type + ")";
    }
    bool seen = false;
    for (const auto& x : out) seen = seen || x.id == id;
    if (!seen) out.push_back(std::move(e));
  }
  // Directories left without a mount.
  const int dir = ::openat(root->get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (DIR* d = dir >= 0 ? ::fdopendir(dir) : nullptr) {
    while (auto* de = ::readdir(d)) {
      const std::string id = de->d_name;
      if (!valid_id(id)) continue;
      bool seen = false;
      for (const auto& x : out) seen = seen || x.id == id;
      if (!seen) out.push_back({id, prefix + id, state::unmounted, "no mount"});
    }
    ::closedir(d);
  } else if (dir >= 0) {
    ::close(dir);
  }
  return out;
}

std::vector<outcome> reconcile(const mount_config& c) {
  std::vector<outcome> cleaned;
  for (const auto& e : list(c))
    if (e.what != state::live) cleaned.push_back(cleanup(c, e.id));
  return cleaned;
}

}  // namespace dockgate::mount

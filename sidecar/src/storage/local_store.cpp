// The operator's directory as an object store (SANDBOX_LOCAL_STORAGE_DIR), and the clean-up
// of the temporaries a killed write left there. See storage.hpp for the invariants kept
// (a key never leaves the directory).
#include "storage/local_store.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "storage/archive.hpp"  // write_atomically

namespace dockgate::sidecar {

namespace {

std::optional<std::string> local_generation(const struct stat& st) {
  return std::to_string(st.st_ino) + "-" + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec) + "-" + std::to_string(st.st_size);
}

// The operator's directory. Keys are checked before they become paths; the final
// component is opened without following a symlink.
class local_store final : public object_store {
 public:
  explicit local_store(std::string dir) : dir_(std::move(dir)) {}

  stored_object get(const std::string& key, std::size_t max_bytes) override {
    stored_object o;
    if (!checked(key, o.error)) return error(std::move(o));
    const int fd = ::open(path(key).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT || errno == ENOTDIR) return o;  // missing
      o.error = "open " + key + ": " + std::strerror(errno);
      return error(std::move(o));
    }
    struct stat st {};
    ::fstat(fd, &st);
    if (!S_ISREG(st.st_mode)) {
      ::close(fd);
      o.error = key + " is not a regular file";
      return error(std::move(o));
    }
    if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
      ::close(fd);
      o.error = key + " is larger than " + std::to_string(max_bytes) + " bytes";
      o.generation = *local_generation(st);
      return error(std::move(o));
    }
    o.data.resize(static_cast<std::size_t>(st.st_size));
    std::size_t done = 0;
    while (done < o.data.size()) {
      const ssize_t n = ::read(fd, o.data.data() + done, o.data.size() - done);
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    ::close(fd);
    if (done != o.data.size()) {
      o.error = "read " + key + " failed";
      return error(std::move(o));
    }
    o.what = stored_object::state::found;
    o.generation = *local_generation(st);
    return o;
  }

  std::optional<std::string> generation(const std::string& key, std::string& err) override {
    if (!checked(key, err)) return std::nullopt;
    struct stat st {};
    if (::lstat(path(key).c_str(), &st) != 0) {
      if (errno == ENOENT || errno == ENOTDIR) return std::string();
      err = "stat " + key + ": " + std::strerror(errno);
      return std::nullopt;
    }
    return local_generation(st);
  }

  std::optional<std::string> put(const std::string& key, std::string_view data, std::string_view,
                                 std::string& err) override {
    if (!checked(key, err)) return std::nullopt;
    if (!write_atomically(path(key), data, &err)) return std::nullopt;
    return generation(key, err);
  }

  std::optional<std::string> replace(const std::string& key, std::string_view data,
                                     std::string_view content_type, const std::string& expected,
                                     bool& changed, std::string& err) override {
    // The caller holds lock_key: no other sidecar on this host writes the key meanwhile.
    auto current = generation(key, err);
    if (!current) return std::nullopt;
    changed = *current != expected;
    if (changed) return std::nullopt;
    return put(key, data, content_type, err);
  }

  std::shared_ptr<void> lock_key(const std::string& key) override {
    if (!valid_object_key(key)) return nullptr;
    const std::string dir = std::filesystem::path(path(key)).parent_path().string();
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return nullptr;
    while (::flock(fd, LOCK_EX) != 0 && errno == EINTR) {
    }
    return std::shared_ptr<void>(nullptr,
                                 [fd](void*) { ::close(fd); });  // closing releases the lock
  }

  bool copy(const std::string& from, const std::string& to, std::string& err) override {
    if (!checked(from, err) || !checked(to, err)) return false;
    // A hard link under a temporary name, renamed over the target: atomic, no bytes copied.
    const std::string tmp =
        path(to) + ".tmp-link-" + std::to_string(::getpid()) + "-" + std::to_string(::gettid());
    ::unlink(tmp.c_str());
    if (::link(path(from).c_str(), tmp.c_str()) == 0) {
      if (::rename(tmp.c_str(), path(to).c_str()) == 0) return true;
      ::unlink(tmp.c_str());
    }
    auto o = get(from, std::size_t(1) << 40);
    if (o.what != stored_object::state::found) {
      err = o.error.empty() ? from + " does not exist" : o.error;
      return false;
    }
    return put(to, o.data, {}, err).has_value();
  }

  bool remove(const std::string& key, std::string& err) override {
    if (!checked(key, err)) return false;
    if (::unlink(path(key).c_str()) == 0 || errno == ENOENT || errno == ENOTDIR) return true;
    err = "unlink " + key + ": " + std::strerror(errno);
    return false;
  }

  bool list(const std::string& prefix, std::vector<object_entry>& out, std::string& err) override {
    // Walk the directory that holds the prefix; symlinks are not followed.
    const auto slash = prefix.rfind('/');
    const std::string sub = slash == std::string::npos ? "" : prefix.substr(0, slash);
    if (!sub.empty() && !valid_object_key(sub)) {
      err = "invalid prefix";
      return false;
    }
    std::error_code ec;
    const std::filesystem::path root =
        sub.empty() ? std::filesystem::path(dir_) : std::filesystem::path(dir_) / sub;
    if (!std::filesystem::is_directory(std::filesystem::symlink_status(root, ec))) return true;
    std::filesystem::recursive_directory_iterator it(root, ec), end;
    for (; !ec && it != end; it.increment(ec)) {
      struct stat st {};
      if (::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      std::string key = std::filesystem::relative(it->path(), dir_, ec).generic_string();
      if (ec || !key.starts_with(prefix)) continue;
      out.push_back({std::move(key), static_cast<std::uint64_t>(st.st_size),
                     static_cast<std::int64_t>(st.st_mtim.tv_sec)});
    }
    if (ec) {
      err = "list " + prefix + ": " + ec.message();
      return false;
    }
    return true;
  }

  std::optional<std::string> presign_get(const std::string&, std::int64_t, std::int64_t) override {
    return std::nullopt;
  }

 private:
  static stored_object error(stored_object o) {
    o.what = stored_object::state::error;
    return o;
  }
  static bool checked(const std::string& key, std::string& err) {
    if (valid_object_key(key)) return true;
    err = "invalid storage key";
    return false;
  }
  std::string path(const std::string& key) const { return dir_ + "/" + key; }
  std::string dir_;
};

}  // namespace

std::unique_ptr<object_store> make_local_store(std::string dir) {
  return std::make_unique<local_store>(std::move(dir));
}

std::size_t remove_stale_temporaries(const std::string& dir, std::int64_t min_age_seconds) {
  if (dir.empty()) return 0;
  std::size_t removed = 0;
  std::error_code ec;
  const auto now = static_cast<std::int64_t>(::time(nullptr));
  std::filesystem::recursive_directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.find(".tmp-") == std::string::npos) continue;  // write_atomically's and copy's names
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (now - static_cast<std::int64_t>(st.st_mtim.tv_sec) < min_age_seconds) continue;
    if (::unlink(it->path().c_str()) == 0) ++removed;
  }
  return removed;
}

}  // namespace dockgate::sidecar

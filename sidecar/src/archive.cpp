// Workspace archives. See archive.hpp for the checks kept.
#include "dockgate/sidecar/archive.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <vector>

namespace dockgate::sidecar {

namespace {

// A member path relative to the workspace root, refused if absolute or with any `..`
// (even one that would stay inside).
bool plain_relative(std::string_view path) {
  if (path.empty() || path.front() == '/') return false;
  for (auto part : path_segments(path))
    if (part == "..") return false;
  return true;
}

// Whether a relative path, with `..` resolved lexically, stays inside the tree.
bool stays_inside(std::string_view path) {
  if (path.empty() || path.front() == '/') return false;
  long depth = 0;
  for (auto part : path_segments(path))
    if ((part == ".." ? --depth : ++depth) < 0) return false;
  return true;
}

}  // namespace

std::vector<std::string_view> path_segments(std::string_view path) {
  std::vector<std::string_view> parts;
  while (!path.empty()) {
    const auto slash = path.find('/');
    const std::string_view part = path.substr(0, slash);
    path = slash == std::string_view::npos ? std::string_view{} : path.substr(slash + 1);
    if (!part.empty() && part != ".") parts.push_back(part);
  }
  return parts;
}

std::optional<std::string> archive_object_key(std::string_view prefix, std::string_view key) {
  // The prefix comes from the request's storage block: only a plain relative path of
  // safe characters, never one that climbs out of the operator's directory or bucket.
  std::string p(prefix);
  while (!p.empty() && p.back() == '/') p.pop_back();
  while (!p.empty() && p.front() == '/') p.erase(0, 1);
  if (p.size() > 256 || p.find("..") != std::string::npos || p.find("//") != std::string::npos) return std::nullopt;
  for (char c : p)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' || c == '/')) return std::nullopt;
  return (p.empty() ? std::string() : p + "/") + "workspaces/" + std::string(key) + ".tgz";
}

std::optional<std::string> archive_path(const std::string& storage_dir, std::string_view prefix, std::string_view key) {
  if (storage_dir.empty()) return std::nullopt;
  std::error_code ec;
  if (!std::filesystem::is_directory(storage_dir, ec)) return std::nullopt;
  auto object = archive_object_key(prefix, key);
  if (!object) return std::nullopt;
  return storage_dir + "/" + *object;
}

bool write_atomically(const std::string& path, std::string_view data, std::string* error) {
  const auto dir = std::filesystem::path(path).parent_path();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(::gettid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    if (error) *error = "open " + tmp + " failed";
    return false;
  }
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n <= 0) {
      ::close(fd);
      ::unlink(tmp.c_str());
      if (error) *error = "write " + tmp + " failed";
      return false;
    }
    done += static_cast<std::size_t>(n);
  }
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  if (!synced || ::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    if (error) *error = "rename to " + path + " failed";
    return false;
  }
  return true;
}

std::optional<std::string> check_workspace_archive(std::string_view tgz, std::uint64_t max_unpacked,
                                                    std::size_t max_members) {
  struct archive* a = archive_read_new();
  archive_read_support_filter_gzip(a);
  archive_read_support_format_tar(a);
  std::optional<std::string> problem;
  if (archive_read_open_memory(a, tgz.data(), tgz.size()) != ARCHIVE_OK) {
    problem = std::string("not a tar.gz: ") + archive_error_string(a);
  }
  std::uint64_t total = 0;
  std::size_t members = 0;
  struct archive_entry* e = nullptr;
  while (!problem) {
    const int r = archive_read_next_header(a, &e);
    if (r == ARCHIVE_EOF) break;
    if (r != ARCHIVE_OK) {
      problem = std::string("unreadable archive: ") + archive_error_string(a);
      break;
    }
    if (++members > max_members) {
      problem = "too many members";
      break;
    }
    const char* name = archive_entry_pathname(e);
    const std::string path = name ? name : "";
    if (!plain_relative(path)) {
      problem = "member \"" + path + "\" is absolute or climbs out with ..";
      break;
    }
    const auto type = archive_entry_filetype(e);
    if (type == AE_IFLNK) {
      // A symlink may point only inside the tree, relative to its own directory.
      const char* target = archive_entry_symlink(e);
      // Resolved from the symlink's own directory.
      const std::string_view dir = std::string_view(path).substr(0, path.rfind('/') + 1);
      const std::string joined = std::string(dir) + (target ? target : "");
      if (!target || target[0] == '/' || !stays_inside(joined)) {
        problem = "symlink \"" + path + "\" leads out of the workspace";
        break;
      }
    } else if (archive_entry_hardlink(e)) {
      if (!stays_inside(archive_entry_hardlink(e))) {
        problem = "hard link \"" + path + "\" leads out of the workspace";
        break;
      }
    } else if (type != AE_IFREG && type != AE_IFDIR) {
      problem = "member \"" + path + "\" is a device node, FIFO or socket";
      break;
    }
    const auto size = archive_entry_size(e);
    total += size > 0 ? static_cast<std::uint64_t>(size) : 0;
    if (total > max_unpacked) {
      problem = "unpacks to more than " + std::to_string(max_unpacked) + " bytes";
      break;
    }
    archive_read_data_skip(a);
  }
  archive_read_free(a);
  return problem;
}

}  // namespace dockgate::sidecar

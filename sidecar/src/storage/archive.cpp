// Workspace archives. See archive.hpp for what is restored and why.
#include "storage/archive.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <set>

#include "util/util.hpp"

namespace dockgate::sidecar {

namespace {

constexpr std::size_t max_listed_skips = 1000;

struct reader_deleter {
  void operator()(struct archive* a) const { archive_read_free(a); }
};
struct writer_deleter {
  void operator()(struct archive* a) const { archive_write_free(a); }
};
using reader = std::unique_ptr<struct archive, reader_deleter>;
using writer = std::unique_ptr<struct archive, writer_deleter>;

reader open_reader(std::string_view tgz) {
  reader a(archive_read_new());
  archive_read_support_filter_all(a.get());
  archive_read_support_format_tar(a.get());
  archive_read_support_format_gnutar(a.get());
  if (archive_read_open_memory(a.get(), tgz.data(), tgz.size()) != ARCHIVE_OK) return nullptr;
  return a;
}

std::string error_of(struct archive* a) {
  const char* e = archive_error_string(a);
  return e ? e : "unreadable";
}

// The member's path relative to /workspace: "" for the archive's own root, nullopt (with
// the reason) for a name that is absolute or climbs with `..`.
std::optional<std::string> normalise(std::string_view raw, std::string& reason) {
  if (!raw.empty() && raw.front() == '/') {
    reason = "absolute path";
    return std::nullopt;
  }
  std::string out;
  for (auto part : path_segments(raw)) {
    if (part == "..") {
      reason = "path climbs out with ..";
      return std::nullopt;
    }
    if (!out.empty()) out += '/';
    out.append(part);
  }
  return out;
}

const char* name_of(struct archive_entry* e) {
  const char* p = archive_entry_pathname(e);
  return p ? p : archive_entry_pathname_utf8(e);
}

// The first proper prefix of `path` that is a symlink of the archive, if any: unpacking
// `path` would write through it, to wherever it points.
std::optional<std::string> through_symlink(const std::string& path,
                                           const std::set<std::string>& symlinks) {
  for (auto slash = path.find('/'); slash != std::string::npos; slash = path.find('/', slash + 1))
    if (symlinks.count(path.substr(0, slash))) return path.substr(0, slash);
  return std::nullopt;
}

la_ssize_t append_output(struct archive*, void* out, const void* data, size_t size) {
  static_cast<std::string*>(out)->append(static_cast<const char*>(data), size);
  return static_cast<la_ssize_t>(size);
}

// Every member header of a tar.gz, data skipped (decompressed: a cut or corrupt stream
// shows): how many were read whole, and why the rest could not be.
archive_check walk_headers(std::string_view tgz,
                           const std::function<void(struct archive_entry*)>& each) {
  archive_check out;
  auto a = open_reader(tgz);
  if (!a) {
    out.error = "not a tar.gz archive";
    return out;
  }
  struct archive_entry* e = nullptr;
  for (;;) {
    const int r = archive_read_next_header(a.get(), &e);
    if (r == ARCHIVE_EOF) return out;
    if (r < ARCHIVE_WARN || archive_read_data_skip(a.get()) < ARCHIVE_WARN) {
      out.error = out.members == 0 ? "not a tar.gz archive: " + error_of(a.get())
                                   : "unreadable after " + std::to_string(out.members) +
                                         " members: " + error_of(a.get());
      return out;
    }
    each(e);
    ++out.members;
  }
}

}  // namespace

bool write_atomically(const std::string& path, std::string_view data, std::string* error) {
  const auto dir = std::filesystem::path(path).parent_path();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string tmp =
      path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(::gettid());
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
  // The rename itself is durable only once the directory is synced.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return true;
}

namespace {

// Why a member (at `path`, normalised) is not restored, or nullopt: it is. A hard link's
// normalised target is set in `hard_target` (it must be a regular file restored before it).
std::optional<std::string> member_refused(struct archive_entry* e, const std::string& path,
                                          const std::set<std::string>& symlinks,
                                          const std::set<std::string>& files,
                                          std::optional<std::string>& hard_target) {
  if (auto link = through_symlink(path, symlinks)) return "written through the symlink " + *link;
  const auto type = archive_entry_filetype(e);
  if (const char* hard = archive_entry_hardlink(e)) {
    std::string why;
    hard_target = normalise(hard, why);
    if (!hard_target || hard_target->empty() || through_symlink(*hard_target, symlinks) ||
        !files.count(*hard_target))
      return "hard link to " + std::string(hard) + ", not a file of this archive";
  } else if (type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK) {
    return type == AE_IFIFO ? "FIFO" : type == AE_IFSOCK ? "socket" : "device node";
  }
  return std::nullopt;
}

// The member as it is restored: its normalised path (and hard link's), owned by the
// sandbox user (1000:1000, no names), directories searchable by it, no sparse map.
void rewrite_member(struct archive_entry* e, const std::string& path,
                    const std::optional<std::string>& hard_target) {
  const auto type = archive_entry_filetype(e);
  archive_entry_copy_pathname(e, path.c_str());
  if (hard_target) {
    archive_entry_copy_hardlink(e, hard_target->c_str());
    archive_entry_set_size(e, 0);
  }
  const auto perm = archive_entry_perm(e) & 0777;
  archive_entry_set_perm(e, type == AE_IFDIR ? (perm | 0700) : perm);
  archive_entry_set_uid(e, 1000);
  archive_entry_set_gid(e, 1000);
  archive_entry_copy_uname(e, nullptr);
  archive_entry_copy_gname(e, nullptr);
  archive_entry_sparse_clear(e);  // holes are read back as zeros and written whole
}

// A gzip'd GNU tar written into `out`, or nullptr.
writer open_repack(std::string& out) {
  writer w(archive_write_new());
  archive_write_add_filter_gzip(w.get());
  archive_write_set_filter_option(w.get(), "gzip", "compression-level", "1");
  archive_write_set_format_gnutar(w.get());
  archive_write_set_bytes_in_last_block(w.get(), 1);
  if (archive_write_open(w.get(), &out, nullptr, append_output, nullptr) != ARCHIVE_OK)
    return nullptr;
  return w;
}

// The names of the archive's symlinks (normalised), and how far its headers can be read.
archive_check symlink_names(std::string_view tgz, std::set<std::string>& symlinks) {
  return walk_headers(tgz, [&](struct archive_entry* e) {
    std::string reason;
    if (archive_entry_filetype(e) == AE_IFLNK && !archive_entry_hardlink(e))
      if (auto p = normalise(name_of(e) ? name_of(e) : "", reason); p && !p->empty())
        symlinks.insert(*p);
  });
}

// The current member's data from `a` to `w`; false when the archive is cut short there.
bool copy_data(struct archive* a, struct archive* w, std::vector<char>& buffer) {
  la_ssize_t n;
  while ((n = archive_read_data(a, buffer.data(), buffer.size())) > 0)
    archive_write_data(w, buffer.data(), static_cast<std::size_t>(n));
  return n >= 0;
}

}  // namespace

restore_plan plan_restore(std::string_view tgz, const restore_limits& limits) {
  restore_plan plan;
  auto skip = [&](std::string path, std::string reason) {
    if (plan.skipped.size() < max_listed_skips)
      plan.skipped.push_back({std::move(path), std::move(reason)});
    else if (plan.skipped.size() == max_listed_skips)
      plan.skipped.push_back({"", "and more members"});
  };

  // Pass 1: which names are symlinks, and how far the archive can be read.
  std::set<std::string> symlinks;
  const auto walked = symlink_names(tgz, symlinks);
  if (walked.error && walked.members == 0) {
    plan.error = *walked.error;
    return plan;
  }
  const std::size_t readable = walked.members;
  bool cut = walked.error.has_value();

  // Pass 2: re-pack what is safe.
  auto a = open_reader(tgz);
  writer w = a ? open_repack(plan.tgz) : nullptr;
  if (!w) {
    plan.error = "cannot re-pack the archive";
    return plan;
  }
  std::set<std::string> files;  // regular files kept: what a hard link may point at
  std::uint64_t total = 0;
  std::vector<char> buffer(64 * 1024);
  struct archive_entry* e = nullptr;
  for (std::size_t index = 0; index < readable; ++index) {
    if (archive_read_next_header(a.get(), &e) < ARCHIVE_WARN) break;
    const char* raw = name_of(e);
    const std::string shown = raw ? raw : "";
    std::string reason;
    auto path = normalise(shown, reason);
    if (!path) {
      skip(shown, reason);
      continue;
    }
    if (path->empty()) continue;  // the archive's own "." (the workspace root itself)
    std::optional<std::string> hard_target;
    if (auto refused = member_refused(e, *path, symlinks, files, hard_target)) {
      skip(shown, *refused);
      continue;
    }
    if (plan.members >= limits.max_members) {
      skip(shown, "more than " + std::to_string(limits.max_members) + " members");
      continue;
    }
    const bool data = archive_entry_filetype(e) == AE_IFREG && !hard_target;
    const auto size = data ? std::max<la_int64_t>(archive_entry_size(e), 0) : 0;
    if (total + static_cast<std::uint64_t>(size) > limits.max_unpacked) {
      skip(shown,
           "does not fit in the workspace (" + std::to_string(limits.max_unpacked) + " bytes)");
      continue;
    }
    total += static_cast<std::uint64_t>(size);
    rewrite_member(e, *path, hard_target);
    if (archive_write_header(w.get(), e) < ARCHIVE_WARN) {
      skip(shown, "cannot be re-packed: " + error_of(w.get()));
      continue;
    }
    if (data) {
      if (!copy_data(a.get(), w.get(), buffer)) {
        cut = true;
        break;
      }
      files.insert(*path);
    }
    ++plan.members;
  }
  archive_write_close(w.get());
  if (cut)
    skip("",
         "the archive is cut short or corrupt after " + std::to_string(plan.members) + " members");
  return plan;
}

archive_check check_archive(std::string_view tgz) {
  return walk_headers(tgz, [](struct archive_entry*) {});
}

}  // namespace dockgate::sidecar

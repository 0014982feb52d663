#include "upload_spool.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace dockgate::proxy {

namespace {

constexpr std::size_t copy_block = 64 * 1024;

struct read_closer {
  void operator()(archive* a) const { archive_read_free(a); }
};
struct write_closer {
  void operator()(archive* a) const { archive_write_free(a); }
};
using reader = std::unique_ptr<archive, read_closer>;
using writer = std::unique_ptr<archive, write_closer>;

// A reader of the spooled archive from its start: tar only (ustar, pax, GNU), plain or
// compressed as dockerd's DecompressStream accepts (gzip, bzip2, xz, zstd).
reader open_reader(int fd, std::string& error) {
  reader a(archive_read_new());
  if (!a || ::lseek(fd, 0, SEEK_SET) != 0) {
    error = "cannot read the spooled archive";
    return nullptr;
  }
  archive_read_support_filter_gzip(a.get());
  archive_read_support_filter_bzip2(a.get());
  archive_read_support_filter_xz(a.get());
  archive_read_support_filter_zstd(a.get());
  archive_read_support_format_tar(a.get());
  if (archive_read_open_fd(a.get(), fd, copy_block) != ARCHIVE_OK) {
    const char* why = archive_error_string(a.get());
    error = why ? why : "not a tar archive";
    return nullptr;
  }
  return a;
}

policy::upload_entry::kind kind_of(archive_entry* e) {
  using k = policy::upload_entry::kind;
  if (archive_entry_hardlink(e)) return k::hardlink;
  switch (archive_entry_filetype(e)) {
    case AE_IFREG:
      return k::file;
    case AE_IFDIR:
      return k::directory;
    case AE_IFLNK:
      return k::symlink;
    default:
      return k::other;
  }
}

std::string error_of(archive* a, std::string_view fallback) {
  const char* why = archive_error_string(a);
  return why ? std::string(why) : std::string(fallback);
}

// One kept entry of `in` written into `out` afresh: its kind, `name`, its permission bits,
// numeric owner and time, and its bytes.
bool copy_entry(archive* in, archive_entry* from, archive* out, const std::string& name,
                std::string& error) {
  std::unique_ptr<archive_entry, void (*)(archive_entry*)> e(archive_entry_new(),
                                                             archive_entry_free);
  const bool file = archive_entry_filetype(from) == AE_IFREG;
  archive_entry_set_pathname(e.get(), name.c_str());
  archive_entry_set_filetype(e.get(), file ? AE_IFREG : AE_IFDIR);
  archive_entry_set_perm(e.get(), policy::upload_mode(archive_entry_perm(from)));
  archive_entry_set_uid(e.get(), archive_entry_uid(from));
  archive_entry_set_gid(e.get(), archive_entry_gid(from));
  archive_entry_set_mtime(e.get(), archive_entry_mtime(from), 0);
  archive_entry_set_size(e.get(), file ? archive_entry_size(from) : 0);
  if (archive_write_header(out, e.get()) < ARCHIVE_WARN) {
    error = error_of(out, "cannot write the archive");
    return false;
  }
  if (!file) return true;
  std::array<char, copy_block> block;
  la_int64_t left = archive_entry_size(from);
  for (;;) {
    const la_ssize_t n = archive_read_data(in, block.data(), block.size());
    if (n < 0) {
      error = error_of(in, "truncated archive");
      return false;
    }
    if (n == 0) break;
    if (archive_write_data(out, block.data(), static_cast<std::size_t>(n)) != n) {
      error = error_of(out, "cannot write the archive");
      return false;
    }
    left -= n;
  }
  if (left != 0) {
    error = "an entry's data is shorter than its size";
    return false;
  }
  return true;
}

}  // namespace

upload_spool& upload_spool::operator=(upload_spool&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    size_ = other.size_;
    other.fd_ = -1;
  }
  return *this;
}

upload_spool::~upload_spool() {
  if (fd_ >= 0) ::close(fd_);
}

bool upload_spool::open(std::string& error) {
  const char* dir = std::getenv("TMPDIR");
  if (!dir || *dir == '\0') dir = "/tmp";
  // O_TMPFILE: a file with no name, gone with its descriptor (Linux 3.11).
  fd_ = ::open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd_ < 0) {
    error = std::string("cannot make an unnamed file in ") + dir + ": " + std::strerror(errno);
    return false;
  }
  size_ = 0;
  return true;
}

bool upload_spool::append(std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd_, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
    size_ += static_cast<std::uint64_t>(n);
  }
  return true;
}

upload_spool::reading upload_spool::entries(std::uint64_t max_bytes, bounds limits) const {
  reading out;
  if (size_ == 0) return out;  // dockerd reads an empty body as an empty archive
  reader a = open_reader(fd_, out.error);
  if (!a) return out;
  std::uint64_t content = 0;
  std::size_t names = 0;
  archive_entry* e = nullptr;
  for (;;) {
    const int r = archive_read_next_header(a.get(), &e);
    if (r == ARCHIVE_EOF) return out;
    if (r < ARCHIVE_WARN) {
      out.error = error_of(a.get(), "malformed archive");
      return out;
    }
    const char* name = archive_entry_pathname(e);
    if (!name) name = archive_entry_pathname_utf8(e);
    if (!name) {
      out.error = "an entry has no name";
      return out;
    }
    policy::upload_entry entry{name, kind_of(e), archive_entry_sparse_count(e) > 0,
                               archive_entry_size_is_set(e) && archive_entry_size(e) > 0
                                   ? static_cast<std::uint64_t>(archive_entry_size(e))
                                   : 0};
    names += entry.name.size();
    if (entry.type == policy::upload_entry::kind::file) content += entry.size;
    // Stop before reading (decompressing) past the cap.
    if (content > max_bytes || out.entries.size() >= limits.entries || names > limits.name_bytes) {
      out.too_large = true;
      return out;
    }
    out.entries.push_back(std::move(entry));
  }
}

bool upload_spool::write_planned(const policy::upload_plan& plan, upload_spool& out,
                                 std::string& error) const {
  writer w(archive_write_new());
  if (!w || archive_write_set_format_pax_restricted(w.get()) != ARCHIVE_OK ||
      archive_write_set_options(w.get(), "hdrcharset=BINARY") < ARCHIVE_WARN ||
      archive_write_set_bytes_in_last_block(w.get(), 1) != ARCHIVE_OK ||
      archive_write_open_fd(w.get(), out.fd_) != ARCHIVE_OK) {
    error = w ? error_of(w.get(), "cannot write the archive") : "cannot write the archive";
    return false;
  }
  if (size_ != 0) {
    reader a = open_reader(fd_, error);
    if (!a) return false;
    archive_entry* e = nullptr;
    for (std::size_t i = 0; i < plan.names.size(); ++i) {
      if (archive_read_next_header(a.get(), &e) < ARCHIVE_WARN) {
        error = error_of(a.get(), "malformed archive");
        return false;
      }
      if (plan.names[i] && !copy_entry(a.get(), e, w.get(), *plan.names[i], error)) return false;
    }
  }
  if (archive_write_close(w.get()) != ARCHIVE_OK) {
    error = error_of(w.get(), "cannot write the archive");
    return false;
  }
  const off_t end = ::lseek(out.fd_, 0, SEEK_END);
  if (end < 0) {
    error = "cannot size the archive";
    return false;
  }
  out.size_ = static_cast<std::uint64_t>(end);
  return true;
}

}  // namespace dockgate::proxy

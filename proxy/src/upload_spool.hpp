#pragma once
// The files of an upload by archive (docs/policy.md, "uploads"; policy/upload_archive.hpp):
// the client's archive spooled to an unnamed file as it arrives, read with libarchive
// (tar, plain or gzip/bzip2/xz/zstd-compressed, as dockerd's DecompressStream accepts),
// and the gate's own tar of what the policy kept, written to a second unnamed file and
// forwarded from there with a Content-Length.
//
// Invariants:
// - Nothing of an upload is held in memory but its entries' names and kinds: the bytes
//   go to files made with O_TMPFILE (in $TMPDIR, else /tmp), which have no name and go
//   when closed, whatever becomes of the process.
// - The daemon receives only the gate's tar: each kept entry written afresh (kind, the
//   planned name, permission bits 0777, numeric owner, time, bytes), never a header or a
//   byte of the client's archive copied through, so no reading of the client's bytes by
//   Go's archive/tar can differ from libarchive's.
// The file I/O here is blocking, on the connection's thread (local files, bounded by the
// profile's max_bytes).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dockgate/policy/upload_archive.hpp"

namespace dockgate::proxy {

class upload_spool {
 public:
  upload_spool() = default;
  upload_spool(upload_spool&& other) noexcept : fd_(other.fd_), size_(other.size_) {
    other.fd_ = -1;
  }
  upload_spool& operator=(upload_spool&& other) noexcept;
  upload_spool(const upload_spool&) = delete;
  upload_spool& operator=(const upload_spool&) = delete;
  ~upload_spool();

  // An empty unnamed file; false with `error` set if none can be made.
  bool open(std::string& error);
  // Appends `data`; false on a write error.
  bool append(std::string_view data);
  std::uint64_t size() const { return size_; }
  int fd() const { return fd_; }

  // What a read of the spooled archive found: its entries, or why it cannot be read
  // (malformed: a 400), or that its content exceeds max_bytes (a 413).
  struct reading {
    std::vector<policy::upload_entry> entries;
    std::string error;
    bool too_large = false;
  };
  // Bounds on what is held in memory of one archive: its entries and their names.
  struct bounds {
    std::size_t entries = 65536;
    std::size_t name_bytes = std::size_t{8} << 20;
  };
  // Reading stops at the first entry that takes the files' content over `max_bytes` or
  // the entries over `limits` (too_large), before any more is read or decompressed.
  reading entries(std::uint64_t max_bytes, bounds limits) const;
  reading entries(std::uint64_t max_bytes) const { return entries(max_bytes, bounds{}); }

  // Writes into `out` the gate's tar of the entries `plan` keeps (by index, as `entries`
  // read them); false with `error` set if the archive cannot be read again or written.
  bool write_planned(const policy::upload_plan& plan, upload_spool& out, std::string& error) const;

 private:
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

}  // namespace dockgate::proxy

#pragma once
// Workspace archives: a session's /workspace (minus uploads and skills) as tar.gz.
//
// A restore unpacks inside the session container, as uid 1000, under /workspace, with
// the container's isolation around it. What a member can do there decides whether it is
// restored: a symlink pointing anywhere is harmless (it is only a name; file operations
// of the sidecar resolve paths inside the container and stay confined), a member written
// *through* a symlink or with `..` or an absolute name is not, nor is a device node or a
// FIFO (it would block whoever reads it). Unsafe members are left out one by one, each
// with its reason; the rest of the archive is restored. The archive's own `.` entry is
// dropped (uid 1000 may not change the mode or times of /workspace itself).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dockgate::sidecar {

// Writes `data` to `path` atomically (temporary file in the same directory, fsync,
// rename, fsync of the directory): a reader never sees a half-written archive, and a
// crash at any point leaves the previous file whole.
bool write_atomically(const std::string& path, std::string_view data, std::string* error);

struct skipped_member {
  std::string path;
  std::string reason;
};

struct restore_limits {
  std::uint64_t max_unpacked = 512ULL << 20;  // the workspace's size
  std::size_t max_members = 100000;
};

struct restore_plan {
  std::string tgz;                      // the members to unpack, re-packed (GNU tar, gzip)
  std::size_t members = 0;              // how many
  std::vector<skipped_member> skipped;  // what was left out, and why
  std::optional<std::string> error;     // not a readable tar.gz at all: nothing to restore
};

// Reads a workspace archive (tar.gz, any tar dialect) and re-packs the members that are
// safe to unpack as uid 1000 under /workspace: names normalised (leading "./" removed),
// permissions without setuid/setgid/sticky bits, owners cleared, sparse files written
// whole. An archive cut short keeps the members read before the cut.
restore_plan plan_restore(std::string_view tgz, const restore_limits& limits);

// The number of members of a tar.gz, or why it is not one (a truncated gzip stream or
// tar, a corrupt header): the check before an archive replaces the last good one.
struct archive_check {
  std::size_t members = 0;
  std::optional<std::string> error;
};
archive_check check_archive(std::string_view tgz);

}  // namespace dockgate::sidecar

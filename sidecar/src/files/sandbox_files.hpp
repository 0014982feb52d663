#pragma once
// The workspace's files as OpenSandbox's execd offers them (upload with mode, ranged
// download, info, delete, directories made, deleted and listed), confined to /workspace
// and symlink-safe as files.hpp's are. Typed requests from a front
// (front/opensandbox/execd/file_routes.cpp), values or refusals back, never HTTP.
// Internal to the sidecar library; the invariants are in sandbox_files.cpp.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dockgate/sidecar/config.hpp"
#include "util/refusal.hpp"

namespace dockgate::sidecar {

class session_containers;
class session_registry;

// execd's FileInfo: `path` absolute, `type` file|directory|symlink|other, `mode` the
// permission bits as an integer whose decimal digits are the octal mode (755).
struct file_info {
  std::string path;
  std::string type;
  std::int64_t size = 0;
  std::string modified_at;  // RFC 3339
  std::string created_at;   // RFC 3339 (the inode's change time: no birth time is kept)
  std::string owner;
  std::string group;
  std::int64_t mode = 0;
};

struct sandbox_upload {
  std::string path;
  std::string bytes;
  std::int64_t mode = 0;  // decimal digits read as octal; 0: left as made (0644)
  std::string owner;      // "" or the session user's name or uid: anything else is refused
  std::string group;
};

// A byte range of a file: [first, last] (last clamped to the end).
struct byte_range {
  std::int64_t first = 0;
  std::optional<std::int64_t> last;
};

struct file_slice {
  std::string bytes;
  std::int64_t size = 0;  // the whole file's
  std::int64_t first = 0, last = -1;
};

struct files_done {};

struct file_permissions {
  std::string path;
  std::int64_t mode = 0;  // decimal digits read as octal; 0: unchanged
  std::string owner;      // "" or the session user's
  std::string group;
};

class sandbox_files {
 public:
  static constexpr std::size_t max_listed = 10000;

  sandbox_files(const config& c, const session_containers& containers, session_registry& registry)
      : config_(c), containers_(containers), registry_(registry) {}

  outcome<files_done> upload(const std::string& session_id, sandbox_upload u) const;
  // The file, or its range (too_large past SANDBOX_MAX_BODY_BYTES; `unsatisfiable` when
  // the range starts past its end: a conflict refusal whose message is the file's size).
  outcome<file_slice> download(const std::string& session_id, const std::string& path,
                               std::optional<byte_range> range) const;
  // Lines `offset` (1-based) to offset+count-1 of a file, their ends kept (count -1: to
  // the end); too_large past SANDBOX_MAX_BODY_BYTES.
  outcome<std::string> read_lines(const std::string& session_id, const std::string& path,
                                  std::int64_t offset, std::int64_t count) const;
  outcome<std::vector<file_info>> info(const std::string& session_id,
                                       const std::vector<std::string>& paths) const;
  outcome<files_done> remove_file(const std::string& session_id, const std::string& path) const;
  outcome<files_done> make_directory(const std::string& session_id, const std::string& path,
                                     std::int64_t mode) const;
  outcome<files_done> remove_directory(const std::string& session_id,
                                       const std::string& path) const;
  // What is under `path`, `depth` levels deep (1: its entries), symlinks reported and never
  // followed, in lexical order.
  outcome<std::vector<file_info>> list(const std::string& session_id, const std::string& path,
                                       int depth) const;
  // A file's or directory's mode (never through a symlink; owner/group: the session user's).
  outcome<files_done> set_permissions(const std::string& session_id,
                                      const file_permissions& p) const;
  // rename(2) of `src` to `dest` (dest's directory must exist).
  outcome<files_done> move(const std::string& session_id, const std::string& src,
                           const std::string& dest) const;
  // The files under `path` whose name (or, for a pattern with '/', relative path) matches
  // the glob `pattern` ("", "*" and "**": all), directories never followed through a
  // symlink, at most max_listed.
  outcome<std::vector<file_info>> search(const std::string& session_id, const std::string& path,
                                         const std::string& pattern) const;
  // Every `old_text` in the file replaced by `new_text`: how many.
  outcome<std::int64_t> replace(const std::string& session_id, const std::string& path,
                                const std::string& old_text, const std::string& new_text) const;

 private:
  struct ran {
    std::int64_t exit_code = -1;
    std::string out, err;
  };
  // The script's `op` on `args` in the session's container, as the session user.
  outcome<ran> run(const std::string& session_id, std::vector<std::string> args,
                   std::string stdin_data = {}) const;

  const config& config_;
  const session_containers& containers_;
  session_registry& registry_;
};

// The refusal a workspace script's exit code stands for ("" message: none, it succeeded).
std::optional<refusal> workspace_refusal(std::int64_t exit_code, const std::string& path,
                                         const std::string& err);

}  // namespace dockgate::sidecar

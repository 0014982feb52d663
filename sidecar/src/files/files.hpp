#pragma once
// Files: upload, read, list and reset inputs of a session's workspace, all confined to
// /workspace. The requests come typed from a front (front/aivory/file_routes.cpp reads
// them from the Aivory API's bodies); the answers are values or refusals, never HTTP.
// Internal to the sidecar library; the invariants are in files.cpp.

#include <cstdint>
#include <string>
#include <vector>

#include "dockgate/sidecar/config.hpp"
#include "util/refusal.hpp"

namespace dockgate::sidecar {

class session_containers;
class session_registry;

// A file to write: `path` as the client gave it (absolute under /workspace, or relative
// to it), `bytes` decoded and within SANDBOX_MAX_UPLOAD_BYTES (the front checks the limit
// before it decodes; put_file checks it again).
struct file_put {
  std::string session_id;
  std::string path;
  std::string bytes;
};

struct file_get {
  std::string session_id;
  std::string path;
};

// A regular file of the workspace: its path relative to /workspace (bytes as found,
// possibly not UTF-8) and its size.
struct file_entry {
  std::string path;
  std::int64_t size = 0;
};

struct file_written {};
struct inputs_reset {};

class files {
 public:
  // At most this many entries in a listing (the first by path).
  static constexpr std::size_t max_listed = 500;

  files(const config& c, const session_containers& containers, session_registry& registry)
      : config_(c), containers_(containers), registry_(registry) {}

  outcome<file_written> put_file(file_put r);
  // The file's bytes (at most SANDBOX_MAX_BODY_BYTES: the answer carries them whole).
  outcome<std::string> get_file(const file_get& r);
  // The workspace's regular files (6 levels deep), sorted by path, at most max_listed.
  outcome<std::vector<file_entry>> list_files(const std::string& session_id);
  outcome<inputs_reset> reset_inputs(const std::string& session_id);

 private:
  const config& config_;
  const session_containers& containers_;
  session_registry& registry_;
};

}  // namespace dockgate::sidecar

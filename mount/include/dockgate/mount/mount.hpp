#pragma once
// dockgate-mount: per-sandbox FUSE workspaces from S3-compatible object storage, mounted
// on the host at <root>/<sandbox-id> and bound by the gate into the sandbox at /workspace
// (the sandbox itself has no /dev/fuse and no CAP_SYS_ADMIN). It reads the variables of
// the AIStor Memory example's aimem-host-mount.sh, so it drops in where that script was.
//
// Invariants kept here:
// - ids are validated before they become paths; the root is absolute, and neither it nor
//   a mountpoint is ever reached through a symlink (host_path.hpp), and nobody but root
//   can replace a component of it;
// - credentials reach the driver through its environment, never its command line (which
//   `ps` shows to everyone);
// - success is what statfs says of the mountpoint (a live FUSE file system), never the
//   driver's exit status: s3fs exits 0 for a bucket or key it cannot use;
// - a failed mount leaves no directory behind; a dead driver's mount (ENOTCONN) is found
//   by `list` and cleaned by `reconcile`.

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dockgate::mount {

struct mount_config {
  std::string bucket;                // AIMEM_BUCKET
  std::string endpoint;              // AIMEM_ENDPOINT: https://aistor.example.com
  std::string access_key;            // AIMEM_ACCESS_KEY
  std::string secret_key;            // AIMEM_SECRET_KEY
  std::string session_token;         // AIMEM_SESSION_TOKEN (optional)
  std::string root = "/mnt/aimem";   // AIMEM_MOUNT_ROOT
  std::string region = "us-east-1";  // AIMEM_REGION
  std::string prefix;                // AIMEM_PREFIX: keys above every sandbox's (optional)
  // DOCKGATE_MOUNT_DRIVER: "s3fs" (Debian's, the default), "rclone", or a command
  // template split on spaces with {bucket} {key} {source} {mountpoint} {endpoint}
  // {region} {uid} {gid} {log} replaced (credentials come in the environment as
  // AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN and the AIMEM_ names).
  std::string driver = "s3fs";
  unsigned uid = 1000, gid = 1000;  // DOCKGATE_MOUNT_UID/GID: who owns the files (the sandbox user)
  // DOCKGATE_MOUNT_USERNS: the engine's userns-remap user (dockerd's "default" makes
  // "dockremap"). Set, the uid and gid above are the container's, and the files are owned
  // by what they map to on the host (the user's ranges in /etc/subuid and /etc/subgid).
  std::string userns;
  std::chrono::seconds timeout{30};  // DOCKGATE_MOUNT_TIMEOUT: until the mount must be live
};

struct config_result {
  std::optional<mount_config> value;
  std::vector<std::string> errors;  // every problem at once
};
// The host id a container's `id` maps to under `user`'s subordinate ranges, as dockerd
// --userns-remap maps them: the text of /etc/subuid or /etc/subgid ("name:start:count"
// lines), the user's ranges in order, concatenated. nullopt if the user has none or `id`
// lies beyond them.
std::optional<unsigned> subordinate_id(std::string_view text, std::string_view user, unsigned id);

// `need_storage`: mount needs the bucket and credentials; cleanup, list and reconcile do not.
config_result load_config(const std::map<std::string, std::string>& env, bool need_storage);

// A sandbox id as a path component: 1-128 of [A-Za-z0-9_.-], starting with a letter or
// digit (so never "." or ".." or hidden).
bool valid_id(std::string_view id);

struct driver_command {
  std::vector<std::string> argv;
  std::vector<std::string> env;  // NAME=VALUE, the whole environment of the driver
};
// The driver's command for mounting `key` of the bucket at `mountpoint`.
std::optional<driver_command> driver_for(const mount_config& c, std::string_view key,
                                         const std::string& mountpoint, const std::string& log_file,
                                         std::string& error);

struct outcome {
  bool ok = false;
  std::string path;   // the mountpoint
  std::string error;  // why not
};

// Mounts `key` (default: the id) of the bucket below the prefix at <root>/<id>. Already
// live: ok (idempotent). Stale: cleaned first.
outcome mount(const mount_config& c, std::string_view id, std::string_view key = {});
// Unmounts (lazily when busy) and removes <root>/<id>; nothing there is ok.
outcome cleanup(const mount_config& c, std::string_view id);

enum class state { live, stale, unmounted };
std::string_view to_string(state s);
struct entry {
  std::string id;
  std::string path;
  state what = state::unmounted;
  std::string detail;  // the fstype, or the error statfs gave
};
// Every mountpoint (and left-over directory) under the root.
std::vector<entry> list(const mount_config& c);
// Cleans every entry that is not live; what it cleaned.
std::vector<outcome> reconcile(const mount_config& c);

}  // namespace dockgate::mount

#pragma once
// Workspace archives: a session's /workspace (minus uploads and skills) as tar.gz, kept
// in SANDBOX_LOCAL_STORAGE_DIR under the archive key, restored into the next session
// with the same key — after libarchive has checked every member.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dockgate::sidecar {

// The segments of a slash-separated path, without empty and "." segments (".." kept):
// the one path walker behind workspace confinement and archive member checks.
std::vector<std::string_view> path_segments(std::string_view path);

// The object key of an archive: <prefix>/workspaces/<key>.tgz (the seed's layout; the
// prefix, which comes from the request, must be a plain relative path). nullopt if not.
std::optional<std::string> archive_object_key(std::string_view prefix, std::string_view key);

// Where the archive of `key` lives locally: <dir>/<object key>. nullopt if the directory
// is not configured or does not exist.
std::optional<std::string> archive_path(const std::string& storage_dir, std::string_view prefix, std::string_view key);

// Writes `data` to `path` atomically (temporary file in the same directory, fsync,
// rename): a reader never sees a half-written archive.
bool write_atomically(const std::string& path, std::string_view data, std::string* error);

// Checks a tar.gz before it is unpacked into a workspace: only regular files and
// directories (symlinks only when they stay inside the tree), relative paths without
// `..`, no device nodes, FIFOs or sockets, no hard links out, at most `max_members`
// members and `max_unpacked` bytes unpacked. nullopt when safe, else the reason.
std::optional<std::string> check_workspace_archive(std::string_view tgz, std::uint64_t max_unpacked,
                                                    std::size_t max_members = 100000);

}  // namespace dockgate::sidecar

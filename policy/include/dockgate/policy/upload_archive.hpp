#pragma once
// Upload by archive under a read-only root (docs/policy.md, "uploads"): the decisions over
// a PutContainerArchive under a profile with an upload rule, on the entries the proxy read
// from the client's tar (proxy/src/upload_spool.hpp). Pure: names and kinds in, a plan or
// a refusal out.
//
// Invariants:
// - Every entry is a regular file or a directory (no symlink, hardlink, device, fifo,
//   socket, sparse file), its name relative and clean once a leading "./" and a trailing
//   "/" are taken off (no "..", "." or empty segment), and the query path joined with it
//   lies within one target (equal or under).
// - A write at a proper ancestor of a target whose entries all lie within that target T is
//   a write into T: the path that goes up is T and the names are made relative to it.
//   Directory entries naming T itself or a directory on the way to it are left out (T is
//   the volume's root, the daemon made the way to it).
// - What goes up keeps of an entry its kind, its name (as planned), its permission bits
//   (0777: no setuid, setgid or sticky bit), its owner's numeric IDs, its time and its
//   bytes: the proxy writes a fresh tar of these, never the client's bytes.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "dockgate/policy/decision.hpp"

namespace dockgate::policy {

// `path` is `root` or lies under it (both clean absolute paths; "/" holds everything).
bool path_within(std::string_view path, std::string_view root);

// One entry of the client's archive, as libarchive read it.
struct upload_entry {
  enum class kind : std::uint8_t { file, directory, symlink, hardlink, other };
  std::string name;  // as written in the archive
  kind type = kind::other;
  bool sparse = false;  // a sparse file (GNU or pax sparse map)
  std::uint64_t size = 0;
  bool operator==(const upload_entry&) const = default;
};

// What goes up: the query path (without a trailing "/"), and per entry of the client's archive its
// name in the gate's archive (nullopt: left out).
struct upload_plan {
  std::string path;
  std::vector<std::optional<std::string>> names;
  std::uint64_t bytes = 0;  // content of the files kept
  bool operator==(const upload_plan&) const = default;
};

// The query's `path` before the body is read: a clean absolute path (one trailing "/", as
// the docker CLI writes a directory, taken off) within a target or a proper ancestor of
// one. nullopt when it may go on.
std::optional<deny> review_upload_path(const profile& p, std::string_view path);

// An entry's name made clean (leading "./" and trailing "/" off; "" for the path itself),
// or nullopt when it is absolute, has a "..", "." or empty segment, or is too long.
std::optional<std::string> clean_entry_name(std::string_view name);

// The permission bits an entry keeps.
constexpr std::uint32_t upload_mode(std::uint32_t mode) {
  return mode & 0777;
}

// The plan for the entries of one upload at `path` (reviewed by review_upload_path), or
// the refusal (403, rule "uploads").
std::variant<deny, upload_plan> review_upload(const profile& p, std::string_view path,
                                              std::span<const upload_entry> entries);

// The refusal of an upload (403 unless `status`), in Docker's words with the rule's name.
deny upload_refusal(const profile& p, std::string what, unsigned status = 403);

// `query` with its `path` parameter's value replaced by `path` (escaped).
std::string with_upload_path(std::string_view query, std::string_view path);

}  // namespace dockgate::policy

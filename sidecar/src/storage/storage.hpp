#pragma once
// Where workspace archives and /storage objects live: the request's `storage` block
// (the seed's snake_case fields, docs/aivory-api.md "Archives and storage"), validated once,
// and one object-store interface over the operator's local directory, S3-compatible
// storage (path-style with an endpoint, virtual-hosted on AWS) and Aliyun OSS through its
// S3-compatible API (virtual-hosted, SigV4).
//
// Invariants kept here: a key never leaves the operator's directory or the bucket (no
// absolute keys, no `..`, no NUL); a storage block the sidecar cannot use is refused with
// the reason, never silently ignored; secrets never appear in `label()` or `where()`.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dockgate/sidecar/config.hpp"
#include "storage/s3.hpp"

namespace dockgate::sidecar {

enum class storage_provider { local, s3, aliyun_oss };

struct storage_spec {
  storage_provider provider = storage_provider::local;
  std::string base;  // the prefix without leading/trailing '/': "workspaces" by default
  s3_config s3;      // s3 and aliyun_oss
  // False for a spec read back from a container label after a restart: the secret was
  // never stored, so S3/OSS can be reached only once a request brings it again.
  bool has_credentials = true;

  std::string_view provider_name() const;
  // <base>/workspaces/<stem>.tgz — the Aivory sidecar's layout.
  std::string archive_key(std::string_view stem) const;
  // <base>/<key> — the layout of /storage/put.
  std::string object_key(std::string_view key) const;
  // The non-secret part as JSON (kept in a container label, so that a restarted sidecar
  // archives an adopted session where it belongs).
  std::string label() const;
  // For logs and answers: local:<dir>/<base>, s3://<bucket>/<base> at <endpoint>.
  std::string where() const;
  // Same provider, bucket, endpoint, region and base (credentials aside).
  bool same_place(const storage_spec& other) const;
};

struct storage_choice {
  std::optional<storage_spec> spec;  // nullopt: no storage (archives are not kept)
  std::optional<std::string> error;  // the block cannot be used: why (answered with 400)
};

// The storage a request names. `json` is the text of its "storage" member, empty when
// the request has none (or null): then the operator's local directory if configured, else
// no storage. A block that names a provider this sidecar cannot use, an invalid prefix,
// a missing bucket or credentials, a malformed endpoint, or local storage without
// SANDBOX_LOCAL_STORAGE_DIR is an error, never a silent "no archive".
storage_choice choose_storage(std::string_view json, const config& c);

// The local store's area of the sidecar's own (dormant sessions' records and archives:
// sessions/workspace/dormant_records.hpp): no client's storage block or object key reaches
// it, so no client reads another sandbox's record (its environment) or archive.
inline constexpr std::string_view sidecar_own_area = "dockgate-dormant";
inline bool in_sidecar_own_area(std::string_view key) {
  return key == sidecar_own_area ||
         (key.starts_with(sidecar_own_area) && key.size() > sidecar_own_area.size() &&
          key[sidecar_own_area.size()] == '/');
}

// Whether the sidecar may connect to this S3 endpoint: the providers' public endpoints
// over https, or one the operator lists in SANDBOX_STORAGE_ENDPOINTS.
bool storage_endpoint_allowed(std::string_view endpoint, const config& c);
// The spec kept in a label (no credentials); nullopt if unreadable.
std::optional<storage_spec> storage_from_label(std::string_view label, const config& c);

// A key of /storage/put and /storage/delete: relative, no `..` segment, no NUL or
// backslash, no empty segment, at most 1024 bytes.
bool valid_object_key(std::string_view key);

struct stored_object {
  enum class state { found, missing, error };
  state what = state::missing;
  std::string data;
  std::string generation;  // changes with every write of the key
  std::string error;
};

struct object_entry {
  std::string key;
  std::uint64_t size = 0;
  std::int64_t last_modified = 0;  // Unix seconds, 0 unknown
};

class object_store {
 public:
  virtual ~object_store() = default;
  // The object, at most `max_bytes` (a larger one is an error that says so).
  virtual stored_object get(const std::string& key, std::size_t max_bytes) = 0;
  // The key's current generation: "" when there is no such object, nullopt on error.
  virtual std::optional<std::string> generation(const std::string& key, std::string& error) = 0;
  // Writes atomically (a reader sees the old object or the new one, never part of one);
  // the new generation, or nullopt with `error`.
  virtual std::optional<std::string> put(const std::string& key, std::string_view data,
                                         std::string_view content_type, std::string& error) = 0;
  // As put, but only while the key is still at `expected` ("" — absent); `changed` says
  // the key moved on (the write was not made). Conditional writes in S3 where the store
  // supports them; in a local directory under the lock of lock_key.
  virtual std::optional<std::string> replace(const std::string& key, std::string_view data,
                                             std::string_view content_type,
                                             const std::string& expected, bool& changed,
                                             std::string& error) = 0;
  // The lock of the archives around `key` shared by every sidecar on this host (a local
  // directory: flock on it), held until the handle goes; nullptr where the store has none.
  virtual std::shared_ptr<void> lock_key(const std::string& key) = 0;
  virtual bool copy(const std::string& from, const std::string& to, std::string& error) = 0;
  // A missing object is not an error.
  virtual bool remove(const std::string& key, std::string& error) = 0;
  // Every object whose key starts with `prefix`.
  virtual bool list(const std::string& prefix, std::vector<object_entry>& out,
                    std::string& error) = 0;
  // A URL that reads the object until `now + ttl`; nullopt where the store has none (local).
  virtual std::optional<std::string> presign_get(const std::string& key, std::int64_t ttl,
                                                 std::int64_t now) = 0;
};

std::unique_ptr<object_store> open_store(const storage_spec& spec, const config& c);

// Temporary files of atomic writes that a killed sidecar left in the local directory,
// older than `min_age_seconds` (a live write is never that old): removed. How many.
std::size_t remove_stale_temporaries(const std::string& dir, std::int64_t min_age_seconds);

}  // namespace dockgate::sidecar

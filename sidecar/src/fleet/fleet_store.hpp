#pragma once
// The fleet's records in the workspaces' object store (SANDBOX_WORKSPACE_MODE=fuse), under
// <AIMEM_PREFIX>/.dockgate-fleet/ — beside the workspace prefixes, never one of them (an
// archive key is [A-Za-z0-9_-], so no session's mount reaches a name with a dot):
//   sessions/<session_id>.json   a session's record: what any sidecar needs to serve it
//                                (archive key, storage place, TTL, kernel) and its owner,
//                                the instance that holds it;
//   instances/<instance>.json    an instance's store lease (store_lease.hpp): its holder,
//                                where it is reached, renewed by rewriting it;
//   workspaces/<archive_key>.json which generation of the key's workspace is current: the
//                                one a new session with that key mounts.
// A workspace's files are a *generation*: generation "" is <prefix>/<archive_key>/ (as
// before generations), generation g.<hex> is <prefix>/g.<hex>/<archive_key>/. A takeover
// writes the session's record with a new generation, copies the old one into it on the
// store, and only then mounts it (fleet.cpp): a stalled holder's container and s3fs can
// write only the generation they mounted, which nobody reads after the copy. That is a
// fencing token enforced by layout: it needs no check in the writer being fenced (s3fs
// cannot be made to check one) and no multi-object condition (S3 has none). "g." holds a
// dot, which no archive key does, so no generation is inside another's prefix, and none
// is inside a mount of another key.
// Every change is a conditional PUT (If-None-Match: * to create, If-Match: <ETag> to
// replace; AWS since 2024, MinIO, AIStor): of two sidecars racing for a record, one wins
// and the other is told 412. Whether a lease has expired is judged on the store's clock
// alone (its Date against the object's Last-Modified, in one answer): no two hosts' clocks
// are compared.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "dockgate/sidecar/config.hpp"
#include "storage/s3.hpp"

namespace dockgate::sidecar {

struct session_record {
  std::string session_id;
  std::string archive_key;
  std::string storage;  // where the workspace is: s3://<bucket>/<prefix>/<key>/ (never a secret)
  std::int64_t idle_ttl_sec = 0;  // 0: the sidecar's default
  std::string kernel;             // "" for a plain session
  std::string owner;              // the instance holding it
  std::string holder;             // its holder's store lease (a new one on every hold)
  std::string created_at;
  std::string generation;  // its workspace's generation ("" : <prefix>/<archive_key>/)
  // Set while a takeover copies the workspace into `generation`: the generation it copies
  // from. A taker that dies mid-copy leaves it set, and the next takeover copies from it
  // again (never from the half-made one).
  std::optional<std::string> copy_from;
  // Set by a holder's clean stop once the session's container here is gone (its holder
  // ID): nothing of that holder writes the generation any more, so a takeover keeps it.
  std::string handed_over;
  // What its client said of it beside its code (an OpenSandbox sandbox's image, limits,
  // expiry, metadata, entrypoint and environment: sessions/client_facts.hpp), sealed under
  // the fleet's key and bound to the session (sealed.hpp), so that a takeover makes the
  // same sandbox and nobody who can only read or write the store learns or changes any of
  // it. "" for none (an Aivory session's); left out of the JSON then.
  std::string facts_sealed;
  // Its own egress list (egress_policy_text: an OpenSandbox sandbox's networkPolicy), when
  // it has one: a takeover keeps it, never the operator's wider list in its place.
  std::optional<std::string> egress_policy;
  std::string to_json() const;
  static std::optional<session_record> parse(std::string_view json);
};

// workspaces/<archive_key>.json: the generation a new session with that key mounts.
struct workspace_record {
  std::string archive_key;
  std::string generation;
  std::string to_json() const;
  static std::optional<workspace_record> parse(std::string_view json);
};

struct lease_record {
  std::string instance;
  std::string holder;  // random, one process's
  std::string url;     // SANDBOX_FLEET_URL ("" when not reachable by peers)
  std::string host;
  std::int64_t pid = 0;
  std::int64_t beat = 0;  // renewals so far: every rewrite has its own ETag
  std::string to_json() const;
  static std::optional<lease_record> parse(std::string_view json);
};

template <typename T>
struct store_read {
  unsigned status = 0;  // 200 found, 404 absent, else the store failed (error)
  std::optional<T> record;
  std::string etag;
  std::int64_t age_s = -1;  // the store's Date minus the object's Last-Modified (-1 unknown)
  std::string error;
  bool found() const { return status == 200 && record.has_value(); }
  bool absent() const { return status == 404; }
};

class fleet_store {
 public:
  explicit fleet_store(const config& c);
  bool enabled() const { return enabled_; }

  store_read<session_record> read_session(std::string_view sid);
  // `if_match`: "" create only, else replace only that ETag. The new ETag in the result.
  s3_result write_session(const session_record& r, const std::string& if_match);
  s3_result delete_session(std::string_view sid);
  store_read<lease_record> read_lease(std::string_view instance);
  s3_result write_lease(const lease_record& r, const std::string& if_match);
  s3_result delete_lease(std::string_view instance);

  store_read<workspace_record> read_workspace(std::string_view archive_key);
  s3_result write_workspace(const workspace_record& r, const std::string& if_match);
  // Every object of one generation of a workspace copied into another on the store
  // (ListObjectsV2, then CopyObject each: no byte passes through the sidecar). "" when
  // done, else why not.
  std::string copy_workspace(std::string_view archive_key, std::string_view from_generation,
                             std::string_view to_generation);

  // A new generation's name: g.<16 hex digits> (random: unique without a counter to race on).
  static std::string new_generation();
  // The workspace's key under the prefix: what dockgate-mount mounts (<key>, g.<hex>/<key>).
  static std::string workspace_key(std::string_view archive_key, std::string_view generation);
  std::string workspace_place(std::string_view archive_key, std::string_view generation) const;
  std::string session_key(std::string_view sid) const;
  std::string workspace_record_key(std::string_view archive_key) const;
  std::string lease_key(std::string_view instance) const;

 private:
  bool enabled_ = false;
  std::string root_;    // <prefix>/.dockgate-fleet/
  std::string prefix_;  // <prefix>/ ("" without AIMEM_PREFIX)
  std::string place_;   // s3://bucket/prefix/
  s3_client client_;
  s3_client
      copy_client_;  // a takeover's copy: a file's CopyObject may take longer than a lease's third
};

// The store's own clock: Date minus Last-Modified of one answer, in seconds (-1 unknown).
std::int64_t store_age(const s3_result& r);

}  // namespace dockgate::sidecar

#pragma once
// A session's life on the engine: created (a warm container claimed, or one created and
// started; its workspace made and restored), deleted (archived or discarded, its
// containers removed), adopted at start-up (reconcile), reaped when idle, ended at
// shutdown. Internal to the sidecar library.

#include <cstddef>
#include <semaphore>
#include <string>
#include <string_view>

#include <optional>

#include "dockgate/client/engine.hpp"
#include "dockgate/sidecar/config.hpp"
#include "fleet/fleet_store.hpp"
#include "front/http_server.hpp"

namespace dockgate::sidecar {

class archive_store;
class session_containers;
class session_pool;
class session_registry;
class store_lease;
class workspace_mounts;
struct session;
struct session_limit;

class session_lifecycle {
 public:
  session_lifecycle(const config& c, const client::engine& docker, session_containers& containers,
                    session_registry& registry, archive_store& archives,
                    const workspace_mounts& mounts, session_pool& pool, session_limit& limit,
                    store_lease* fleet);

  http_reply create_session(const http_request& r);
  http_reply delete_session(std::string_view id, const std::string& body);
  // Start-up: adopt running session containers left by a previous run, remove the rest.
  void reconcile();
  // The idle reaper's end of a session (held under its lock, idle past its TTL):
  // archived where it has storage, then its containers removed; kept for the next sweep
  // when the storage cannot be written now.
  void reap(session& s);
  // Shutdown: every session of this instance archived (where it has storage) and its
  // container removed, as a DELETE would; one whose archive cannot be written now keeps
  // its container for the next start to adopt. Returns how many were kept.
  std::size_t end_all_sessions();
  // A handed-over session's record marked `handed_over` by this holder, once the daemon
  // says its container is gone: the next takeover keeps its generation (fleet.cpp).
  void mark_handed_over(const session& s);
  // The store lease was lost (another member may take the sessions over, or has): each
  // FUSE session's container is removed, then its mount (s3fs) cleaned, with no session
  // lock taken (a cell may hold one for its whole run) and no record touched — except a
  // session whose record names another holder of this same instance (a successor on this
  // engine adopted it). Its data is fenced by generation already (fleet.cpp); this ends
  // the old holder's processes. Returns how many were fenced.
  std::size_t fence();
  // A session's end on the engine: its container removed (a warm one is never returned to
  // the pool), its FUSE mount cleaned, the session forgotten, then its claim record removed;
  // its record in the fleet's store too unless `handed_over` (another sidecar serves it next).
  void remove_session_containers(const session& s, bool handed_over = false);
  // A session of the fleet's store taken over by this sidecar (its record, rewritten to name
  // this instance, in `record`): its workspace mounted, its container made on this engine,
  // its runner (or kernel: a new one, said at the next answer) started. nullopt when it is
  // served here now, else the answer.
  std::optional<http_reply> take_over(const session_record& record);
  // The record of a session that ended here, removed from the store if it still names this
  // instance.
  void forget_record(std::string_view sid);
  // A kernel session's kernel driver started in its container (kernel.hpp); "" when it
  // runs, else the error to answer.
  std::string start_kernel(session& s);

 private:
  // Create and start a session container `name` for `s` (its ID in `container_id`); the
  // answer when either fails (the container removed).
  std::optional<http_reply> create_and_start(const std::string& name, session& s,
                                             std::string& container_id);
  // Whether the session's place in SANDBOX_MAX_SESSIONS is taken (under limit_.mutex).
  bool at_session_limit();
  // Rewrites a record read with `etag` to name this holder: false when another sidecar
  // wrote it first (or the store failed).
  bool claim_record(session_record record, const std::string& etag);
  session_record record_of(const session& s) const;
  const config& config_;
  const client::engine& docker_;
  session_containers& containers_;
  session_registry& registry_;
  archive_store& archives_;
  const workspace_mounts& mounts_;
  session_pool& pool_;
  session_limit& limit_;
  store_lease* fleet_;  // the store lease (fuse mode), else nullptr
  std::counting_semaphore<1 << 20> create_slots_;
};

}  // namespace dockgate::sidecar

#pragma once
// A session's life on the engine: created (a warm container claimed, or one created and
// started; its workspace made and restored), deleted (archived or discarded, its
// containers removed), adopted at start-up (reconcile), reaped when idle, ended at
// shutdown. Internal to the sidecar library.

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <semaphore>
#include <set>
#include <string>
#include <string_view>

#include "dockgate/sidecar/config.hpp"
#include "engine/container_engine.hpp"
#include "fleet/fleet_store.hpp"
#include "sessions/executor_hooks.hpp"
#include "sessions/pool/pool.hpp"
#include "sessions/session_containers.hpp"
#include "sessions/session_request.hpp"
#include "sessions/workspace/dormant_records.hpp"
#include "util/refusal.hpp"

namespace dockgate::sidecar {

class archive_store;
class session_pool;
class session_registry;
class store_lease;
class workspace_mounts;
struct session;
struct session_limit;

class session_lifecycle {
 public:
  session_lifecycle(const config& c, const container_engine& engine,
                    const executor_hooks& executors, session_containers& containers,
                    session_registry& registry, archive_store& archives,
                    const workspace_mounts& mounts, session_pool& pool, session_limit& limit,
                    store_lease* fleet);

  // A new session: a warm container claimed, or one created and started (within
  // SANDBOX_MAX_CONCURRENT_CREATES and SANDBOX_MAX_SESSIONS), its workspace made and
  // restored from its archive; registered only once all of it is done. Refused: busy (the
  // create queue or the session limit is full), unavailable (no image yet, the fleet's
  // store unreachable), failed (anything the engine or the workspace refused: nothing it
  // made is left behind).
  outcome<created_session> create_session(const create_request& r);
  // A session ended on request: its workspace archived (or its archives discarded), its
  // containers removed; idempotent for a session this sidecar does not hold (only this
  // instance's container is removed). Refused: busy (held past the queue timeout).
  outcome<deleted_session> delete_session(const delete_request& r);
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
  // served here now, else the refusal.
  std::optional<refusal> take_over(const session_record& record);
  // The record of a session that ended here, removed from the store if it still names this
  // instance.
  void forget_record(std::string_view sid);
  // A held session's record in the fleet's store rewritten with its client facts as they
  // are now (a renewed expiry, patched metadata), so that a takeover keeps them: nothing
  // for a session without a record. Refused (unavailable) when the store cannot be written.
  std::optional<refusal> refresh_record(const std::string& sid);

  // Dormancy (session_dormancy.cpp; docs/sidecar.md "Dormant sessions"). `s` (held under
  // its lock, idle past SANDBOX_DORMANT_AFTER_SECONDS) put to sleep: its workspace
  // archived (a FUSE one stays in its bucket), its record written, then its container
  // removed; the session stays registered, dormant and paused. Any failure keeps its
  // container as it was, for the next sweep. Whether it went dormant.
  bool sleep(session& s);
  // A dormant `s` (held under its lock) brought back under its id: a container made
  // (cold), its archive unpacked (or its bucket mounted), its entrypoint started again, its
  // record removed; running afterwards. Refused: busy (SANDBOX_MAX_SESSIONS, the create
  // queue), unavailable (its archive cannot be read now), failed; it stays dormant.
  std::optional<refusal> wake(session& s);
  // Start-up (after reconcile's adoptions): every dormant record registered as a dormant
  // session, but for a session adopted live (a stop between its record and its removal),
  // whose record goes.
  void adopt_dormant();

 private:
  // The isolation of `s`'s new container (isolation/isolation_proof.cpp) read and judged
  // against what its create asked, with the probe's answer: kept in s.isolation when every
  // wall holds; else its container is removed and the session refused.
  std::optional<refusal> prove_isolation(session& s, const std::string& probe_output,
                                         const char* read_at);
  // An adopted container's, with a probe of its own (nothing asked is known): false when a
  // wall fails (the caller removes it).
  bool prove_adopted(session& s);
  // create_session's steps, in order. Whether a warm container may serve `r` (the pool's
  // image, no environment, the caps' limits); the refusal when its image is not there.
  bool poolable(const create_request& r) const;
  std::optional<refusal> image_missing(const create_request& r, bool warm) const;
  std::shared_ptr<session> new_session(const create_request& r, const std::string& sid) const;
  // A FUSE workspace mounted for `s` (its generation read from the fleet's store first).
  std::optional<refusal> mount_fuse_workspace(session& s);
  // The archive fetched and checked before the container exists (its labels record it).
  prepared_restore prepare_restore_of(session& s);
  // A cold container created and started for `s` within SANDBOX_MAX_SESSIONS, or (at the
  // limit) a warm one claimed in its place, `s` moved to its session ID.
  std::optional<refusal> place_session(const create_request& r, session& s,
                                       prepared_restore& restore,
                                       std::optional<pooled_container>& warm,
                                       std::string& container_id);
  // The workspace made (cold), the kernel started, the archive unpacked and the inputs
  // emptied again; on a failure the container is removed.
  std::optional<refusal> ready_workspace(session& s, bool warm, prepared_restore& restore);
  // The claim record (warm) and the fleet's record (FUSE), before the answer.
  std::optional<refusal> record_session(session& s, bool warm);

  // The request's entrypoint started in the made container; on a failure the container
  // removed.
  std::optional<refusal> start_entrypoint(session& s);
  // A client's facts of `s` (its image, limits, expiry, metadata, entrypoint, environment
  // sealed under the fleet's key) into its record, and back at a takeover (refused when the
  // sealed environment does not open: never a sandbox without what its client asked for).
  void write_sealed_facts(const session& s, session_record& r) const;
  std::optional<refusal> read_sealed_facts(const session_record& r, session& s) const;
  // A taken-over session's image, when it is not on this engine (unavailable: not taken).
  std::optional<refusal> image_of_record_missing(const session& s) const;
  // A paused session's container unpaused (held under its lock) before its end.
  void thaw(session& s);
  // delete_session's two cases: a session held here, and one that is not.
  std::optional<archive_outcome> end_held_session(session& s, const delete_request& r);
  std::optional<archive_outcome> end_unheld_session(const delete_request& r);

  // Dormancy's steps: why `s` cannot go dormant (nullopt: it can); a dormant session's end
  // (reap, delete: its own archive discarded, its record removed, it is forgotten); its
  // container made and its workspace restored for wake.
  std::optional<std::string> dormancy_refused(const session& s) const;
  void end_dormant(session& s);
  std::optional<refusal> remake_container(session& s);
  bool keep_archive_for_sleep(session& s);

  // reconcile's steps. One session container of this instance (not a claim record)
  // adopted into the registry, or removed; `claims`: the claim records by the session they
  // name, those of an adopted warm container added to `adopted_claims`.
  using claim_records = std::map<std::string, const session_containers::listed*>;
  void adopt_or_remove(const session_containers::listed& c, const claim_records& claims,
                       std::set<std::string>& adopted_claims);
  // The session its labels (`labelled`: a warm container's claim record's) describe.
  std::shared_ptr<session> session_of_labels(const session_containers::listed& c,
                                             const session_containers::listed& labelled,
                                             bool pooled) const;
  // What the last run left running in it swept, and (FUSE, in a fleet) its record claimed
  // for this holder; false when it cannot be adopted (its container then removed).
  bool settle_adopted(session& s);

  // Create and start a session container `name` for `s` (its ID in `container_id`), in
  // the place take_place() reserved (given back when it returns); the refusal when either
  // fails (the container removed).
  std::optional<refusal> create_and_start(const std::string& name, session& s,
                                          std::string& container_id);
  // The kernel a label or record names, as it is known (executor_hooks::kernel_name).
  std::optional<std::string> known_kernel(std::string_view name) const;
  // Whether the session's place in SANDBOX_MAX_SESSIONS is taken (under limit_.mutex).
  bool at_session_limit();
  // A place in SANDBOX_MAX_SESSIONS reserved under limit_.mutex (limit_.reserved) for a
  // create_and_start that follows outside it; false when none is left.
  bool take_place();
  // Rewrites a record read with `etag` to name this holder: false when another sidecar
  // wrote it first (or the store failed).
  bool claim_record(session_record record, const std::string& etag);
  session_record record_of(const session& s) const;
  const config& config_;
  const container_engine& engine_;
  const executor_hooks& executors_;
  session_containers& containers_;
  session_registry& registry_;
  archive_store& archives_;
  const workspace_mounts& mounts_;
  session_pool& pool_;
  session_limit& limit_;
  store_lease* fleet_;  // the store lease (fuse mode), else nullptr
  std::counting_semaphore<1 << 20> create_slots_;
  dormant_records records_;
};

}  // namespace dockgate::sidecar

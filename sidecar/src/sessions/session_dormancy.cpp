// Dormant sessions (session_lifecycle.hpp "Dormancy"; docs/sidecar.md "Dormant sessions"):
// a session unused past SANDBOX_DORMANT_AFTER_SECONDS (paused, or running with
// SANDBOX_DORMANT_IDLE) costs the engine nothing until a resume or its next call.
//
// Invariants it keeps:
// - Nothing is lost: the workspace is archived (and read back whole: archive_store) and the
//   session's record written before its container is removed, and the session goes
//   dormant only once the engine says the container is gone; any failure on the way
//   leaves it live as it was (paused again if it was), for the next sweep.
// - A dormant session is the same session: its id, metadata, expiry and access token (a
//   function of the id) do not change; it stays listed (Paused) and survives a restart
//   (its record in the operator's directory, dormant_records.hpp).
// - It comes back with its files and none of its processes (the engine has no memory of
//   them): the entrypoint is started again, a kernel is a new one (said at its next cell).
#include <iostream>

#include "engine/labels.hpp"
#include "fleet/store_lease.hpp"
#include "sessions/pool/pool_sessions.hpp"
#include "sessions/session.hpp"
#include "sessions/session_lifecycle.hpp"
#include "sessions/session_limit.hpp"
#include "sessions/session_registry.hpp"
#include "sessions/workspace/archive_store.hpp"
#include "sessions/workspace/workspace_mounts.hpp"

namespace dockgate::sidecar {

namespace {

// The create queue's place, given back on every path (as create_session's).
struct queue_place {
  std::counting_semaphore<1 << 20>& slots;
  ~queue_place() { slots.release(); }
};

// A FUSE workspace mounted for a waking session: unmounted again unless it came back.
struct wake_mount {
  const workspace_mounts& mounts;
  std::string sid;
  bool armed = false;
  ~wake_mount() {
    if (armed) mounts.unmount(sid);
  }
};

void say(const session& s, const std::string& what) {
  std::cerr << "dockgate-sidecar: session " << s.id << ": " << what << std::endl;
}

}  // namespace

std::optional<std::string> session_lifecycle::dormancy_refused(const session& s) const {
  if (config_.local_storage_dir.empty()) return "SANDBOX_LOCAL_STORAGE_DIR is not set";
  // Only storage reached without a client's credentials: a record on disk never holds
  // one, so S3/OSS named by a request could not be read back after a restart.
  if (s.storage && s.storage->provider != storage_provider::local)
    return "its storage (" + s.storage->where() + ") needs the client's credentials";
  return std::nullopt;
}

bool session_lifecycle::keep_archive_for_sleep(session& s) {
  // A session without storage archives into the sidecar's own place for it (new the first
  // time: anything a crash left there is discarded first).
  const bool own = !s.storage;
  if (own && !s.own_archive) {
    archives_.discard_archives(records_.own_storage(s.id), s.archive_key);
    s.restored_generation = std::string();
  }
  if (own) s.storage = records_.own_storage(s.id);
  const auto outcome = archives_.archive_workspace(s);
  if (own) s.storage.reset();
  if (outcome.status != "written") {
    // A conflict (another session wrote its key) would leave its workspace beside the key
    // a wake restores from: not good enough to remove the container over.
    say(s, "not dormant yet, its archive was not written (" + outcome.status + " " +
               outcome.reason + "); kept for the next sweep");
    return false;
  }
  if (own) s.own_archive = true;
  return true;
}

bool session_lifecycle::sleep(session& s) {
  if (s.dormant || s.terminating) return false;
  if (dormancy_refused(s)) return false;
  const auto timeout = std::chrono::seconds(config_.docker_call_timeout_s);
  const bool was_paused = s.paused;
  // A call that holds no session lock (an execd command) marks its use before it runs: one
  // that came while the workspace was archived keeps the session live.
  const auto last_used = s.last_used.load();
  auto stay_live = [&] {
    s.dormant = false;
    s.paused = was_paused && engine_.pause(s.container, timeout).status / 100 == 2;
  };
  thaw(s);  // tar runs in it
  if (!s.fuse && !keep_archive_for_sleep(s)) {
    stay_live();
    return false;
  }
  if (s.last_used.load() != last_used) {
    say(s, "not dormant: it was used while its workspace was archived");
    stay_live();
    return false;
  }
  std::string error;
  if (!records_.write(s, error)) {
    say(s, "not dormant yet, its record was not written: " + error);
    stay_live();
    return false;
  }
  const std::string container = s.container;
  containers_.remove(container);
  if (engine_.inspect(container, timeout).status != 404) {
    say(s, "not dormant yet, the engine did not remove its container");
    records_.remove(s.id, error);
    stay_live();
    return false;
  }
  if (s.pooled)
    containers_.remove(std::string(container_prefix) + s.id + std::string(claim_suffix));
  if (s.fuse) mounts_.unmount(s.id);  // the bucket keeps its workspace
  s.pooled = false;
  s.container.clear();
  s.runner.reset();
  s.kernel_driver.reset();
  s.runner_refused = false;
  s.sweep_before_runner = false;
  s.paused = true;  // listed as Paused until it comes back
  s.dormant = true;
  {
    std::lock_guard g(s.facts_mutex);
    s.isolation.reset();  // no container to report on: read again at its wake
  }
  pool_.wake();  // SANDBOX_MAX_SESSIONS has room again
  say(s, "dormant (its container removed, its workspace archived)");
  return true;
}

std::optional<refusal> session_lifecycle::remake_container(session& s) {
  if (s.image.empty()
          ? !(containers_.image_seen() || containers_.image_present())
          : engine_.image_inspect(s.image, std::chrono::seconds(config_.docker_call_timeout_s))
                    .status != 200)
    return refuse(refusal_kind::unavailable,
                  "image " + (s.image.empty() ? config_.image : s.image) + " is not on the engine");
  wake_mount mounted{mounts_, s.id};
  prepared_restore restore;
  if (s.fuse) {
    if (auto refused = mount_fuse_workspace(s)) return refused;
    mounted.armed = true;
  } else {
    if (s.own_archive) s.storage = records_.own_storage(s.id);
    restore = prepare_restore_of(s);
    if (s.own_archive) s.storage.reset();
    if (restore.report.status == "failed")
      return refuse(refusal_kind::unavailable,
                    "its archive cannot be read now (" + restore.report.error + ")");
    if (restore.report.status == "none") say(s, "its archive is gone: it comes back empty");
  }
  std::string container_id = std::string(container_prefix) + s.id;
  if (!take_place()) return refuse(refusal_kind::busy, "too many active sessions");
  if (auto failed = create_and_start(std::string(container_id), s, container_id)) return failed;
  s.container = container_id;
  if (auto refused = ready_workspace(s, false, restore)) {
    s.container.clear();
    return refused;
  }
  if (!s.fuse && restore.report.status == "failed") {  // the unpack failed
    containers_.remove(s.container);
    s.container.clear();
    return refuse(refusal_kind::failed, "its archive could not be unpacked");
  }
  mounted.armed = false;
  return std::nullopt;
}

std::optional<refusal> session_lifecycle::wake(session& s) {
  if (!s.dormant) return std::nullopt;
  if (!create_slots_.try_acquire_for(std::chrono::seconds(config_.queue_timeout_seconds)))
    return refuse(refusal_kind::busy, "session create queue is full");
  queue_place place{create_slots_};
  if (auto refused = remake_container(s)) return refused;
  if (auto refused = start_entrypoint(s)) {  // (its container removed)
    if (s.fuse) mounts_.unmount(s.id);
    s.container.clear();
    return refused;
  }
  std::string error;
  if (!records_.remove(s.id, error)) say(s, "its dormant record could not be removed: " + error);
  if (!s.kernel.empty()) s.kernel_replaced = true;
  s.last_used = std::chrono::steady_clock::now();
  s.paused = false;
  s.dormant = false;
  say(s, "back from dormancy");
  return std::nullopt;
}

void session_lifecycle::end_dormant(session& s) {
  s.terminating = true;
  if (s.own_archive) archives_.discard_archives(records_.own_storage(s.id), s.archive_key);
  std::string error;
  if (!records_.remove(s.id, error)) say(s, "its dormant record could not be removed: " + error);
  registry_.forget(s.id);
  if (s.recorded && fleet_) forget_record(s.id);
}

void session_lifecycle::adopt_dormant() {
  for (auto& s : records_.load_all()) {
    std::string error;
    if (registry_.find(s->id)) {  // adopted live: it never finished going dormant
      records_.remove(s->id, error);
      continue;
    }
    if (s->fuse && fleet_) {
      // Still this instance's (its record in the fleet's store names it), claimed for this
      // holder; otherwise another member took it over meanwhile.
      auto seen = fleet_->store().read_session(s->id);
      if (!seen.found() || seen.record->owner != config_.instance ||
          !claim_record(*seen.record, seen.etag)) {
        say(*s, "dormant here, but the fleet's store says it moved: its record here goes");
        records_.remove(s->id, error);
        continue;
      }
      s->recorded = true;
      s->generation = seen.record->generation;
    }
    s->last_used = std::chrono::steady_clock::now();
    registry_.add(std::move(s));
  }
}

}  // namespace dockgate::sidecar

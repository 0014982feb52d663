// Sessions: create, delete, the idle reaper's end of one, start-up reconciliation and the
// shutdown's end of all (docs/aivory-api.md, "Create: POST /sessions" and "Session lifecycle").
#include "sessions/session_lifecycle.hpp"

#include <simdjson.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <set>

#include "dockgate/common/workspace_id.hpp"
#include "engine/labels.hpp"
#include "fleet/sealed.hpp"
#include "fleet/store_lease.hpp"
#include "sessions/isolation/isolation.hpp"
#include "sessions/pool/pool_sessions.hpp"
#include "sessions/session.hpp"
#include "sessions/session_containers.hpp"
#include "sessions/session_limit.hpp"
#include "sessions/session_registry.hpp"
#include "sessions/workspace/archive_store.hpp"
#include "sessions/workspace/workspace_layout.hpp"
#include "sessions/workspace/workspace_mounts.hpp"
#include "util/ids.hpp"

namespace dockgate::sidecar {

using namespace std::chrono_literals;

namespace {

// A place of the create queue (SANDBOX_MAX_CONCURRENT_CREATES), given back on every path.
struct create_slot {
  std::counting_semaphore<1 << 20>& slots;
  ~create_slot() { slots.release(); }
};

// A FUSE workspace mounted for a session that is not up yet: unmounted again unless the
// session came up (armed cleared).
struct mount_guard {
  const workspace_mounts& mounts;
  std::string sid;
  bool armed = false;
  ~mount_guard() {
    if (armed) mounts.unmount(sid);
  }
};

}  // namespace

session_lifecycle::session_lifecycle(const config& c, const container_engine& engine,
                                     const executor_hooks& executors,
                                     session_containers& containers, session_registry& registry,
                                     archive_store& archives, const workspace_mounts& mounts,
                                     session_pool& pool, session_limit& limit, store_lease* fleet)
    : config_(c),
      engine_(engine),
      executors_(executors),
      containers_(containers),
      registry_(registry),
      archives_(archives),
      mounts_(mounts),
      pool_(pool),
      limit_(limit),
      fleet_(fleet),
      create_slots_(c.max_concurrent_creates > 0 ? c.max_concurrent_creates : (1 << 20)),
      records_(c) {
  if (c.dormant_after_seconds > 0 && c.local_storage_dir.empty())
    std::cerr << "dockgate-sidecar: SANDBOX_DORMANT_AFTER_SECONDS is set but "
                 "SANDBOX_LOCAL_STORAGE_DIR is not: no session goes dormant (nowhere to keep "
                 "its record)"
              << std::endl;
}

outcome<created_session> session_lifecycle::create_session(const create_request& r) {
  if (!create_slots_.try_acquire_for(std::chrono::seconds(config_.queue_timeout_seconds)))
    return refuse(refusal_kind::busy, "session create queue is full");
  create_slot slot{create_slots_};

  // A warm container when the pool has one ready (or one nearly: the one being made now,
  // as far along as a create of this request's own would be): created, started and its
  // workspace made already; it left the pool for this request alone.
  // Only a session of the pool's own image, environment and limits takes one.
  std::optional<pooled_container> warm;
  if (poolable(r)) warm = pool_.claim(std::chrono::seconds(config_.docker_call_timeout_s));
  if (auto missing = image_missing(r, warm.has_value())) return *missing;
  auto s = new_session(r, warm ? warm->sid : random_hex(16));
  // A FUSE workspace is its own storage (the bucket prefix of the archive key): mounted
  // before the container exists, unmounted again if the session does not come up.
  mount_guard mounted{mounts_, s->id};
  if (s->fuse) {
    if (auto refused = mount_fuse_workspace(*s)) return *refused;
    mounted.armed = true;
  }
  prepared_restore restore = prepare_restore_of(*s);
  std::string container_id = std::string(container_prefix) + s->id;  // the ID once created
  if (!warm)
    if (auto refused = place_session(r, *s, restore, warm, container_id)) return *refused;
  if (warm) container_id = warm->id;
  s->container = container_id;
  s->pooled = warm.has_value();
  if (warm) s->runner = std::move(warm->runner);  // under no lock yet: nobody else has s
  if (warm) s->isolation = warm->isolation;       // proved when the pool made it
  if (auto refused = ready_workspace(*s, warm.has_value(), restore)) return *refused;
  if (auto refused = start_entrypoint(*s)) return *refused;
  if (auto refused = record_session(*s, warm.has_value())) return *refused;
  s->last_used = std::chrono::steady_clock::now();
  registry_.add(s);
  mounted.armed = false;
  return created_session{s->id, std::move(restore.report)};
}

bool session_lifecycle::poolable(const create_request& r) const {
  return (!r.image || *r.image == config_.image) && r.env.empty() && r.memory_bytes == 0 &&
         r.nano_cpus == 0 && !r.egress_policy &&
         (!r.runtime || *r.runtime == default_runtime(config_));
}

std::optional<refusal> session_lifecycle::image_missing(const create_request& r, bool warm) const {
  if (warm) return std::nullopt;
  if (!r.image || *r.image == config_.image) {
    if (containers_.image_seen() || containers_.image_present()) return std::nullopt;
    return refuse(refusal_kind::unavailable, "sandbox image not available yet: " + config_.image);
  }
  // Another image of SANDBOX_IMAGES (the front checked the list): on the engine already,
  // never pulled here.
  const auto found =
      engine_.image_inspect(*r.image, std::chrono::seconds(config_.docker_call_timeout_s));
  if (found.status == 200) return std::nullopt;
  if (found.status == 404)
    return refuse(refusal_kind::unavailable, "image " + *r.image + " is not on the engine");
  return refuse(refusal_kind::engine_failed,
                "image " + *r.image + ": the engine answered " + std::to_string(found.status));
}

std::shared_ptr<session> session_lifecycle::new_session(const create_request& r,
                                                        const std::string& sid) const {
  auto s = std::make_shared<session>();
  s->id = sid;
  s->archive_key = r.archive_key ? *r.archive_key : sid;
  s->storage = r.storage;
  s->ttl_seconds = r.idle_ttl_sec && *r.idle_ttl_sec > 0
                       ? std::clamp<std::int64_t>(*r.idle_ttl_sec, 1, config_.idle_ttl_cap_seconds)
                       : 0;
  s->fuse = config_.workspace_mode == "fuse";
  if (s->fuse) s->storage.reset();  // the bucket is its storage
  s->kernel = r.kernel;
  s->image = r.image && *r.image != config_.image ? *r.image : std::string();
  s->env = r.env;
  s->entrypoint = r.entrypoint;
  s->memory_bytes = r.memory_bytes;
  s->nano_cpus = r.nano_cpus;
  s->idle_reaped = r.idle_reaped;
  s->runtime = r.runtime && *r.runtime != default_runtime(config_) ? *r.runtime : std::string();
  s->metadata = r.metadata;
  s->expires_at = r.expires_at;
  s->egress_policy = r.egress_policy;
  return s;
}

std::optional<refusal> session_lifecycle::mount_fuse_workspace(session& s) {
  if (fleet_) {
    // The key's current generation (a takeover may have moved it): never the key's own
    // prefix by default when the store cannot say which it is.
    auto current = fleet_->store().read_workspace(s.archive_key);
    if (!current.found() && !current.absent())
      return refuse(refusal_kind::unavailable,
                    "the fleet's store is unreachable: " + current.error);
    if (current.found()) s.generation = current.record->generation;
  }
  if (auto problem = mounts_.mount(s.id, fleet_store::workspace_key(s.archive_key, s.generation)))
    return refuse(refusal_kind::failed, "workspace mount failed: " + *problem);
  return std::nullopt;
}

prepared_restore session_lifecycle::prepare_restore_of(session& s) {
  // The archive is fetched and checked before the container exists, so that the
  // container's labels (or a pool container's claim record) record where the workspace
  // came from (for a restarted sidecar).
  prepared_restore restore;
  if (s.storage) {
    restore = archives_.prepare_restore(*s.storage, s.archive_key);
    s.restored_generation = restore.generation;
  } else {
    s.restored_generation = std::string();
  }
  s.restore_status = restore.report.status;
  return restore;
}

std::optional<refusal> session_lifecycle::place_session(const create_request& r, session& s,
                                                        prepared_restore& restore,
                                                        std::optional<pooled_container>& warm,
                                                        std::string& container_id) {
  if (take_place()) return create_and_start(std::string(container_id), s, container_id);
  // The room left may be held by warm containers (ready, or being made since this request
  // looked): one of those serves it; otherwise the limit is reached.
  if (poolable(r)) warm = pool_.claim(std::chrono::seconds(config_.docker_call_timeout_s));
  if (!warm) return refuse(refusal_kind::busy, "too many active sessions");
  // Its session ID is the one its name and labels carry: the request's is not used yet
  // (nothing was created or mounted under it: the pool serves tmpfs mode only).
  s.id = warm->sid;
  if (!r.archive_key) {
    // Without an archive key the workspace's key is the session ID: looked up again.
    s.archive_key = warm->sid;
    if (s.storage) restore = prepare_restore_of(s);
  }
  return std::nullopt;
}

std::optional<refusal> session_lifecycle::ready_workspace(session& s, bool warm,
                                                          prepared_restore& restore) {
  const std::string& id = s.container;
  if (!warm) {  // (a warm one was given its workspace, and its runner, in the pool)
    // The runner the first cell would start is started now and makes the folders: the
    // session's first answer waits for one exec, not two.
    std::string probe;
    if (auto error = containers_.make_workspace(id, s.kernel.empty() ? &s.runner : nullptr, &probe);
        !error.empty()) {
      containers_.remove(id);
      return refuse(refusal_kind::failed, error);
    }
    // Before anything of the client's goes in: a container whose walls fell is removed now.
    if (auto refused = prove_isolation(s, probe, s.dormant ? "wake" : "create")) return refused;
  }
  if (!s.kernel.empty()) {
    std::string error = executors_.start_kernel ? executors_.start_kernel(s)
                                                : std::string("no kernel can be started here");
    if (!error.empty()) {
      containers_.remove(id);
      if (warm) containers_.remove(id + std::string(claim_suffix));
      return refuse(refusal_kind::failed, error);
    }
  }
  // Inputs are staged afresh for every run: emptied again only where an archive may have
  // brought some back (a new workspace has just made them, empty).
  const bool unpacking = restore.plan.members > 0 && (restore.report.status == "restored" ||
                                                      restore.report.status == "partial");
  archives_.unpack_restore(id, restore);
  s.restore_status = restore.report.status;
  if (unpacking) {
    auto reset = containers_.run_in(id, {"sh", "-c", std::string(reset_inputs_script)}, 30s);
    if (!reset.started || reset.exit_code != 0) {
      containers_.remove(id);
      return refuse(refusal_kind::failed, "reset inputs failed: " + reset.stderr_data);
    }
  }
  return std::nullopt;
}

std::optional<refusal> session_lifecycle::record_session(session& s, bool warm) {
  if (warm) {
    // The claim record, before the answer: once the client knows the session, a restarted
    // sidecar adopts it (a kill before this point removes the container at the next
    // start: no answer named it, and its workspace is the archive it came from).
    if (auto error = pool_.write_claim_record(s); !error.empty()) {
      remove_session_containers(s);
      return refuse(refusal_kind::failed, error);
    }
  }
  if (s.fuse && fleet_) {
    // The record, before the answer: from now on any sidecar of the fleet can serve it.
    auto wrote = fleet_->store().write_session(record_of(s), "");
    if (!wrote.ok()) {
      containers_.remove(s.container);
      return refuse(refusal_kind::failed, "session record failed: " + wrote.describe());
    }
    s.recorded = true;
  }
  return std::nullopt;
}

outcome<deleted_session> session_lifecycle::delete_session(const delete_request& r) {
  deleted_session out;
  auto s = registry_.find(r.session_id);
  if (!s) {
    out.archive = end_unheld_session(r);
    return out;
  }
  s->terminating = true;  // a racing /exec gets a fast 404
  std::unique_lock lock(s->lock, std::defer_lock);
  if (!lock.try_lock_for(std::chrono::seconds(config_.queue_timeout_seconds))) {
    s->terminating = false;
    return refuse(refusal_kind::busy, "session is busy");
  }
  thaw(*s);
  out.archive = end_held_session(*s, r);
  return out;
}

std::optional<refusal> session_lifecycle::start_entrypoint(session& s) {
  const auto& entrypoint = s.entrypoint;
  if (entrypoint.empty()) return std::nullopt;
  // Found first (127: not in the image, the create refused), then started detached: its
  // own session and group, stdin from /dev/null, its output to a file under /tmp.
  std::vector<std::string> cmd = {
      "sh", "-c",
      "command -v \"$1\" >/dev/null 2>&1 || exit 127; cd /workspace 2>/dev/null; "
      "setsid \"$@\" </dev/null >/tmp/.dockgate-entrypoint.log 2>&1 &",
      "dockgate-entrypoint"};
  cmd.insert(cmd.end(), entrypoint.begin(), entrypoint.end());
  const auto started = containers_.run_in(s.container, std::move(cmd), 30s);
  if (started.started && started.exit_code == 0) return std::nullopt;
  containers_.remove(s.container);  // (a warm one's claim record is not written yet)
  if (started.started && started.exit_code == 127)
    return refuse(refusal_kind::invalid,
                  "entrypoint: " + entrypoint.front() + " is not a program of the image");
  return refuse(
      refusal_kind::failed,
      "entrypoint did not start: " +
          (started.started ? "exit " + std::to_string(started.exit_code) + " " + started.stderr_data
                           : started.error));
}

void session_lifecycle::thaw(session& s) {
  // A frozen container runs no exec: the archive's and the sweep's need it thawed (its
  // removal does not, but an unpause the engine refuses changes nothing for it).
  if (!s.paused || s.dormant) return;
  engine_.unpause(s.container, std::chrono::seconds(config_.docker_call_timeout_s));
  s.paused = false;
}

std::optional<archive_outcome> session_lifecycle::end_held_session(session& s,
                                                                   const delete_request& r) {
  std::optional<archive_outcome> archive;
  if (s.dormant) {
    // Its workspace is its archive already (written when it went dormant): a discard
    // removes it, as a live session's; otherwise it is what a DELETE would have written.
    if (r.discard && (s.storage || r.storage))
      archive = archives_.discard_archives(s.storage ? *s.storage : *r.storage,
                                           r.archive_key ? *r.archive_key : s.archive_key);
    else if (s.storage && !s.fuse)
      archive = archive_outcome{"written", s.storage->archive_key(s.archive_key), "", false};
    end_dormant(s);
    return archive;
  }
  // The session's storage is the one it was created with; a block here may only bring
  // back the credentials of that same place (a session adopted after a restart).
  if (r.storage_given && r.storage && s.storage && !s.storage->has_credentials &&
      s.storage->same_place(*r.storage))
    s.storage = r.storage;
  if (r.discard) {
    const auto& where = s.storage ? s.storage : r.storage;
    if (where)
      archive = archives_.discard_archives(*where, r.archive_key ? *r.archive_key : s.archive_key);
  } else if (s.storage) {
    archive = archives_.archive_workspace(s);
  }
  remove_session_containers(s);
  return archive;
}

std::optional<archive_outcome> session_lifecycle::end_unheld_session(const delete_request& r) {
  std::optional<archive_outcome> archive;
  if (r.discard && r.archive_key && r.storage)
    archive = archives_.discard_archives(*r.storage, *r.archive_key);
  // Idempotent, also for a session a restart forgot — but never another instance's.
  const std::string name = std::string(container_prefix) + r.session_id;
  auto inspect = engine_.inspect(name, 20s);
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  std::string_view instance = "default";
  if (inspect.status == 200 && p.parse(inspect.body).get(doc) == simdjson::SUCCESS) {
    if (doc["Config"]["Labels"][instance_label].get_string().get(instance) != simdjson::SUCCESS)
      instance = "default";
    if (instance == config_.instance) {
      containers_.remove(name);
      containers_.remove(name + std::string(claim_suffix));  // if it came from the warm pool
    }
  }
  if (config_.workspace_mode == "fuse" && (inspect.status == 404 || instance == config_.instance))
    mounts_.unmount(r.session_id);
  // A session of the fleet's store this sidecar took over for this DELETE (fleet.cpp):
  // its record names this instance now, and goes.
  if (fleet_) forget_record(r.session_id);
  return archive;
}

// A session's end on the engine: its container removed (a warm one is never returned to
// the pool), its FUSE mount cleaned, the session forgotten, then its claim record removed
// (after the container: a kill between the two leaves a record without its container,
// which the next start removes).
void session_lifecycle::remove_session_containers(const session& s, bool handed_over) {
  containers_.remove(s.container);
  if (s.own_archive) archives_.discard_archives(records_.own_storage(s.id), s.archive_key);
  if (config_.dormant_after_seconds > 0 || s.own_archive) {
    std::string error;  // a record left by a wake that could not remove it
    records_.remove(s.id, error);
  }
  if (s.fuse) mounts_.unmount(s.id);
  registry_.forget(s.id);
  if (s.recorded && !handed_over) forget_record(s.id);
  if (s.pooled)
    containers_.remove(std::string(container_prefix) + s.id + std::string(claim_suffix));
  pool_.wake();  // SANDBOX_MAX_SESSIONS has room again
}

namespace {
const std::string* label_of(const session_containers::listed& c, std::string_view name) {
  auto it = c.labels.find(std::string(name));
  return it == c.labels.end() ? nullptr : &it->second;
}
}  // namespace

void session_lifecycle::reconcile() {
  auto mine = containers_.own(true);
  if (!mine) return;
  // Claim records (never started), by the session they name.
  claim_records claims;
  for (const auto& c : *mine) {
    const std::string* sid = label_of(c, session_label);
    if (label_of(c, claim_label) && sid) claims[*sid] = &c;
  }
  std::set<std::string> adopted_claims;
  for (const auto& c : *mine)
    if (!label_of(c, claim_label)) adopt_or_remove(c, claims, adopted_claims);
  for (const auto& [sid, record] : claims)
    if (!adopted_claims.contains(sid)) containers_.remove(record->id);
  adopt_dormant();
}

void session_lifecycle::adopt_or_remove(const session_containers::listed& c,
                                        const claim_records& claims,
                                        std::set<std::string>& adopted_claims) {
  const std::string* sid = label_of(c, session_label);
  if (!sid || !valid_session_id(*sid)) return;
  // A warm pool container's labels are not a session's; its claim record's are.
  const session_containers::listed* labelled = &c;
  const bool pooled = label_of(c, pool_label) != nullptr;
  if (pooled) {
    auto record = claims.find(*sid);
    const std::string* claimed =
        record == claims.end() ? nullptr : label_of(*record->second, claim_label);
    if (c.state != "running" || !claimed || *claimed != c.id) {
      // Never claimed, or claimed by a request that a kill cut short before its record
      // was written (as a create cut short): nothing of a session's is lost with it.
      containers_.remove(c.id);
      return;
    }
    labelled = record->second;
    adopted_claims.insert(*sid);
  }
  // A paused one (a client's pause, session_controls) is a live session: thawed for the
  // sweep, frozen again after it.
  const bool paused = c.state == "paused";
  if (c.state != "running" && !paused) {
    // A stopped session container of an earlier run: its tmpfs workspace went with it.
    // Removed without archiving, so that the last good archive under its key (if any)
    // is not overwritten by an empty one; a FUSE workspace's mount is cleaned.
    containers_.remove(c.id);
    if (label_of(*labelled, common::workspace_label)) mounts_.unmount(*sid);
    return;
  }
  auto s = session_of_labels(c, *labelled, pooled);
  const auto timeout = std::chrono::seconds(config_.docker_call_timeout_s);
  if (paused && engine_.unpause(c.id, timeout).status / 100 != 2) {
    std::cerr << "dockgate-sidecar: session " << *sid
              << ": paused and the engine would not thaw it; left as it is" << std::endl;
    return;
  }
  if (!settle_adopted(*s)) return;
  if (paused) s->paused = engine_.pause(c.id, timeout).status / 100 == 2;
  if (s->fuse) s->storage.reset();                  // the bucket is its storage
  s->last_used = std::chrono::steady_clock::now();  // the TTL restarts at boot
  registry_.add(std::move(s));
}

namespace {
// What a client said of the session beside its code (session.hpp), as its labels keep it.
void read_client_facts(const session_containers::listed& labelled, session& s) {
  if (const std::string* image = label_of(labelled, image_label)) s.image = *image;
  if (const std::string* runtime = label_of(labelled, runtime_label)) s.runtime = *runtime;
  if (const std::string* at = label_of(labelled, created_label))
    s.created_at = std::chrono::system_clock::time_point(
        std::chrono::seconds(std::strtoll(at->c_str(), nullptr, 10)));
  if (const std::string* idle = label_of(labelled, idle_reaped_label)) s.idle_reaped = *idle != "0";
  if (const std::string* at = label_of(labelled, expires_label))
    s.expires_at = std::chrono::system_clock::time_point(
        std::chrono::seconds(std::strtoll(at->c_str(), nullptr, 10)));
  for (const auto& [name, value] : labelled.labels)
    if (name.starts_with(metadata_label_prefix))
      s.metadata[name.substr(metadata_label_prefix.size())] = value;
  // Unreadable: no name at all (never the operator's whole list in its place).
  if (const std::string* policy = label_of(labelled, egress_policy_label))
    s.egress_policy = parse_egress_policy_text(*policy).value_or(egress_rules{});
}
}  // namespace

std::shared_ptr<session> session_lifecycle::session_of_labels(
    const session_containers::listed& c, const session_containers::listed& labelled,
    bool pooled) const {
  auto label = [&](std::string_view name) { return label_of(labelled, name); };
  auto s = std::make_shared<session>();
  s->id = *label_of(c, session_label);
  s->container = c.id;
  const std::string* key = label(archive_label);
  s->archive_key = key && valid_archive_key(*key) ? *key : s->id;
  if (const std::string* where = label(storage_label)) {
    s->storage = storage_from_label(*where, config_);
    if (!s->storage)
      std::cerr << "dockgate-sidecar: session " << s->id
                << ": unreadable storage label, its workspace will not be archived" << std::endl;
  } else if (!label(instance_label)) {
    // A container of a sidecar before storage labels: the operator's directory, as then.
    s->storage = choose_storage(R"({"provider":"local"})", config_).spec;
  }
  if (const std::string* ttl = label(ttl_label))
    s->ttl_seconds = std::clamp<std::int64_t>(std::strtoll(ttl->c_str(), nullptr, 10), 0,
                                              config_.idle_ttl_cap_seconds);
  if (const std::string* status = label(restore_label)) s->restore_status = *status;
  if (const std::string* generation = label(generation_label))
    s->restored_generation = *generation;
  else if (!label(instance_label))
    s->restored_generation = std::nullopt;  // unknown: never overwrite
  s->fuse = label(common::workspace_label) != nullptr;
  s->pooled = pooled;
  read_client_facts(labelled, *s);
  if (const std::string* k = label(kernel_label)) {
    // Its kernel went with the last run (the sweep below ends it): the next cell starts
    // a new one and says so.
    if (auto name = known_kernel(*k)) s->kernel = *name;
    s->kernel_replaced = true;
  }
  return s;
}

bool session_lifecycle::settle_adopted(session& s) {
  // The last run may have died mid-cell, its runner with it: the cell's processes may
  // be alive. They end now (nothing a cell starts outlives its answer, and none may
  // meet the session's next runner: cells.cpp). One the sweep could not end ends the
  // container; when the host could not say, the next cell sweeps again first.
  const auto swept = containers_.sweep_cell_processes(s.container, s.runtime);
  if (swept == session_containers::sweep_outcome::tainted) {
    std::cerr << "dockgate-sidecar: session " << s.id
              << ": a process left by a cell outlived the kill sweep; its container is removed"
              << std::endl;
    containers_.remove(s.container);
    if (s.pooled)
      containers_.remove(std::string(container_prefix) + s.id + std::string(claim_suffix));
    if (s.fuse) mounts_.unmount(s.id);
    return false;
  }
  s.sweep_before_runner = swept != session_containers::sweep_outcome::clean;
  if (!prove_adopted(s)) {
    containers_.remove(s.container);
    if (s.pooled)
      containers_.remove(std::string(container_prefix) + s.id + std::string(claim_suffix));
    if (s.fuse) mounts_.unmount(s.id);
    return false;
  }
  if (s.fuse && fleet_) {
    // Adopted only if its record still names this instance and is rewritten to name this
    // holder before another sidecar's takeover lands (If-Match): otherwise it moved while
    // this instance was away (or ended), and its container here goes.
    auto seen = fleet_->store().read_session(s.id);
    if (!seen.found() || seen.record->owner != config_.instance ||
        !claim_record(*seen.record, seen.etag)) {
      std::cerr << "dockgate-sidecar: session " << s.id
                << (seen.found() ? " is held by instance " + seen.record->owner
                                 : std::string(" has no record in the fleet's store"))
                << " now: its container here is removed" << std::endl;
      containers_.remove(s.container);
      mounts_.unmount(s.id);
      return false;
    }
    s.recorded = true;
    s.generation = seen.record->generation;
  }
  return true;
}

std::optional<std::string> session_lifecycle::known_kernel(std::string_view name) const {
  if (!executors_.kernel_name) return std::nullopt;
  return executors_.kernel_name(name);
}

bool session_lifecycle::take_place() {
  std::lock_guard g(limit_.mutex);
  if (at_session_limit()) return false;
  ++limit_.reserved;
  return true;
}

bool session_lifecycle::at_session_limit() {
  if (config_.max_sessions <= 0) return false;
  // Running containers of this instance on the daemon (the gate confines the list to its
  // profile's own; the instance label to this sidecar's), warm ones included, and those
  // being made (limit_.reserved).
  std::int64_t live = 0;
  if (auto mine = containers_.own(false))
    live = static_cast<std::int64_t>(mine->size());
  else
    live = static_cast<std::int64_t>(registry_.size());
  return live + limit_.reserved.load() >= config_.max_sessions;
}

std::optional<refusal> session_lifecycle::create_and_start(const std::string& name, session& s,
                                                           std::string& container_id) {
  // The place take_place() reserved, held until the container runs or is gone: outside
  // the limit's mutex, so that concurrent creates overlap at the engine.
  limit_place reserved{limit_.reserved};
  const std::string body = containers_.create_body(s.id, s);
  s.asked_of_engine = std::make_shared<const isolation_asked>(isolation_asked_of(body));
  auto created = engine_.create(name, body, 60s);
  if (created.status != 201) {
    containers_.remove_unused_network(s.id);
    return refuse(refusal_kind::failed,
                  "docker run failed: " + (created.status ? created.body : created.error));
  }
  {
    simdjson::dom::parser p;
    simdjson::dom::element doc;
    std::string_view id;
    if (p.parse(created.body).get(doc) == simdjson::SUCCESS &&
        doc["Id"].get_string().get(id) == simdjson::SUCCESS)
      container_id = std::string(id);
  }
  auto started = engine_.start(container_id, 60s);
  if (started.status != 204 && started.status != 304) {
    containers_.remove(container_id);
    return refuse(refusal_kind::failed,
                  "docker run failed: " + (started.status ? started.body : started.error));
  }
  return std::nullopt;
}

session_record session_lifecycle::record_of(const session& s) const {
  session_record r;
  r.session_id = s.id;
  r.archive_key = s.archive_key;
  r.storage = fleet_->store().workspace_place(s.archive_key, s.generation);
  r.generation = s.generation;
  r.idle_ttl_sec = s.ttl_seconds;
  r.kernel = s.kernel;
  if (s.egress_policy) r.egress_policy = egress_policy_text(*s.egress_policy);
  r.owner = config_.instance;
  r.holder = fleet_->holder();
  r.created_at = std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                                    std::chrono::system_clock::now().time_since_epoch())
                                    .count());
  write_sealed_facts(s, r);
  return r;
}

void session_lifecycle::write_sealed_facts(const session& s, session_record& r) const {
  const bool none = s.image.empty() && !s.memory_bytes && !s.nano_cpus && s.idle_reaped &&
                    s.entrypoint.empty() && s.env.empty() && s.metadata.empty() && !s.expires_at &&
                    s.runtime.empty();
  if (none) return;  // an Aivory session's record stays as it was
  std::string j = "{\"image\":";
  client::append_json_string(j, s.image);
  j += ",\"runtime\":";
  client::append_json_string(j, s.runtime);
  j += ",\"memory_bytes\":" + std::to_string(s.memory_bytes);
  j += ",\"nano_cpus\":" + std::to_string(s.nano_cpus);
  j += std::string(",\"idle_reaped\":") + (s.idle_reaped ? "true" : "false");
  j += ",\"entrypoint\":" + client::json_string_array(s.entrypoint);
  j += ",\"env\":" + client::json_string_array(s.env);
  {
    std::lock_guard g(s.facts_mutex);
    j += ",\"expires_at\":" + std::to_string(s.expires_at
                                                 ? std::chrono::duration_cast<std::chrono::seconds>(
                                                       s.expires_at->time_since_epoch())
                                                       .count()
                                                 : 0);
    j += ",\"metadata\":{";
    bool first = true;
    for (const auto& [k, v] : s.metadata) {
      if (!first) j += ',';
      first = false;
      client::append_json_string(j, k);
      j += ':';
      client::append_json_string(j, v);
    }
  }
  r.facts_sealed = seal(config_.fleet_key, s.id, j + "}}");
}

namespace {
// The strings of a JSON array (nullopt: not an array of strings).
std::optional<std::vector<std::string>> strings_of(simdjson::dom::element e) {
  simdjson::dom::array a;
  if (e.get_array().get(a) != simdjson::SUCCESS) return std::nullopt;
  std::vector<std::string> out;
  for (auto v : a) {
    std::string_view text;
    if (v.get_string().get(text) != simdjson::SUCCESS) return std::nullopt;
    out.emplace_back(text);
  }
  return out;
}
}  // namespace

std::optional<refusal> session_lifecycle::read_sealed_facts(const session_record& r,
                                                            session& s) const {
  if (r.facts_sealed.empty()) return std::nullopt;
  auto refused = [&](std::string why) {
    return refuse(refusal_kind::unavailable, "session " + s.id + ": " + why + "; not taken over");
  };
  // Opened only under the fleet's key for this very session: a record a store writer made
  // or changed is refused, never run with an image, entrypoint or environment of its own.
  auto json = unseal(config_.fleet_key, s.id, r.facts_sealed);
  if (!json) return refused("its sealed facts do not open under this fleet's key");
  simdjson::dom::parser parser;
  simdjson::dom::object o;
  if (parser.parse(*json).get_object().get(o) != simdjson::SUCCESS)
    return refused("its sealed facts are not an object");
  std::string_view image;
  std::int64_t expires = 0;
  bool reaped = true;
  simdjson::dom::object metadata;
  auto entrypoint = strings_of(o["entrypoint"]);
  auto env = strings_of(o["env"]);
  if (o["image"].get_string().get(image) != simdjson::SUCCESS ||
      o["memory_bytes"].get_int64().get(s.memory_bytes) != simdjson::SUCCESS ||
      o["nano_cpus"].get_int64().get(s.nano_cpus) != simdjson::SUCCESS ||
      o["idle_reaped"].get_bool().get(reaped) != simdjson::SUCCESS ||
      o["expires_at"].get_int64().get(expires) != simdjson::SUCCESS ||
      o["metadata"].get_object().get(metadata) != simdjson::SUCCESS || !entrypoint || !env)
    return refused("its sealed facts are incomplete");
  // This member's own rules still hold: its images, its caps (the fleet's members may
  // differ; the stricter one serves).
  s.image = std::string(image);
  if (!s.image.empty() && s.image != config_.image &&
      std::find(config_.images.begin(), config_.images.end(), s.image) == config_.images.end())
    return refused("its image " + s.image + " is not one of this sidecar's (SANDBOX_IMAGES)");
  // Its runtime (absent in a record older than the field: the default), one of this
  // member's: never brought back on another.
  std::string_view runtime;
  if (o["runtime"].get_string().get(runtime) == simdjson::SUCCESS) s.runtime = runtime;
  if (!s.runtime.empty() && s.runtime != default_runtime(config_))
    if (auto why = runtime_refusal(config_, s.runtime)) return refused("its " + *why);
  if (s.memory_bytes < 0 || s.memory_bytes >= config_.memory_bytes) s.memory_bytes = 0;
  if (s.nano_cpus < 0 || s.nano_cpus >= config_.nano_cpus) s.nano_cpus = 0;
  s.idle_reaped = reaped;
  s.entrypoint = std::move(*entrypoint);
  s.env = std::move(*env);
  if (expires) s.expires_at = std::chrono::system_clock::time_point(std::chrono::seconds(expires));
  for (auto [k, v] : metadata) {
    std::string_view text;
    if (v.get_string().get(text) == simdjson::SUCCESS) s.metadata[std::string(k)] = text;
  }
  return std::nullopt;
}

std::optional<refusal> session_lifecycle::refresh_record(const std::string& sid) {
  auto s = registry_.find(sid);
  if (!s || !s->recorded || !fleet_) return std::nullopt;
  auto& store = fleet_->store();
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto seen = store.read_session(sid);
    if (seen.absent()) return std::nullopt;
    if (!seen.found())
      return refuse(refusal_kind::unavailable, "the fleet's store is unreachable: " + seen.error);
    if (seen.record->owner != config_.instance) return std::nullopt;  // moved on: not ours
    session_record r = *seen.record;
    write_sealed_facts(*s, r);
    auto wrote = store.write_session(r, seen.etag);
    if (wrote.ok()) return std::nullopt;
    if (wrote.status != 412 && wrote.status != 404)
      return refuse(refusal_kind::unavailable,
                    "changed here, but the fleet's record could not be written (ask again): " +
                        wrote.describe());
  }
  return refuse(refusal_kind::unavailable, "the session's record kept moving; ask again");
}

std::optional<refusal> session_lifecycle::image_of_record_missing(const session& s) const {
  if (s.image.empty()) return std::nullopt;  // SANDBOX_IMAGE: checked with the others
  create_request r;
  r.image = s.image;
  return image_missing(r, false);
}

bool session_lifecycle::claim_record(session_record record, const std::string& etag) {
  record.owner = config_.instance;
  record.holder = fleet_->holder();
  record.handed_over.clear();
  return fleet_->store().write_session(record, etag).ok();
}

void session_lifecycle::forget_record(std::string_view sid) {
  auto seen = fleet_->store().read_session(sid);
  if (seen.found() && seen.record->owner == config_.instance) {
    auto gone = fleet_->store().delete_session(sid);
    if (!gone.ok())
      std::cerr << "dockgate-sidecar: the record of session " << sid
                << " could not be removed: " << gone.describe() << std::endl;
  }
}

std::optional<refusal> session_lifecycle::take_over(const session_record& record) {
  if (!create_slots_.try_acquire_for(std::chrono::seconds(config_.queue_timeout_seconds)))
    return refuse(refusal_kind::busy, "session create queue is full");
  create_slot slot{create_slots_};
  if (!containers_.image_seen() && !containers_.image_present())
    return refuse(refusal_kind::unavailable, "sandbox image not available yet: " + config_.image);
  auto s = std::make_shared<session>();
  s->id = record.session_id;
  s->archive_key = valid_archive_key(record.archive_key) ? record.archive_key : s->id;
  s->ttl_seconds = std::clamp<std::int64_t>(record.idle_ttl_sec, 0, config_.idle_ttl_cap_seconds);
  s->fuse = true;
  s->recorded = true;
  s->restored_generation = std::string();
  s->generation = record.generation;
  if (auto refused = read_sealed_facts(record, *s)) return refused;
  if (auto missing = image_of_record_missing(*s)) return missing;
  // Its own list, as its record keeps it (unreadable: no name at all).
  if (record.egress_policy)
    s->egress_policy = parse_egress_policy_text(*record.egress_policy).value_or(egress_rules{});
  if (auto k = known_kernel(record.kernel)) {
    s->kernel = *k;
    s->kernel_replaced = true;  // its kernel's state went with its last host
  }
  const std::string name = std::string(container_prefix) + s->id;
  // The workspace is the record's generation (a new one, copied from the last holder's,
  // when that holder may still be writing: fleet.cpp): mounted here before the container.
  mounts_.unmount(s->id);  // a mount left by an earlier hold of it on this host
  if (auto problem =
          mounts_.mount(s->id, fleet_store::workspace_key(s->archive_key, s->generation)))
    return refuse(refusal_kind::failed, "workspace mount failed: " + *problem);
  mount_guard mounted{mounts_, s->id, true};
  std::string container_id = name;
  if (!take_place()) return refuse(refusal_kind::busy, "too many active sessions");
  // A container left here by an earlier hold of this session (this instance's: the gate
  // lists only the profile's own) goes first.
  containers_.remove(name);
  if (auto failed = create_and_start(name, *s, container_id)) return *failed;
  s->container = container_id;
  prepared_restore none;  // the workspace is the mounted generation: nothing to unpack
  if (auto refused = ready_workspace(*s, false, none)) return *refused;
  if (auto refused = start_entrypoint(*s)) return *refused;  // its main program, anew
  s->last_used = std::chrono::steady_clock::now();
  registry_.add(s);
  mounted.armed = false;
  return std::nullopt;
}

void session_lifecycle::reap(session& s) {
  if (s.dormant) return end_dormant(s);
  s.terminating = true;
  thaw(s);
  if (s.storage) {
    const auto outcome = archives_.archive_workspace(s);
    if (outcome.status == "not_written" && outcome.retry) {
      // Storage unreachable (or its credentials unknown): the workspace stays in its
      // container until a later sweep (or a DELETE) can archive it.
      s.terminating = false;
      return;
    }
  }
  remove_session_containers(s);
}

std::size_t session_lifecycle::end_all_sessions() {
  const auto all = registry_.all();
  std::size_t kept = 0;
  for (const auto& s : all) {
    std::unique_lock lock(s->lock);              // a request in flight finishes first
    if (s->terminating || s->dormant) continue;  // a dormant one's record stays for the next start
    s->terminating = true;
    if (s->storage) {
      const auto outcome = archives_.archive_workspace(*s);
      if (outcome.status == "not_written" && outcome.retry) {
        // Storage unreachable: the container stays, and the next start adopts it.
        std::cerr << "dockgate-sidecar: session " << s->id
                  << " kept for the next start: " << outcome.reason << std::endl;
        ++kept;
        continue;
      }
    }
    // A fleet member hands its sessions over: their records stay in the store and the
    // next call for each, on any sidecar of the fleet, takes it over (the store lease is
    // released last, so at once) — in the same generation once the record says its
    // container is gone (mark_handed_over), else into a new one.
    const bool handing_over = s->recorded && !config_.fleet_url.empty();
    remove_session_containers(*s, handing_over);
    if (handing_over && fleet_) mark_handed_over(*s);
  }
  return kept;
}

void session_lifecycle::mark_handed_over(const session& s) {
  // The daemon's word that the container is gone (a removal that failed leaves it
  // running, and its cell writing): without it the record stays unmarked.
  auto inspect = engine_.inspect(s.container, 20s);
  if (inspect.status != 404) {
    std::cerr << "dockgate-sidecar: session " << s.id
              << ": its container may still run here; handed over unmarked (a takeover "
                 "fences it by generation)"
              << std::endl;
    return;
  }
  auto seen = fleet_->store().read_session(s.id);
  if (!seen.found() || seen.record->owner != config_.instance ||
      seen.record->holder != fleet_->holder() || seen.record->copy_from)
    return;
  session_record marked = *seen.record;
  marked.handed_over = fleet_->holder();
  fleet_->store().write_session(marked, seen.etag);  // a 412: it moved on, nothing to mark
}

std::size_t session_lifecycle::fence() {
  std::size_t fenced = 0;
  for (const auto& s : registry_.all()) {
    if (!s->fuse || s->dormant) continue;
    s->terminating = true;  // a racing call gets a fast 404
    if (fleet_) {
      // A successor of this instance on this engine (it holds the instance lease now, and
      // adopted the container: its record names that process's holder) keeps it.
      auto seen = fleet_->store().read_session(s->id);
      if (seen.found() && seen.record->owner == config_.instance &&
          seen.record->holder != fleet_->holder()) {
        std::cerr << "dockgate-sidecar: session " << s->id
                  << " is held by another holder of this instance: left to it" << std::endl;
        continue;
      }
    }
    containers_.remove(s->container);
    mounts_.unmount(s->id);
    ++fenced;
  }
  return fenced;
}

}  // namespace dockgate::sidecar

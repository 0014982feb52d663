// Sessions: create, delete, the idle reaper and start-up reconciliation (seed §1.4, §1.7).
#include "dockgate/sidecar/service.hpp"

#include <simdjson.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>

#include "dockgate/common/workspace_id.hpp"
#include "dockgate/sidecar/archive.hpp"
#include "pool.hpp"
#include "request.hpp"
#include "runner.hpp"

namespace dockgate::sidecar {

using namespace std::chrono_literals;

std::string service::create_body(const std::string& sid, const session& s, body_kind kind,
                                 const std::string& claim_of) const {
  // The hardened host config of the seed (§1.10). The gate's sandbox profile forces all
  // of it anyway; asking for it too keeps the sidecar honest against a looser profile.
  // A warm pool container gets exactly this body (the host config is the same whatever
  // `kind` is); only its labels differ: none of a request's, since none is known yet.
  std::string b = "{\"Image\":";
  client::append_json_string(b, config_.image);
  b += R"(,"Cmd":["sleep","infinity"],"User":)";
  client::append_json_string(b, keepalive_user);
  b += R"(,"WorkingDir":"/workspace","Labels":{)";
  auto label = [&b](std::string_view name, std::string_view value) {
    if (b.back() != '{') b += ',';
    client::append_json_string(b, name);
    b += ':';
    client::append_json_string(b, value);
  };
  label(created_label, std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                                          std::chrono::system_clock::now().time_since_epoch())
                                          .count()));
  label(session_label, sid);
  label(instance_label, config_.instance);
  if (kind == body_kind::pool) label(pool_label, "1");
  if (kind == body_kind::claim) label(claim_label, claim_of);
  if (kind != body_kind::pool) {
    label(archive_label, s.archive_key);
    if (s.storage) label(storage_label, s.storage->label());
    if (s.ttl_seconds > 0) label(ttl_label, std::to_string(s.ttl_seconds));
    label(restore_label, s.restore_status);
    if (s.restored_generation) label(generation_label, *s.restored_generation);
    if (s.fuse) label(common::workspace_label, sid);  // the gate binds <root>/<sid> at /workspace
  }
  b += "},\"HostConfig\":{\"NetworkMode\":\"none\",\"Memory\":" + std::to_string(config_.memory_bytes) +
       ",\"MemorySwap\":" + std::to_string(config_.memory_bytes) + ",\"NanoCpus\":" + std::to_string(config_.nano_cpus) +
       ",\"PidsLimit\":" + std::to_string(config_.pids_limit) + ",\"Ulimits\":[{\"Name\":\"nofile\",\"Soft\":" +
       std::to_string(config_.nofile_soft) + ",\"Hard\":" + std::to_string(config_.nofile_hard) +
       "}],\"Init\":true,\"SecurityOpt\":[\"no-new-privileges\"],\"CapDrop\":[\"ALL\"]";
  if (config_.read_only_rootfs) {
    b += ",\"ReadonlyRootfs\":true,\"Tmpfs\":{\"/tmp\":\"rw,nosuid,nodev,size=" + config_.tmpfs_size +
         "\",\"/home/sandbox\":\"rw,nosuid,nodev,size=" + config_.tmpfs_size + "\"";
    if (!s.fuse) b += ",\"/workspace\":\"rw,nosuid,nodev,size=" + config_.workspace_size + ",mode=1777\"";
    b += "}";
  }
  if (!config_.disk_size.empty()) b += ",\"StorageOpt\":{\"size\":\"" + config_.disk_size + "\"}";
  return b + "}}";
}

std::optional<std::vector<service::session_container>> service::own_containers(bool all) {
  // Every session container the gate lets us see, then only this instance's: a container
  // without the instance label predates it and belongs to the "default" instance.
  auto list = docker_.call("GET", std::string("/containers/json?") + (all ? "all=1&" : "") +
                                      "filters=%7B%22label%22%3A%5B%22" + std::string(session_label) + "%22%5D%7D",
                           {}, 20s);
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  simdjson::dom::array arr;
  if (list.status != 200 || p.parse(list.body).get(doc) != simdjson::SUCCESS || doc.get_array().get(arr) != simdjson::SUCCESS)
    return std::nullopt;
  std::vector<session_container> out;
  for (simdjson::dom::element c : arr) {
    session_container sc;
    std::string_view id, state;
    simdjson::dom::object labels;
    if (c["Id"].get_string().get(id) != simdjson::SUCCESS || c["Labels"].get_object().get(labels) != simdjson::SUCCESS) continue;
    if (c["State"].get_string().get(state) == simdjson::SUCCESS) sc.state = std::string(state);
    for (auto [k, v] : labels) {
      std::string_view text;
      if (v.get_string().get(text) == simdjson::SUCCESS) sc.labels.emplace(std::string(k), std::string(text));
    }
    auto inst = sc.labels.find(std::string(instance_label));
    if (inst == sc.labels.end() ? config_.instance != "default" : inst->second != config_.instance) continue;
    sc.id = std::string(id);
    out.push_back(std::move(sc));
  }
  return out;
}

http_reply service::create_session(const http_request& r) {
  body_fields f(r.body, true);
  if (f.error) return *f.error;
  std::optional<http_reply> err;
  auto ttl = f.integer("idle_ttl_sec", err);
  auto key = f.string("archive_key", false, err);
  if (err) return *err;
  // A storage block the sidecar cannot use is refused now, not found out at delete.
  auto storage = request_storage(r.body);
  if (storage.error) return detail(400, *storage.error);

  if (!create_slots_.try_acquire_for(std::chrono::seconds(config_.queue_timeout_seconds)))
    return detail(429, "session create queue is full");
  struct release {
    std::counting_semaphore<1 << 20>& s;
    ~release() { s.release(); }
  } slot{create_slots_};

  // A warm container when the pool has one ready (or one nearly: the one being made now,
  // as far along as a create of this request's own would be): created, started and its
  // workspace made already; it left the pool for this request alone.
  std::optional<pooled_container> warm = claim_warm(std::chrono::seconds(config_.docker_call_timeout_s));
  if (!warm && !image_ready_) {
    if (docker_.call("GET", "/images/" + config_.image + "/json", {}, 10s).status != 200)
      return detail(503, "sandbox image not available yet: " + config_.image);
    image_ready_ = true;
  }
  const std::string sid = warm ? warm->sid : random_hex(16);
  const std::string name = std::string(container_prefix) + sid;
  auto s = std::make_shared<session>();
  s->id = sid;
  s->archive_key = key && valid_archive_key(*key) ? *key : sid;
  s->storage = storage.spec;
  s->ttl_seconds = ttl && *ttl > 0 ? std::clamp<std::int64_t>(*ttl, 1, config_.idle_ttl_cap_seconds) : 0;
  s->fuse = config_.workspace_mode == "fuse";
  // A FUSE workspace is its own storage (the bucket prefix of the archive key): mounted
  // before the container exists, unmounted again if the session does not come up.
  struct mount_guard {
    service* svc;
    std::string sid;
    bool armed = false;
    ~mount_guard() {
      if (armed) svc->unmount_workspace(sid);
    }
  } mounted{this, sid};
  if (s->fuse) {
    s->storage.reset();
    if (auto problem = mount_workspace(sid, s->archive_key)) return detail(500, "workspace mount failed: " + *problem);
    mounted.armed = true;
  }
  // The archive is fetched and checked before the container exists, so that the
  // container's labels (or a pool container's claim record) record where the workspace
  // came from (for a restarted sidecar).
  prepared_restore restore;
  if (s->storage) {
    restore = prepare_restore(*s->storage, s->archive_key);
    s->restored_generation = restore.generation;
  } else {
    s->restored_generation = std::string();
  }
  s->restore_status = restore.report.status;
  std::string container_id = name;  // replaced by the full ID once created
  if (!warm) {
    bool at_limit = false;
    {
      std::lock_guard g(create_mutex_);
      if (config_.max_sessions > 0) {
        // Running containers of this instance on the daemon (the gate confines the list to
        // its profile's own; the instance label to this sidecar's), warm ones included, and
        // the warm ones being made.
        std::int64_t live = 0;
        if (auto mine = own_containers(false)) {
          live = static_cast<std::int64_t>(mine->size());
        } else {
          std::lock_guard t(table_mutex_);
          live = static_cast<std::int64_t>(sessions_.size());
        }
        at_limit = live + pool_reserved_.load() >= config_.max_sessions;
      }
      if (!at_limit) {
        auto created = docker_.call("POST", "/containers/create?name=" + name, create_body(sid, *s), 60s);
        if (created.status != 201)
          return detail(500, "docker run failed: " + (created.status ? created.body : created.error));
        {
          simdjson::dom::parser p;
          simdjson::dom::element doc;
          std::string_view id;
          if (p.parse(created.body).get(doc) == simdjson::SUCCESS && doc["Id"].get_string().get(id) == simdjson::SUCCESS)
            container_id = std::string(id);
        }
        auto started = docker_.call("POST", "/containers/" + container_id + "/start", {}, 60s);
        if (started.status != 204 && started.status != 304) {
          remove_container(container_id);
          return detail(500, "docker run failed: " + (started.status ? started.body : started.error));
        }
      }
    }
    if (at_limit) {
      // The room left may be held by warm containers (ready, or being made since this
      // request looked): one of those serves it; otherwise the limit is reached.
      warm = claim_warm(std::chrono::seconds(config_.docker_call_timeout_s));
      if (!warm) return detail(429, "too many active sessions");
      // Its session ID is the one its name and labels carry: the request's is not used
      // yet (nothing was created or mounted under it: the pool serves tmpfs mode only).
      s->id = warm->sid;
      if (!(key && valid_archive_key(*key))) {
        // Without an archive key the workspace's key is the session ID: looked up again.
        s->archive_key = warm->sid;
        if (s->storage) {
          restore = prepare_restore(*s->storage, s->archive_key);
          s->restored_generation = restore.generation;
          s->restore_status = restore.report.status;
        }
      }
    }
  }
  if (warm) container_id = warm->id;
  s->container = container_id;
  s->pooled = warm.has_value();
  if (warm) s->runner = std::move(warm->runner);  // under no lock yet: nobody else has s
  if (!warm) {  // (a warm one was given its workspace, and its runner, in the pool)
    // The runner the first cell would start is started now and makes the folders: the
    // session's first answer waits for one exec, not two.
    if (auto error = make_workspace(container_id, &s->runner); !error.empty()) {
      remove_container(container_id);
      return detail(500, error);
    }
  }
  // Inputs are staged afresh for every run: emptied again only where an archive may have
  // brought some back (a new workspace has just made them, empty).
  const bool unpacking = restore.plan.members > 0 && (restore.report.status == "restored" || restore.report.status == "partial");
  unpack_restore(container_id, restore);
  s->restore_status = restore.report.status;
  if (unpacking) {
    auto reset = run_in(container_id, {"sh", "-c", std::string(reset_inputs_script)}, 30s);
    if (!reset.started || reset.exit_code != 0) {
      remove_container(container_id);
      return detail(500, "reset inputs failed: " + reset.stderr_data);
    }
  }
  if (warm) {
    // The claim record, before the answer: once the client knows the session, a restarted
    // sidecar adopts it (a kill before this point removes the container at the next
    // start: no answer named it, and its workspace is the archive it came from).
    if (auto error = write_claim_record(*s); !error.empty()) {
      remove_session_containers(*s);
      return detail(500, error);
    }
  }
  s->last_used = std::chrono::steady_clock::now();
  {
    std::lock_guard g(table_mutex_);
    sessions_[s->id] = s;
  }
  mounted.armed = false;
  std::string body = "{\"session_id\":";
  client::append_json_string(body, s->id);
  return {200, body + ",\"restore\":" + restore.report.to_json() + "}"};
}

http_reply service::delete_session(std::string_view id, const std::string& body) {
  if (!valid_session_id(id)) return detail(400, "invalid session_id");
  body_fields f(body, true);
  if (f.error) return *f.error;
  std::optional<http_reply> err;
  const bool discard = f.boolean("discard");
  auto key = f.string("archive_key", false, err);
  if (err) return *err;
  simdjson::dom::element block;
  const bool block_given = f.doc.at_key("storage").get(block) == simdjson::SUCCESS && !block.is_null();
  auto storage = request_storage(body);
  if (storage.error) return detail(400, *storage.error);  // refused before anything is removed

  std::optional<archive_outcome> outcome;
  auto s = find(std::string(id));
  if (s) {
    s->terminating = true;  // a racing /exec gets a fast 404
    std::unique_lock lock(s->lock, std::defer_lock);
    if (!lock.try_lock_for(std::chrono::seconds(config_.queue_timeout_seconds))) {
      s->terminating = false;
      return detail(429, "session is busy");
    }
    // The session's storage is the one it was created with; a block here may only bring
    // back the credentials of that same place (a session adopted after a restart).
    if (block_given && storage.spec && s->storage && !s->storage->has_credentials && s->storage->same_place(*storage.spec))
      s->storage = storage.spec;
    if (discard) {
      const auto& where = s->storage ? s->storage : storage.spec;
      if (where) outcome = discard_archives(*where, key && valid_archive_key(*key) ? *key : s->archive_key);
    } else if (s->storage) {
      outcome = archive_workspace(*s);
    }
    remove_session_containers(*s);
  } else {
    if (discard && key && valid_archive_key(*key) && storage.spec) outcome = discard_archives(*storage.spec, *key);
    // Idempotent, also for a session a restart forgot — but never another instance's.
    const std::string name = std::string(container_prefix) + std::string(id);
    auto inspect = docker_.call("GET", "/containers/" + name + "/json", {}, 20s);
    simdjson::dom::parser p;
    simdjson::dom::element doc;
    std::string_view instance = "default";
    if (inspect.status == 200 && p.parse(inspect.body).get(doc) == simdjson::SUCCESS) {
      if (doc["Config"]["Labels"][instance_label].get_string().get(instance) != simdjson::SUCCESS) instance = "default";
      if (instance == config_.instance) {
        remove_container(name);
        remove_container(name + std::string(claim_suffix));  // if it came from the warm pool
      }
    }
    if (config_.workspace_mode == "fuse" && (inspect.status == 404 || instance == config_.instance)) unmount_workspace(std::string(id));
  }
  std::string reply = R"({"ok":true)";
  if (outcome) reply += ",\"archive\":" + outcome->to_json();
  return {200, reply + "}"};
}

// A session's end on the engine: its container removed (a warm one is never returned to
// the pool), its FUSE mount cleaned, the session forgotten, then its claim record removed
// (after the container: a kill between the two leaves a record without its container,
// which the next start removes).
void service::remove_session_containers(const session& s) {
  remove_container(s.container);
  if (s.fuse) unmount_workspace(s.id);
  forget(s.id);
  if (s.pooled) remove_container(std::string(container_prefix) + s.id + std::string(claim_suffix));
  if (pool_) pool_->wake();  // SANDBOX_MAX_SESSIONS has room again
}

void service::reconcile() {
  auto mine = own_containers(true);
  if (!mine) return;
  auto label_of = [](const session_container& c, std::string_view name) -> const std::string* {
    auto it = c.labels.find(std::string(name));
    return it == c.labels.end() ? nullptr : &it->second;
  };
  // Claim records (never started), by the session they name.
  std::map<std::string, const session_container*> records;
  for (const auto& c : *mine) {
    const std::string* sid = label_of(c, session_label);
    if (label_of(c, claim_label) && sid) records[*sid] = &c;
  }
  std::set<std::string> adopted_records;
  for (const auto& c : *mine) {
    if (label_of(c, claim_label)) continue;
    const std::string* sid = label_of(c, session_label);
    if (!sid || !valid_session_id(*sid)) continue;
    // A warm pool container's labels are not a session's; its claim record's are.
    const session_container* labelled = &c;
    const bool pooled = label_of(c, pool_label) != nullptr;
    if (pooled) {
      auto record = records.find(*sid);
      const std::string* claimed = record == records.end() ? nullptr : label_of(*record->second, claim_label);
      if (c.state != "running" || !claimed || *claimed != c.id) {
        // Never claimed, or claimed by a request that a kill cut short before its record
        // was written (as a create cut short): nothing of a session's is lost with it.
        remove_container(c.id);
        continue;
      }
      labelled = record->second;
      adopted_records.insert(*sid);
    }
    auto label = [&](std::string_view name) { return label_of(*labelled, name); };
    const bool fuse = label(common::workspace_label) != nullptr;
    if (c.state != "running") {
      // A stopped session container of an earlier run: its tmpfs workspace went with it.
      // Removed without archiving, so that the last good archive under its key (if any)
      // is not overwritten by an empty one; a FUSE workspace's mount is cleaned.
      remove_container(c.id);
      if (fuse) unmount_workspace(*sid);
      continue;
    }
    auto s = std::make_shared<session>();
    s->id = *sid;
    s->container = c.id;
    const std::string* key = label(archive_label);
    s->archive_key = key && valid_archive_key(*key) ? *key : s->id;
    if (const std::string* where = label(storage_label)) {
      s->storage = storage_from_label(*where, config_);
      if (!s->storage)
        std::cerr << "dockgate-sidecar: session " << s->id << ": unreadable storage label, its workspace will not be archived"
                  << std::endl;
    } else if (!label(instance_label)) {
      // A container of a sidecar before storage labels: the operator's directory, as then.
      s->storage = choose_storage(R"({"provider":"local"})", config_).spec;
    }
    if (const std::string* ttl = label(ttl_label)) s->ttl_seconds = std::clamp<std::int64_t>(std::strtoll(ttl->c_str(), nullptr, 10), 0, config_.idle_ttl_cap_seconds);
    if (const std::string* status = label(restore_label)) s->restore_status = *status;
    if (const std::string* generation = label(generation_label)) s->restored_generation = *generation;
    else if (!label(instance_label)) s->restored_generation = std::nullopt;  // unknown: never overwrite
    s->fuse = fuse;
    s->pooled = pooled;
    // The last run may have died mid-cell, its runner with it: the cell's processes may
    // be alive. They end now (nothing a cell starts outlives its answer, and none may
    // meet the session's next runner: cells.cpp). One the sweep could not end ends the
    // container; when the host could not say, the next cell sweeps again first.
    const auto swept = sweep_cell_processes(c.id);
    if (swept == sweep_outcome::tainted) {
      std::cerr << "dockgate-sidecar: session " << s->id
                << ": a process left by a cell outlived the kill sweep; its container is removed" << std::endl;
      remove_container(c.id);
      if (pooled) remove_container(std::string(container_prefix) + *sid + std::string(claim_suffix));
      if (fuse) unmount_workspace(*sid);
      continue;
    }
    s->sweep_before_runner = swept != sweep_outcome::clean;
    if (fuse) s->storage.reset();  // the bucket is its storage
    s->last_used = std::chrono::steady_clock::now();  // the TTL restarts at boot
    std::lock_guard g(table_mutex_);
    sessions_[s->id] = s;
  }
  for (const auto& [sid, record] : records)
    if (!adopted_records.contains(sid)) remove_container(record->id);
}

void service::reap_once() {
  std::vector<std::shared_ptr<session>> all;
  {
    std::lock_guard g(table_mutex_);
    for (auto& [id, s] : sessions_) all.push_back(s);
  }
  const auto now = std::chrono::steady_clock::now();
  for (auto& s : all) {
    const auto ttl = std::chrono::seconds(s->ttl_seconds > 0 ? s->ttl_seconds : config_.idle_ttl_seconds);
    if (now - s->last_used.load() <= ttl) continue;
    std::unique_lock lock(s->lock, std::try_to_lock);
    if (!lock.owns_lock()) continue;  // busy: next sweep
    if (std::chrono::steady_clock::now() - s->last_used.load() <= ttl) continue;
    s->terminating = true;
    if (s->storage) {
      const auto outcome = archive_workspace(*s);
      if (outcome.status == "not_written" && outcome.retry) {
        // Storage unreachable (or its credentials unknown): the workspace stays in its
        // container until a later sweep (or a DELETE) can archive it.
        s->terminating = false;
        continue;
      }
    }
    remove_session_containers(*s);
  }
}

std::size_t service::end_all_sessions() {
  std::vector<std::shared_ptr<session>> all;
  {
    std::lock_guard g(table_mutex_);
    for (auto& [id, s] : sessions_) all.push_back(s);
  }
  std::size_t kept = 0;
  for (auto& s : all) {
    std::unique_lock lock(s->lock);  // a request in flight finishes first
    if (s->terminating) continue;
    s->terminating = true;
    if (s->storage) {
      const auto outcome = archive_workspace(*s);
      if (outcome.status == "not_written" && outcome.retry) {
        // Storage unreachable: the container stays, and the next start adopts it.
        std::cerr << "dockgate-sidecar: session " << s->id << " kept for the next start: " << outcome.reason << std::endl;
        ++kept;
        continue;
      }
    }
    remove_session_containers(*s);
  }
  return kept;
}

void service::start_reaper() {
  reaper_ = std::thread([this] {
    std::unique_lock lock(reaper_mutex_);
    while (!stopping_) {
      reaper_wake_.wait_for(lock, std::chrono::seconds(config_.idle_reaper_sweep_interval));
      if (stopping_) break;
      lock.unlock();
      reap_once();
      lock.lock();
    }
  });
}


std::string service::make_workspace(const std::string& container, std::shared_ptr<cell_runner>* runner) {
  // Before the answer that names the session: no request can touch the folders earlier.
  const std::vector<std::string> mkdir = {"mkdir", "-p", "/workspace/uploads", "/workspace/outputs", "/workspace/skills"};
  if (runner && config_.cell_runner) {
    // The same command through the runner (its own process, as the session user, like the
    // exec's); a runner that fails here is closed and the exec below says why, if anything.
    std::string why;
    if (auto started = cell_runner::start(docker_, container, 20s, &why)) {
      auto made = started->run(mkdir, {}, 64 * 1024, {20s, 20s, {}}, nullptr);
      if (made.state == cell_runner::outcome::done && made.result.exit_code == 0) {
        *runner = std::move(started);
        return {};
      }
      started->close();
      why = made.state == cell_runner::outcome::done ? "mkdir exit " + std::to_string(made.result.exit_code) : made.why;
    }
    std::cerr << "dockgate-sidecar: container " << container.substr(0, 12) << ": cell runner not started (" << why
              << "); its first cell will start one" << std::endl;
  }
  auto mk = run_in(container, mkdir, 20s);
  if (mk.started && mk.exit_code == 0) return {};
  return "workspace init failed: " + (mk.error.empty() ? mk.stderr_data : mk.error);
}

}  // namespace dockgate::sidecar

// Sessions: create, delete, the idle reaper and start-up reconciliation (seed §1.4, §1.7).
#include "dockgate/sidecar/service.hpp"

#include <simdjson.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "dockgate/sidecar/archive.hpp"
#include "request.hpp"

namespace dockgate::sidecar {

using namespace std::chrono_literals;

std::string service::create_body(const std::string& sid, const std::string& archive_key) const {
  // The hardened host config of the seed (§1.10). The gate's sandbox profile forces all
  // of it anyway; asking for it too keeps the sidecar honest against a looser profile.
  std::string b = "{\"Image\":";
  client::append_json_string(b, config_.image);
  b += R"(,"Cmd":["sleep","infinity"],"User":"1000:1000","WorkingDir":"/workspace","Labels":{)";
  client::append_json_string(b, archive_label);
  b += ':';
  client::append_json_string(b, archive_key);
  b += ',';
  client::append_json_string(b, created_label);
  b += ':';
  client::append_json_string(b, std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                                                   std::chrono::system_clock::now().time_since_epoch())
                                                   .count()));
  b += ',';
  client::append_json_string(b, session_label);
  b += ':';
  client::append_json_string(b, sid);
  b += "},\"HostConfig\":{\"NetworkMode\":\"none\",\"Memory\":" + std::to_string(config_.memory_bytes) +
       ",\"MemorySwap\":" + std::to_string(config_.memory_bytes) + ",\"NanoCpus\":" + std::to_string(config_.nano_cpus) +
       ",\"PidsLimit\":" + std::to_string(config_.pids_limit) + ",\"Ulimits\":[{\"Name\":\"nofile\",\"Soft\":" +
       std::to_string(config_.nofile_soft) + ",\"Hard\":" + std::to_string(config_.nofile_hard) +
       "}],\"Init\":true,\"SecurityOpt\":[\"no-new-privileges\"],\"CapDrop\":[\"ALL\"]";
  if (config_.read_only_rootfs) {
    b += ",\"ReadonlyRootfs\":true,\"Tmpfs\":{\"/tmp\":\"rw,nosuid,nodev,size=" + config_.tmpfs_size +
         "\",\"/home/sandbox\":\"rw,nosuid,nodev,size=" + config_.tmpfs_size +
         "\",\"/workspace\":\"rw,nosuid,nodev,size=" + config_.workspace_size + ",mode=1777\"}";
  }
  if (!config_.disk_size.empty()) b += ",\"StorageOpt\":{\"size\":\"" + config_.disk_size + "\"}";
  return b + "}}";
}

http_reply service::create_session(const http_request& r) {
  body_fields f(r.body, true);
  if (f.error) return *f.error;
  std::optional<http_reply> err;
  auto ttl = f.integer("idle_ttl_sec", err);
  auto key = f.string("archive_key", false, err);
  if (err) return *err;

  if (!create_slots_.try_acquire_for(std::chrono::seconds(config_.queue_timeout_seconds)))
    return detail(429, "session create queue is full");
  struct release {
    std::counting_semaphore<1 << 20>& s;
    ~release() { s.release(); }
  } slot{create_slots_};

  if (!image_ready_) {
    if (docker_.call("GET", "/images/" + config_.image + "/json", {}, 10s).status != 200)
      return detail(503, "sandbox image not available yet: " + config_.image);
    image_ready_ = true;
  }
  const std::string sid = random_hex(16);
  const std::string name = std::string(container_prefix) + sid;
  const std::string archive_key = key && valid_archive_key(*key) ? *key : sid;
  std::string container_id = name;  // replaced by the full ID once created
  {
    std::lock_guard g(create_mutex_);
    if (config_.max_sessions > 0) {
      // Running labelled containers on the daemon (the gate confines the list to ours).
      auto list = docker_.call("GET", "/containers/json?filters=%7B%22label%22%3A%5B%22" + std::string(session_label) + "%22%5D%7D", {}, 20s);
      std::int64_t live = 0;
      simdjson::dom::parser p;
      simdjson::dom::element doc;
      simdjson::dom::array arr;
      if (list.status == 200 && p.parse(list.body).get(doc) == simdjson::SUCCESS && doc.get_array().get(arr) == simdjson::SUCCESS) {
        live = static_cast<std::int64_t>(arr.size());
      } else {
        std::lock_guard t(table_mutex_);
        live = static_cast<std::int64_t>(sessions_.size());
      }
      if (live >= config_.max_sessions) return detail(429, "too many active sessions");
    }
    auto created = docker_.call("POST", "/containers/create?name=" + name, create_body(sid, archive_key), 60s);
    if (created.status != 201)
      return detail(500, "docker run failed: " + (created.status ? created.body : created.error));
    {
      simdjson::dom::parser p;
      simdjson::dom::element doc;
      std::string_view id;
      if (p.parse(created.body).get(doc) == simdjson::SUCCESS && doc["Id"].get_string().get(id) == simdjson::SUCCESS)
        container_id = std::string(id);
    }
    auto started = docker_.call("POST", "/containers/" + name + "/start", {}, 60s);
    if (started.status != 204 && started.status != 304) {
      remove_container(name);
      return detail(500, "docker run failed: " + (started.status ? started.body : started.error));
    }
  }
  auto mk = run_in(container_id, {"mkdir", "-p", "/workspace/uploads", "/workspace/outputs", "/workspace/skills"}, 20s);
  if (!mk.started || mk.exit_code != 0) {
    remove_container(container_id);
    return detail(500, "workspace init failed: " + (mk.error.empty() ? mk.stderr_data : mk.error));
  }
  auto s = std::make_shared<session>();
  s->id = sid;
  s->container = container_id;
  s->archive_key = archive_key;
  apply_storage(r.body, *s);
  if (s->archive) restore_workspace(*s);
  auto reset = run_in(container_id, {"sh", "-c", std::string(reset_inputs_script)}, 30s);
  if (!reset.started || reset.exit_code != 0) {
    remove_container(container_id);
    return detail(500, "reset inputs failed: " + reset.stderr_data);
  }
  s->ttl_seconds = ttl && *ttl > 0 ? std::clamp<std::int64_t>(*ttl, 1, config_.idle_ttl_cap_seconds) : 0;
  s->last_used = std::chrono::steady_clock::now();
  {
    std::lock_guard g(table_mutex_);
    sessions_[sid] = s;
  }
  std::string body = "{\"session_id\":";
  client::append_json_string(body, sid);
  return {200, body + "}"};
}

http_reply service::delete_session(std::string_view id, const std::string& body) {
  if (!valid_session_id(id)) return detail(400, "invalid session_id");
  body_fields f(body, true);
  if (f.error) return *f.error;
  std::optional<http_reply> err;
  const bool discard = f.boolean("discard");
  auto key = f.string("archive_key", false, err);
  if (err) return *err;
  auto s = find(std::string(id));
  const std::string name = std::string(container_prefix) + std::string(id);
  if (s) {
    s->terminating = true;  // a racing /exec gets a fast 404
    std::unique_lock lock(s->lock, std::defer_lock);
    if (!lock.try_lock_for(std::chrono::seconds(config_.queue_timeout_seconds))) {
      s->terminating = false;
      return detail(429, "session is busy");
    }
    session from_body;
    apply_storage(body, from_body);
    if (from_body.archive) {  // the storage block of this request, when effective, wins
      s->archive = true;
      s->s3 = from_body.s3;
      s->storage_prefix = from_body.storage_prefix;
    }
    if (discard) {
      session target;
      target.archive_key = key && valid_archive_key(*key) ? *key : s->archive_key;
      target.s3 = s->s3;
      target.storage_prefix = s->storage_prefix;
      discard_archive(target);
    } else if (s->archive) {
      archive_workspace(*s);
    }
    remove_container(s->container);
    forget(s->id);
  } else {
    if (discard && key && valid_archive_key(*key)) {
      session target;
      apply_storage(body, target);
      target.archive_key = *key;
      discard_archive(target);
    }
    remove_container(name);  // idempotent, also for sessions a restart forgot
  }
  return {200, R"({"ok":true})"};
}

void service::reconcile() {
  auto list = docker_.call("GET", "/containers/json?all=1&filters=%7B%22label%22%3A%5B%22" + std::string(session_label) + "%22%5D%7D", {}, 20s);
  if (list.status != 200) return;
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  simdjson::dom::array arr;
  if (p.parse(list.body).get(doc) != simdjson::SUCCESS || doc.get_array().get(arr) != simdjson::SUCCESS) return;
  for (simdjson::dom::element c : arr) {
    std::string_view state, sid, key;
    simdjson::dom::element labels;
    if (c["State"].get_string().get(state) != simdjson::SUCCESS || c["Labels"].get(labels) != simdjson::SUCCESS) continue;
    if (labels[session_label].get_string().get(sid) != simdjson::SUCCESS || !valid_session_id(sid)) continue;
    const std::string name = std::string(container_prefix) + std::string(sid);
    if (state != "running") {
      // A stopped session container of an earlier run: its tmpfs workspace went with it.
      // Removed without archiving, so that the last good archive under its key (if any)
      // is not overwritten by an empty one.
      std::string_view full_id;
      remove_container(c["Id"].get_string().get(full_id) == simdjson::SUCCESS ? std::string(full_id) : name);
      continue;
    }
    auto s = std::make_shared<session>();
    s->id = std::string(sid);
    std::string_view full_id;
    s->container = c["Id"].get_string().get(full_id) == simdjson::SUCCESS ? std::string(full_id) : name;
    if (labels[archive_label].get_string().get(key) == simdjson::SUCCESS && valid_archive_key(key))
      s->archive_key = std::string(key);
    else
      s->archive_key = s->id;
    s->archive = storage_effective("local");  // the archive key survives in the label
    s->last_used = std::chrono::steady_clock::now();  // the TTL restarts at boot
    std::lock_guard g(table_mutex_);
    sessions_[s->id] = s;
  }
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
    if (s->archive) archive_workspace(*s);
    remove_container(s->container);
    forget(s->id);
  }
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


}  // namespace dockgate::sidecar

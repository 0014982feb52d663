// The session side of the warm pool (SANDBOX_WARM_POOL): how a pool container is made
// and claimed. Invariants kept here:
// - A pool container is created through the gate with the body of a session's container
//   (create_body: the same image, command, user and host config; the gate's sandbox
//   profile forces the same hardening on it), with no request's data in its labels.
// - It counts against SANDBOX_MAX_SESSIONS from the moment its create is decided (the
//   count and the reservation are made under session_limit's mutex, as a session's create is).
// - Only the tmpfs workspace mode is served: a FUSE workspace is mounted for its session
//   and bound by the gate at create, from a label naming the session.
// - A warm container is handed out only when it can run a cell now (the `ready` hook): a
//   paused (cgroup freezer), stopped or runner-less one is removed and replaced, so that a
//   session's first cell never waits on a container that cannot answer.
#include "sessions/pool/pool_sessions.hpp"

#include <simdjson.h>

#include <iostream>

#include "engine/labels.hpp"
#include "sessions/isolation/isolation.hpp"
#include "sessions/session.hpp"
#include "sessions/session_containers.hpp"
#include "sessions/session_limit.hpp"
#include "sessions/session_registry.hpp"
#include "util/ids.hpp"

namespace dockgate::sidecar {

using namespace std::chrono_literals;

bool inspect_runs_now(std::string_view body) {
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  bool running = false, paused = true, restarting = true;
  return p.parse(body).get(doc) == simdjson::SUCCESS &&
         doc["State"]["Running"].get_bool().get(running) == simdjson::SUCCESS &&
         doc["State"]["Paused"].get_bool().get(paused) == simdjson::SUCCESS &&
         doc["State"]["Restarting"].get_bool().get(restarting) == simdjson::SUCCESS && running &&
         !paused && !restarting;
}

void session_pool::start() {
  if (config_.warm_pool <= 0 || pool_) return;
  if (config_.workspace_mode != "tmpfs") {
    std::cerr << "dockgate-sidecar: SANDBOX_WARM_POOL is not used with SANDBOX_WORKSPACE_MODE="
              << config_.workspace_mode << " (a FUSE workspace is bound per session at create)"
              << std::endl;
    return;
  }
  warm_pool::hooks h;
  h.create = [this](std::string& error, bool& full) { return create(error, full); };
  h.remove = [this](const std::string& id) { containers_.remove(id); };
  h.image_id = [this] { return containers_.image_id(); };
  h.running = [this]() -> std::optional<std::set<std::string>> {
    auto mine = containers_.own(false);
    if (!mine) return std::nullopt;
    std::set<std::string> ids;
    // The list has paused containers too (State "paused"): they are not running here.
    for (const auto& c : *mine)
      if (c.labels.contains(std::string(pool_label)) && c.state == "running") ids.insert(c.id);
    return ids;
  };
  // Whether a warm container can run a cell now. With its runner: a round trip through it
  // (executor_hooks::runner_ready: answered within 100 ms for a claim, 2 s for the pool's
  // own check), which only a running,
  // unfrozen container whose runner lives can make. It proves more than the engine's State: a
  // paused container's runner stream is open and quiet, a killed or stopped runner leaves
  // the container running, and a freezer set outside Docker is not in State. Without one
  // (SANDBOX_CELL_RUNNER=0, or its start failed in the pool; the session's first cell
  // starts one): the engine's State, Running and neither Paused nor Restarting.
  h.ready = [this](pooled_container& c, bool claiming) {
    // A claim's bound is what a frozen container costs the request that finds it; the
    // pool's check, which nobody waits for, gives a runner on a loaded host its time (a
    // frozen one never answers either way).
    const std::chrono::milliseconds within = claiming ? 100ms : 2000ms;
    if (c.runner) return executors_.runner_ready && executors_.runner_ready(*c.runner, within);
    auto r = engine_.inspect(c.id, 10s);
    return r.status == 200 && inspect_runs_now(r.body);
  };
  h.sweep = [this](const std::set<std::string>& made) -> std::optional<std::set<std::string>> {
    auto mine = containers_.own(true);
    if (!mine) return std::nullopt;
    std::set<std::string> ids, existing;
    for (const auto& c : *mine) ids.insert(c.id);
    for (const auto& c : *mine) {
      const auto claim = c.labels.find(std::string(claim_label));
      if (claim != c.labels.end()) {
        if (!ids.contains(claim->second)) containers_.remove(c.id);  // its container is gone
        continue;
      }
      if (!c.labels.contains(std::string(pool_label))) continue;
      if (made.contains(c.id)) {
        existing.insert(c.id);
        continue;
      }
      // Not this pool's: a session adopted at start, or left by an earlier run.
      const auto sid = c.labels.find(std::string(session_label));
      auto s = sid == c.labels.end() ? nullptr : registry_.find(sid->second);
      if (!s || s->container != c.id) containers_.remove(c.id);
    }
    return existing;
  };
  pool_ = std::make_shared<warm_pool>(static_cast<std::size_t>(config_.warm_pool), std::move(h));
  pool_->start();
}

std::size_t session_pool::stop() {
  return pool_ ? pool_->stop() : 0;
}

void session_pool::wake() {
  if (pool_) pool_->wake();
}

std::size_t session_pool::size() const {
  return pool_ ? pool_->size() : 0;
}

std::optional<pooled_container> session_pool::create(std::string& error, bool& full) {
  pooled_container c;
  c.image_id = containers_.image_id();
  if (c.image_id.empty()) {
    error = "sandbox image not available: " + config_.image;
    return std::nullopt;
  }
  c.sid = random_hex(16);
  const std::string name = std::string(container_prefix) + c.sid;
  {
    std::lock_guard g(limit_.mutex);
    if (config_.max_sessions > 0) {
      auto mine = containers_.own(false);
      if (!mine) {
        error = "the engine did not list the session containers";
        return std::nullopt;
      }
      if (static_cast<std::int64_t>(mine->size()) + limit_.reserved.load() >=
          config_.max_sessions) {
        full = true;
        return std::nullopt;
      }
    }
    ++limit_.reserved;
  }
  // Held until the container runs (then the engine's list counts it) or is gone.
  limit_place reserved{limit_.reserved};
  session blank;  // no request yet: create_body writes none of a session's labels
  const std::string body =
      containers_.create_body(c.sid, blank, session_containers::body_kind::pool);
  auto created = engine_.create(name, body, 60s);
  if (created.status != 201) {
    containers_.remove_unused_network(c.sid);
    error = "create failed: " + (created.status ? created.body : created.error);
    return std::nullopt;
  }
  {
    simdjson::dom::parser p;
    simdjson::dom::element doc;
    std::string_view id;
    if (p.parse(created.body).get(doc) != simdjson::SUCCESS ||
        doc["Id"].get_string().get(id) != simdjson::SUCCESS) {
      containers_.remove(name);
      error = "create answered without an Id";
      return std::nullopt;
    }
    c.id = std::string(id);
  }
  auto started = engine_.start(c.id, 60s);
  if (started.status != 204 && started.status != 304) {
    containers_.remove(c.id);
    error = "start failed: " + (started.status ? started.body : started.error);
    return std::nullopt;
  }
  // The workspace a new session starts with, and the cell runner (it makes the workspace),
  // so that a claimed container's first cell is as fast as its next (create_session does
  // the same for a cold one).
  // The isolation probe goes with it (isolation/isolation.hpp), judged here, off every
  // request's path: a claim hands out a container already proved.
  std::string probe;
  error = containers_.make_workspace(c.id, &c.runner, &probe);
  // A runner answers at its hello, before its warm-up (the data stack's imports) has ended:
  // a pool container waits for it here, off every request's path, so that a hit's first
  // cell is a fork of a warm interpreter.
  if (error.empty() && c.runner && executors_.runner_warm && !executors_.runner_warm(*c.runner))
    error = "the cell runner failed during its warm-up";
  if (error.empty()) error = prove_pool_container(c, body, probe);
  if (!error.empty()) {
    containers_.remove(c.id);
    return std::nullopt;
  }
  return c;
}

std::string session_pool::prove_pool_container(pooled_container& c, const std::string& body,
                                               const std::string& probe) const {
  if (executors_.isolation_probe.empty()) return {};
  auto report = read_isolation(config_, engine_, c.id, isolation_asked_of(body), probe, "pool");
  c.isolation = report;
  if (report->failures.empty()) return {};
  std::string why = "isolation self-test failed:";
  for (const auto& f : report->failures) why += " " + f + ";";
  std::cerr << "dockgate-sidecar: warm container " << c.id.substr(0, 12) << ": " << why
            << " removed" << std::endl;
  return why;
}

std::optional<pooled_container> session_pool::claim(std::chrono::milliseconds wait) {
  if (!pool_) return std::nullopt;
  return pool_->claim(wait);
}

// The record that makes a claimed pool container a session for a restarted sidecar
// (reconcile): labels cannot change after create, so it is a container of its own,
// created and never started, with the session's labels and `sandbox.claim` naming the
// container. Written synchronously before the answer, so that no kill after the answer
// loses the session (the create costs 10-100 ms; the engine, not the sidecar's disk,
// keeps it, so it outlives a sidecar redeployed elsewhere). A record whose create
// answered with an error may still have been made: the caller removes it by name.
std::string session_pool::write_claim_record(const session& s) {
  const std::string name = std::string(container_prefix) + s.id + std::string(claim_suffix);
  auto made = engine_.create(
      name, containers_.create_body(s.id, s, session_containers::body_kind::claim, s.container),
      std::chrono::seconds(config_.docker_call_timeout_s));
  if (made.status == 201) return {};
  return "claim record not written: " + (made.status ? made.body : made.error);
}

}  // namespace dockgate::sidecar

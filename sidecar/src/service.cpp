// The service: routing and authentication, health, and the wiring of the sidecar's
// objects (each holds its own state and locks; this file holds none). Seed:
// shared/research/seed_systems.md §1.2–1.3.
#include "dockgate/sidecar/service.hpp"

#include <simdjson.h>

#include <ctime>

#include "archive_store.hpp"
#include "cells.hpp"
#include "files.hpp"
#include "fleet.hpp"
#include "fleet_auth.hpp"
#include "pool_sessions.hpp"
#include "request.hpp"
#include "session_containers.hpp"
#include "session_lifecycle.hpp"
#include "session_limit.hpp"
#include "session_registry.hpp"
#include "storage_api.hpp"
#include "workspace_mounts.hpp"

namespace dockgate::sidecar {

using namespace std::chrono_literals;

// Declared in the order they depend on each other: each gets its collaborators, declared
// before it, by reference; they go in the reverse order (the warm pool, which removes its
// containers through `containers`, before those).
struct service::rooms {
  rooms(const config& c, const client::engine& docker, store_lease* lease)
      : containers(c, docker),
        mounts(c),
        registry(c, containers),
        archives(c, containers),
        pool(c, docker, containers, registry, limit),
        lifecycle(c, docker, containers, registry, archives, mounts, pool, limit, lease),
        fleet(c, lease, registry, lifecycle),
        cells(c, docker, containers, registry, lifecycle),
        files(c, containers, registry),
        storage(c),
        fleet_auth(c.fleet_key, c.instance) {}

  session_containers containers;
  workspace_mounts mounts;
  session_registry registry;
  session_limit limit;
  archive_store archives;
  session_pool pool;
  session_lifecycle lifecycle;
  class fleet fleet;
  class cells cells;
  class files files;
  storage_api storage;
  fleet_verifier fleet_auth;  // checks the fleet's credential on forwarded calls
};

service::service(config c, client::engine docker, store_lease* fleet)
    : config_(std::move(c)),
      docker_(std::move(docker)),
      rooms_(std::make_unique<rooms>(config_, docker_, fleet)) {}

service::~service() {
  // The reaper first: it ends sessions through the objects that go next.
  rooms_->registry.stop_reaper();
}

void service::reconcile() {
  rooms_->lifecycle.reconcile();
}

void service::start_reaper() {
  rooms_->registry.start_reaper([this](session& s) { rooms_->lifecycle.reap(s); });
}

std::size_t service::end_all_sessions() {
  return rooms_->lifecycle.end_all_sessions();
}

std::size_t service::fence_fuse_sessions() {
  return rooms_->lifecycle.fence();
}

void service::start_pool() {
  rooms_->pool.start();
}

std::size_t service::stop_pool() {
  return rooms_->pool.stop();
}

std::size_t service::max_body(std::string_view path) const {
  return static_cast<std::size_t>(path == "/storage/put" ? config_.max_storage_body_bytes
                                                         : config_.max_body_bytes);
}

http_reply service::handle(const http_request& r) {
  if (r.path == "/healthz") {
    if (r.method != "GET") return detail(405, "Method Not Allowed");
    return healthz();
  }
  if (!r.forwarded.empty() || !r.fleet_auth.empty()) {
    // A call another member forwarded: served only with the fleet's own credential,
    // addressed to this instance (fleet_auth.hpp). The client's key, which a member never
    // passes on, does not stand in for it, nor does SANDBOX_ALLOW_NO_AUTH.
    if (auto refused = rooms_->fleet_auth.check(r.fleet_auth, r.forwarded, r.method, r.path,
                                                r.body, static_cast<std::int64_t>(std::time(nullptr)))) {
      std::string body = R"({"error":"unauthorized","detail":)";
      client::append_json_string(body, "forwarded call refused: " + *refused);
      return {401, body + "}"};
    }
  } else if (!config_.allow_no_auth) {
    // Constant-time comparison of the whole header with "Bearer <key>".
    const std::string expected = "Bearer " + config_.api_key;
    unsigned char diff = r.authorization.size() == expected.size() ? 0 : 1;
    for (std::size_t i = 0; i < expected.size(); ++i)
      diff |= static_cast<unsigned char>(expected[i] ^
                                         (i < r.authorization.size() ? r.authorization[i] : 0));
    if (diff != 0) return {401, R"({"error":"unauthorized"})"};
  }
  auto post = [&](auto& room, auto fn) {
    return r.method == "POST" ? (room.*fn)(r) : detail(405, "Method Not Allowed");
  };
  auto& o = *rooms_;
  if (o.fleet.enabled())
    if (auto routed = route_in_fleet(r)) return *routed;
  if (r.path == "/sessions") return post(o.lifecycle, &session_lifecycle::create_session);
  // POST /sessions/{id}/restart: a kernel session's kernel reset (kernel_cells.cpp).
  if (constexpr std::string_view restart = "/restart";
      r.path.starts_with("/sessions/") && r.path.ends_with(restart) &&
      r.path.size() > 10 + restart.size() && r.path.find('/', 10) == r.path.size() - restart.size())
    return r.method == "POST" ? o.cells.restart_kernel(std::string_view(r.path).substr(
                                    10, r.path.size() - 10 - restart.size()))
                              : detail(405, "Method Not Allowed");
  if (r.path.starts_with("/sessions/") && r.path.find('/', 10) == std::string::npos) {
    if (r.method != "DELETE") return detail(405, "Method Not Allowed");
    return o.lifecycle.delete_session(std::string_view(r.path).substr(10), r.body);
  }
  if (r.path == "/exec") return post(o.cells, &cells::exec);
  if (r.path == "/files") return post(o.files, &files::put_file);
  if (r.path == "/files/get") return post(o.files, &files::get_file);
  if (r.path == "/files/list") return post(o.files, &files::list_files);
  if (r.path == "/files/reset-inputs") return post(o.files, &files::reset_inputs);
  if (r.path == "/storage/put") return post(o.storage, &storage_api::put);
  if (r.path == "/storage/delete") return post(o.storage, &storage_api::remove);
  if (r.path == "/storage/gc") return post(o.storage, &storage_api::gc);
  return detail(404, "Not Found");
}

// A call naming a session this sidecar does not hold goes where the fleet's store says
// (fleet.hpp); one it holds, or one naming none, is served here.
std::optional<http_reply> service::route_in_fleet(const http_request& r) {
  std::string sid;
  bool deleting = false;
  if (r.path.starts_with("/sessions/")) {
    const auto end = r.path.find('/', 10);
    sid = r.path.substr(10, end == std::string::npos ? std::string::npos : end - 10);
    deleting = end == std::string::npos && r.method == "DELETE";
  } else if (r.method == "POST" && (r.path == "/exec" || r.path.starts_with("/files"))) {
    // A body the route will refuse names no session here: the route answers it.
    body_fields f(r.body);
    std::optional<http_reply> err;
    if (!f.error)
      if (auto id = f.string("session_id", true, err); id && !err) sid = *id;
  }
  if (!valid_session_id(sid) || rooms_->registry.find(sid)) return std::nullopt;
  return rooms_->fleet.route(r, sid, deleting);
}

http_reply service::healthz() {
  auto version = docker_.call("GET", "/version", {}, 10s);
  std::string docker_version;
  if (version.status == 200) {
    simdjson::dom::parser p;
    simdjson::dom::element doc;
    std::string_view v;
    if (p.parse(version.body).get(doc) == simdjson::SUCCESS &&
        doc["Version"].get_string().get(v) == simdjson::SUCCESS)
      docker_version = std::string(v);
  }
  std::string body = "{\"ok\":";
  if (docker_version.empty()) {
    body += "false,\"docker\":\"\",\"image\":";
    client::append_json_string(body, config_.image);
    return {503, body + "}"};
  }
  const bool ready = rooms_->containers.image_present();
  body += ready ? "true" : "false";
  body += ",\"docker\":";
  client::append_json_string(body, docker_version);
  body += ",\"image\":";
  client::append_json_string(body, config_.image);
  body += ",\"image_ready\":";
  body += ready ? "true" : "false";
  return {ready ? 200u : 503u, body + "}"};
}

}  // namespace dockgate::sidecar

// The service: the HTTP face of the session core. Health, authentication (the client's
// key, or a fleet member's credential on a forwarded call), a call for a session another
// member holds forwarded there, then the Aivory front's route table (front/aivory); the
// OpenSandbox front's paths go to that front first (front/opensandbox). Holds
// no state of its own but the core.
#include "dockgate/sidecar/service.hpp"

#include <simdjson.h>

#include <ctime>

#include "core/session_core.hpp"
#include "fleet/fleet_auth.hpp"
#include "front/aivory/routes.hpp"
#include "front/fleet_routing.hpp"
#include "front/opensandbox/replies.hpp"
#include "front/opensandbox/routes.hpp"
#include "front/request.hpp"
#include "util/ids.hpp"

namespace dockgate::sidecar {

using namespace std::chrono_literals;

// The session core and what the front adds to it: the check of forwarded calls, and the
// routing of calls for sessions other members hold.
struct service::rooms {
  rooms(const config& c, const container_engine& engine, store_lease* lease)
      : core(c, engine, lease),
        fleet_auth(c.fleet_key, c.instance),
        fleet(c, lease, core.registry, core.lifecycle) {}
  session_core core;
  fleet_verifier fleet_auth;  // checks the fleet's credential on forwarded calls
  fleet_routing fleet;        // serve here, forward, or take over (fleet_routing.hpp)
};

service::service(config c, client::engine docker, store_lease* fleet)
    : config_(std::move(c)),
      engine_(std::move(docker)),
      rooms_(std::make_unique<rooms>(config_, engine_, fleet)) {}

service::~service() {
  // The reaper first: it ends sessions through the objects that go next.
  rooms_->core.registry.stop_reaper();
}

void service::reconcile() {
  rooms_->core.lifecycle.reconcile();
}

void service::start_reaper() {
  rooms_->core.registry.start_reaper([this](session& s) { rooms_->core.lifecycle.reap(s); },
                                     [this](session& s) { rooms_->core.lifecycle.sleep(s); });
}

std::size_t service::end_all_sessions() {
  return rooms_->core.lifecycle.end_all_sessions();
}

std::size_t service::fence_fuse_sessions() {
  return rooms_->core.lifecycle.fence();
}

void service::start_pool() {
  rooms_->core.pool.start();
}

std::size_t service::stop_pool() {
  return rooms_->core.pool.stop();
}

std::size_t service::max_body(std::string_view path) const {
  // The front that claims the path says, from its route table.
  if (opensandbox::claims(path)) return opensandbox::max_body(config_, path);
  return aivory::max_body(config_, path);
}

http_reply service::handle(const http_request& r) {
  // The OpenSandbox front's paths (/health, /v1/…, /sandboxes…) are its own, with its own
  // authentication: no Aivory path is among them.
  const bool forwarded = !r.forwarded.empty() || !r.fleet_auth.empty();
  // A call another member forwarded: served only with the fleet's own credential,
  // addressed to this instance, over the call as sent (method, path and query, body:
  // fleet_auth.hpp). The client's credentials, which a member never passes on, do not
  // stand in for it, nor does SANDBOX_ALLOW_NO_AUTH.
  std::optional<std::string> refused_hop;
  if (forwarded)
    refused_hop = rooms_->fleet_auth.check(r.fleet_auth, r.forwarded, r.method,
                                           r.query.empty() ? r.path : r.path + "?" + r.query,
                                           r.body, static_cast<std::int64_t>(std::time(nullptr)));
  if (opensandbox::claims(r.path)) {
    if (refused_hop)
      return opensandbox::error(401, "FLEET::UNAUTHORIZED",
                                "forwarded call refused: " + *refused_hop);
    auto& fleet = rooms_->fleet;
    return opensandbox::serve(
        rooms_->core, r,
        forwarded ? opensandbox::caller::fleet_member : opensandbox::caller::client,
        [&fleet](const http_request& call, const std::string& sid, bool deleting) {
          return fleet.route_session(call, sid, deleting, opensandbox::reply);
        });
  }
  if (r.path == "/healthz") {
    if (r.method != "GET") return detail(405, "Method Not Allowed");
    return healthz();
  }
  if (forwarded) {
    if (refused_hop) {
      std::string body = R"({"error":"unauthorized","detail":)";
      client::append_json_string(body, "forwarded call refused: " + *refused_hop);
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
  if (auto routed = rooms_->fleet.route(r)) return *routed;
  return aivory::serve(rooms_->core, r);
}

http_reply service::healthz() {
  auto version = engine_.version(10s);
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
  const bool ready = rooms_->core.containers.image_present();
  body += ready ? "true" : "false";
  body += ",\"docker\":";
  client::append_json_string(body, docker_version);
  body += ",\"image\":";
  client::append_json_string(body, config_.image);
  body += ",\"image_ready\":";
  body += ready ? "true" : "false";
  // The warm containers ready to be claimed now (their runners warm): what a burst of
  // creates can take without a miss.
  body += ",\"warm_pool\":" + std::to_string(rooms_->core.pool.size());
  return {ready ? 200u : 503u, body + "}"};
}

}  // namespace dockgate::sidecar

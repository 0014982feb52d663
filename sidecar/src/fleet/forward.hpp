#pragma once
// The hop from one fleet member to another: a call sent to the member that holds its
// session, at the address the operator listed for it, with the fleet's own credential
// (fleet_auth.hpp) and never the client's Authorization. Which call goes where is decided
// above (front/fleet_routing.cpp); this only carries it. Internal to the sidecar library.

#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dockgate/common/endpoint.hpp"
#include "dockgate/sidecar/config.hpp"

namespace dockgate::sidecar {

// A call as the client made it (the parts a member passes on).
struct fleet_call {
  std::string method;
  std::string path;
  std::string body;
  std::string accept;  // the client's Accept, passed on when it sent one
  std::string query;   // what followed the '?', as sent ("" if none)
  // The body's type as the client sent it ("": application/json).
  std::string content_type;
  // More of the client's fields an API needs on the holder (a Range, a request id): never
  // a credential (forwardable_field says which).
  std::vector<std::pair<std::string, std::string>> fields;
};

// Whether a client's field (lower-case name) may travel on the hop: the ones an API's
// answer depends on (Range, X-Request-ID), never a credential of the client's (its
// Authorization, OpenSandbox's API key or a sandbox's access token: the member it
// reached checked them; the hop carries the fleet's own credential).
bool forwardable_field(std::string_view name);
// Whether a field of the holder's answer goes back to the client (the ones an API's
// client reads beside the body: Content-Range, a log's cursor, a request id).
bool returnable_field(std::string_view name);

struct fleet_answer {
  unsigned status = 0;       // 0: no answer (`error` says why)
  std::string content_type;  // as the member answered
  std::string body;
  std::string error;
  std::vector<std::pair<std::string, std::string>> fields;  // the returnable ones, as sent
};

// `call` sent to member `to` (an instance of SANDBOX_FLEET_MEMBERS) at `where` (its listed
// http://host:port as an endpoint; `host` the Host field), signed by this instance
// (config::instance, config::fleet_key) over its method, path and body. Bounded: the
// connect by `connect_timeout` (a host that is gone answers nothing), the answer by the
// longest cell and its collection (SANDBOX_EXEC_TIMEOUT_CAP_MS, SANDBOX_MAX_COLLECT_SECONDS,
// + 120 s), at most twice SANDBOX_MAX_BODY_BYTES.
fleet_answer send_to_member(const config& c, std::string_view to, const common::endpoint& where,
                            std::string_view host, const fleet_call& call,
                            std::chrono::milliseconds connect_timeout);

}  // namespace dockgate::sidecar

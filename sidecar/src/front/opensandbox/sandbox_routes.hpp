#pragma once
// The OpenSandbox lifecycle front's handlers (routes.cpp holds their table): each parses its
// request once, calls the session core, and answers in OpenSandbox's shapes (replies.hpp,
// sandbox_json.hpp). Internal to the sidecar library.

#include <string>
#include <string_view>

#include "core/session_core.hpp"
#include "front/http_server.hpp"
#include "front/opensandbox/replies.hpp"
#include "front/request.hpp"
#include "sessions/session_request.hpp"

namespace dockgate::sidecar::opensandbox {

// What a route's pattern matched: {id} (a sandbox id) and {port}.
struct route_args {
  std::string_view id;
  std::string_view port;
};

using handler = http_reply (*)(session_core&, const http_request&, const route_args&);

// 400 SANDBOX::INVALID_PARAMETER, the message naming the field.
inline http_reply invalid_parameter(std::string_view message) {
  return error(400, "SANDBOX::INVALID_PARAMETER", message);
}

// POST /sandboxes's body (CreateSandboxRequest) as the core's create request, every field
// checked (create_body.cpp); the entrypoint kept under sandbox_json.hpp's entrypoint_key.
parsed<create_request> parse_create_body(const std::string& body, const config& c);

// sandbox_routes.cpp
http_reply create_sandbox(session_core& core, const http_request& r, const route_args& a);
http_reply list_sandboxes(session_core& core, const http_request& r, const route_args& a);
http_reply get_sandbox(session_core& core, const http_request& r, const route_args& a);
http_reply delete_sandbox(session_core& core, const http_request& r, const route_args& a);
http_reply pause_sandbox(session_core& core, const http_request& r, const route_args& a);
http_reply resume_sandbox(session_core& core, const http_request& r, const route_args& a);
http_reply renew_expiration(session_core& core, const http_request& r, const route_args& a);
http_reply patch_metadata(session_core& core, const http_request& r, const route_args& a);
http_reply get_endpoint(session_core& core, const http_request& r, const route_args& a);
http_reply metrics_event(session_core& core, const http_request& r, const route_args& a);

// Whether `key` may be a metadata key and `value` its value (Kubernetes' label rules:
// [prefix/]name, the name 1-63 of [A-Za-z0-9._-] starting and ending alphanumeric, the
// prefix a DNS subdomain; the value empty or a name); the reason when not.
std::optional<std::string> metadata_problem(std::string_view key, std::string_view value);

}  // namespace dockgate::sidecar::opensandbox

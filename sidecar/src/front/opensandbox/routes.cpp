// The OpenSandbox front's door (routes.hpp; docs/opensandbox-api.md): every route at /v1/…
// and at /…, GET /health open, the API key on the lifecycle routes, the sandbox's access
// token on the proxy path, X-Request-ID on every answer, then the table.
//
// Invariants it keeps:
// - Nothing but GET /health is answered before the caller is known: a lifecycle route needs
//   SANDBOX_API_KEY in OPEN-SANDBOX-API-KEY (unless SANDBOX_ALLOW_NO_AUTH), the proxy path
//   the access token of the very sandbox it names (access_token.hpp), both compared in
//   constant time. The API key does not open the proxy path, nor a token the lifecycle.
// - Every answer carries X-Request-ID, refusals included (OpenSandbox's outermost
//   middleware does the same; the SDK reports it in its errors).
#include "front/opensandbox/routes.hpp"

#include <algorithm>
#include <cctype>

#include "front/opensandbox/access_token.hpp"
#include "front/opensandbox/execd/execd_routes.hpp"
#include "front/opensandbox/port_proxy.hpp"
#include "front/opensandbox/sandbox_json.hpp"
#include "front/opensandbox/sandbox_routes.hpp"
#include "util/util.hpp"

namespace dockgate::sidecar::opensandbox {

namespace {

struct route {
  std::string_view method;
  std::string_view pattern;  // literal segments, {id} and {port} one segment each
  handler serve;
};

const route routes[] = {
    {"POST", "/sandboxes", create_sandbox},
    {"GET", "/sandboxes", list_sandboxes},
    {"GET", "/sandboxes/{id}", get_sandbox},
    {"DELETE", "/sandboxes/{id}", delete_sandbox},
    {"POST", "/sandboxes/{id}/pause", pause_sandbox},
    {"POST", "/sandboxes/{id}/resume", resume_sandbox},
    {"POST", "/sandboxes/{id}/renew-expiration", renew_expiration},
    {"PATCH", "/sandboxes/{id}/metadata", patch_metadata},
    {"GET", "/sandboxes/{id}/endpoints/{port}", get_endpoint},
    {"POST", "/metrics/events", metrics_event},
};

// Whether `path` matches `pattern`, what its holes matched in `args`.
bool matches(std::string_view pattern, std::string_view path, route_args& args) {
  while (!pattern.empty() || !path.empty()) {
    if (!pattern.starts_with('/') || !path.starts_with('/')) return false;
    pattern.remove_prefix(1), path.remove_prefix(1);
    const auto p_end = std::min(pattern.find('/'), pattern.size());
    const auto s_end = std::min(path.find('/'), path.size());
    const auto want = pattern.substr(0, p_end), got = path.substr(0, s_end);
    if (want == "{id}" && !got.empty())
      args.id = got;
    else if (want == "{port}" && !got.empty())
      args.port = got;
    else if (want != got)
      return false;
    pattern.remove_prefix(p_end), path.remove_prefix(s_end);
  }
  return true;
}

// The path without a leading /v1 (every route is served at both).
std::string_view unversioned(std::string_view path) {
  if (path == "/v1") return "/";
  if (path.starts_with("/v1/")) path.remove_prefix(3);
  return path;
}

// /sandboxes/{id}/proxy/{port}[/rest]: the sandbox, the port and the rest ("" for none).
struct proxy_target {
  std::string id;
  std::string_view port, rest;
};
std::optional<proxy_target> proxy_path(std::string_view path) {
  constexpr std::string_view head = "/sandboxes/";
  if (!path.starts_with(head)) return std::nullopt;
  path.remove_prefix(head.size());
  const auto slash = path.find('/');
  if (slash == std::string_view::npos || slash == 0) return std::nullopt;
  proxy_target t{std::string(path.substr(0, slash)), {}, {}};
  path.remove_prefix(slash);
  if (!path.starts_with("/proxy/")) return std::nullopt;
  path.remove_prefix(7);
  const auto end = std::min(path.find('/'), path.size());
  if (end == 0) return std::nullopt;
  t.port = path.substr(0, end);
  t.rest = path.substr(end);
  return t;
}

std::string lower_case(std::string s) {
  for (auto& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

bool same_in_constant_time(std::string_view sent, const std::string& expected) {
  unsigned char diff = sent.size() == expected.size() ? 0 : 1;
  for (std::size_t i = 0; i < expected.size(); ++i)
    diff |= static_cast<unsigned char>(expected[i] ^ (i < sent.size() ? sent[i] : 0));
  return diff == 0;
}

// The SDK's egress API (port 18080, OpenSandbox's specs/egress-api.yaml), read-only: GET
// /policy answers the sandbox's own list (fixed at create, enforced by the egress proxy);
// a change of it, the credential vault and the rest are not offered.
http_reply egress_api(session_core& core, const http_request& r, const proxy_target& t) {
  if (t.rest != "/policy")
    return error(501, "NOT_SUPPORTED",
                 "egress API: only GET /policy is served (the sandbox's networkPolicy)");
  if (r.method != "GET")
    return error(501, "NOT_SUPPORTED",
                 "egress API: a sandbox's networkPolicy is fixed at create (the egress proxy "
                 "reads it from the sidecar); " +
                     r.method + " /policy is not offered");
  auto s = core.registry.find(t.id);
  if (!s || !s->egress_policy)
    return error(501, "NOT_SUPPORTED",
                 "egress API: this sandbox has no network (SANDBOX_NETWORK=none), so no policy");
  return {200, R"({"status":"ok","mode":")" +
                   std::string(s->egress_policy->empty() ? "deny_all" : "allow_list") +
                   R"(","enforcementMode":"proxy","policy":)" +
                   network_policy_json(*s->egress_policy) + "}"};
}

// The sandbox a lifecycle path names (/sandboxes/{id}[/…]), or "".
std::string sandbox_named(std::string_view path) {
  constexpr std::string_view head = "/sandboxes/";
  if (!path.starts_with(head)) return {};
  path.remove_prefix(head.size());
  return std::string(path.substr(0, path.find('/')));
}

http_reply serve_proxy(session_core& core, const http_request& r, const proxy_target& t, caller who,
                       const fleet_hook& fleet) {
  const auto token = r.field("x-execd-access-token");
  if (who == caller::client && (!token || !access_token_valid(core.config_of, t.id, *token)))
    return error(401, "INVALID_ACCESS_TOKEN",
                 "the sandbox's access token (X-EXECD-ACCESS-TOKEN, from GET "
                 "/v1/sandboxes/{id}/endpoints/{port}) is missing or wrong");
  if (fleet)
    if (auto elsewhere = fleet(r, t.id, false)) return *elsewhere;
  // A dormant sandbox comes back before the call is served (sessions/session_dormancy.cpp).
  if (auto refused = core.registry.wake(t.id)) return reply(*refused);
  if (t.port == "44772") return execd::serve(core, r, t.id, t.rest);
  if (t.port == "18080") return egress_api(core, r, t);
  return forward_to_port(core, r, t.id, t.port, t.rest);
}

std::optional<http_reply> refused_key(const config& c, const http_request& r) {
  if (c.allow_no_auth) return std::nullopt;
  const auto key = r.field("open-sandbox-api-key");
  if (!key) return error(401, "MISSING_API_KEY", "the OPEN-SANDBOX-API-KEY header is missing");
  if (!same_in_constant_time(*key, c.api_key))
    return error(401, "INVALID_API_KEY", "the OPEN-SANDBOX-API-KEY header is not the API key");
  return std::nullopt;
}

http_reply route_request(session_core& core, const http_request& r, caller who,
                         const fleet_hook& fleet) {
  if (r.path == "/health") {
    if (r.method != "GET") return error(405, "GENERAL::METHOD_NOT_ALLOWED", "GET /health only");
    return {200, R"({"status":"healthy"})"};
  }
  const std::string_view path = unversioned(r.path);
  if (auto target = proxy_path(path)) return serve_proxy(core, r, *target, who, fleet);
  if (who == caller::client)
    if (auto refused = refused_key(core.config_of, r)) return *refused;
  if (const std::string sid = sandbox_named(path); fleet && !sid.empty()) {
    const bool deleting = r.method == "DELETE" && path.size() == 11 + sid.size();
    if (auto elsewhere = fleet(r, sid, deleting)) return *elsewhere;
  }
  bool other_method = false;
  for (const auto& route : routes) {
    route_args args;
    if (!matches(route.pattern, path, args)) continue;
    if (route.method == r.method) return route.serve(core, r, args);
    other_method = true;
  }
  if (other_method)
    return error(405, "GENERAL::METHOD_NOT_ALLOWED",
                 r.method + " is not allowed on " + valid_utf8(r.path));
  return error(404, "GENERAL::NOT_FOUND", "no route " + valid_utf8(r.path));
}

}  // namespace

bool claims(std::string_view path) {
  return path == "/health" || path == "/v1" || path.starts_with("/v1/") || path == "/sandboxes" ||
         path.starts_with("/sandboxes/") || path == "/metrics/events";
}

http_reply serve(session_core& core, const http_request& r, caller who, const fleet_hook& fleet) {
  const std::string request_id = request_id_of(r);
  http_reply answer = route_request(core, r, who, fleet);
  // Added here to every answer that has none: execd's handler (the proxy path) sets its
  // own, and a streamed answer wrote its fields when it opened. One field, never two.
  const bool has_id = std::any_of(answer.headers.begin(), answer.headers.end(), [](const auto& f) {
    return lower_case(f.first) == "x-request-id";
  });
  if (!has_id) answer.headers.emplace_back("X-Request-ID", request_id);
  return answer;
}

std::size_t max_body(const config& c, std::string_view path) {
  // An upload through the proxy path: the file and its multipart framing (its parts'
  // heads and the metadata part, a few KiB; 64 KiB allowed).
  if (auto target = proxy_path(unversioned(path)); target && target->rest == "/files/upload")
    return static_cast<std::size_t>(c.max_upload_bytes) + 65536;
  return static_cast<std::size_t>(c.max_body_bytes);
}

}  // namespace dockgate::sidecar::opensandbox

#pragma once
// OpenSandbox's answer shapes (docs/opensandbox-api.md): every error is
// {"code": …, "message": …} with the status OpenSandbox gives that case, and every answer
// carries X-Request-ID (the request's own when it sent a non-blank one, else a new one).
// Internal to the sidecar library.

#include <string>
#include <string_view>

#include "dockgate/client/engine.hpp"
#include "front/http_server.hpp"
#include "util/ids.hpp"
#include "util/refusal.hpp"

namespace dockgate::sidecar::opensandbox {

inline http_reply error(unsigned status, std::string_view code, std::string_view message) {
  std::string body = "{\"code\":";
  client::append_json_string(body, code);
  body += ",\"message\":";
  client::append_json_string(body, message);
  return {status, body + "}"};
}

// A refusal of the core: its status, and a code in OpenSandbox's form (DOMAIN::CASE).
inline http_reply reply(const refusal& r) {
  switch (r.kind) {
    case refusal_kind::invalid:
      return error(400, "SANDBOX::INVALID_PARAMETER", r.message);
    case refusal_kind::not_found:
      return error(404, "SANDBOX::NOT_FOUND", r.message);
    case refusal_kind::too_large:
      return error(413, "SANDBOX::TOO_LARGE", r.message);
    case refusal_kind::busy:
      return error(429, "SANDBOX::BUSY", r.message);
    case refusal_kind::conflict:
      return error(409, "SANDBOX::STATE_CONFLICT", r.message);
    case refusal_kind::unavailable:
      return error(503, "SANDBOX::UNAVAILABLE", r.message);
    case refusal_kind::engine_failed:
      return error(502, "DOCKER::ENGINE_ERROR", r.message);
    case refusal_kind::failed:
      return error(500, "GENERAL::UNKNOWN_ERROR", r.message);
  }
  return error(500, "GENERAL::UNKNOWN_ERROR", r.message);
}

// The request's X-Request-ID when it sent a non-blank one, else 32 new hex digits (as
// OpenSandbox's server makes them).
inline std::string request_id_of(const http_request& r) {
  if (auto id = r.field("x-request-id");
      id && id->find_first_not_of(" \t") != std::string_view::npos)
    return std::string(*id);
  return random_hex(16);
}

}  // namespace dockgate::sidecar::opensandbox

#pragma once
// A request of the Aivory API that names a session: the session found and locked for it
// (session_registry::acquire), or the refusal as the Aivory answer (400 malformed id,
// 404 unknown or not running, 429 busy). Internal to the sidecar library.

#include <optional>
#include <string>

#include "front/aivory/replies.hpp"
#include "front/http_server.hpp"
#include "front/request.hpp"
#include "sessions/session_registry.hpp"

namespace dockgate::sidecar::aivory {

inline std::optional<http_reply> acquire(session_registry& registry, const std::string& id,
                                         held_session& out) {
  if (auto refused = registry.acquire(id, out)) return reply(*refused);
  return std::nullopt;
}

// For routes whose body names only a session ({"session_id": …}): parsed (422 FastAPI
// shapes), then the session acquired.
inline std::optional<http_reply> session_request(session_registry& registry, const http_request& r,
                                                 held_session& out) {
  body_fields f(r.body);
  if (f.error) return f.error;
  std::optional<http_reply> err;
  auto sid = f.string("session_id", true, err);
  if (err) return err;
  return acquire(registry, *sid, out);
}

}  // namespace dockgate::sidecar::aivory

#pragma once
// The OpenSandbox front (docs/design.md, "A front per API"; docs/opensandbox-api.md): the
// lifecycle API of OpenSandbox's specs/sandbox-lifecycle.yml at /v1 and at /, its key in
// OPEN-SANDBOX-API-KEY, and execd's API on the server-proxy path
// /v1/sandboxes/{id}/proxy/{port}/… (execd/execd_routes.hpp), over the same session core
// as the Aivory front. Internal to the sidecar library.

#include <cstddef>
#include <string_view>

#include "core/session_core.hpp"
#include "front/http_server.hpp"

namespace dockgate::sidecar::opensandbox {

// Whether `path` is this front's: /health, /v1/… or /sandboxes… (no Aivory path is).
bool claims(std::string_view path);
// `r` answered: authenticated (the API key, or on the proxy path the sandbox's access
// token), routed, every answer with X-Request-ID; errors as {code, message}.
http_reply serve(session_core& core, const http_request& r);
// The body limit for `path` (an upload through the proxy path: SANDBOX_MAX_UPLOAD_BYTES
// plus its multipart framing; the rest: SANDBOX_MAX_BODY_BYTES).
std::size_t max_body(const config& c, std::string_view path);

}  // namespace dockgate::sidecar::opensandbox

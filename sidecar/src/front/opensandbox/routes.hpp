#pragma once
// The OpenSandbox front (docs/design.md, "A front per API"; docs/opensandbox-api.md): the
// lifecycle API of OpenSandbox's specs/sandbox-lifecycle.yml at /v1 and at /, its key in
// OPEN-SANDBOX-API-KEY, and execd's API on the server-proxy path
// /v1/sandboxes/{id}/proxy/{port}/… (execd/execd_routes.hpp), over the same session core
// as the Aivory front. Internal to the sidecar library.

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "core/session_core.hpp"
#include "front/http_server.hpp"

namespace dockgate::sidecar::opensandbox {

// Whether `path` is this front's: /health, /v1/… or /sandboxes… (no Aivory path is).
bool claims(std::string_view path);
// Who the caller was found to be before the front reads the call: a client (checked here:
// the API key, or on the proxy path the sandbox's access token), or a fleet member whose
// signature the service checked (it authenticated the client; the client's credentials
// never travel on the hop).
enum class caller { client, fleet_member };
// A call naming sandbox `sid`, which this sidecar may not hold: the fleet's answer (the
// holder's, forwarded; a takeover's refusal), or nullopt to serve it here. `deleting`:
// DELETE /sandboxes/{id} itself.
using fleet_hook = std::function<std::optional<http_reply>(const http_request& r,
                                                           const std::string& sid, bool deleting)>;
// `r` answered: authenticated, passed to the fleet when it names a sandbox held elsewhere,
// routed, every answer with X-Request-ID; errors as {code, message}.
http_reply serve(session_core& core, const http_request& r, caller who = caller::client,
                 const fleet_hook& fleet = {});
// The body limit for `path` (an upload through the proxy path: SANDBOX_MAX_UPLOAD_BYTES
// plus its multipart framing; the rest: SANDBOX_MAX_BODY_BYTES).
std::size_t max_body(const config& c, std::string_view path);

}  // namespace dockgate::sidecar::opensandbox

#pragma once
// execd's API (OpenSandbox's specs/execd-api.yaml) as the sidecar serves it on the
// server-proxy path of a sandbox's execd port, over exec through the gate: no daemon in
// the sandbox, no port published (docs/opensandbox-api.md, "execd"). The caller (the
// OpenSandbox front's serve) has checked the sandbox's access token. Internal to the
// sidecar library.

#include <string>
#include <string_view>

#include "core/session_core.hpp"
#include "front/http_server.hpp"

namespace dockgate::sidecar::opensandbox::execd {

// execd's port, as the SDK asks for it (GET …/endpoints/44772).
inline constexpr unsigned port = 44772;

// `r` (its path the part after /proxy/44772, "" meaning "/") for sandbox `sandbox_id`,
// answered as execd answers it: streams as server-sent events of one JSON object per line,
// errors as {code, message}.
http_reply serve(session_core& core, const http_request& r, const std::string& sandbox_id,
                 std::string_view path);

}  // namespace dockgate::sidecar::opensandbox::execd

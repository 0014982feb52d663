#pragma once
// OpenSandbox's Sandbox object as the lifecycle front writes it (specs/sandbox-lifecycle.yml,
// components/schemas/Sandbox; docs/opensandbox-api.md): a session seen as a sandbox, and the
// RFC 3339 times of its answers and requests. Internal to the sidecar library.

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dockgate/sidecar/config.hpp"
#include "sessions/session.hpp"

namespace dockgate::sidecar::opensandbox {

// The metadata key under which a sandbox keeps the entrypoint it was created with (its
// words joined by spaces: only the keep-alive forms are accepted, whose words hold none).
// The `opensandbox.io/` prefix is reserved: a client can neither set nor patch it, and no
// answer shows it among the metadata. Kept in the session's labels, so it survives an
// adoption.
inline constexpr std::string_view entrypoint_key = "opensandbox.io/entrypoint";
inline constexpr std::string_view reserved_prefix = "opensandbox.io/";

// The key of the Sandbox object's `extensions` under which the isolation report is given
// (its JSON text: extensions are a map of strings).
inline constexpr std::string_view isolation_extension_key = "dockgate.io/isolation";

// The entrypoints this slice accepts: what the container's own keep-alive already does.
const std::vector<std::vector<std::string>>& keep_alive_entrypoints();

// `t` as RFC 3339 in UTC with milliseconds and a Z: 2026-12-07T11:39:53.120Z.
std::string rfc3339(std::chrono::system_clock::time_point t);
// An RFC 3339 date-time (fraction optional, Z or ±hh:mm) of the years 1900-2261, or nullopt.
std::optional<std::chrono::system_clock::time_point> parse_rfc3339(std::string_view text);

// "Running" or "Paused" (session::paused).
std::string_view state_of(const session& s);

// The Sandbox object of `s`: id, image {uri} (`with_image`; a CreateSandboxResponse has
// none), status {state}, metadata (its client's labels, none of the reserved ones),
// entrypoint, expiresAt (only when it has an expiry), networkPolicy (the list in force,
// under SANDBOX_NETWORK=allowlist), extensions (the isolation report), createdAt.
std::string sandbox_json(const session& s, const config& c, bool with_image);

// OpenSandbox's NetworkPolicy of a session's own egress list: its rules in order, then deny.
std::string network_policy_json(const egress_rules& rules);

}  // namespace dockgate::sidecar::opensandbox

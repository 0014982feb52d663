#pragma once
// What a session's record in the fleet's store must carry but no reader of the store may
// see (a sandbox's environment: its API keys, its tokens): sealed with AES-256-GCM under a
// key derived from the fleet's key (SANDBOX_FLEET_KEY_FILE: HMAC-SHA256 of a fixed label),
// bound to the session's id, so only a fleet member can open it, only for that session,
// and a change by a store writer is found. Internal to the sidecar library.
//
// Why not leave it out of the record: a takeover must make the same sandbox (its
// environment is part of what its client asked for: nothing is lost to a takeover); why
// not in clear: the store is the fleet's, its readers are not all trusted with secrets
// (docs/sidecar.md, "Fleet").

#include <optional>
#include <string>
#include <string_view>

namespace dockgate::sidecar {

// "v1:" + hex(nonce(12) | ciphertext | tag(16)); `bound_to` is authenticated, not stored.
std::string seal(std::string_view fleet_key, std::string_view bound_to, std::string_view plain);
// The text sealed by seal() under the same key for the same `bound_to`; nullopt for
// anything else (another key, another session, a change, not our form).
std::optional<std::string> unseal(std::string_view fleet_key, std::string_view bound_to,
                                  std::string_view sealed);

}  // namespace dockgate::sidecar

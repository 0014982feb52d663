#pragma once
// The per-sandbox access token of the execd proxy path
// (/v1/sandboxes/{id}/proxy/{port}/…): HMAC-SHA256 under SANDBOX_API_KEY of the sandbox's
// id, so it is valid for that sandbox only, needs no state, and survives a restart or a
// takeover by a fleet member with the same key. The lifecycle front hands it out in the
// `headers` of GET …/endpoints/{port}; the SDK sends it back on every call to that
// endpoint, and the proxy path checks it in constant time. Internal to the sidecar library.

#include <string>
#include <string_view>

#include "dockgate/sidecar/config.hpp"
#include "util/hmac.hpp"

namespace dockgate::sidecar::opensandbox {

// The header the token travels in (execd's own name for its access token).
inline constexpr std::string_view access_token_header = "X-EXECD-ACCESS-TOKEN";

inline std::string access_token(const config& c, std::string_view sandbox_id) {
  return hmac_sha256_hex(c.api_key, "dockgate-opensandbox-proxy\n" + std::string(sandbox_id));
}

// Whether `sent` is the token of `sandbox_id`, compared in constant time.
inline bool access_token_valid(const config& c, std::string_view sandbox_id,
                               std::string_view sent) {
  const std::string expected = access_token(c, sandbox_id);
  unsigned char diff = sent.size() == expected.size() ? 0 : 1;
  for (std::size_t i = 0; i < expected.size(); ++i)
    diff |= static_cast<unsigned char>(expected[i] ^ (i < sent.size() ? sent[i] : 0));
  return diff == 0;
}

}  // namespace dockgate::sidecar::opensandbox

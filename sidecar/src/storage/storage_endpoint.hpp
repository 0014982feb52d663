#pragma once
// Which object-storage endpoints a request's storage block may make the sidecar connect
// to (SANDBOX_STORAGE_ENDPOINTS and the providers' public endpoints).
//
// Invariant: an allowed endpoint means exactly what the operator wrote. Both sides are
// reduced to one origin — scheme, host, port — before they are compared: the scheme is
// http or https, the host is lower case without its trailing root dot (an IPv6 literal in
// its canonical text), the port is the one written or the scheme's default (443, 80). A
// bare name or `*.suffix` is https on port 443 unless a port is written; `:443` written
// out is the same origin as none. Anything the connector could read differently from
// this parser — userinfo (`user@host`), a path, a query, a second colon outside
// brackets, an empty or out-of-range port, characters a host name does not have — is no
// origin at all, so it is never allowed. Without this, a bare name admitted every port
// of its host: a port probe for whoever holds the API key.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dockgate::sidecar {

struct endpoint_origin {
  bool https = true;
  std::string host;  // lower case, no trailing dot; IPv6 in brackets, canonical
  std::uint16_t port = 443;
  bool operator==(const endpoint_origin&) const = default;
};

// The origin of a request's endpoint (`http://host[:port]` or `https://host[:port]`,
// trailing slashes allowed), or nullopt when it is not one.
std::optional<endpoint_origin> parse_endpoint_origin(std::string_view endpoint);

// One entry of SANDBOX_STORAGE_ENDPOINTS: `scheme://host[:port]`, `host[:port]` (https)
// or `*.suffix[:port]` (https; a scheme may be written before it). `wildcard`: `host` is
// the suffix (without `*.`), matched by hosts with at least one more label.
struct allowed_endpoint {
  endpoint_origin origin;
  bool wildcard = false;
};
std::optional<allowed_endpoint> parse_allowed_endpoint(std::string_view entry);

// Whether `endpoint` is the origin of one of `allowed` (entries that do not parse allow
// nothing) or a provider's public endpoint (https on 443: s3.<region>.amazonaws.com,
// s3.oss-<region>.aliyuncs.com).
bool endpoint_allowed(std::string_view endpoint, const std::vector<std::string>& allowed);

}  // namespace dockgate::sidecar

#pragma once
// The route table: the only code that interprets a Docker API request target.
//
// Invariant: a target is either routed exactly as dockerd would route it, or refused.
// dockerd decodes percent-escapes and cleans paths before routing, so the router never
// repairs a target: percent-encoded bytes, `//`, dot segments, a trailing slash and any
// version prefix but a canonical `/v<major>.<minor>` in the supported range are refused.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "dockgate/http/method.hpp"
#include "dockgate/policy/operation.hpp"

namespace dockgate::policy {

struct api_version {
  std::uint16_t major = 0;
  std::uint16_t minor = 0;
  auto operator<=>(const api_version&) const = default;
};

// "1.41" (as /version's ApiVersion says it) -> {1, 41}; and back.
std::optional<api_version> parse_api_version(std::string_view text);
std::string to_string(api_version v);

// Oldest version accepted: below 1.24 ContainerStart takes a host config in its body.
inline constexpr api_version min_api_version{1, 24};
// Newest version the route table knows (the latest specification).
inline constexpr api_version max_api_version{1, 56};

struct route {
  operation op{};
  std::optional<api_version> version;  // from the `/vX.Y` prefix, if any
  std::string_view path;               // the target's path without the version prefix
  std::string_view param;              // the `{id}` / `{name}` path parameter, if any
  std::string_view query;              // raw query (without `?`), still percent-encoded
  bool operator==(const route&) const = default;
};

enum class route_error : std::uint8_t {
  not_origin_form,      // target does not start with `/` (absolute-form, authority, `*`)
  bad_character,        // byte outside the RFC 3986 path or query grammar, or `#`
  percent_encoded,      // `%` in the path
  empty_segment,        // `//` anywhere in the path
  dot_segment,          // `.` or `..` segment
  trailing_slash,       // path ends in `/` (other than `/` itself)
  bad_version,          // `/v...` prefix not spelled `v<major>.<minor>`
  unsupported_version,  // version outside [min_api_version, max_api_version]
  bad_query,            // malformed percent-escape, `;`, or an empty key
  bad_parameter,        // a `/` in a one-segment path parameter (legacy link alias)
  ambiguous,            // more than one route matches
  method_not_allowed,   // the path is known, the method is not
  not_found,            // no operation has this path
};

std::string_view route_error_text(route_error e);
// HTTP status the proxy answers a routing error with (400, 404 or 405).
unsigned route_error_status(route_error e);

using route_result = std::variant<route, route_error>;

// Routes a request. `target` is the request-target exactly as received.
route_result route_request(http::method method, std::string_view target);

// The route table itself: every (method, path template, operation), from the specification.
struct route_template {
  http::method method;
  std::string_view path_template;  // "/containers/{id}/start"
  operation op;
};
std::span<const route_template> route_templates();

}  // namespace dockgate::policy

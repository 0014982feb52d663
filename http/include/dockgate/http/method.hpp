#pragma once
// The request methods the Engine API uses. Only their exact, upper-case spelling is a
// method: anything else is refused before routing (dockerd's router matches them exactly).

#include <cstdint>
#include <optional>
#include <string_view>

namespace dockgate::http {

// `patch` is never an Engine API method (parse_method refuses it): it is there for the
// sidecar's HTTP server, whose OpenSandbox front has PATCH /sandboxes/{id}/metadata.
enum class method : std::uint8_t { get, head, post, put, delete_, patch };

std::optional<method> parse_method(std::string_view token);
// The Engine API's methods and PATCH (the sidecar's APIs).
std::optional<method> parse_method_or_patch(std::string_view token);
std::string_view method_name(method m);

}  // namespace dockgate::http

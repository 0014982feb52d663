#pragma once
// The one writer of Docker's error body, `{"message":"..."}`, which the docker CLI and
// other Engine API clients print as is.

#include <string>
#include <string_view>

namespace dockgate::common {

// Appends `s` to `out` as the inside of a JSON string (quotes not included).
void append_json_escaped(std::string& out, std::string_view s);

// `{"message":"<message>"}` followed by a newline, as dockerd writes it.
std::string docker_error_body(std::string_view message);

}  // namespace dockgate::common

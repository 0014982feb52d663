#pragma once
// The request methods the Engine API uses. Only their exact, upper-case spelling is a
// method: anything else is refused before routing (dockerd's router matches them exactly).

#include <cstdint>
#include <optional>
#include <string_view>

namespace dockgate::http {

enum class method : std::uint8_t { get, head, post, put, delete_ };

std::optional<method> parse_method(std::string_view token);
std::string_view method_name(method m);

}  // namespace dockgate::http

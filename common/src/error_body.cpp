#include "dockgate/common/error_body.hpp"

namespace dockgate::common {

void append_json_escaped(std::string& out, std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out += "\\u00";
          out += hex[c >> 4];
          out += hex[c & 0xf];
        } else {
          out += static_cast<char>(c);
        }
    }
  }
}

std::string docker_error_body(std::string_view message) {
  std::string out;
  out.reserve(message.size() + 16);
  out += R"({"message":")";
  append_json_escaped(out, message);
  out += "\"}\n";
  return out;
}

}  // namespace dockgate::common

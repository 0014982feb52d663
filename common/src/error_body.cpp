#include "dockgate/common/error_body.hpp"

#include <array>

namespace dockgate::common {

namespace {
// The bytes a JSON string cannot hold as they are: controls, DEL, quote, backslash.
constexpr std::array<bool, 256> needs_escape = [] {
  std::array<bool, 256> t{};
  for (int c = 0; c < 0x20; ++c) t[static_cast<std::size_t>(c)] = true;
  t[0x7f] = t['"'] = t['\\'] = true;
  return t;
}();
}  // namespace

void append_json_escaped(std::string& out, std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  // Runs of characters that need no escape are appended whole (most values are one run).
  std::size_t run = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (!needs_escape[c]) continue;
    out.append(s.data() + run, i - run);
    run = i + 1;
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default: {
        const char escaped[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 0xf]};
        out.append(escaped, 6);
      }
    }
  }
  out.append(s.data() + run, s.size() - run);
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

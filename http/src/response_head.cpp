// Response heads from the daemon. See response_head.hpp for what is refused.
#include "dockgate/http/response_head.hpp"

#include <array>
#include <cstdint>

#include "dockgate/http/request_head.hpp"

namespace dockgate::http {

namespace {

// What a byte is to the field-line scan, one table look-up per byte. In a name (before
// its colon): 1 refused (anything but a token's byte: so no obs-fold, no "Name :", no line
// without a colon, no control or non-ASCII byte a client might read past), 2 the colon that
// ends it. In a value: 1 refused (a control character but tab, DEL), 2 the CR that ends it.
constexpr std::array<std::uint8_t, 256> name_bytes = [] {
  std::array<std::uint8_t, 256> t{};
  for (int c = 0; c < 256; ++c)
    t[static_cast<std::size_t>(c)] = is_tchar(static_cast<unsigned char>(c)) ? 0 : 1;
  t[':'] = 2;
  return t;
}();
constexpr std::array<std::uint8_t, 256> value_bytes = [] {
  std::array<std::uint8_t, 256> t{};
  for (int c = 0; c < 0x20; ++c) t[static_cast<std::size_t>(c)] = 1;
  t['\t'] = 0;
  t[0x7f] = 1;
  t['\r'] = 2;
  return t;
}();

bool parse_digits(std::string_view v, std::uint64_t& n) {
  if (v.empty() || v.size() > 18) return false;
  n = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return true;
}

}  // namespace

bool parse_response_head(std::string_view data, response_head& out) {
  if (data.size() < 4 || !data.ends_with("\r\n\r\n")) return false;
  out = response_head{};
  // Status line: HTTP/1.x SP 3DIGIT SP reason. Every byte of it is checked below (the
  // reason's too), so a CR or LF in it cannot pass.
  const auto eol = data.find("\r\n");
  const std::string_view line = data.substr(0, eol);
  if (line.size() < 12 || !line.starts_with("HTTP/1.") || line[8] != ' ' ||
      (line.size() > 12 && line[12] != ' '))
    return false;
  if (line[7] == '1')
    out.version_minor = 1;
  else if (line[7] == '0')
    out.version_minor = 0;
  else
    return false;
  std::uint64_t status = 0;
  if (!parse_digits(line.substr(9, 3), status) || status < 100) return false;
  out.status = static_cast<unsigned>(status);
  out.reason = line.size() > 13 ? line.substr(13) : std::string_view{};
  for (unsigned char c : out.reason)
    if ((c < 0x20 && c != '\t') || c == 0x7f) return false;
  out.keep_alive = out.version_minor == 1;

  // Field lines, in one pass over their bytes: a name of token bytes before a colon (so
  // no obs-fold, no line without a colon), a value without control characters but
  // tab, and CRLF at the end (a CR or LF anywhere else is refused).
  out.fields = data.substr(eol + 2, data.size() - 2 - (eol + 2));
  bool saw_te = false, connection_seen = false;
  for (std::string_view rest = out.fields; !rest.empty();) {
    const char* s = rest.data();
    const std::size_t n = rest.size();
    std::size_t i = 0;
    for (; i < n; ++i)
      if (const auto k = name_bytes[static_cast<unsigned char>(s[i])]) {
        if (k == 1) return false;
        break;
      }
    if (i == 0 || i == n) return false;
    const std::string_view name(s, i);
    const std::size_t value_begin = ++i;
    for (; i < n; ++i)
      if (const auto k = value_bytes[static_cast<unsigned char>(s[i])]) {
        if (k == 1) return false;
        break;
      }
    if (i + 1 >= n || s[i + 1] != '\n') return false;
    std::string_view value(s + value_begin, i - value_begin);
    rest.remove_prefix(i + 2);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
      value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);

    // The fields the relay reads, told apart by length first (most of a head is others).
    switch (name.size()) {
      case 14:
        if (iequals(name, "content-length")) {
          std::uint64_t v = 0;
          if (out.content_length || !parse_digits(value, v)) return false;
          out.content_length = v;
        }
        break;
      case 17:
        if (iequals(name, "transfer-encoding")) {
          if (saw_te || !iequals(value, "chunked")) return false;
          saw_te = true;
          out.chunked = true;
        }
        break;
      case 12:
        if (iequals(name, "content-type")) out.content_type = value;
        break;
      case 10:
        if (iequals(name, "connection")) {
          if (connection_seen) return false;
          connection_seen = true;
          if (iequals(value, "close"))
            out.keep_alive = false;
          else if (iequals(value, "keep-alive") && out.version_minor == 0)
            out.keep_alive = true;
        }
        break;
      default:
        break;
    }
  }
  return !(out.chunked && out.content_length);
}

}  // namespace dockgate::http

// Response heads from the daemon. See response_head.hpp for what is refused.
#include "dockgate/http/response_head.hpp"

#include "dockgate/http/request_head.hpp"

namespace dockgate::http {

namespace {

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
  if (line.size() < 12 || !line.starts_with("HTTP/1.") || line[8] != ' ' || (line.size() > 12 && line[12] != ' '))
    return false;
  if (line[7] == '1') out.version_minor = 1;
  else if (line[7] == '0') out.version_minor = 0;
  else return false;
  std::uint64_t status = 0;
  if (!parse_digits(line.substr(9, 3), status) || status < 100) return false;
  out.status = static_cast<unsigned>(status);
  out.reason = line.size() > 13 ? line.substr(13) : std::string_view{};
  for (unsigned char c : out.reason)
    if ((c < 0x20 && c != '\t') || c == 0x7f) return false;
  out.keep_alive = out.version_minor == 1;

  // Field lines, in one pass over their bytes: a name without space or tab before a colon
  // (so no obs-fold, no line without a colon), a value without control characters but
  // tab, and CRLF at the end (a CR or LF anywhere else is refused).
  out.fields = data.substr(eol + 2, data.size() - 2 - (eol + 2));
  bool saw_te = false, connection_seen = false;
  for (std::string_view rest = out.fields; !rest.empty();) {
    const char* s = rest.data();
    const std::size_t n = rest.size();
    std::size_t i = 0;
    for (; i < n && s[i] != ':'; ++i)
      if (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n') return false;
    if (i == 0 || i == n) return false;
    const std::string_view name(s, i);
    const std::size_t value_begin = ++i;
    for (; i < n && s[i] != '\r'; ++i) {
      const auto c = static_cast<unsigned char>(s[i]);
      if ((c < 0x20 && c != '\t') || c == 0x7f) return false;
    }
    if (i + 1 >= n || s[i + 1] != '\n') return false;
    std::string_view value(s + value_begin, i - value_begin);
    rest.remove_prefix(i + 2);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);

    if (iequals(name, "content-length")) {
      std::uint64_t v = 0;
      if (out.content_length || !parse_digits(value, v)) return false;
      out.content_length = v;
    } else if (iequals(name, "transfer-encoding")) {
      if (saw_te || !iequals(value, "chunked")) return false;
      saw_te = true;
      out.chunked = true;
    } else if (iequals(name, "content-type")) {
      out.content_type = value;
    } else if (iequals(name, "connection")) {
      if (connection_seen) return false;
      connection_seen = true;
      if (iequals(value, "close")) out.keep_alive = false;
      else if (iequals(value, "keep-alive") && out.version_minor == 0) out.keep_alive = true;
    }
  }
  return !(out.chunked && out.content_length);
}

}  // namespace dockgate::http

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
  for (std::size_t i = 0; i < data.size(); ++i) {
    if (data[i] == '\r' && (i + 1 == data.size() || data[i + 1] != '\n')) return false;
    if (data[i] == '\n' && (i == 0 || data[i - 1] != '\r')) return false;
  }
  out = response_head{};
  // Status line: HTTP/1.x SP 3DIGIT SP reason
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

  out.fields = data.substr(eol + 2, data.size() - 2 - (eol + 2));
  bool ok = true, saw_te = false, connection_seen = false;
  for_each_field(out.fields, [&](std::string_view name, std::string_view value) {
    if (name.empty() || name.find_first_of(" \t") != std::string_view::npos) ok = false;
    for (unsigned char c : value)
      if ((c < 0x20 && c != '\t') || c == 0x7f) ok = false;
    if (iequals(name, "content-length")) {
      std::uint64_t n = 0;
      if (out.content_length || !parse_digits(value, n)) ok = false;
      out.content_length = n;
    } else if (iequals(name, "transfer-encoding")) {
      if (saw_te || !iequals(value, "chunked")) ok = false;
      saw_te = true;
      out.chunked = true;
    } else if (iequals(name, "content-type")) {
      out.content_type = value;
    } else if (iequals(name, "connection")) {
      if (connection_seen) ok = false;
      connection_seen = true;
      if (iequals(value, "close")) out.keep_alive = false;
      else if (iequals(value, "keep-alive") && out.version_minor == 0) out.keep_alive = true;
    }
  });
  // Field lines: no obs-fold, each with a colon.
  for (std::string_view rest = out.fields; ok && !rest.empty();) {
    const auto end = rest.find("\r\n");
    const std::string_view field = rest.substr(0, end);
    if (field.empty() || field.front() == ' ' || field.front() == '\t' || field.find(':') == std::string_view::npos ||
        field.front() == ':')
      ok = false;
    rest.remove_prefix(end + 2);
  }
  if (out.chunked && out.content_length) ok = false;
  return ok;
}

}  // namespace dockgate::http

// Strict request-head parsing. See request_head.hpp for the invariant kept here.
#include "dockgate/http/request_head.hpp"

#include <algorithm>
#include <cstring>

namespace dockgate::http {

namespace {

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Calls f(token) for each comma-separated element of a list header, trimmed.
template <class F>
void each_list_token(std::string_view v, F&& f) {
  while (true) {
    auto comma = v.find(',');
    auto token = trim_ows(v.substr(0, comma));
    if (!token.empty()) f(token);
    if (comma == std::string_view::npos) break;
    v.remove_prefix(comma + 1);
  }
}

std::optional<std::uint64_t> parse_content_length(std::string_view v) {
  // Digits only: no sign, no spaces inside, no list ("5, 5"), at most 18 digits.
  if (v.empty() || v.size() > 18) return std::nullopt;
  std::uint64_t n = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return n;
}

}  // namespace

std::string_view head_error_text(head_error e) {
  switch (e) {
    case head_error::too_large:
      return "request head too large";
    case head_error::too_many_headers:
      return "too many header fields";
    case head_error::bad_line_ending:
      return "line endings must be CRLF";
    case head_error::bad_request_line:
      return "malformed request line";
    case head_error::unknown_method:
      return "method not supported";
    case head_error::bad_version:
      return "only HTTP/1.1 and HTTP/1.0 are supported";
    case head_error::bad_header:
      return "malformed header field";
    case head_error::bad_content_length:
      return "malformed or repeated Content-Length";
    case head_error::bad_transfer_encoding:
      return "only a single Transfer-Encoding: chunked on HTTP/1.1 is supported";
    case head_error::content_length_and_chunked:
      return "Content-Length and Transfer-Encoding together";
    case head_error::bad_host:
      return "missing or repeated Host";
    case head_error::bad_expect:
      return "unsupported Expect";
  }
  return "bad request";
}

std::size_t find_head_end(std::string_view data) {
  // One look at each LF, in order: a bare one (no CR before it) ends a malformed head right
  // after it (waiting for a CRLFCRLF that an LF-only client never sends would only hold the
  // connection); one followed by CRLF ends the head.
  const char* const begin = data.data();
  const char* const end = begin + data.size();
  for (const char* p = begin; p != end; ++p) {
    p = static_cast<const char*>(std::memchr(p, '\n', static_cast<std::size_t>(end - p)));
    if (p == nullptr) return 0;
    if (p == begin || p[-1] != '\r') return static_cast<std::size_t>(p - begin) + 1;
    if (end - p >= 3 && p[1] == '\r' && p[2] == '\n')
      return static_cast<std::size_t>(p - begin) + 3;
  }
  return 0;
}

std::optional<head_error> parse_request_head(std::string_view data, request_head& out,
                                             bool patch_too) {
  if (data.size() > max_head_bytes) return head_error::too_large;
  if (data.size() < 4 || !data.ends_with("\r\n\r\n")) return head_error::bad_line_ending;
  // Every CR must be followed by LF and every LF preceded by CR.
  for (std::size_t i = 0; i < data.size(); ++i) {
    if (data[i] == '\r' && (i + 1 == data.size() || data[i + 1] != '\n'))
      return head_error::bad_line_ending;
    if (data[i] == '\n' && (i == 0 || data[i - 1] != '\r')) return head_error::bad_line_ending;
  }
  out = request_head{};

  // Request line: METHOD SP request-target SP HTTP-version
  auto eol = data.find("\r\n");
  std::string_view line = data.substr(0, eol);
  auto sp1 = line.find(' ');
  if (sp1 == std::string_view::npos || sp1 == 0) return head_error::bad_request_line;
  auto sp2 = line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || sp2 == sp1 + 1) return head_error::bad_request_line;
  std::string_view method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string_view version = line.substr(sp2 + 1);
  for (unsigned char c : method)
    if (!is_tchar(c)) return head_error::bad_request_line;
  for (unsigned char c : target)
    if (c <= 0x20 || c >= 0x7f) return head_error::bad_request_line;
  auto m = patch_too ? http::parse_method_or_patch(method) : http::parse_method(method);
  if (!m) return head_error::unknown_method;
  if (version == "HTTP/1.1")
    out.version_minor = 1;
  else if (version == "HTTP/1.0")
    out.version_minor = 0;
  else
    return head_error::bad_version;
  out.method = *m;
  out.target = target;
  out.keep_alive = out.version_minor == 1;

  int host_count = 0;
  bool saw_transfer_encoding = false;
  std::size_t pos = eol + 2;
  while (pos < data.size()) {
    auto end = data.find("\r\n", pos);
    std::string_view field = data.substr(pos, end - pos);
    pos = end + 2;
    if (field.empty()) break;  // the blank line ending the head
    if (field.front() == ' ' || field.front() == '\t') return head_error::bad_header;  // obs-fold
    auto colon = field.find(':');
    if (colon == std::string_view::npos || colon == 0) return head_error::bad_header;
    std::string_view name = field.substr(0, colon);
    for (unsigned char c : name)
      if (!is_tchar(c)) return head_error::bad_header;  // also refuses "Name :"
    std::string_view value = trim_ows(field.substr(colon + 1));
    for (unsigned char c : value)
      if ((c < 0x20 && c != '\t') || c == 0x7f) return head_error::bad_header;
    if (out.field_count == max_header_count) return head_error::too_many_headers;
    out.fields[out.field_count++] = {name, value};

    if (iequals(name, "content-length")) {
      if (out.content_length) return head_error::bad_content_length;
      out.content_length = parse_content_length(value);
      if (!out.content_length) return head_error::bad_content_length;
    } else if (iequals(name, "transfer-encoding")) {
      if (saw_transfer_encoding || !iequals(value, "chunked"))
        return head_error::bad_transfer_encoding;
      saw_transfer_encoding = true;
      out.chunked = true;
    } else if (iequals(name, "host")) {
      if (++host_count > 1) return head_error::bad_host;
    } else if (iequals(name, "connection")) {
      if (!out.connection.empty()) return head_error::bad_header;
      out.connection = value;
    } else if (iequals(name, "upgrade")) {
      if (!out.upgrade.empty()) return head_error::bad_header;
      out.upgrade = value;
    } else if (iequals(name, "expect")) {
      if (!iequals(value, "100-continue") || out.expect_continue) return head_error::bad_expect;
      out.expect_continue = true;
    }
  }
  if (out.chunked && out.content_length) return head_error::content_length_and_chunked;
  if (out.chunked && out.version_minor == 0) return head_error::bad_transfer_encoding;
  if (out.version_minor == 1 && host_count == 0) return head_error::bad_host;
  each_list_token(out.connection, [&](std::string_view token) {
    if (iequals(token, "close"))
      out.keep_alive = false;
    else if (iequals(token, "keep-alive") && out.version_minor == 0)
      out.keep_alive = true;
    else if (iequals(token, "upgrade"))
      out.connection_upgrade = true;
  });
  return std::nullopt;
}

bool is_hop_by_hop(std::string_view name, std::string_view connection_value) {
  static constexpr std::string_view fixed[] = {
      "connection", "keep-alive",          "proxy-connection",  "te",
      "trailer",    "transfer-encoding",   "upgrade",           "content-length",
      "expect",     "proxy-authorization", "proxy-authenticate"};
  for (auto f : fixed)
    if (iequals(name, f)) return true;
  bool listed = false;
  each_list_token(connection_value,
                  [&](std::string_view token) { listed = listed || iequals(token, name); });
  return listed;
}

}  // namespace dockgate::http

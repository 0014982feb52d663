#pragma once
// Strict HTTP/1.1 request-head parsing (the gate's clients, and the sidecar's).
//
// Invariant: a head is accepted only if every HTTP implementation on the path (the
// client, this proxy, Go's net/http in dockerd) frames it the same way. Everything with
// two readings is refused: bare LF or CR, obs-fold, whitespace before a colon,
// Content-Length together with Transfer-Encoding, repeated or malformed Content-Length,
// any transfer coding but a single `chunked`, chunked on HTTP/1.0, unknown methods, and
// heads over the size and count limits. After a refusal the connection is closed.

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "dockgate/http/method.hpp"

namespace dockgate::http {

inline constexpr std::size_t max_head_bytes = 64 * 1024;
inline constexpr std::size_t max_header_count = 100;

enum class head_error : std::uint8_t {
  too_large,              // head over max_head_bytes
  too_many_headers,       // over max_header_count
  bad_line_ending,        // bare LF or bare CR
  bad_request_line,       // not `METHOD SP target SP HTTP/1.x`
  unknown_method,         // not an exact Engine API method (GET, HEAD, POST, PUT, DELETE)
  bad_version,            // not HTTP/1.1 or HTTP/1.0
  bad_header,             // malformed field line, obs-fold, control bytes
  bad_content_length,     // empty, signed, non-digit, repeated or too large
  bad_transfer_encoding,  // anything but one `chunked`, or on HTTP/1.0
  content_length_and_chunked,
  bad_host,    // missing (HTTP/1.1) or repeated Host
  bad_expect,  // Expect other than 100-continue
};

std::string_view head_error_text(head_error e);

struct header_field {
  std::string_view name;
  std::string_view value;
};

struct request_head {
  http::method method{};
  std::string_view target;
  unsigned version_minor = 1;  // HTTP/1.<minor>
  std::optional<std::uint64_t> content_length;
  bool chunked = false;
  bool keep_alive = true;           // from the version and Connection
  bool connection_upgrade = false;  // Connection lists `upgrade`
  bool expect_continue = false;
  std::string_view upgrade;     // Upgrade header value, if any
  std::string_view connection;  // Connection header value, if any (for hop-by-hop names)
  std::array<header_field, max_header_count> fields{};
  std::size_t field_count = 0;

  bool has_body() const { return chunked || (content_length && *content_length > 0); }
};

struct head_parse_result {
  std::optional<head_error> error;
  std::size_t head_size = 0;  // bytes of the head including the final CRLFCRLF
};

// Looks for the end of a head in `data`. Returns its size (including CRLFCRLF), 0 if it is
// not complete yet. A bare LF ends the head early (right after it), so that parse refuses
// it at once instead of waiting for a CRLFCRLF that will not come.
std::size_t find_head_end(std::string_view data);

// Parses a complete head (`data` is exactly the head, ending in CRLFCRLF). On success
// `out` views into `data`.
// `patch_too`: PATCH is a method too (the sidecar's server; never the gate's, which reads
// the Engine API's methods only: PATCH is unknown_method there).
std::optional<head_error> parse_request_head(std::string_view data, request_head& out,
                                             bool patch_too = false);

// True when `name` is a hop-by-hop header: never forwarded as the client wrote it.
bool is_hop_by_hop(std::string_view name, std::string_view connection_value);

// A token's byte (RFC 9110 5.6.2: a method, a field name).
constexpr bool is_tchar(unsigned char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  switch (c) {
    case '!':
    case '#':
    case '$':
    case '%':
    case '&':
    case '\'':
    case '*':
    case '+':
    case '-':
    case '.':
    case '^':
    case '_':
    case '`':
    case '|':
    case '~':
      return true;
    default:
      return false;
  }
}

// ASCII case-insensitive equality (header names, tokens). Inline: the parsers call it
// for every field they read.
inline bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const char x = a[i], y = b[i];
    if (x != y && ((x | 0x20) != (y | 0x20) || (x | 0x20) < 'a' || (x | 0x20) > 'z')) return false;
  }
  return true;
}

}  // namespace dockgate::http

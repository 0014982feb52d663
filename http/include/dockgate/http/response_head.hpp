#pragma once
// Response heads from the daemon, parsed in place in the buffer they were read into.
//
// The daemon (Go's net/http) writes well-formed heads; anything else is refused (the
// client gets a 502) rather than relayed with a reading of our own: bare CR or LF,
// obs-fold, malformed or repeated Content-Length, a transfer coding other than a single
// chunked, both framings at once.

#include <cstdint>
#include <optional>
#include <string_view>

namespace dockgate::http {

struct response_head {
  unsigned status = 0;
  unsigned version_minor = 1;
  std::string_view reason;
  std::optional<std::uint64_t> content_length;
  bool chunked = false;
  bool keep_alive = true;  // the daemon keeps the connection after this response
  std::string_view content_type;
  std::string_view fields;  // the field lines, each ending in CRLF (no blank line)

  // A body follows the head unless the status or the request's method says there is none.
  bool has_body(bool head_request) const {
    return !head_request && status >= 200 && status != 204 && status != 304;
  }
};

// Parses a complete head (`data` ends in CRLFCRLF; find_head_end finds it). On success
// `out` views into `data`. false: not a head the proxy relays.
bool parse_response_head(std::string_view data, response_head& out);

}  // namespace dockgate::http

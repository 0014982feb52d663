#pragma once
// multipart/form-data (RFC 7578) read from a whole request body: what execd's
// POST /files/upload sends (the SDK: part "metadata" then part "file", per file). Pure: bytes
// in, parts or the reason out; every limit explicit. Internal to the sidecar library.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dockgate::sidecar::opensandbox::execd {

struct multipart_part {
  std::string name;          // Content-Disposition's name
  std::string filename;      // its filename ("" if none)
  std::string content_type;  // the part's Content-Type ("" if none)
  std::string body;
};

struct multipart_limits {
  std::size_t max_parts = 256;
  std::size_t max_part_bytes = 64 * 1024 * 1024;
  std::size_t max_header_bytes = 8 * 1024;  // one part's header block
};

// The parts, or why the body is not multipart/form-data of that boundary (`error`), or
// which limit it passed (`too_large`).
struct multipart_result {
  std::vector<multipart_part> parts;
  std::string error;  // "": parsed
  bool too_large = false;
};

// The boundary of a Content-Type "multipart/form-data; boundary=…" (quoted or not), or
// nullopt when it is not one (or the boundary is empty or longer than RFC 2046's 70).
std::optional<std::string> multipart_boundary(std::string_view content_type);

multipart_result parse_multipart(std::string_view body, std::string_view boundary,
                                 const multipart_limits& limits = {});

}  // namespace dockgate::sidecar::opensandbox::execd

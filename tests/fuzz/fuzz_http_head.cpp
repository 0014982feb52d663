// libFuzzer target: the strict request-head parser. Beyond "no crash", it checks what an
// accepted head must satisfy, so a parser change that lets an ambiguous head through fails.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "dockgate/http/request_head.hpp"

using namespace dockgate::http;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::size_t end = find_head_end(text);
  if (end == 0) return 0;
  request_head head;
  if (parse_request_head(text.substr(0, end), head)) return 0;
  const std::string_view accepted = text.substr(0, end);
  // Accepted heads: CRLF only, no CL+TE, chunked only on 1.1, target in origin or other form
  // but without spaces or control bytes, and every field inside the head.
  for (std::size_t i = 0; i < accepted.size(); ++i)
    if (accepted[i] == '\n' && (i == 0 || accepted[i - 1] != '\r')) std::abort();
  if (head.chunked && head.content_length) std::abort();
  if (head.chunked && head.version_minor != 1) std::abort();
  for (char c : head.target)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) std::abort();
  for (std::size_t i = 0; i < head.field_count; ++i) {
    const auto& f = head.fields[i];
    if (f.name.empty() || f.name.data() < accepted.data() ||
        f.value.data() + f.value.size() > accepted.data() + accepted.size())
      std::abort();
  }
  return 0;
}

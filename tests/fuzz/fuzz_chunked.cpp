// libFuzzer target: the chunked decoder. Decoding in one piece and byte by byte must agree
// (a body that two readers split differently is a smuggling vector).
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "dockgate/http/chunked.hpp"

using namespace dockgate::http;

namespace {
// Returns the decoded body and whether decoding ended in done (true) or error/need_more.
std::pair<std::string, int> decode(std::string_view in, std::size_t step) {
  chunked_decoder d;
  std::string body, pending;
  std::size_t fed = 0;
  for (;;) {
    auto r = d.feed(pending);
    if (r.state == chunked_decoder::status::data) body.append(r.data);
    pending.erase(0, r.consumed);
    if (r.state == chunked_decoder::status::error) return {body, 2};
    if (r.state == chunked_decoder::status::done) return {body, 1};
    if (r.state == chunked_decoder::status::data) continue;
    if (fed == in.size()) return {body, 0};
    const std::size_t n = std::min(step, in.size() - fed);
    pending.append(in.substr(fed, n));
    fed += n;
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  auto whole = decode(in, in.size() + 1);
  auto bytewise = decode(in, 1);
  if (whole.second != bytewise.second) std::abort();
  if (whole.second == 1 && whole.first != bytewise.first) std::abort();
  return 0;
}

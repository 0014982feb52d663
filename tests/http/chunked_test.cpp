#include "dockgate/http/chunked.hpp"

#include <catch2/catch.hpp>
#include <string>

using namespace dockgate::http;

namespace {
// Feeds `in` in pieces of `step` bytes; returns the decoded body, or "<error>".
std::string decode(std::string_view in, std::size_t step) {
  chunked_decoder d;
  std::string body;
  std::string pending;
  std::size_t fed = 0;
  while (true) {
    auto r = d.feed(pending);
    if (r.state == chunked_decoder::status::data) body += r.data;  // views into pending
    pending.erase(0, r.consumed);
    if (r.state == chunked_decoder::status::error) return "<error>";
    if (r.state == chunked_decoder::status::done) return pending.empty() ? body : body + "<extra>";
    if (r.state == chunked_decoder::status::data) continue;
    if (fed == in.size()) return "<incomplete>";
    auto n = std::min(step, in.size() - fed);
    pending += in.substr(fed, n);
    fed += n;
  }
}
}  // namespace

TEST_CASE("chunked bodies decode in any split", "[chunked]") {
  for (std::size_t step : {1, 2, 3, 7, 1000}) {
    CAPTURE(step);
    CHECK(decode("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", step) == "hello world");
    CHECK(decode("0\r\n\r\n", step).empty());
    CHECK(decode("A\r\n0123456789\r\n0\r\n\r\n", step) == "0123456789");
    CHECK(decode("5\r\nhello\r\n", step) == "<incomplete>");
  }
}

TEST_CASE("chunk extensions, trailers and malformed sizes are refused", "[chunked]") {
  for (auto bad : {"5;ext=1\r\nhello\r\n0\r\n\r\n", "5 \r\nhello\r\n0\r\n\r\n",
                   " 5\r\nhello\r\n0\r\n\r\n", "5\nhello\r\n0\r\n\r\n", "5\r\nhelloX\r\n0\r\n\r\n",
                   "0\r\nTrailer: x\r\n\r\n", "\r\n", "-5\r\nhello\r\n0\r\n\r\n",
                   "0x5\r\nhello\r\n0\r\n\r\n", "1000000000000000\r\n", "5\r\nhello\n0\r\n\r\n"}) {
    CAPTURE(bad);
    CHECK(decode(bad, 1000) == "<error>");
    CHECK(decode(bad, 1) == "<error>");
  }
}

#include "dockgate/common/percent.hpp"

#include <catch2/catch.hpp>
#include <string>
#include <string_view>

using namespace dockgate::common;

namespace {
using namespace std::string_literals;

// One input, what each encoding writes: `query` for a Docker query value and an S3 query
// value (percent_keep::unreserved), `path` for an S3 object key in a path
// (percent_keep::unreserved_and_slash). The rows are the bytes where encodings in the wild
// differ: space and '+' (form encoding writes '+'), '/', '~' and '*' (Go's QueryEscape and
// JavaScript's encodeURIComponent disagree on them), bytes above 0x7f, '%' itself.
struct encode_row {
  std::string input;
  std::string query;
  std::string path;
};
const encode_row encode_rows[] = {
    {"", "", ""},
    {"AZaz09-._~", "AZaz09-._~", "AZaz09-._~"},
    {" ", "%20", "%20"},
    {"+", "%2B", "%2B"},
    {"/", "%2F", "/"},
    {"a/b/", "a%2Fb%2F", "a/b/"},
    {"~", "~", "~"},
    {"*", "%2A", "%2A"},
    {"%", "%25", "%25"},
    {"%41", "%2541", "%2541"},
    {"\xc3\xa9", "%C3%A9", "%C3%A9"},  // é in UTF-8: upper-case hex, one escape a byte
    {"\xff\x80", "%FF%80", "%FF%80"},
    {"\0\x01\x7f"s, "%00%01%7F", "%00%01%7F"},
    {"a b/c+d~e", "a%20b%2Fc%2Bd~e", "a%20b/c%2Bd~e"},
    {"=&?#:@!$'(),;[]", "%3D%26%3F%23%3A%40%21%24%27%28%29%2C%3B%5B%5D",
     "%3D%26%3F%23%3A%40%21%24%27%28%29%2C%3B%5B%5D"},
    {R"({"label":["dockgate.owner=p"]})", "%7B%22label%22%3A%5B%22dockgate.owner%3Dp%22%5D%7D",
     "%7B%22label%22%3A%5B%22dockgate.owner%3Dp%22%5D%7D"},
};

// How dockerd reads a query component (Go's url.ParseQuery): nullopt is a malformed escape.
struct decode_row {
  std::string input;
  std::optional<std::string> decoded;
};
const decode_row decode_rows[] = {
    {"", ""},
    {"abc", "abc"},
    {"a+b", "a b"},
    {"%20", " "},
    {"%2B", "+"},
    {"%2b", "+"},  // either case of hex digit
    {"%2F", "/"},
    {"/~*", "/~*"},  // bytes that need no escape are themselves
    {"%C3%A9", "\xc3\xa9"},
    {"\xc3\xa9", "\xc3\xa9"},  // raw bytes above 0x7f pass as they are
    {"a%00b", "a\0b"s},
    {"%41", "A"},  // an escape that ends the text
    {"%", std::nullopt},
    {"%4", std::nullopt},
    {"a%4", std::nullopt},
    {"%4g", std::nullopt},
    {"%g4", std::nullopt},
    {"%%41", std::nullopt},
    {"100%", std::nullopt},
};
}  // namespace

TEST_CASE("percent_encode: unreserved bytes kept, '/' only for a path, upper-case %XX",
          "[percent]") {
  for (const auto& row : encode_rows) {
    CAPTURE(row.input);
    CHECK(percent_encode(row.input) == row.query);
    CHECK(percent_encode(row.input, percent_keep::unreserved) == row.query);
    CHECK(percent_encode(row.input, percent_keep::unreserved_and_slash) == row.path);
  }
}

TEST_CASE("percent_decode_query reads as dockerd's url.ParseQuery does", "[percent]") {
  for (const auto& row : decode_rows) {
    CAPTURE(row.input);
    CHECK(percent_decode_query(row.input) == row.decoded);
  }
}

TEST_CASE("every byte survives percent_encode then percent_decode_query", "[percent]") {
  std::string all;
  for (int c = 0; c < 256; ++c) all += static_cast<char>(c);
  for (auto keep : {percent_keep::unreserved, percent_keep::unreserved_and_slash}) {
    const std::string encoded = percent_encode(all, keep);
    CHECK(encoded.find('+') == std::string::npos);  // '+' would decode as a space
    CHECK(percent_decode_query(encoded) == all);
  }
}

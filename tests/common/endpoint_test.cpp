#include "dockgate/common/endpoint.hpp"

#include <catch2/catch.hpp>

#include "dockgate/common/error_body.hpp"

using namespace dockgate::common;

TEST_CASE("endpoints parse as DOCKER_HOST does", "[endpoint]") {
  auto u = parse_endpoint("unix:///var/run/docker.sock");
  REQUIRE(u);
  CHECK(u->scheme == endpoint::kind::unix_socket);
  CHECK(u->path == "/var/run/docker.sock");
  auto t = parse_endpoint("tcp://127.0.0.1:2375");
  REQUIRE(t);
  CHECK(t->host == "127.0.0.1");
  CHECK(t->port == 2375);
  auto v6 = parse_endpoint("tcp://[::1]:2376");
  REQUIRE(v6);
  CHECK(v6->host == "::1");
  CHECK(v6->to_string() == "tcp://[::1]:2376");
  auto tls = parse_endpoint("tls://127.0.0.1:2376");
  REQUIRE(tls);
  CHECK(tls->scheme == endpoint::kind::tls);
  CHECK(tls->to_string() == "tls://127.0.0.1:2376");
  for (auto bad :
       {"", "unix://", "unix://relative.sock", "tcp://", "tcp://host", "tcp://:80", "tcp://h:0",
        "tcp://h:65536", "tcp://h:80/path", "tcp://::1:80", "http://h:80", "tcp://h:8x"}) {
    CAPTURE(bad);
    std::string why;
    CHECK_FALSE(parse_endpoint(bad, &why));
    CHECK_FALSE(why.empty());
  }
}

TEST_CASE("Docker error bodies are escaped JSON", "[error_body]") {
  CHECK(docker_error_body("no") == "{\"message\":\"no\"}\n");
  CHECK(docker_error_body("a\"b\\c\n\x01") == "{\"message\":\"a\\\"b\\\\c\\n\\u0001\"}\n");
}

TEST_CASE("JSON escaping: every byte, alone and between runs of plain text", "[error_body]") {
  // What each byte becomes, spelled out: the escapes JSON names, \u00XX for the other
  // control characters and DEL, every other byte (UTF-8 included) as it is.
  auto expected = [](unsigned char c) -> std::string {
    static constexpr char hex[] = "0123456789abcdef";
    switch (c) {
      case '"':
        return "\\\"";
      case '\\':
        return "\\\\";
      case '\n':
        return "\\n";
      case '\r':
        return "\\r";
      case '\t':
        return "\\t";
      default:
        if (c < 0x20 || c == 0x7f) return std::string("\\u00") + hex[c >> 4] + hex[c & 0xf];
        return std::string(1, static_cast<char>(c));
    }
  };
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    const std::string one(1, c);
    for (const std::string& input :
         {one, "ab" + one, one + "cd", "ab" + one + "cd" + one + one + "ef"}) {
      std::string want = "prefix:";
      for (char in : input) want += expected(static_cast<unsigned char>(in));
      std::string out = "prefix:";
      append_json_escaped(out, input);
      CHECK(out == want);
    }
  }
  std::string out;
  append_json_escaped(out, "");
  CHECK(out.empty());
}

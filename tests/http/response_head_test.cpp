#include "dockgate/http/response_head.hpp"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

using namespace dockgate::http;

namespace {
constexpr std::string_view go_inspect_head =
    "HTTP/1.1 200 OK\r\nApi-Version: 1.41\r\nContent-Type: "
    "application/json\r\nDocker-Experimental: false\r\n"
    "Ostype: linux\r\nServer: Docker/20.10.24+dfsg1 (linux)\r\nDate: Tue, 01 Dec 2026 02:02:19 "
    "GMT\r\n"
    "Transfer-Encoding: chunked\r\n\r\n";

bool parses(std::string_view head) {
  response_head r;
  return parse_response_head(head, r);
}
}  // namespace

namespace {

// "name=value" for each field line of an accepted head, the value without its spaces.
std::vector<std::string> field_list(std::string_view fields) {
  std::vector<std::string> out;
  while (!fields.empty()) {
    const auto eol = fields.find("\r\n");
    const std::string_view line = fields.substr(0, eol);
    fields.remove_prefix(eol + 2);
    const auto colon = line.find(':');
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
      value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
    out.push_back(std::string(line.substr(0, colon)) + "=" + std::string(value));
  }
  return out;
}

}  // namespace

TEST_CASE("response head: what the daemon writes is read in place",
          "[unit][proxy][response_head]") {
  response_head r;
  REQUIRE(parse_response_head(go_inspect_head, r));
  CHECK(r.status == 200);
  CHECK(r.reason == "OK");
  CHECK(r.chunked);
  CHECK_FALSE(r.content_length);
  CHECK(r.keep_alive);
  CHECK(r.content_type == "application/json");
  const std::vector<std::string> names = field_list(r.fields);
  REQUIRE(names.size() == 7);
  CHECK(names.front() == "Api-Version=1.41");
  CHECK(names.back() == "Transfer-Encoding=chunked");

  REQUIRE(parse_response_head(
      "HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.raw-stream\r\n"
      "Connection: Upgrade\r\nUpgrade: tcp\r\n\r\n",
      r));
  CHECK(r.status == 101);
  CHECK(r.content_type == "application/vnd.docker.raw-stream");
  REQUIRE(parse_response_head(
      "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", r));
  CHECK(*r.content_length == 0);
  CHECK_FALSE(r.keep_alive);
  CHECK_FALSE(r.has_body(false));
  REQUIRE(parse_response_head("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", r));
  CHECK(r.has_body(false));
  CHECK_FALSE(r.has_body(true));  // HEAD
  REQUIRE(parse_response_head("HTTP/1.0 200 OK\r\n\r\n", r));
  CHECK_FALSE(r.keep_alive);
  REQUIRE(parse_response_head("HTTP/1.1 304\r\n\r\n", r));  // no reason phrase
  CHECK(r.reason.empty());
  CHECK_FALSE(r.has_body(false));
}

TEST_CASE("response head: what has two readings is refused", "[unit][proxy][response_head]") {
  CHECK_FALSE(parses("HTTP/1.1 200 OK\nContent-Length: 1\r\n\r\n"));  // bare LF
  CHECK_FALSE(parses("HTTP/1.1 200 OK\r\nA: b\rc\r\n\r\n"));          // bare CR
  CHECK_FALSE(parses("HTTP/1.1 200 OK\r\nA: b\r\n c\r\n\r\n"));       // obs-fold
  CHECK_FALSE(parses("HTTP/1.1 200 OK\r\nNo colon\r\n\r\n"));
  CHECK_FALSE(parses("HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n"));
  CHECK_FALSE(parses("HTTP/1.1 200 OK\r\n: x\r\n\r\n"));
  // A name is a token: no control, separator or non-ASCII byte that one reader might skip
  // and another keep ("Content-Length\0" is not Content-Length to the gate).
  CHECK_FALSE(parses(std::string_view("HTTP/1.1 200 OK\r\nContent-Length\0: 1\r\n\r\n", 39)));
  CHECK_FALSE(parses("HTTP/1.1 200 OK\r\nX\x01Y: v\r\n\r\n"));
  CHECK_FALSE(parses("HTTP/1.1 200 OK\r\nNa\"me: v\r\n\r\n"));
  CHECK_FALSE(parses("HTTP/1.1 200 OK\r\nN(a): v\r\n\r\n"));
  CHECK_FALSE(parses("HTTP/1.1 200 OK\r\nN\x80: v\r\n\r\n"));
  CHECK_FALSE(parses("HTTP/1.1 200 OK\r\nN\x7f: v\r\n\r\n"));
  CHECK(parses("HTTP/1.1 200 OK\r\nX-a_b!#$%&'*+.^`|~9: v\r\n\r\n"));
  CHECK_FALSE(parses("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n"));
  CHECK_FALSE(parses("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n"));
  CHECK_FALSE(parses("HTTP/1.1 200 OK\r\nContent-Length: 1, 1\r\n\r\n"));
  CHECK_FALSE(parses("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"));
  CHECK_FALSE(parses(
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"));
  CHECK_FALSE(parses("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n"));
  CHECK_FALSE(parses("HTTP/1.1 200 OK\r\nConnection: close\r\nConnection: keep-alive\r\n\r\n"));
  CHECK_FALSE(parses("HTTP/1.1 2000 OK\r\n\r\n"));
  CHECK_FALSE(parses("HTTP/1.1 20x OK\r\n\r\n"));
  CHECK_FALSE(parses("HTTP/2.0 200 OK\r\n\r\n"));
  CHECK_FALSE(parses("HTTP/1.1 099 Odd\r\n\r\n"));
  CHECK_FALSE(parses("HTTP/1.1 200 O\x01K\r\n\r\n"));
  CHECK_FALSE(parses("HTTP/1.1 200 OK\r\nA: \x7f\r\n\r\n"));
  CHECK_FALSE(parses("HTTP/1.1 200 OK\r\n"));  // not a whole head
}

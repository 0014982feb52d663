#include "dockgate/http/request_head.hpp"

#include <catch2/catch.hpp>
#include <string>

using namespace dockgate::http;

namespace {
std::optional<head_error> parse(std::string_view head) {
  request_head out;
  return parse_request_head(head, out);
}
}  // namespace

TEST_CASE("well-formed heads parse", "[http][request_head]") {
  request_head h;
  std::string_view text =
      "POST /v1.41/containers/create?name=x HTTP/1.1\r\n"
      "Host: docker\r\n"
      "User-Agent: Docker-Client/20.10.24 (linux)\r\n"
      "Content-Type: application/json\r\n"
      "Content-Length: 42\r\n"
      "\r\n";
  REQUIRE_FALSE(parse_request_head(text, h));
  CHECK(h.method == dockgate::http::method::post);
  CHECK(h.target == "/v1.41/containers/create?name=x");
  CHECK(h.content_length == 42u);
  CHECK_FALSE(h.chunked);
  CHECK(h.keep_alive);
  CHECK(h.field_count == 4);
  CHECK(h.fields[1].value == "Docker-Client/20.10.24 (linux)");

  REQUIRE_FALSE(
      parse_request_head("POST /v1.41/exec/abc/start HTTP/1.1\r\nHost: d\r\nConnection: Upgrade\r\n"
                         "Upgrade: tcp\r\nTransfer-Encoding: chunked\r\n\r\n",
                         h));
  CHECK(h.chunked);
  CHECK(h.connection_upgrade);
  CHECK(h.upgrade == "tcp");

  REQUIRE_FALSE(parse_request_head("GET /_ping HTTP/1.0\r\n\r\n", h));
  CHECK_FALSE(h.keep_alive);
  REQUIRE_FALSE(
      parse_request_head("GET /_ping HTTP/1.1\r\nHost: d\r\nConnection: close\r\n\r\n", h));
  CHECK_FALSE(h.keep_alive);
  REQUIRE_FALSE(parse_request_head("GET /_ping HTTP/1.1\r\nHost: d\r\nX-Empty:\r\n\r\n", h));
  CHECK(h.fields[1].value.empty());
}

TEST_CASE("ambiguous framing is refused", "[http][request_head]") {
  struct bad_case {
    std::string_view head;
    head_error error;
  };
  const bad_case cases[] = {
      // Content-Length and Transfer-Encoding together, in either order
      {"POST /x HTTP/1.1\r\nHost: d\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
       head_error::content_length_and_chunked},
      {"POST /x HTTP/1.1\r\nHost: d\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
       head_error::content_length_and_chunked},
      // repeated, empty, signed, listed, spaced, huge Content-Length
      {"POST /x HTTP/1.1\r\nHost: d\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n",
       head_error::bad_content_length},
      {"POST /x HTTP/1.1\r\nHost: d\r\nContent-Length:\r\n\r\n", head_error::bad_content_length},
      {"POST /x HTTP/1.1\r\nHost: d\r\nContent-Length: +3\r\n\r\n", head_error::bad_content_length},
      {"POST /x HTTP/1.1\r\nHost: d\r\nContent-Length: -1\r\n\r\n", head_error::bad_content_length},
      {"POST /x HTTP/1.1\r\nHost: d\r\nContent-Length: 3, 3\r\n\r\n",
       head_error::bad_content_length},
      {"POST /x HTTP/1.1\r\nHost: d\r\nContent-Length: 3 3\r\n\r\n",
       head_error::bad_content_length},
      {"POST /x HTTP/1.1\r\nHost: d\r\nContent-Length: 0x10\r\n\r\n",
       head_error::bad_content_length},
      {"POST /x HTTP/1.1\r\nHost: d\r\nContent-Length: 99999999999999999999\r\n\r\n",
       head_error::bad_content_length},
      {"POST /x HTTP/1.1\r\nHost: d\r\ncontent-length: 1\r\nCONTENT-LENGTH: 2\r\n\r\n",
       head_error::bad_content_length},
      // transfer codings other than one chunked, and chunked on HTTP/1.0
      {"POST /x HTTP/1.1\r\nHost: d\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
       head_error::bad_transfer_encoding},
      {"POST /x HTTP/1.1\r\nHost: d\r\nTransfer-Encoding: identity\r\n\r\n",
       head_error::bad_transfer_encoding},
      {"POST /x HTTP/1.1\r\nHost: d\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: "
       "chunked\r\n\r\n",
       head_error::bad_transfer_encoding},
      {"POST /x HTTP/1.1\r\nHost: d\r\nTransfer-Encoding: xchunked\r\n\r\n",
       head_error::bad_transfer_encoding},
      {"POST /x HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", head_error::bad_transfer_encoding},
      // line endings: bare LF, bare CR
      {"GET /x HTTP/1.1\nHost: d\r\n\r\n", head_error::bad_line_ending},
      {"GET /x HTTP/1.1\r\nHost: d\n\r\n", head_error::bad_line_ending},
      {"GET /x HTTP/1.1\r\nHost: d\rX: y\r\n\r\n", head_error::bad_line_ending},
      // obs-fold, space before colon, bad names, control bytes
      {"GET /x HTTP/1.1\r\nHost: d\r\nX-A: 1\r\n 2\r\n\r\n", head_error::bad_header},
      {"GET /x HTTP/1.1\r\nHost: d\r\nContent-Length : 3\r\n\r\n", head_error::bad_header},
      {"GET /x HTTP/1.1\r\nHost: d\r\n: v\r\n\r\n", head_error::bad_header},
      {"GET /x HTTP/1.1\r\nHost: d\r\nNoColon\r\n\r\n", head_error::bad_header},
      {"GET /x HTTP/1.1\r\nHost: d\r\nX: a\x01b\r\n\r\n", head_error::bad_header},
      {"GET /x HTTP/1.1\r\nHost: d\r\nConnection: close\r\nConnection: keep-alive\r\n\r\n",
       head_error::bad_header},
      // methods: lower-case, unknown, CONNECT
      {"get /x HTTP/1.1\r\nHost: d\r\n\r\n", head_error::unknown_method},
      {"CONNECT docker:2375 HTTP/1.1\r\nHost: d\r\n\r\n", head_error::unknown_method},
      {"OPTIONS * HTTP/1.1\r\nHost: d\r\n\r\n", head_error::unknown_method},
      {"PATCH /x HTTP/1.1\r\nHost: d\r\n\r\n", head_error::unknown_method},
      // request line shape and version
      {"GET  /x HTTP/1.1\r\nHost: d\r\n\r\n", head_error::bad_request_line},
      {"GET /x  HTTP/1.1\r\nHost: d\r\n\r\n", head_error::bad_version},
      {"GET /x\r\nHost: d\r\n\r\n", head_error::bad_request_line},
      {"GET /x HTTP/2.0\r\nHost: d\r\n\r\n", head_error::bad_version},
      {"GET /x http/1.1\r\nHost: d\r\n\r\n", head_error::bad_version},
      {"GET /x HTTP/1.1 \r\nHost: d\r\n\r\n", head_error::bad_version},
      {"GET /\x7f HTTP/1.1\r\nHost: d\r\n\r\n", head_error::bad_request_line},
      // Host
      {"GET /x HTTP/1.1\r\n\r\n", head_error::bad_host},
      {"GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", head_error::bad_host},
      // Expect
      {"POST /x HTTP/1.1\r\nHost: d\r\nExpect: 200-ok\r\n\r\n", head_error::bad_expect},
  };
  for (const auto& c : cases) {
    CAPTURE(c.head);
    auto err = parse(c.head);
    REQUIRE(err);
    CHECK(head_error_text(*err) == head_error_text(c.error));
  }
}

TEST_CASE("head limits", "[http][request_head]") {
  std::string many = "GET /x HTTP/1.1\r\nHost: d\r\n";
  for (std::size_t i = 0; i < max_header_count; ++i) many += "X-H: v\r\n";
  many += "\r\n";
  CHECK(parse(many) == head_error::too_many_headers);
  std::string big =
      "GET /x HTTP/1.1\r\nHost: d\r\nX: " + std::string(max_head_bytes, 'a') + "\r\n\r\n";
  CHECK(parse(big) == head_error::too_large);
}

TEST_CASE("find_head_end needs CRLFCRLF", "[http][request_head]") {
  CHECK(find_head_end("GET / HTTP/1.1\r\nHost: d\r\n\r\nrest") == 27);
  CHECK(find_head_end("GET / HTTP/1.1\r\nHost: d\r\n") == 0);
  CHECK(find_head_end("GET / HTTP/1.1\n\n") == 15);
  CHECK(find_head_end("GET / HTTP/1.1\r\nHost: d\n") == 24);
  // The first CRLFCRLF ends the head; a bare LF after it belongs to the body.
  CHECK(find_head_end("GET / HTTP/1.1\r\n\r\nbody\n") == 18);
  CHECK(find_head_end("\r\n\r\n") == 4);
  CHECK(find_head_end("\n") == 1);
  CHECK(find_head_end("GET / HTTP/1.1\r\nHost: d\r\n\r") == 0);   // not complete yet
  CHECK(find_head_end("GET / HTTP/1.1\r\nHost: d\r\n\n") == 26);  // a bare LF
  CHECK(find_head_end("") == 0);
  request_head h;
  CHECK(parse_request_head("GET / HTTP/1.1\n", h) == head_error::bad_line_ending);
}

TEST_CASE("hop-by-hop headers include those named by Connection", "[http][request_head]") {
  CHECK(is_hop_by_hop("Transfer-Encoding", ""));
  CHECK(is_hop_by_hop("keep-alive", ""));
  CHECK(is_hop_by_hop("Upgrade", ""));
  CHECK(is_hop_by_hop("X-Custom", "close, x-custom"));
  CHECK_FALSE(is_hop_by_hop("X-Registry-Auth", "close"));
  CHECK_FALSE(is_hop_by_hop("Host", ""));
}

TEST_CASE("PATCH is a method only where asked for (the sidecar's server), never the gate's",
          "[http]") {
  request_head h;
  const std::string_view patch = "PATCH /v1/sandboxes/x/metadata HTTP/1.1\r\nHost: d\r\n\r\n";
  CHECK(parse_request_head(patch, h) == head_error::unknown_method);
  REQUIRE_FALSE(parse_request_head(patch, h, true));
  CHECK(h.method == method::patch);
  CHECK(method_name(h.method) == "PATCH");
  CHECK(parse_request_head("patch /x HTTP/1.1\r\nHost: d\r\n\r\n", h, true) ==
        head_error::unknown_method);
  CHECK_FALSE(parse_method("PATCH"));
}

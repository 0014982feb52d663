#include <catch2/catch.hpp>

#include "dockgate/common/endpoint.hpp"
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
  for (auto bad : {"", "unix://", "unix://relative.sock", "tcp://", "tcp://host", "tcp://:80",
                   "tcp://h:0", "tcp://h:65536", "tcp://h:80/path", "tcp://::1:80", "http://h:80",
                   "tcp://h:8x"}) {
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

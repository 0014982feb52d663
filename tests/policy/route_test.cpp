#include "dockgate/policy/route.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <vector>

using namespace dockgate::policy;
namespace http = dockgate::http;

namespace {
struct routed_case {
  http::method method;
  std::string_view target;
  operation op;
  std::string_view param;
};

struct refused_case {
  http::method method;
  std::string_view target;
  route_error error;
};
}  // namespace

TEST_CASE("canonical targets route to their operation", "[router]") {
  const routed_case cases[] = {
      {http::method::get, "/_ping", operation::SystemPing, ""},
      {http::method::head, "/_ping", operation::SystemPingHead, ""},
      {http::method::get, "/v1.41/_ping", operation::SystemPing, ""},
      {http::method::get, "/v1.24/version", operation::SystemVersion, ""},
      {http::method::get, "/v1.41/containers/json?all=1&filters=%7B%22label%22%3A%5B%5D%7D",
       operation::ContainerList, ""},
      {http::method::post, "/v1.41/containers/create?name=web", operation::ContainerCreate, ""},
      {http::method::get, "/v1.41/containers/abc123/json", operation::ContainerInspect, "abc123"},
      {http::method::post, "/v1.41/containers/my_app.1-x/attach?stream=1&stdin=1",
       operation::ContainerAttach, "my_app.1-x"},
      {http::method::post, "/v1.41/exec/deadbeef/start", operation::ExecStart, "deadbeef"},
      {http::method::get, "/v1.41/exec/deadbeef/json", operation::ExecInspect, "deadbeef"},
      {http::method::delete_, "/v1.41/containers/abc?force=1", operation::ContainerDelete, "abc"},
      {http::method::post, "/v1.41/images/create?fromImage=busybox&tag=latest",
       operation::ImageCreate, ""},
      {http::method::get, "/v1.41/images/127.0.0.1:5000/library/busybox:latest/json",
       operation::ImageInspect, "127.0.0.1:5000/library/busybox:latest"},
      {http::method::get, "/images/busybox@sha256:abcd/json", operation::ImageInspect,
       "busybox@sha256:abcd"},
      {http::method::delete_, "/v1.41/images/a/b/c", operation::ImageDelete, "a/b/c"},
      {http::method::get, "/v1.41/images/json", operation::ImageList, ""},
      {http::method::get, "/v1.41/images/get?names=a", operation::ImageGetAll, ""},
      {http::method::get, "/v1.41/images/x/get", operation::ImageGet, "x"},
      {http::method::get, "/v1.41/events?since=1&until=2", operation::SystemEvents, ""},
      {http::method::post, "/v1.41/plugins/vieux/sshfs:latest/enable", operation::PluginEnable,
       "vieux/sshfs:latest"},
      {http::method::get, "/v1.41/distribution/docker.io/library/busybox/json",
       operation::DistributionInspect, "docker.io/library/busybox"},
      {http::method::post, "/v1.41/containers/c1/wait?condition=next-exit",
       operation::ContainerWait, "c1"},
      {http::method::get, "/v1.41/containers/c1/logs?follow=1&stdout=1", operation::ContainerLogs,
       "c1"},
      {http::method::post, "/session", operation::Session, ""},
      {http::method::get, "/v1.56/info", operation::SystemInfo, ""},
  };
  for (const auto& c : cases) {
    CAPTURE(c.target);
    auto result = route_request(c.method, c.target);
    REQUIRE(std::holds_alternative<route>(result));
    const auto& r = std::get<route>(result);
    CHECK(operation_name(r.op) == operation_name(c.op));
    CHECK(r.param == c.param);
  }
}

TEST_CASE("non-canonical and unknown targets are refused, never repaired", "[router]") {
  const refused_case cases[] = {
      // absolute-form, authority-form, asterisk-form
      {http::method::get, "http://localhost/v1.41/_ping", route_error::not_origin_form},
      {http::method::get, "localhost:2375", route_error::not_origin_form},
      {http::method::get, "*", route_error::not_origin_form},
      {http::method::get, "", route_error::not_origin_form},
      // percent-encoding of letters and of separators
      {http::method::post, "/v1.41/containers/%63reate", route_error::percent_encoded},
      {http::method::post, "/v1.41%2Fcontainers/create", route_error::percent_encoded},
      {http::method::get, "/v1.41/containers/a%2Fb/json", route_error::percent_encoded},
      {http::method::get, "/%761.41/_ping", route_error::percent_encoded},
      {http::method::get, "/v1.41/containers/abc%00/json", route_error::percent_encoded},
      // dot segments and doubled slashes
      {http::method::get, "/v1.41/containers/../images/json", route_error::dot_segment},
      {http::method::get, "/v1.41/./_ping", route_error::dot_segment},
      {http::method::get, "/v1.41/containers/..", route_error::dot_segment},
      {http::method::get, "//v1.41/_ping", route_error::empty_segment},
      {http::method::post, "/v1.41//containers/create", route_error::empty_segment},
      {http::method::get, "/v1.41/containers//json", route_error::empty_segment},
      // trailing slash
      {http::method::get, "/v1.41/_ping/", route_error::trailing_slash},
      {http::method::post, "/v1.41/containers/create/", route_error::trailing_slash},
      // version prefixes: every spelling but v<major>.<minor>, and out of range
      {http::method::get, "/v1.041/_ping", route_error::bad_version},
      {http::method::get, "/v01.41/_ping", route_error::bad_version},
      {http::method::get, "/v1..41/_ping", route_error::bad_version},
      {http::method::get, "/v1.4.1/_ping", route_error::bad_version},
      {http::method::get, "/v1/_ping", route_error::bad_version},
      {http::method::get, "/v./_ping", route_error::bad_version},
      {http::method::get, "/v.41/_ping", route_error::bad_version},
      {http::method::get, "/v1./_ping", route_error::bad_version},
      {http::method::get, "/v1.12/_ping", route_error::unsupported_version},
      {http::method::get, "/v1.23/containers/json", route_error::unsupported_version},
      {http::method::get, "/v2.0/_ping", route_error::unsupported_version},
      {http::method::get, "/v1.99/_ping", route_error::unsupported_version},
      {http::method::get, "/v1.41/v1.41/_ping", route_error::not_found},
      // forbidden bytes
      {http::method::get, "/v1.41/_ping#x", route_error::bad_character},
      {http::method::get, "/v1.41/containers/a b/json", route_error::bad_character},
      {http::method::get, "/v1.41/containers/a\\b/json", route_error::bad_character},
      {http::method::get, "/v1.41/containers/json?all=1#x", route_error::bad_character},
      {http::method::get, "/v1.41/containers/\xc3\xa9/json", route_error::bad_character},
      // query grammar
      {http::method::get, "/v1.41/containers/json?all=%zz", route_error::bad_query},
      {http::method::get, "/v1.41/containers/json?all=%4", route_error::bad_query},
      {http::method::get, "/v1.41/containers/json?all=1;size=1", route_error::bad_query},
      {http::method::get, "/v1.41/containers/json?=1", route_error::bad_query},
      {http::method::get, "/v1.41/containers/json?all=1&&size=1", route_error::bad_query},
      {http::method::get, "/v1.41/containers/json?all=1&", route_error::bad_query},
      // a `/` in a one-segment parameter: legacy link alias
      {http::method::get, "/v1.41/containers/parent/alias/json", route_error::bad_parameter},
      {http::method::post, "/v1.41/exec/a/b/start", route_error::bad_parameter},
      // unknown operations and wrong methods
      {http::method::get, "/v1.41/libpod/containers/json", route_error::not_found},
      {http::method::get, "/", route_error::not_found},
      {http::method::get, "/v1.41", route_error::not_found},
      {http::method::get, "/v1.41/containers", route_error::not_found},
      {http::method::get, "/v1.41/containers/create", route_error::method_not_allowed},
      {http::method::put, "/v1.41/_ping", route_error::method_not_allowed},
      {http::method::post, "/v1.41/images/json", route_error::method_not_allowed},
  };
  for (const auto& c : cases) {
    CAPTURE(c.target);
    auto result = route_request(c.method, c.target);
    REQUIRE(std::holds_alternative<route_error>(result));
    CHECK(route_error_text(std::get<route_error>(result)) == route_error_text(c.error));
  }
}

TEST_CASE("the route keeps the version, path and raw query", "[router]") {
  auto result = route_request(http::method::get, "/v1.41/containers/json?filters=%7B%7D");
  REQUIRE(std::holds_alternative<route>(result));
  const auto& r = std::get<route>(result);
  REQUIRE(r.version);
  CHECK(r.version->major == 1);
  CHECK(r.version->minor == 41);
  CHECK(r.path == "/containers/json");
  CHECK(r.query == "filters=%7B%7D");
}

TEST_CASE("methods are exact upper-case tokens", "[router]") {
  CHECK(http::parse_method("GET") == http::method::get);
  CHECK(http::parse_method("DELETE") == http::method::delete_);
  for (auto bad : {"get", "Get", "CONNECT", "OPTIONS", "TRACE", "PATCH", "GET ", "", "G\0T"})
    CHECK_FALSE(http::parse_method(bad));
}

TEST_CASE("operation names round-trip and hijacking operations are known", "[router]") {
  CHECK(operation_from_name("ContainerCreate") == operation::ContainerCreate);
  CHECK_FALSE(operation_from_name("containercreate"));
  CHECK_FALSE(operation_from_name("NoSuchOperation"));
  CHECK(operation_hijacks(operation::ContainerAttach));
  CHECK(operation_hijacks(operation::ExecStart));
  CHECK_FALSE(operation_hijacks(operation::ContainerAttachWebsocket));
  CHECK_FALSE(operation_hijacks(operation::ContainerCreate));
  for (std::size_t i = 0; i < operation_count; ++i) {
    auto op = static_cast<operation>(i);
    CHECK(operation_from_name(operation_name(op)) == op);
  }
}

TEST_CASE("body kinds come from the specification", "[router]") {
  CHECK(operation_body(operation::ContainerCreate) == body_kind::json);
  CHECK(operation_body(operation::ExecStart) == body_kind::json);
  CHECK(operation_body(operation::ContainerStart) == body_kind::none);
  CHECK(operation_body(operation::SystemPing) == body_kind::none);
  CHECK(operation_body(operation::ImageLoad) == body_kind::stream);
  CHECK(operation_body(operation::PutContainerArchive) == body_kind::stream);
}

TEST_CASE("the calls at which the daemon mounts binds again are named in one place", "[router]") {
  std::vector<std::string_view> mounting;
  for (std::size_t i = 0; i < operation_count; ++i)
    if (operation_mounts_binds(static_cast<operation>(i)))
      mounting.push_back(operation_name(static_cast<operation>(i)));
  std::sort(mounting.begin(), mounting.end());
  CHECK(mounting == std::vector<std::string_view>{"ContainerArchive", "ContainerArchiveInfo",
                                                  "ContainerRestart", "ContainerStart",
                                                  "PutContainerArchive"});
}

#include <catch2/catch.hpp>

#include "dockgate/policy/decision.hpp"
#include "dockgate/policy/ownership.hpp"
#include "dockgate/policy/query.hpp"

using namespace dockgate::policy;

namespace {
const policy& cli() {
  static const policy p = *parse_policy(R"({"profiles":{"cli":{
      "allow":["ContainerList","ContainerDelete","ContainerAttach","ContainerWait","ContainerStop","ImageCreate","SystemEvents"],
      "images":{"allow":["docker.io/library/busybox:*","127.0.0.1:*/dockgate/*"]}}}})")
                              .value;
  return p;
}
std::string verdict(http_method m, std::string_view target) {
  auto r = std::get<route>(route_request(m, target));
  auto d = decide(cli().default_(), r);
  if (auto* x = std::get_if<deny>(&d)) return std::to_string(x->status) + " " + x->reason;
  return "allow";
}
}  // namespace

TEST_CASE("query parameters: taken by the operation, once, well typed", "[query]") {
  struct c {
    http_method m;
    std::string_view target;
    std::string_view expect;  // "allow" or the start of the refusal
  };
  const c cases[] = {
      {http_method::get, "/v1.41/containers/json?all=1&limit=5&size=false", "allow"},
      {http_method::get, "/v1.41/containers/json?filters=%7B%22label%22%3A%5B%22a%22%5D%7D", "allow"},
      {http_method::get, "/v1.41/containers/json?all=1&all=0", "400 dockgate: query parameter \"all\" given twice"},
      {http_method::get, "/v1.41/containers/json?all=1&%61ll=0", "400 dockgate: query parameter \"all\" given twice"},
      {http_method::get, "/v1.41/containers/json?all=yes", "400 dockgate: query parameter \"all\" has an invalid value"},
      {http_method::get, "/v1.41/containers/json?limit=1e3", "400 dockgate: query parameter \"limit\" has an invalid"},
      {http_method::get, "/v1.41/containers/json?bogus=1", "400 dockgate: query parameter \"bogus\" is not taken"},
      {http_method::post, "/v1.41/containers/x/wait?condition=next-exit", "allow"},
      {http_method::post, "/v1.41/containers/x/wait?condition=whenever", "400"},
      {http_method::post, "/v1.41/containers/x/stop?t=0", "allow"},
      {http_method::delete_, "/v1.41/containers/x?force=1&v=1", "allow"},
      {http_method::delete_, "/v1.41/containers/x?link=1", "403 dockgate: query parameter \"link\" is not allowed"},
      {http_method::post, "/v1.41/containers/x/attach?stream=1&logs=1", "403 dockgate: query parameter \"logs\""},
      {http_method::post, "/v1.41/containers/x/attach?stream=1&stdin=1&stdout=1&stderr=1", "allow"},
      // ImageCreate: the pull form only, and the effective reference in the allowlist
      {http_method::post, "/v1.41/images/create?fromImage=busybox&tag=1.36", "allow"},
      {http_method::post, "/v1.41/images/create?fromImage=busybox&tag=latest&platform=linux%2Famd64", "allow"},
      {http_method::post, "/v1.41/images/create?fromImage=127.0.0.1%3A5000%2Fdockgate%2Ftest-busybox&tag=latest", "allow"},
      {http_method::post, "/v1.41/images/create?fromImage=busybox", "400 dockgate: cannot pull \"busybox\": no tag"},
      {http_method::post, "/v1.41/images/create?fromImage=alpine&tag=latest", "403 dockgate: Image \"docker.io/library/alpine:latest\""},
      {http_method::post, "/v1.41/images/create?fromImage=busybox%3Alatest&tag=x%2F..", "400"},
      {http_method::post, "/v1.41/images/create?fromSrc=-&repo=busybox", "403 dockgate: query parameter \"fromSrc\""},
      {http_method::post, "/v1.41/images/create?fromImage=busybox&tag=1&fromImage=alpine", "400 dockgate: query parameter \"fromImage\" given twice"},
      {http_method::post, "/v1.41/images/create?tag=latest", "403 dockgate: ImageCreate is allowed only as a pull"},
      {http_method::get, "/v1.41/events?since=1&until=2&filters=%7B%7D", "allow"},
  };
  for (const auto& x : cases) {
    CAPTURE(x.target);
    CHECK_THAT(verdict(x.m, x.target), Catch::StartsWith(std::string(x.expect)));
  }
}

TEST_CASE("the pull reference is combined as the daemon combines it", "[query]") {
  std::string why;
  CHECK(effective_pull_reference("busybox", "1.36", &why) == "docker.io/library/busybox:1.36");
  CHECK(effective_pull_reference("busybox:1.35", "1.36", &why) == "docker.io/library/busybox:1.36");
  CHECK(effective_pull_reference("busybox", "sha256:" + std::string(64, 'c'), &why) ==
        "docker.io/library/busybox@sha256:" + std::string(64, 'c'));
  CHECK(effective_pull_reference("busybox:1.36", "", &why) == "docker.io/library/busybox:1.36");
  CHECK_FALSE(effective_pull_reference("busybox", "", &why));
  CHECK_FALSE(effective_pull_reference("BusyBox", "latest", &why));
}

TEST_CASE("list and event queries get the owner label filter, other parameters kept", "[query][ownership]") {
  CHECK(confine_query("all=1&size=0", "cli", false) ==
        "all=1&size=0&filters=%7B%22label%22%3A%5B%22dockgate.owner%3Dcli%22%5D%7D");
  // The client's filters are merged; a label filter can only narrow, the type is replaced.
  CHECK(confine_query("filters=%7B%22label%22%3A%5B%22a%22%5D%2C%22type%22%3A%5B%22image%22%5D%7D&since=1", "p", true) ==
        "since=1&filters=" + query_escape(R"({"label":["a","dockgate.owner=p"],"type":["container"]})"));
  CHECK(confine_query("filters=%7B%22label%22%3A%7B%22a%22%3Atrue%7D%7D", "p", false) ==
        "filters=" + query_escape(R"({"label":["a","dockgate.owner=p"]})"));
  CHECK_FALSE(confine_query("filters=not-json", "p", false));
  CHECK_FALSE(confine_query("filters=%7B%7D&filters=%7B%7D", "p", false));
  CHECK_FALSE(confine_query("a=%zz", "p", false));
}

#include "dockgate/proxy/explain.hpp"

#include <catch2/catch.hpp>

using namespace dockgate;

TEST_CASE("explain prints the decision and the rewritten body", "[explain]") {
  auto pol = policy::parse_policy(R"({"profiles":{"p":{"allow":["ContainerCreate","ContainerKill"],
      "images":{"allow":["*"]},"container_create":{"HostConfig.Memory":{"max":100}}}}})");
  REQUIRE(pol.value);
  const auto& p = pol.value->default_();
  auto created = proxy::explain_request(p, "POST", "/v1.41/containers/create",
                                        std::string(R"({"Image":"busybox"})"));
  CHECK(created.exit_status == 0);
  CHECK_THAT(created.text, Catch::Contains("operation: ContainerCreate"));
  CHECK_THAT(
      created.text,
      Catch::Contains("HostConfig.Memory: clamped (rule container_create.HostConfig.Memory)"));
  CHECK_THAT(created.text, Catch::Contains(R"("HostConfig":{"Memory":100})"));
  auto denied = proxy::explain_request(
      p, "POST", "/v1.41/containers/create",
      std::string(R"({"Image":"busybox","HostConfig":{"Privileged":true}})"));
  CHECK(denied.exit_status == 1);
  CHECK_THAT(denied.text, Catch::Contains("HostConfig.Privileged is not allowed"));
  auto kill = proxy::explain_request(p, "POST", "/v1.41/containers/web/kill", std::nullopt);
  CHECK_THAT(kill.text, Catch::Contains("ownership: the daemon must report container \"web\""));
  auto bad = proxy::explain_request(p, "POST", "/v1.41//containers/create", std::nullopt);
  CHECK(bad.exit_status == 1);
}

TEST_CASE("explain names the rule behind each rewrite, the fields left out and the warnings",
          "[explain]") {
  auto pol = policy::parse_policy(R"({"profiles":{"p":{"allow":["ContainerCreate"],
      "images":{"allow":["*"]},"ports":{},"owner":"ci"}}})");
  REQUIRE(pol.value);
  auto e = proxy::explain_request(
      pol.value->default_(), "POST", "/v1.41/containers/create",
      std::string(
          R"({"Image":"busybox","Bogus":1,"HostConfig":{"PortBindings":{"80/tcp":[{"HostPort":"8080"}]}}})"));
  CHECK(e.exit_status == 0);
  CHECK_THAT(e.text, Catch::Contains("HostConfig.PortBindings: bound to loopback (rule ports)"));
  CHECK_THAT(e.text, Catch::Contains("Labels: owner stamped (rule owner)"));
  CHECK_THAT(e.text, Catch::Contains("dropped:   body:Bogus (the daemon ignores them)"));
  CHECK_THAT(e.text, Catch::Contains("warning:   dockgate: published ports bound to loopback"));
}

TEST_CASE("explain shows an upload rule's query change and its archive review",
          "[explain][uploads]") {
  auto pol =
      policy::parse_policy(R"({"profiles":{"p":{"allow":["ContainerDelete","PutContainerArchive"],
      "uploads":{"targets":["/opt/app"]}}}})");
  REQUIRE(pol.value);
  const auto& p = pol.value->default_();
  auto removed = proxy::explain_request(p, "DELETE", "/v1.41/containers/web?force=1", std::nullopt);
  CHECK_THAT(
      removed.text,
      Catch::Contains("query:     query:v:upload volumes removed (forwarded as force=1&v=1)"));
  auto upload =
      proxy::explain_request(p, "PUT", "/v1.41/containers/web/archive?path=/", std::nullopt);
  CHECK_THAT(upload.text, Catch::Contains("upload:    the archive is read whole"));
  auto outside =
      proxy::explain_request(p, "PUT", "/v1.41/containers/web/archive?path=/etc", std::nullopt);
  CHECK(outside.exit_status == 1);
}

TEST_CASE("explain says which calls check the binds again", "[explain]") {
  auto pol = policy::parse_policy(R"({"profiles":{"p":{"allow":["ContainerStart","ContainerStop",
      "ContainerArchive"],"binds":{"sources":["/srv/data"]}}}})");
  REQUIRE(pol.value);
  const auto& p = pol.value->default_();
  const std::string says = "binds:     the daemon mounts the container's binds again";
  CHECK_THAT(proxy::explain_request(p, "POST", "/v1.41/containers/web/start", std::nullopt).text,
             Catch::Contains(says));
  CHECK_THAT(
      proxy::explain_request(p, "GET", "/v1.41/containers/web/archive?path=/", std::nullopt).text,
      Catch::Contains(says));
  CHECK_THAT(proxy::explain_request(p, "POST", "/v1.41/containers/web/stop", std::nullopt).text,
             !Catch::Contains(says));
}

TEST_CASE("explain says a profile's seccomp profile replaces the one a body names", "[explain]") {
  auto pol = policy::parse_policy(R"({"profiles":{"p":{"allow":["ContainerCreate"],
      "images":{"allow":["*"]},"container_create":{"HostConfig.SecurityOpt":{"allow":["seccomp=unconfined"]}},
      "seccomp":{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read"],"action":"SCMP_ACT_ALLOW"}]}}}})");
  REQUIRE(pol.value);
  const auto& p = pol.value->default_();
  const std::string body =
      R"({"Image":"busybox","HostConfig":{"SecurityOpt":["seccomp=unconfined"]}})";
  const auto text = proxy::explain_request(p, "POST", "/v1.41/containers/create", body).text;
  CHECK_THAT(text, Catch::Contains("seccomp:   the container runs under the profile's own"));
  CHECK_THAT(text, Catch::Contains("HostConfig.SecurityOpt: seccomp forced (rule seccomp)"));
  CHECK_THAT(text, !Catch::Contains("unconfined\""));
}

// networks.join_owned_containers: NetworkMode "container:<ref>" names a container for the
// proxy to prove owned (opensandbox-server's sandbox behind its egress sidecar).
#include <catch2/catch.hpp>

#include "dockgate/policy/body_review.hpp"

using namespace dockgate::policy;

namespace {
profile with_sharing(bool share) {
  auto r = parse_policy(std::string(R"({"profiles":{"p":{"allow":["ContainerCreate"],
      "images":{"allow":["*"]},"networks":{"join_owned_containers":)") +
                        (share ? "true" : "false") + "}}}}");
  REQUIRE(r.value);
  return r.value->profiles[0];
}
decision create(const profile& p, const std::string& mode) {
  return review_container_create(
      p, R"({"Image":"busybox:1","HostConfig":{"NetworkMode":")" + mode + R"("}})");
}
}  // namespace

TEST_CASE(
    "networks.join_owned_containers: a container's network is shared only by reference, "
    "for the proxy to prove owned",
    "[body_rules]") {
  const auto p = with_sharing(true);
  auto d = create(p, "container:sandbox-egress-1");
  REQUIRE(std::holds_alternative<rewrite>(d));
  CHECK(std::get<rewrite>(d).container == "sandbox-egress-1");
  // The proxy forwards the full ID it resolved.
  const std::string id(64, 'a');
  CHECK(with_container(std::get<rewrite>(d).body, operation::ContainerCreate, id)
            .find(R"("NetworkMode":"container:)" + id + "\"") != std::string::npos);
  // The gate's own output, reviewed again, names the same container.
  auto again = create(p, "container:" + id);
  REQUIRE(std::holds_alternative<rewrite>(again));
  CHECK(std::get<rewrite>(again).container == id);
  // Not a container name, or host: refused.
  for (const char* bad : {"container:", "container:../x", "container:a/b", "host"}) {
    INFO(bad);
    CHECK(std::holds_alternative<deny>(create(p, bad)));
  }
  // Plain bridge still needs no container.
  auto bridge = create(p, "bridge");
  REQUIRE(std::holds_alternative<rewrite>(bridge));
  CHECK(std::get<rewrite>(bridge).container.empty());
  // Without the rule, sharing a container's network is a widening: refused.
  auto without = create(with_sharing(false), "container:sandbox-egress-1");
  REQUIRE(std::holds_alternative<deny>(without));
  CHECK(std::get<deny>(without).rule == "HostConfig.NetworkMode:default");
}

TEST_CASE(
    "networks.join_owned_containers: sharing needs confine_to_owned, other modes stay refused",
    "[body_rules][redteam]") {
  // Without confine_to_owned the proxy proves nothing owned: "container:<any>" would join
  // any container's network namespace (another tenant's, or one on the host's network).
  auto r = parse_policy(R"({"profiles":{"p":{"allow":["ContainerCreate"],"images":{"allow":["*"]},
      "confine_to_owned":false,"networks":{"join_owned_containers":true}}}})");
  CHECK_THAT(Catch::Detail::stringify(r.errors),
             Catch::Contains("profiles.p.networks.join_owned_containers"));
  CHECK_THAT(Catch::Detail::stringify(r.errors), Catch::Contains("confine_to_owned"));
  // The modes dockerd reads as something else than a container's namespace: refused.
  const auto p = with_sharing(true);
  for (const char* bad : {"Container:x", "service:x", "ns:/proc/1/ns/net", "container:/x",
                          "container:x:y", "container: x", "container:x/../y", "CONTAINER:x"}) {
    INFO(bad);
    CHECK(std::holds_alternative<deny>(create(p, bad)));
  }
}

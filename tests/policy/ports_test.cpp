// The ports rule: published ports bound to loopback (or to addresses the profile names),
// host ports in the profile's range, PublishAllPorts refused; the rewrite in the changes and
// the create warnings. Against small inline policies and the shipped docker-cli/compose.
#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "dockgate/policy/body_review.hpp"
#include "dockgate/policy/go_json.hpp"
#include "dockgate/policy/policy_file.hpp"

using namespace dockgate::policy;

namespace {

policy load_ports(const std::string& ports) {
  auto r = parse_policy(
      R"({"profiles":{"p":{"allow":["ContainerCreate","ContainerUpdate"],"images":{"allow":["*"]},)"
      R"("ports":)" +
      ports + "}}}");
  INFO(Catch::Detail::stringify(r.errors));
  REQUIRE(r.value);
  return std::move(*r.value);
}

policy load_file(const std::string& path) {
  std::ifstream in(std::string(DOCKGATE_SOURCE_DIR) + "/" + path);
  std::stringstream s;
  s << in.rdbuf();
  auto r = parse_policy(s.str());
  INFO(Catch::Detail::stringify(r.errors));
  REQUIRE(r.value);
  return std::move(*r.value);
}

const std::string image = R"("Image":"dockgate/test-busybox")";

decision create(const policy& p, const std::string& host_config) {
  return review_container_create(p.default_(),
                                 "{" + image + R"(,"HostConfig":)" + host_config + "}");
}

std::string bindings_of(const decision& d) {
  if (auto* x = std::get_if<deny>(&d)) return "DENY: " + x->reason;
  auto decoded = decode_body(std::get<rewrite>(d).body, schema::container_create);
  REQUIRE(decoded.value);
  const json_value* host = find(*decoded.value->as_object(), "HostConfig");
  const json_value* b = find(*host->as_object(), "PortBindings");
  return b ? to_json(*b) : "";
}

}  // namespace

TEST_CASE("ports: unspecified host addresses are rewritten to loopback", "[ports]") {
  const policy p = load_ports("{}");
  CHECK(
      bindings_of(create(p, R"({"PortBindings":{"80/tcp":[{"HostIp":"","HostPort":"8080"}]}})")) ==
      R"({"80/tcp":[{"HostIp":"127.0.0.1","HostPort":"8080"}]})");
  CHECK(bindings_of(create(p, R"({"PortBindings":{"80/tcp":[{"HostPort":"0"}]}})")) ==
        R"({"80/tcp":[{"HostIp":"127.0.0.1","HostPort":"0"}]})");
  CHECK(bindings_of(create(p, R"({"PortBindings":{"80":[{"HostIp":"0.0.0.0"}]}})")) ==
        R"({"80":[{"HostIp":"127.0.0.1"}]})");
  CHECK(
      bindings_of(create(
          p,
          R"({"PortBindings":{"53/udp":[{"HostIp":"::","HostPort":"5353"},{"HostIp":"::1"}]}})")) ==
      R"({"53/udp":[{"HostIp":"::1","HostPort":"5353"},{"HostIp":"::1"}]})");
  // The loopback addresses the client names itself pass unchanged, with no change recorded.
  auto d = create(p, R"({"PortBindings":{"80/tcp":[{"HostIp":"127.0.0.1","HostPort":"8080"}]}})");
  REQUIRE(std::holds_alternative<rewrite>(d));
  for (const auto& c : std::get<rewrite>(d).changes) CHECK(c.field != "HostConfig.PortBindings");
  // Exposed without a binding (null), and none at all.
  CHECK(bindings_of(create(p, R"({"PortBindings":{"80/tcp":null}})")) == R"({"80/tcp":[]})");
  CHECK(bindings_of(create(p, R"({})")) == "");
}

TEST_CASE("ports: the rewrite is in the changes and in the create warnings", "[ports]") {
  const policy p = load_ports("{}");
  auto d =
      create(p, R"({"PortBindings":{"80/tcp":[{"HostPort":"8080"}],"53/udp":[{"HostIp":"::"}]}})");
  REQUIRE(std::holds_alternative<rewrite>(d));
  const auto& rw = std::get<rewrite>(d);
  const auto c = std::find_if(rw.changes.begin(), rw.changes.end(), [](const body_change& x) {
    return x.field == "HostConfig.PortBindings";
  });
  REQUIRE(c != rw.changes.end());
  CHECK(c->action == "bound to loopback");
  REQUIRE(c->from);
  CHECK_THAT(*c->from, Catch::Contains(R"({"HostIp":"::"})"));
  REQUIRE(c->to);
  CHECK_THAT(*c->to, Catch::Contains(R"("HostIp":"127.0.0.1")"));
  INFO(Catch::Detail::stringify(rw.warnings));
  CHECK(std::find(rw.warnings.begin(), rw.warnings.end(),
                  "dockgate: published ports bound to loopback, not every interface: "
                  "[::1]:0->53/udp, 127.0.0.1:8080->80/tcp (profile p)") != rw.warnings.end());
  // The gate's own output reviews to itself, with nothing left to change.
  auto again = review_container_create(p.default_(), rw.body);
  REQUIRE(std::holds_alternative<rewrite>(again));
  CHECK(std::get<rewrite>(again).body == rw.body);
  CHECK(std::get<rewrite>(again).warnings.empty());
}

TEST_CASE("ports: other addresses only when the profile names them", "[ports]") {
  const policy p = load_ports("{}");
  auto refused = bindings_of(create(p, R"({"PortBindings":{"80/tcp":[{"HostIp":"10.1.2.3"}]}})"));
  CHECK_THAT(refused,
             Catch::StartsWith("DENY: dockgate: HostConfig.PortBindings address \"10.1.2.3\" "
                               "is not allowed (the profile publishes on 127.0.0.1, ::1)"));
  CHECK_THAT(refused, Catch::EndsWith("(profile p, rule ports)"));
  for (const char* ip : {"192.168.0.1", "127.0.0.2", "[::]", "::ffff:0.0.0.0", "0", "localhost"}) {
    CAPTURE(ip);
    CHECK_THAT(bindings_of(create(
                   p, std::string(R"({"PortBindings":{"80/tcp":[{"HostIp":")") + ip + R"("}]}})")),
               Catch::StartsWith("DENY: dockgate: HostConfig.PortBindings address"));
  }
  const policy named = load_ports(R"({"addresses":["10.1.2.3","fd00::5"]})");
  CHECK(bindings_of(create(named, R"({"PortBindings":{"80/tcp":[{"HostIp":"10.1.2.3"}]}})")) ==
        R"({"80/tcp":[{"HostIp":"10.1.2.3"}]})");
  CHECK(bindings_of(create(named, R"({"PortBindings":{"80/tcp":[{"HostIp":"fd00::5"}]}})")) ==
        R"({"80/tcp":[{"HostIp":"fd00::5"}]})");
  // Naming addresses replaces the loopback list, but the unspecified ones still go to loopback.
  CHECK_THAT(bindings_of(create(named, R"({"PortBindings":{"80/tcp":[{"HostIp":"127.0.0.1"}]}})")),
             Catch::Contains("is not allowed (the profile publishes on 10.1.2.3, fd00::5)"));
  CHECK(bindings_of(create(named, R"({"PortBindings":{"80/tcp":[{}]}})")) ==
        R"({"80/tcp":[{"HostIp":"127.0.0.1"}]})");
}

TEST_CASE("ports: host ports in the profile's range, container ports well formed", "[ports]") {
  const policy p = load_ports(R"({"host_ports":"8000-8099"})");
  auto port = [&](const std::string& key, const std::string& host_port) {
    return bindings_of(
        create(p, R"({"PortBindings":{")" + key + R"(":[{"HostPort":")" + host_port + R"("}]}})"));
  };
  CHECK_THAT(port("80/tcp", "8000"), Catch::Contains("127.0.0.1"));
  CHECK_THAT(port("80/tcp", "8099"), Catch::Contains("127.0.0.1"));
  CHECK_THAT(port("80/tcp", "8010-8020"), Catch::Contains("127.0.0.1"));
  CHECK_THAT(port("80/tcp", ""), Catch::Contains("127.0.0.1"));
  CHECK_THAT(port("80/tcp", "0"), Catch::Contains("127.0.0.1"));
  for (const char* bad : {"7999", "8100", "80", "22", "7990-8010", "8090-8100", "8020-8010",
                          "-8000", "8000-", "x", "+8000", "99999", "8000 "}) {
    CAPTURE(bad);
    CHECK_THAT(port("80/tcp", bad),
               Catch::StartsWith("DENY: dockgate: HostConfig.PortBindings host port"));
  }
  for (const char* key : {"53/udp", "9/sctp", "8080", "65535/tcp"}) {
    CAPTURE(key);
    CHECK_THAT(port(key, "8000"), Catch::Contains("127.0.0.1"));
  }
  for (const char* key :
       {"0/tcp", "65536/tcp", "80/icmp", "80/TCP", "80-90/tcp", "http", "", "80/"}) {
    CAPTURE(key);
    CHECK_THAT(port(key, "8000"), Catch::StartsWith("DENY: dockgate: HostConfig.PortBindings key"));
  }
  // The default range: 1024-65535.
  const policy defaults = load_ports("{}");
  CHECK_THAT(
      bindings_of(create(defaults, R"({"PortBindings":{"80/tcp":[{"HostPort":"1023"}]}})")),
      Catch::Contains("host port \"1023\" is not allowed (the profile publishes on 1024-65535"));
  CHECK_THAT(bindings_of(create(defaults, R"({"PortBindings":{"80/tcp":[{"HostPort":"1024"}]}})")),
             Catch::Contains("127.0.0.1"));
}

TEST_CASE("ports: PublishAllPorts stays refused, and without the rule nothing is published",
          "[ports]") {
  const policy p = load_ports("{}");
  CHECK_THAT(
      bindings_of(create(p, R"({"PublishAllPorts":true})")),
      Catch::Contains("HostConfig.PublishAllPorts is not allowed: it publishes every exposed "
                      "port on every interface; name the ports to publish (-p)"));
  CHECK_THAT(bindings_of(create(p, R"({"PublishAllPorts":true})")),
             Catch::EndsWith("(profile p, rule ports)"));
  CHECK(bindings_of(create(p, R"({"PublishAllPorts":false})")) == "");
  auto sandbox = load_file("compose/policies/sandbox.json");
  CHECK_THAT(bindings_of(create(sandbox, R"({"PortBindings":{"80/tcp":[{"HostPort":"8080"}]}})")),
             Catch::Contains("HostConfig.PortBindings is not allowed: the profile has no rule"));
}

TEST_CASE("ports: docker-cli and compose publish on loopback", "[ports]") {
  for (const char* file : {"compose/policies/docker-cli.json", "compose/policies/compose.json"}) {
    CAPTURE(file);
    const policy p = load_file(file);
    CHECK(bindings_of(
              create(p, R"({"PortBindings":{"80/tcp":[{"HostIp":"","HostPort":"8080"}]}})")) ==
          R"({"80/tcp":[{"HostIp":"127.0.0.1","HostPort":"8080"}]})");
    CHECK_THAT(bindings_of(create(p, R"({"PortBindings":{"80/tcp":[{"HostIp":"10.0.0.1"}]}})")),
               Catch::Contains("rule ports"));
    CHECK_THAT(bindings_of(create(p, R"({"PublishAllPorts":true})")),
               Catch::Contains("rule ports"));
  }
}

TEST_CASE("ports: an update cannot change the published ports", "[ports]") {
  // ContainerUpdate's body has no PortBindings (dockerd's UpdateConfig): the gate leaves
  // it out of what goes up.
  const policy p = load_ports("{}");
  auto d = review_container_update(
      p.default_(),
      R"({"PortBindings":{"80/tcp":[{"HostIp":"0.0.0.0","HostPort":"80"}]},"PublishAllPorts":true,"CpuShares":5})");
  REQUIRE(std::holds_alternative<rewrite>(d));
  CHECK(std::get<rewrite>(d).body == R"({"CpuShares":5})");
}

TEST_CASE("ports: the policy file's ports key is checked", "[ports][policy_file]") {
  auto errors = [](const std::string& ports) {
    auto r = parse_policy(R"({"profiles":{"p":{"allow":[],"ports":)" + ports + "}}}");
    return Catch::Detail::stringify(r.errors);
  };
  CHECK(errors("{}") == "{  }");
  CHECK(errors(R"({"addresses":["127.0.0.1"],"host_ports":"8080"})") == "{  }");
  CHECK_THAT(errors("true"), Catch::Contains("profiles.p.ports: must be an object"));
  CHECK_THAT(errors(R"({"address":[]})"), Catch::Contains("unknown key \"address\""));
  CHECK_THAT(errors(R"({"addresses":"127.0.0.1"})"), Catch::Contains("profiles.p.ports.addresses"));
  for (const char* a : {"0.0.0.0", "::", "localhost", "127.000.000.001", "::0:1", "10.0.0.0/8"}) {
    CAPTURE(a);
    CHECK_THAT(errors(std::string(R"({"addresses":[")") + a + R"("]})"),
               Catch::Contains("canonical form"));
  }
  for (const char* r : {"0-100", "100-50", "1-65536", "x", "", "1024-"}) {
    CAPTURE(r);
    CHECK_THAT(errors(std::string(R"({"host_ports":")") + r + R"("})"),
               Catch::Contains("profiles.p.ports.host_ports"));
  }
  auto p = load_ports(R"({"addresses":["::1"],"host_ports":"2000-3000"})");
  REQUIRE(p.default_().rules.ports);
  CHECK(p.default_().rules.ports->addresses == std::vector<std::string>{"::1"});
  CHECK(p.default_().rules.ports->first_port == 2000);
  CHECK(p.default_().rules.ports->last_port == 3000);
}

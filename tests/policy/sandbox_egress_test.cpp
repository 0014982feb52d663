// The sandbox-egress profile (compose/policies/sandbox-egress.json, SANDBOX_NETWORK=allowlist):
// a session's container joins an owned network (its own, internal) or none, never the
// daemon's bridge; every network the profile creates is internal and on a bridge named
// dgsbx<hash> (what scripts/egress-proxy.sh's rules hold); and everything else is the
// sandbox profile's, rule for rule (the two files cannot drift apart unseen).
#include <simdjson.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <set>
#include <sstream>

#include "dockgate/policy/body_review.hpp"

using namespace dockgate::policy;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(std::string(DOCKGATE_SOURCE_DIR) + "/" + path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

const profile& egress() {
  static const policy p = [] {
    auto r = parse_policy(read_file("compose/policies/sandbox-egress.json"));
    INFO(Catch::Detail::stringify(r.errors));
    REQUIRE(r.value);
    return std::move(*r.value);
  }();
  return p.default_();
}

// The reviewed body, or "DENY: <reason>".
std::string reviewed(operation op, const std::string& body, rewrite* out = nullptr) {
  auto d = review_body(egress(), op, body);
  if (auto* x = std::get_if<deny>(&d)) return "DENY: " + x->reason;
  if (out) *out = std::get<rewrite>(d);
  return std::get<rewrite>(d).body;
}

std::string minified(simdjson::dom::element e) {
  return simdjson::minify(e);
}

}  // namespace

TEST_CASE("sandbox-egress: every network it creates is internal, whatever the body says",
          "[sandbox_egress]") {
  for (const char* body :
       {R"({"Name":"dockgate-egress-s1"})", R"({"Name":"dockgate-egress-s1","Internal":false})",
        R"({"Name":"dockgate-egress-s1","Internal":true,"Driver":"bridge"})"}) {
    CAPTURE(body);
    const auto out = reviewed(operation::NetworkCreate, body);
    CHECK_THAT(out, Catch::Contains(R"("Internal":true)"));
    CHECK_THAT(out, !Catch::Contains(R"("Internal":false)"));
    CHECK_THAT(out, Catch::Contains(R"("dockgate.owner":"sandbox")"));
  }
  // The host options that would undo it stay refused (networks rule).
  CHECK(reviewed(
            operation::NetworkCreate,
            R"({"Name":"n","Options":{"com.docker.network.bridge.enable_ip_masquerade":"true"}})")
            .starts_with("DENY"));
}

TEST_CASE("sandbox-egress: every network it creates is on a bridge named dgsbx<hash>",
          "[sandbox_egress]") {
  const std::string bridge = network_bridge_name("dgsbx", "dockgate-egress-s1");
  CHECK(bridge.size() == 15);  // Linux's longest interface name
  CHECK(bridge.starts_with("dgsbx"));
  CHECK(bridge != network_bridge_name("dgsbx", "dockgate-egress-s2"));
  const std::string forced = R"("Options":{"com.docker.network.bridge.name":")" + bridge + R"("})";
  rewrite rw;
  const auto out = reviewed(operation::NetworkCreate, R"({"Name":"dockgate-egress-s1"})", &rw);
  CHECK_THAT(out, Catch::Contains(forced));
  // The gate's own rewrite, reviewed again, passes unchanged; any other bridge name, or
  // any other option beside it, is refused.
  CHECK(reviewed(operation::NetworkCreate, out) == out);
  CHECK(reviewed(operation::NetworkCreate,
                 R"({"Name":"dockgate-egress-s1","Options":{"com.docker.network.bridge.name":")" +
                     network_bridge_name("dgsbx", "other") + R"("}})")
            .starts_with("DENY"));
  CHECK(reviewed(operation::NetworkCreate,
                 R"({"Name":"dockgate-egress-s1","Options":{"com.docker.network.bridge.name":")" +
                     bridge + R"(","com.docker.network.driver.mtu":"9000"}})")
            .starts_with("DENY"));
  CHECK(
      reviewed(
          operation::NetworkCreate,
          R"({"Name":"dockgate-egress-s1","Options":{"com.docker.network.bridge.name":"docker0"}})")
          .starts_with("DENY"));
}

TEST_CASE("sandbox-egress: a session joins an owned network or none, never the daemon's bridge",
          "[sandbox_egress]") {
  const std::string image = R"("Image":"dockgate/test-busybox")";
  // The daemon's bridge (named or by default), the host's network, another container's:
  // refused.
  for (const std::string mode :
       {"", R"(,"HostConfig":{"NetworkMode":"host"})", R"(,"HostConfig":{"NetworkMode":"bridge"})",
        R"(,"HostConfig":{"NetworkMode":"default"})", R"(,"HostConfig":{"NetworkMode":""})",
        R"(,"HostConfig":{"NetworkMode":"container:x"})",
        R"(,"NetworkingConfig":{"EndpointsConfig":{"bridge":{}}})"}) {
    CAPTURE(mode);
    CHECK(reviewed(operation::ContainerCreate, "{" + image + mode + "}").starts_with("DENY"));
  }
  // none: no network at all (the instance lease's container, a pool claim's marker).
  rewrite none;
  const auto out_none = reviewed(operation::ContainerCreate,
                                 "{" + image + R"(,"HostConfig":{"NetworkMode":"none"}})", &none);
  REQUIRE_FALSE(out_none.starts_with("DENY"));
  CHECK(none.networks.empty());
  // A network by name: the proxy asks the daemon whose it is (one the profile did not
  // make, not internal say, is refused at the create); endpoints are emptied.
  for (const std::string extra :
       {std::string(),
        std::string(R"(,"NetworkingConfig":{"EndpointsConfig":{"other":{},"bridge":{}}})")}) {
    CAPTURE(extra);
    rewrite rw;
    const auto out = reviewed(
        operation::ContainerCreate,
        "{" + image + R"(,"HostConfig":{"NetworkMode":"dockgate-egress-s1"})" + extra + "}", &rw);
    REQUIRE_FALSE(out.starts_with("DENY"));
    CHECK_THAT(out, Catch::Contains(R"("NetworkMode":"dockgate-egress-s1")"));
    CHECK_THAT(out, Catch::Contains(R"("EndpointsConfig":{})"));
    CHECK(rw.networks == std::vector<std::string>{"dockgate-egress-s1"});
  }
}

TEST_CASE("sandbox-egress is the sandbox profile but for its network", "[sandbox_egress]") {
  simdjson::dom::parser pa, pb;
  const std::string a_text = read_file("compose/policies/sandbox.json");
  const std::string b_text = read_file("compose/policies/sandbox-egress.json");
  simdjson::dom::element a = pa.parse(a_text)["profiles"]["sandbox"];
  simdjson::dom::element b = pb.parse(b_text)["profiles"]["sandbox-egress"];
  // The differences, all of them: no network forced (a session's own, checked by the
  // networks rule), the three network operations the sidecar needs to make, find and remove
  // them, the networks rule, the description.
  const std::set<std::string> own_keys{"description", "allow", "networks", "container_create"};
  simdjson::dom::object oa, ob, ca, cb;
  REQUIRE(a.get_object().get(oa) == simdjson::SUCCESS);
  REQUIRE(b.get_object().get(ob) == simdjson::SUCCESS);
  REQUIRE(a["container_create"].get_object().get(ca) == simdjson::SUCCESS);
  REQUIRE(b["container_create"].get_object().get(cb) == simdjson::SUCCESS);
  std::set<std::string> keys;
  for (auto [k, v] : oa) keys.emplace(k);
  for (auto [k, v] : ob) keys.emplace(k);
  for (const auto& k : keys) {
    if (own_keys.count(k)) continue;
    CAPTURE(k);
    CHECK(minified(a[k]) == minified(b[k]));
  }
  std::vector<std::string> allow_a, allow_b;
  // The arrays held by name: a range-for over a temporary's value() outlives it.
  simdjson::dom::array list_a, list_b;
  REQUIRE(a["allow"].get_array().get(list_a) == simdjson::SUCCESS);
  REQUIRE(b["allow"].get_array().get(list_b) == simdjson::SUCCESS);
  for (auto v : list_a) allow_a.emplace_back(v.get_string().value());
  for (auto v : list_b) allow_b.emplace_back(v.get_string().value());
  allow_a.insert(allow_a.end(), {"NetworkCreate", "NetworkInspect", "NetworkDelete"});
  CHECK(allow_a == allow_b);
  CHECK(minified(b["networks"]) ==
        R"({"join_owned":true,"internal":true,"bridge_prefix":"dgsbx"})");
  std::set<std::string> rules;
  for (auto [k, v] : ca) rules.emplace(k);
  for (auto [k, v] : cb) rules.emplace(k);
  for (const auto& k : rules) {
    CAPTURE(k);
    if (k == "HostConfig.NetworkMode") {
      CHECK(minified(a["container_create"][k]) == R"({"force":"none"})");
      CHECK(b["container_create"][k].error() == simdjson::NO_SUCH_FIELD);
      continue;
    }
    CHECK(minified(a["container_create"][k]) == minified(b["container_create"][k]));
  }
}

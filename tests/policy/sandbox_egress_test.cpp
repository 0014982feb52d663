// The sandbox-egress profile (compose/policies/sandbox-egress.json, SANDBOX_NETWORK=allowlist):
// a session's container joins exactly the owned, internal dockgate-egress network and
// nothing else; every network the profile creates is internal; and everything else is the
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
       {R"({"Name":"dockgate-egress"})", R"({"Name":"dockgate-egress","Internal":false})",
        R"({"Name":"dockgate-egress","Internal":true,"Driver":"bridge"})"}) {
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

TEST_CASE("sandbox-egress: a session joins dockgate-egress and nothing else", "[sandbox_egress]") {
  const std::string image = R"("Image":"dockgate/test-busybox")";
  for (const std::string mode :
       {"", R"(,"HostConfig":{"NetworkMode":"host"})", R"(,"HostConfig":{"NetworkMode":"bridge"})",
        R"(,"HostConfig":{"NetworkMode":"none"})", R"(,"HostConfig":{"NetworkMode":"default"})",
        R"(,"HostConfig":{"NetworkMode":"other"})",
        R"(,"HostConfig":{"NetworkMode":"container:x"})",
        R"(,"HostConfig":{"NetworkMode":"dockgate-egress"})",
        R"(,"NetworkingConfig":{"EndpointsConfig":{"other":{},"bridge":{}}})"}) {
    CAPTURE(mode);
    rewrite rw;
    const auto out = reviewed(operation::ContainerCreate, "{" + image + mode + "}", &rw);
    REQUIRE_FALSE(out.starts_with("DENY"));
    CHECK_THAT(out, Catch::Contains(R"("NetworkMode":"dockgate-egress")"));
    CHECK_THAT(out, Catch::Contains(R"("EndpointsConfig":{})"));
    // The proxy asks the daemon whose the network is: a dockgate-egress made by anyone but
    // this profile (not internal, say) is refused at the create.
    CHECK(rw.networks == std::vector<std::string>{"dockgate-egress"});
  }
}

TEST_CASE("sandbox-egress is the sandbox profile but for its network", "[sandbox_egress]") {
  simdjson::dom::parser pa, pb;
  const std::string a_text = read_file("compose/policies/sandbox.json");
  const std::string b_text = read_file("compose/policies/sandbox-egress.json");
  simdjson::dom::element a = pa.parse(a_text)["profiles"]["sandbox"];
  simdjson::dom::element b = pb.parse(b_text)["profiles"]["sandbox-egress"];
  // The differences, all of them: the network it forces, the two network operations the
  // sidecar needs to make and find it, the networks rule, the description.
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
  allow_a.insert(allow_a.end(), {"NetworkCreate", "NetworkInspect"});
  CHECK(allow_a == allow_b);
  CHECK(minified(b["networks"]) == R"({"join_owned":true,"internal":true})");
  std::set<std::string> rules;
  for (auto [k, v] : ca) rules.emplace(k);
  for (auto [k, v] : cb) rules.emplace(k);
  for (const auto& k : rules) {
    CAPTURE(k);
    if (k == "HostConfig.NetworkMode") {
      CHECK(minified(b["container_create"][k]) == R"({"force":"dockgate-egress"})");
      continue;
    }
    CHECK(minified(a["container_create"][k]) == minified(b["container_create"][k]));
  }
}

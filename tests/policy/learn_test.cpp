// The learner's aggregation (policy/src/learn.cpp) and the audit line's "seen"
// (policy/src/body_seen.cpp), as tables: audit lines in, the policy the gate would load out.
#include "dockgate/policy/learn.hpp"

#include <catch2/catch.hpp>

#include "dockgate/policy/body_review.hpp"
#include "dockgate/policy/body_seen.hpp"
#include "dockgate/policy/policy_file.hpp"

using namespace dockgate::policy;

namespace {

std::string line(const std::string& op, const std::string& verdict, const std::string& extra = {}) {
  static int n = 0;
  const std::string digit = std::to_string(n++ % 10);
  return R"({"time":"2026-12-01T21:00:00.00000)" + digit +
         R"(Z","request_id":"00000000-00000000000)" + digit +
         R"(","profile":"learn","operation":")" + op + R"(","verdict":")" + verdict + "\"" + extra +
         "}\n";
}

std::string seen_of(const std::string& body) {
  return ",\"seen\":" + body_seen(operation::ContainerCreate, body);
}

struct learned_policy {
  learn_result result;
  policy loaded;
};

learned_policy learn(const std::string& log) {
  std::string_view text = log;
  auto r = learn_profile(std::span<const std::string_view>(&text, 1), {"learn", "t", {}});
  INFO(r.policy);
  auto p = parse_policy(r.policy);
  for (const auto& e : p.errors) INFO(e);
  REQUIRE(p.value);
  return {std::move(r), std::move(*p.value)};
}

const field_rule* rule_of(const profile& p, std::string_view path) {
  for (const auto& [k, r] : p.rules.container_create.rules)
    if (k == path) return &r;
  return nullptr;
}

}  // namespace

TEST_CASE("seen: paths set, values only of fields a rule can name, never secrets",
          "[policy][learn]") {
  const std::string s = body_seen(
      operation::ContainerCreate,
      R"({"Image":"busybox","Env":["TOKEN=hunter2"],"Cmd":["echo","s3cret"],"Labels":{"k":"v1"},)"
      R"("HostConfig":{"Memory":67108864,"Privileged":true,"LogConfig":{"Type":"","Config":{}}}})");
  INFO(s);
  CHECK(s.find("hunter2") == std::string::npos);
  CHECK(s.find("s3cret") == std::string::npos);
  CHECK(s.find("v1") == std::string::npos);
  CHECK(
      s.find(
          R"("fields":["Env","Cmd","Image","Labels","HostConfig.Privileged","HostConfig.Memory"])") !=
      std::string::npos);  // LogConfig with nothing set is not "set"
  CHECK(s.find(R"("HostConfig.Memory":67108864)") != std::string::npos);
  CHECK(s.find(R"("widening":["HostConfig.Privileged"])") != std::string::npos);
  // The deprecated top-level host config is read as HostConfig.
  CHECK(body_seen(operation::ContainerCreate, R"({"Image":"busybox","Memory":5})")
            .find(R"("HostConfig.Memory":5)") != std::string::npos);
  CHECK(body_seen(operation::ContainerList, "{}").empty());
  CHECK(body_seen(operation::ContainerCreate, "{not json").empty());
}

TEST_CASE("learn: operations, image repositories, allow lists and max clamps from what passed",
          "[policy][learn]") {
  std::string log;
  log += line("SystemPingHead", "allow");
  log += line(
      "ContainerCreate", "allow",
      seen_of(
          R"({"Image":"busybox","User":"1000","HostConfig":{"Memory":1000,"NetworkMode":"default"}})"));
  log += line(
      "ContainerCreate", "allow",
      seen_of(
          R"({"Image":"127.0.0.1:5000/app:v2","HostConfig":{"Memory":3000,"CapDrop":["ALL"]}})"));
  log += line("ImageCreate", "allow",
              R"(,"object":{"type":"image","name":"docker.io/library/alpine:3"})");
  log += "\n";
  auto l = learn(log);
  const profile& p = l.loaded.profiles.at(0);
  CHECK(p.name == "t");
  CHECK(p.allowed.count() == 3);
  CHECK(p.allows(operation::SystemPingHead));
  CHECK(p.allows(operation::ImageCreate));
  CHECK(p.rules.images.patterns == std::vector<std::string>{"127.0.0.1:5000/app:*",
                                                            "docker.io/library/alpine:*",
                                                            "docker.io/library/busybox:*"});
  REQUIRE(rule_of(p, "HostConfig.Memory"));
  CHECK(rule_of(p, "HostConfig.Memory")->max == 3000);
  REQUIRE(rule_of(p, "User"));
  CHECK(rule_of(p, "User")->allowed == std::vector<std::string>{"1000"});
  CHECK(rule_of(p, "HostConfig.CapDrop")->allowed == std::vector<std::string>{"ALL"});
  CHECK(l.result.lines_learned == 4);
  CHECK(l.result.refused_seen.empty());
  CHECK(l.result.policy.find("seen 2 times, first 2026-12-01T21:00:00.00000") != std::string::npos);
  // The learned profile refuses a value outside the list, and clamps a larger limit.
  CHECK(std::holds_alternative<deny>(
      review_container_create(p, R"({"Image":"busybox","User":"0"})")));
  CHECK(std::holds_alternative<deny>(review_container_create(p, R"({"Image":"debian"})")));
}

TEST_CASE("learn: blocking mode's decision lines (status 0) are not learned twice",
          "[policy][learn]") {
  std::string log;
  log += line("SystemPing", "allow", R"(,"status":0)");    // decision line
  log += line("SystemPing", "allow", R"(,"status":200)");  // its answer's line
  // A decision line whose answer never came (the gate stopped, or the sink refused it):
  // nothing the daemon answered, nothing to learn.
  log += line("SystemInfo", "allow", R"(,"status":0)");
  auto l = learn(log);
  const profile& p = l.loaded.profiles.at(0);
  CHECK(p.allows(operation::SystemPing));
  CHECK_FALSE(p.allows(operation::SystemInfo));
  CHECK(l.result.lines_learned == 1);
}

TEST_CASE("learn: refusals, audit mode's would-refuse and widening values are never learned",
          "[policy][learn]") {
  std::string log;
  // Refused by the learning profile.
  log +=
      line("ContainerCreate", "deny",
           R"(,"reason":"dockgate: HostConfig.Privileged is not allowed")" +
               seen_of(R"({"Image":"busybox","HostConfig":{"Privileged":true,"Memory":999999}})"));
  // Audit mode let it through but would have refused it.
  log += line("ContainerCreate", "allow",
              R"(,"would":"dockgate: HostConfig.CapAdd is not allowed")" +
                  seen_of(R"({"Image":"evil","HostConfig":{"CapAdd":["SYS_ADMIN"]}})"));
  // A learning profile whose rule let host networking through: still never learned.
  log +=
      line("ContainerCreate", "allow",
           seen_of(R"({"Image":"busybox","HostConfig":{"NetworkMode":"host","PidMode":"host"}})"));
  log += line("ContainerCreate", "allow",
              seen_of(R"({"Image":"busybox","HostConfig":{"NetworkMode":"host"}})"));
  log += line("ContainerCreate", "allow", seen_of(R"({"Image":"busybox"})"));
  auto l = learn(log);
  const profile& p = l.loaded.profiles.at(0);
  CHECK(l.result.refused_seen.size() == 4);
  CHECK(l.result.lines_learned == 1);
  CHECK(p.rules.images.patterns == std::vector<std::string>{"docker.io/library/busybox:*"});
  CHECK(rule_of(p, "HostConfig.Memory") == nullptr);
  CHECK(rule_of(p, "HostConfig.NetworkMode") == nullptr);
  CHECK(rule_of(p, "HostConfig.PidMode") == nullptr);
  CHECK(!p.rules.networks.join_owned);
  CHECK(std::holds_alternative<deny>(
      review_container_create(p, R"({"Image":"busybox","HostConfig":{"NetworkMode":"host"}})")));
}

TEST_CASE("learn: binds only under the sources seen, owned networks and volumes",
          "[policy][learn]") {
  std::string log;
  log += line("NetworkCreate", "allow");
  log +=
      line("ContainerCreate", "allow",
           seen_of(R"({"Image":"busybox","HostConfig":{"Binds":["/srv/app:/src:ro","data:/data"],)"
                   R"("NetworkMode":"proj_default"},"NetworkingConfig":{"EndpointsConfig":)"
                   R"({"proj_default":{"Aliases":["web"]}}}})"));
  auto l = learn(log);
  const profile& p = l.loaded.profiles.at(0);
  REQUIRE(p.rules.binds);
  CHECK(p.rules.binds->source_roots == std::vector<std::string>{"/srv/app"});
  CHECK(p.rules.binds->targets == std::vector<std::string>{"/src"});
  CHECK(p.rules.networks.join_owned);
  CHECK(p.rules.networks.aliases);
  CHECK(p.rules.volumes.mount_owned);
  CHECK(std::holds_alternative<deny>(
      review_container_create(p, R"({"Image":"busybox","HostConfig":{"Binds":["/etc:/src"]}})")));
}

TEST_CASE("policy files: comment keys are read past on the policy, profiles, rules and images",
          "[policy][learn]") {
  auto p = parse_policy(
      R"({"comment":"x","profiles":{"a":{"comment":{"refused_seen":[]},"record":"fields",)"
      R"("allow":["ContainerCreate"],"images":{"allow":["*"],"comment":{}},)"
      R"("container_create":{"HostConfig.Memory":{"max":5,"comment":"seen"}}}}})");
  for (const auto& e : p.errors) INFO(e);
  REQUIRE(p.value);
  CHECK(p.value->profiles[0].record_fields);
  CHECK(!parse_policy(R"({"profiles":{"a":{"allow":[],"record":"values"}}})").value);
  CHECK(!parse_policy(R"({"profiles":{"a":{"allow":["ContainerCreate"],"images":{"allow":["*"]},)"
                      R"("container_create":{"HostConfig.Memory":{"comment":"only"}}}}})")
             .value);
}

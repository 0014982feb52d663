// The learner's aggregation (policy/src/learn.cpp) and the audit line's "seen"
// (policy/src/body_seen.cpp), as tables: audit lines in, the policy the gate would load out.
#include "dockgate/policy/learn.hpp"

#include <simdjson.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <set>
#include <sstream>

#include "dockgate/policy/audit_line.hpp"
#include "dockgate/policy/body_review.hpp"
#include "dockgate/policy/body_seen.hpp"
#include "dockgate/policy/policy_file.hpp"

using namespace dockgate::policy;

namespace {

// One audit line as the gate writes it (docs/audit.schema.json), of `profile`.
std::string line(const std::string& op, const std::string& verdict, const std::string& extra = {},
                 const std::string& profile = "learn") {
  static int n = 0;
  const std::string digit = std::to_string(n++ % 10);
  std::string out = R"({"time":"2026-12-01T21:00:00.00000)" + digit +
                    R"(Z","request_id":"00000000-00000000000)" + digit +
                    R"(","client":{"transport":"unix","uid":0,"pid":1},"profile":")" + profile +
                    R"(","method":"POST","path":"/v1.47/x","operation":")" + op +
                    R"(","verdict":")" + verdict + "\"" + extra;
  if (extra.find("\"status\"") == std::string::npos)
    out += verdict == "allow" ? R"(,"status":200)" : R"(,"status":403)";
  return out + R"(,"bytes_in":0,"bytes_out":0,"duration_ms":0.5})" + "\n";
}

std::string seen_of(const std::string& body, operation op = operation::ContainerCreate) {
  return ",\"seen\":" + body_seen(op, body);
}

// The same "seen" with its widening list emptied: an edited line.
std::string forged_seen_of(const std::string& body, operation op = operation::ContainerCreate) {
  std::string seen = body_seen(op, body);
  const auto at = seen.find("\"widening\":[");
  REQUIRE(at != std::string::npos);
  return ",\"seen\":" + seen.substr(0, at) + "\"widening\":[]}";
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The recording policy: the shipped learning profile, and profiles of the tests' own
// ("lax" lets host namespaces and SecurityOpt weakeners through by rule, so only learn's
// own table stands between them and a learned rule; "binds" declares bind roots).
const policy& recording_policy() {
  static const policy p = [] {
    std::string text = slurp(DOCKGATE_SOURCE_DIR "/compose/policies/learn.json");
    const auto profiles = text.find("\"profiles\": {");
    REQUIRE(profiles != std::string::npos);
    text.insert(profiles + 13, R"(
    "lax": {"record": "fields", "allow": ["ContainerCreate", "ContainerExec", "SystemPing"],
      "images": {"allow": ["*"]},
      "container_create": {
        "HostConfig.PidMode": {"allow": ["host", "container:x"]},
        "HostConfig.IpcMode": {"allow": ["host", "container:x"]},
        "HostConfig.UTSMode": {"allow": ["host"]},
        "HostConfig.UsernsMode": {"allow": ["host"]},
        "HostConfig.CgroupnsMode": {"allow": ["host"]},
        "HostConfig.Cgroup": {"allow": ["host"]},
        "HostConfig.NetworkMode": {"allow": ["host", "container:x", "default"]},
        "HostConfig.SecurityOpt": {"allow": ["seccomp=unconfined", "seccomp:unconfined",
          "apparmor=unconfined", "label=disable", "label:disable", "label=type:spc_t",
          "no-new-privileges=false", "no-new-privileges:false", "systempaths=unconfined",
          "writable-cgroups=true", "no-new-privileges"]}}},
    "binds": {"record": "fields", "allow": ["ContainerCreate", "NetworkCreate"],
      "images": {"allow": ["docker.io/library/busybox:*"]},
      "binds": {"source_roots": ["/srv"], "targets": ["/src"], "require_fuse": false},
      "networks": {"join_owned": true, "aliases": true}, "volumes": {"mount_owned": true},
      "ports": {}},
    "plain": {"allow": ["ContainerCreate", "SystemPing"], "images": {"allow": ["*"]}},
    "audited": {"mode": "audit", "record": "fields", "allow": ["SystemPing"],
      "images": {"allow": ["docker.io/library/busybox:*"]}},)");
    auto loaded = parse_policy(text);
    for (const auto& e : loaded.errors) INFO(e);
    REQUIRE(loaded.value);
    return std::move(*loaded.value);
  }();
  return p;
}

learn_result learn_raw(const std::string& log, const std::string& from_profile = "") {
  std::string_view text = log;
  learn_options o{from_profile, "t", {"t.log"}, &recording_policy()};
  return learn_profile(std::span<const std::string_view>(&text, 1), o);
}

struct learned_policy {
  learn_result result;
  policy loaded;
};

learned_policy learn(const std::string& log, const std::string& from_profile = "learn") {
  auto r = learn_raw(log, from_profile);
  INFO(r.policy);
  for (const auto& e : r.errors) INFO(e);
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

bool has_error(const learn_result& r, std::string_view where, std::string_view why) {
  for (const auto& e : r.errors)
    if (e.starts_with(std::string(where) + ": ") && e.find(why) != std::string::npos) return true;
  return false;
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
                  seen_of(R"({"Image":"evil","HostConfig":{"CapAdd":["SYS_ADMIN"]}})"),
              "audited");
  // A learning profile whose rule let host networking through: still never learned.
  log +=
      line("ContainerCreate", "allow",
           seen_of(R"({"Image":"busybox","HostConfig":{"NetworkMode":"host","PidMode":"host"}})"),
           "lax");
  log += line("ContainerCreate", "allow",
              seen_of(R"({"Image":"busybox","HostConfig":{"NetworkMode":"host"}})"), "lax");
  log += line("ContainerCreate", "allow", seen_of(R"({"Image":"busybox"})"));
  auto l = learn(log, "");
  const profile& p = l.loaded.profiles.at(0);
  CHECK(l.result.errors.empty());
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
  log += line("NetworkCreate", "allow", {}, "binds");
  log +=
      line("ContainerCreate", "allow",
           seen_of(R"({"Image":"busybox","HostConfig":{"Binds":["/srv/app:/src:ro","data:/data"],)"
                   R"("NetworkMode":"proj_default"},"NetworkingConfig":{"EndpointsConfig":)"
                   R"({"proj_default":{"Aliases":["web"]}}}})"),
           "binds");
  auto l = learn(log, "binds");
  const profile& p = l.loaded.profiles.at(0);
  CHECK(l.result.errors.empty());
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

// Issue 39, item 8: learn trusted what a line said about itself.

TEST_CASE("learn: a line's widening list is recomputed from its values: an edited line is refused",
          "[policy][learn]") {
  // Each sibling of the class: a host namespace, a container's namespace, a SecurityOpt
  // weakener, or another widening value, recorded by the gate, then the line's own
  // "widening" emptied. Recorded under "lax", whose rules let each through, so nothing
  // but learn's own recomputation stands between the line and a learned allow rule.
  struct edited {
    std::string body;   // HostConfig members
    std::string path;   // the field it widens
    std::string value;  // the value that must never be allowed
  };
  const std::vector<edited> table{
      {R"("PidMode":"host")", "HostConfig.PidMode", "host"},
      {R"("PidMode":"container:x")", "HostConfig.PidMode", "container:x"},
      {R"("IpcMode":"host")", "HostConfig.IpcMode", "host"},
      {R"("IpcMode":"container:x")", "HostConfig.IpcMode", "container:x"},
      {R"("UTSMode":"host")", "HostConfig.UTSMode", "host"},
      {R"("UsernsMode":"host")", "HostConfig.UsernsMode", "host"},
      {R"("CgroupnsMode":"host")", "HostConfig.CgroupnsMode", "host"},
      {R"("Cgroup":"host")", "HostConfig.Cgroup", "host"},
      {R"("NetworkMode":"host")", "HostConfig.NetworkMode", "host"},
      {R"("NetworkMode":"container:x")", "HostConfig.NetworkMode", "container:x"},
      {R"("SecurityOpt":["seccomp=unconfined"])", "HostConfig.SecurityOpt", "seccomp=unconfined"},
      {R"("SecurityOpt":["seccomp:unconfined"])", "HostConfig.SecurityOpt", "seccomp:unconfined"},
      {R"("SecurityOpt":["apparmor=unconfined"])", "HostConfig.SecurityOpt", "apparmor=unconfined"},
      {R"("SecurityOpt":["label=disable"])", "HostConfig.SecurityOpt", "label=disable"},
      {R"("SecurityOpt":["label:disable"])", "HostConfig.SecurityOpt", "label:disable"},
      {R"("SecurityOpt":["label=type:spc_t"])", "HostConfig.SecurityOpt", "label=type:spc_t"},
      {R"("SecurityOpt":["no-new-privileges=false"])", "HostConfig.SecurityOpt",
       "no-new-privileges=false"},
      {R"("SecurityOpt":["no-new-privileges:false"])", "HostConfig.SecurityOpt",
       "no-new-privileges:false"},
      {R"("SecurityOpt":["systempaths=unconfined"])", "HostConfig.SecurityOpt",
       "systempaths=unconfined"},
      {R"("SecurityOpt":["writable-cgroups=true"])", "HostConfig.SecurityOpt",
       "writable-cgroups=true"},
      {R"("SecurityOpt":["no-new-privileges","seccomp=unconfined"])", "HostConfig.SecurityOpt",
       "seccomp=unconfined"},
  };
  for (const auto& e : table) {
    const std::string body = R"({"Image":"busybox","HostConfig":{)" + e.body + "}}";
    INFO(body);
    std::string log = line("SystemPing", "allow", {}, "lax");  // something valid to learn
    log += line("ContainerCreate", "allow", forged_seen_of(body), "lax");
    auto l = learn(log, "lax");
    for (const auto& x : l.result.errors) INFO(x);
    CHECK(has_error(l.result, "t.log:2", "seen.widening leaves out " + e.path));
    CHECK(l.result.lines_learned == 1);
    const profile& p = l.loaded.profiles.at(0);
    CHECK_FALSE(p.allows(operation::ContainerCreate));
    CHECK(rule_of(p, e.path) == nullptr);
    CHECK(l.result.policy.find(e.value) == std::string::npos);
    // The same line as the gate wrote it is read, and refused as a widening.
    std::string honest = line("SystemPing", "allow", {}, "lax");
    honest += line("ContainerCreate", "allow", seen_of(body), "lax");
    auto h = learn(honest, "lax");
    CHECK(h.result.errors.empty());
    REQUIRE(h.result.refused_seen.size() == 1);
    CHECK(h.result.refused_seen[0].find("never learned (security invariants): " + e.path) !=
          std::string::npos);
    CHECK(h.result.policy.find("\"allow\": [\"" + e.value) == std::string::npos);
  }
  // An exec's Privileged, and widening fields whose values are never recorded (only that
  // they were set): the same.
  {
    std::string log = line("SystemPing", "allow", {}, "lax");
    log += line("ContainerExec", "allow",
                forged_seen_of(R"({"Cmd":["id"],"Privileged":true})", operation::ContainerExec),
                "lax");
    auto l = learn(log, "lax");
    CHECK(has_error(l.result, "t.log:2", "seen.widening leaves out Privileged"));
    CHECK_FALSE(l.loaded.profiles.at(0).allows(operation::ContainerExec));
  }
  {
    std::string log = line("SystemPing", "allow", {}, "lax");
    log += line("ContainerCreate", "allow",
                forged_seen_of(R"({"Image":"busybox","HostConfig":{"CgroupParent":"/"}})"), "lax");
    auto l = learn(log, "lax");
    CHECK(has_error(l.result, "t.log:2", "seen.widening leaves out HostConfig.CgroupParent"));
  }
}

TEST_CASE("learn: never an allow for a host namespace or a SecurityOpt weakener",
          "[policy][learn]") {
  for (const auto& [path, value] : std::vector<std::pair<std::string, std::string>>{
           {"HostConfig.PidMode", "host"},
           {"HostConfig.PidMode", "container:x"},
           {"HostConfig.IpcMode", "host"},
           {"HostConfig.IpcMode", "container:x"},
           {"HostConfig.UTSMode", "host"},
           {"HostConfig.UsernsMode", "host"},
           {"HostConfig.CgroupnsMode", "host"},
           {"HostConfig.Cgroup", "host"},
           {"HostConfig.NetworkMode", "host"},
           {"HostConfig.NetworkMode", "container:x"},
           {"HostConfig.SecurityOpt", "seccomp=unconfined"},
           {"HostConfig.SecurityOpt", "seccomp={\"defaultAction\":\"SCMP_ACT_ALLOW\"}"},
           {"HostConfig.SecurityOpt", "apparmor=unconfined"},
           {"HostConfig.SecurityOpt", "label=disable"},
           {"HostConfig.SecurityOpt", "label:disable"},
           {"HostConfig.SecurityOpt", "no-new-privileges=false"},
           {"HostConfig.SecurityOpt", "no-new-privileges:false"},
           {"HostConfig.SecurityOpt", "systempaths=unconfined"},
           {"HostConfig.SecurityOpt", "writable-cgroups=true"},
       }) {
    INFO(path << " " << value);
    CHECK_FALSE(learnable_create_value(path, value));
  }
  for (const auto& [path, value] : std::vector<std::pair<std::string, std::string>>{
           {"HostConfig.PidMode", "private"},
           {"HostConfig.IpcMode", "shareable"},
           {"HostConfig.IpcMode", "none"},
           {"HostConfig.CgroupnsMode", "private"},
           {"HostConfig.NetworkMode", "default"},
           {"HostConfig.NetworkMode", "proj_default"},  // an owned network: join_owned bounds it
           {"HostConfig.SecurityOpt", "no-new-privileges"},
           {"HostConfig.SecurityOpt", "no-new-privileges:true"},
           {"User", "1000"},
           {"HostConfig.CapDrop", "ALL"},
       }) {
    INFO(path << " " << value);
    CHECK(learnable_create_value(path, value));
  }
}

TEST_CASE("learn: lines that are no audit record are refused with their number and why",
          "[policy][learn]") {
  const std::string good_object =
      R"({"time":"2026-12-01T21:00:00.000000Z","request_id":"00000000-000000000000",)"
      R"("client":{"transport":"unix","uid":0,"pid":1},"profile":"learn","method":"HEAD",)"
      R"("path":"/_ping","operation":"SystemPing","verdict":"allow","status":200,"bytes_in":0,)"
      R"("bytes_out":0,"duration_ms":0.5})";
  const std::string good = good_object + "\n";
  auto with = [&](const std::string& from, const std::string& to) {
    std::string l = good_object;
    const auto at = l.find(from);
    REQUIRE(at != std::string::npos);
    return l.replace(at, from.size(), to);
  };
  struct bad {
    std::string text, why;
  };
  const std::vector<bad> table{
      {"not json at all", "not JSON"},
      {"[1,2]", "(line): is not an object"},
      {R"({"profile":"learn","operation":"SwarmInit","verdict":"allow"})", "has no \"time\""},
      {with(R"("time":"2026-12-01T21:00:00.000000Z",)", ""), "has no \"time\""},
      {with(R"("request_id":"00000000-000000000000",)", ""), "has no \"request_id\""},
      {with(R"("client":{"transport":"unix","uid":0,"pid":1},)", ""), "has no \"client\""},
      {with(R"("time":"2026-12-01T21:00:00.000000Z")", R"("time":"yesterday")"),
       "time: does not match"},
      {with(R"("time":"2026-12-01T21:00:00.000000Z")", R"("time":"2026-13-01T21:00:00.000000Z")"),
       "time: does not match"},
      {with(R"("request_id":"00000000-000000000000")", R"("request_id":"ABCDEFGH-000000000000")"),
       "request_id: does not match"},
      {with(R"("transport":"unix")", R"("transport":"pigeon")"), "client.transport"},
      {with(R"("uid":0)", R"("uid":-1)"), "client.uid: is out of range"},
      {with(R"("transport":"unix","uid":0)", R"("transport":"tcp","uid":0)"),
       "client.uid: is not carried by transport tcp"},
      {with(R"("verdict":"allow")", R"("verdict":"maybe")"), "verdict"},
      {with(R"("verdict":"allow")", R"("verdict":"allow","trusted":true)"),
       "unknown member \"trusted\""},
      {with(R"("operation":"SystemPing")", R"("operation":"system ping")"),
       "operation: does not match"},
      {with(R"("status":200)", R"("status":50)"), "status: is between 0 and 100"},
      {with(R"("status":200)", R"("status":"200")"), "status: is not an integer"},
      {with(R"("duration_ms":0.5)", R"("duration_ms":-1)"), "duration_ms: is negative"},
      {with(R"("profile":"learn")", R"("profile":"")"), "profile: is empty"},
      {with(R"("verdict":"allow")", R"("verdict":"allow","object":{"type":"container"})"),
       "object: has fewer than 2 members"},
      {with(R"("verdict":"allow")", R"("verdict":"allow","object":{"type":"host","id":"x"})"),
       "object.type"},
      {with(R"("verdict":"allow")", R"("verdict":"allow","seen":{"fields":[],"values":{}})"),
       "seen: has no \"widening\""},
      {with(R"("verdict":"allow")",
            R"("verdict":"allow","seen":{"fields":[],"values":{"Env":["A=b"]},"widening":[]})"),
       "seen.values: records the value of \"Env\""},
      {with(R"("verdict":"allow")", R"("verdict":"allow","hijacked":false)"), "hijacked"},
      // Beyond the schema: a member twice (a reader taking the last would see allow).
      {with(R"("verdict":"allow")", R"("verdict":"deny","verdict":"allow")"),
       "(line): has \"verdict\" twice"},
      {with(R"("uid":0)", R"("uid":0,"uid":0)"), "client: has \"uid\" twice"},
  };
  std::string log = good;
  for (const auto& b : table) log += b.text + "\n";
  auto l = learn(log);
  for (const auto& e : l.result.errors) INFO(e);
  CHECK(l.result.lines_learned == 1);
  REQUIRE(l.result.errors.size() == table.size());
  for (std::size_t i = 0; i < table.size(); ++i) {
    INFO(table[i].text << " -> " << l.result.errors[i]);
    CHECK(l.result.errors[i].starts_with("t.log:" + std::to_string(i + 2) + ": not an audit line"));
    CHECK(l.result.errors[i].find(table[i].why) != std::string::npos);
  }
  const profile& p = l.loaded.profiles.at(0);
  CHECK(p.allowed.count() == 1);  // SystemPing: the one record
  CHECK_FALSE(p.allows(operation::SwarmInit));
  // Nothing but such lines: nothing learned.
  std::string only_bad;
  for (const auto& b : table) only_bad += b.text + "\n";
  CHECK(learn_raw(only_bad).lines_learned == 0);
}

TEST_CASE("learn: operations and values the recording profile could not allow are never learned",
          "[policy][learn]") {
  struct impossible {
    std::string text, why;
  };
  const std::vector<impossible> table{
      // learn.json allows no swarm write, plugin or build: no line the gate let through.
      {line("SwarmInit", "allow"), "operation SwarmInit is not one profile learn allows"},
      {line("PluginPull", "allow"), "operation PluginPull is not one profile learn allows"},
      {line("ImageBuild", "allow"), "operation ImageBuild is not one profile learn allows"},
      {line("ServiceCreate", "allow"), "operation ServiceCreate is not one profile learn allows"},
      {line("NoSuchThing", "allow"), "is no Engine API operation"},
      {line("SystemPing", "allow", {}, "root"), "profile root is not one of the recording"},
      // "seen" where the gate never writes it, or missing where it always does.
      {line("SystemPing", "allow", R"(,"seen":{"fields":[],"values":{},"widening":[]})", "plain"),
       "does not record fields"},
      {line("ContainerCreate", "allow"), "records fields, but this ContainerCreate line has no"},
      // Values the profile's own review refuses: a bind learn.json has no root for, a
      // privileged exec, an image outside "binds"' images, a capability.
      {line("ContainerCreate", "allow",
            seen_of(R"({"Image":"busybox","HostConfig":{"Binds":["/:/host"]}})")),
       "says allow, but profile learn refuses its values"},
      {line("ContainerCreate", "allow", seen_of(R"({"Image":"evil/miner"})"), "binds"),
       "says allow, but profile binds refuses its values"},
      {line("ContainerCreate", "allow",
            seen_of(R"({"Image":"busybox","HostConfig":{"CapAdd":["SYS_ADMIN"]}})")),
       "says allow, but profile learn refuses its values"},
      // values that are no body the gate would read
      {line(
           "ContainerCreate", "allow",
           R"(,"seen":{"fields":["HostConfig.Memory"],"values":{"HostConfig.Memory":"lots"},"widening":[]})"),
       "seen.values are not a ContainerCreate body"},
      {line("ContainerCreate", "allow",
            R"(,"seen":{"fields":[],"values":{"HostConfig.NoSuchField":1},"widening":[]})"),
       "seen.values are not a ContainerCreate body"},
  };
  std::string log = line("SystemPing", "allow");
  for (const auto& i : table) log += i.text;
  auto l = learn(log, "");
  for (const auto& e : l.result.errors) INFO(e);
  REQUIRE(l.result.errors.size() == table.size());
  for (std::size_t i = 0; i < table.size(); ++i) {
    INFO(l.result.errors[i]);
    CHECK(l.result.errors[i].starts_with("t.log:" + std::to_string(i + 2) + ": "));
    CHECK(l.result.errors[i].find(table[i].why) != std::string::npos);
  }
  CHECK(l.result.lines_learned == 1);
  const profile& p = l.loaded.profiles.at(0);
  CHECK(p.allowed.count() == 1);
  CHECK_FALSE(p.allows(operation::SwarmInit));
  CHECK_FALSE(p.allows(operation::PluginPull));
  CHECK_FALSE(p.allows(operation::ContainerCreate));
  CHECK(!p.rules.binds);
  // The same operations refused by the gate are facts it writes: listed, not learned.
  std::string refused = line("SystemPing", "allow");
  refused += line("SwarmInit", "deny", R"(,"reason":"dockgate: SwarmInit is not allowed")");
  auto r = learn(refused);
  CHECK(r.result.errors.empty());
  CHECK(r.result.refused_seen.size() == 1);
  // No recording policy: nothing is learned.
  std::string_view text = refused;
  CHECK(learn_profile(std::span<const std::string_view>(&text, 1), {}).lines_learned == 0);
}

TEST_CASE("learn: lines of a profile that records no fields learn operations and say so",
          "[policy][learn]") {
  std::string log = line("SystemPing", "allow", {}, "plain");
  log += line("ContainerCreate", "allow", {}, "plain");
  auto r = learn_raw(log, "plain");
  CHECK(r.errors.empty());
  CHECK(r.lines_learned == 2);
  CHECK(r.unrecorded_bodies == 1);
  CHECK(r.unrecorded_profiles == std::vector<std::string>{"plain"});
  CHECK(learn_raw(line("SystemPing", "allow"), "learn").unrecorded_profiles.empty());
}

// docs/audit.schema.json is the one definition of an audit line; audit_line.cpp enforces
// it as code. Every list the schema gives (members, required, enumerations, patterns,
// types) must be the validator's, so neither can change without the other.
TEST_CASE("audit lines: the validator is docs/audit.schema.json's", "[policy][learn]") {
  simdjson::dom::parser parser;
  simdjson::dom::element schema;
  REQUIRE(parser.load(DOCKGATE_SOURCE_DIR "/docs/audit.schema.json").get(schema) ==
          simdjson::SUCCESS);
  auto node = [&](std::string_view where) {
    if (where.empty()) return schema;
    if (where == "changes[]") return schema.at_pointer("/properties/changes/oneOf/1/items").value();
    std::string pointer;
    for (std::size_t at = 0; at != std::string_view::npos;) {
      const auto dot = where.find('.', at);
      pointer += "/properties/" + std::string(where.substr(at, dot - at));
      at = dot == std::string_view::npos ? dot : dot + 1;
    }
    simdjson::dom::element e;
    INFO(pointer);
    REQUIRE(schema.at_pointer(pointer).get(e) == simdjson::SUCCESS);
    return e;
  };
  auto members = [](simdjson::dom::element e) {
    simdjson::dom::object o;
    REQUIRE(e.get_object().get(o) == simdjson::SUCCESS);
    return o;
  };
  const auto top = members(schema["properties"].value());
  auto strings = [](simdjson::dom::element e) {
    std::set<std::string> out;
    simdjson::dom::array a;
    REQUIRE(e.get_array().get(a) == simdjson::SUCCESS);
    for (auto item : a) out.emplace(item.get_string().value());
    return out;
  };
  // Every object the schema closes (additionalProperties: false), and only those.
  std::set<std::string> closed;
  for (const auto& o : audit_schema_objects()) {
    INFO("object " << o.where);
    closed.emplace(o.where);
    auto n = node(o.where);
    CHECK(n["additionalProperties"].get_bool().value() == false);
    std::set<std::string> props;
    for (auto [k, v] : members(n["properties"].value())) props.emplace(k);
    CHECK(props == std::set<std::string>(o.properties.begin(), o.properties.end()));
    CHECK(strings(n["required"]) == std::set<std::string>(o.required.begin(), o.required.end()));
  }
  std::set<std::string> schema_closed{""};
  for (auto [k, v] : top)
    if (v["additionalProperties"].error() == simdjson::SUCCESS) schema_closed.emplace(k);
  schema_closed.emplace("changes[]");
  CHECK(closed == schema_closed);
  for (const auto& e : audit_schema_enums()) {
    INFO("enum " << e.where);
    CHECK(strings(node(e.where)["enum"]) ==
          std::set<std::string>(e.values.begin(), e.values.end()));
  }
  std::set<std::string> enum_members;
  for (const auto& e : audit_schema_enums()) enum_members.emplace(e.where);
  for (auto [k, v] : top)
    if (v["enum"].error() == simdjson::SUCCESS) CHECK(enum_members.contains(std::string(k)));
  std::size_t patterns = 0;
  for (const auto& p : audit_schema_patterns()) {
    INFO("pattern " << p.where);
    if (p.where.starts_with("seen.values")) {
      CHECK(node("seen.values")["propertyNames"]["not"]["pattern"].get_string().value() ==
            p.pattern);
    } else {
      CHECK(node(p.where)["pattern"].get_string().value() == p.pattern);
      ++patterns;
    }
  }
  // No pattern in the schema the validator does not implement.
  std::size_t schema_patterns = 0;
  for (auto [k, v] : top) {
    if (v["pattern"].error() == simdjson::SUCCESS) ++schema_patterns;
    if (auto sub = v["properties"]; sub.error() == simdjson::SUCCESS)
      for (auto [k2, v2] : members(sub.value()))
        if (v2["pattern"].error() == simdjson::SUCCESS) ++schema_patterns;
  }
  CHECK(patterns == schema_patterns);
  for (const auto& t : audit_schema_types()) {
    INFO("type " << t.where);
    CHECK(node(t.where)["type"].get_string().value() == t.type);
  }
  // Every member with a type is in the validator's table.
  std::set<std::string> typed;
  for (const auto& t : audit_schema_types()) typed.emplace(t.where);
  for (auto [k, v] : top) {
    if (v["type"].error() == simdjson::SUCCESS) CHECK(typed.contains(std::string(k)));
    if (auto sub = v["properties"]; sub.error() == simdjson::SUCCESS)
      for (auto [k2, v2] : members(sub.value()))
        if (v2["type"].error() == simdjson::SUCCESS && k != "seen")
          CHECK(typed.contains(std::string(k) + "." + std::string(k2)));
  }
}

TEST_CASE("learn: published ports become the loopback ports rule, never the address seen",
          "[policy][learn]") {
  std::string log;
  log += line("ContainerCreate", "allow",
              seen_of(R"({"Image":"busybox","HostConfig":{"PortBindings":)"
                      R"({"80/tcp":[{"HostIp":"0.0.0.0","HostPort":"8080"}]}}})"),
              "binds");
  auto l = learn(log, "binds");
  CHECK(l.result.errors.empty());
  const profile& p = l.loaded.profiles.at(0);
  REQUIRE(p.rules.ports);
  auto d = review_container_create(
      p, R"({"Image":"busybox","HostConfig":{"PortBindings":{"80/tcp":[{"HostIp":"0.0.0.0"}]}}})");
  REQUIRE(std::holds_alternative<rewrite>(d));
  CHECK(std::get<rewrite>(d).body.find(R"("HostIp":"127.0.0.1")") != std::string::npos);
}

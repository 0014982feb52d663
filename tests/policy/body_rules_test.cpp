// Container-create and exec-create review against the shipped policies
// (compose/policies/*.json) and small inline ones, one rule at a time.
#include <simdjson.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <set>
#include <sstream>

#include "dockgate/policy/body_review.hpp"
#include "dockgate/policy/go_json.hpp"
#include "dockgate/policy/responses.hpp"

using namespace dockgate::policy;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(std::string(DOCKGATE_SOURCE_DIR) + "/" + path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

policy load(const std::string& json) {
  auto r = parse_policy(json);
  INFO(Catch::Detail::stringify(r.errors));
  REQUIRE(r.value);
  return std::move(*r.value);
}

const policy& sandbox() {
  static const policy p = load(read_file("compose/policies/sandbox.json"));
  return p;
}
const policy& cli() {
  static const policy p = load(read_file("compose/policies/docker-cli.json"));
  return p;
}

const std::string image = R"("Image":"dockgate/test-busybox")";

// The rewritten body, or "DENY: <reason>".
std::string review(const policy& p, const std::string& body) {
  auto d = review_container_create(p.default_(), body);
  if (auto* x = std::get_if<deny>(&d)) return "DENY: " + x->reason;
  return std::get<rewrite>(d).body;
}

// A member of the rewritten HostConfig (or top level), as JSON text; "" if absent.
std::string field(const std::string& body, std::string_view path) {
  auto decoded = decode_body(body, schema::container_create);
  REQUIRE(decoded.value);
  const json_value* v = &*decoded.value;
  while (v) {
    auto dot = path.find('.');
    v = find(*v->as_object(), path.substr(0, dot));
    if (dot == std::string_view::npos) break;
    path.remove_prefix(dot + 1);
  }
  return v ? to_json(*v) : "";
}

}  // namespace

TEST_CASE("the docker CLI's run body passes docker-cli with restricted defaults", "[body_rules]") {
  const std::string body = read_file("tests/policy/data/docker_cli_run.json");
  auto out = review(cli(), body);
  INFO(out);
  REQUIRE_FALSE(out.starts_with("DENY"));
  CHECK(field(out, "HostConfig.SecurityOpt") == R"(["no-new-privileges"])");
  CHECK(field(out, "HostConfig.CgroupnsMode") == R"("private")");
  CHECK(field(out, "HostConfig.Memory") == "2147483648");
  CHECK(field(out, "HostConfig.PidsLimit") == "4096");
  CHECK(field(out, "Labels") == R"({"dockgate.owner":"docker-cli"})");
  CHECK(field(out, "Cmd") == R"(["true"])");
}

TEST_CASE("docker CLI 28's run body (an empty endpoint on its own network) passes docker-cli",
          "[body_rules]") {
  const std::string body = read_file("tests/policy/data/docker_cli28_run.json");
  auto out = review(cli(), body);
  INFO(out);
  REQUIRE_FALSE(out.starts_with("DENY"));
  // The same endpoint on another network, or with a setting, is a widening.
  CHECK_THAT(review(cli(), "{" + image + R"(,"NetworkingConfig":{"EndpointsConfig":{"host":{}}}})"),
             Catch::Contains("NetworkingConfig.EndpointsConfig"));
  CHECK_THAT(
      review(cli(),
             "{" + image +
                 R"(,"NetworkingConfig":{"EndpointsConfig":{"default":{"Aliases":["x"]}}}})"),
      Catch::Contains("NetworkingConfig.EndpointsConfig"));
  CHECK_FALSE(
      review(
          cli(),
          "{" + image +
              R"(,"HostConfig":{"NetworkMode":"bridge"},"NetworkingConfig":{"EndpointsConfig":{"bridge":{"Aliases":null}}}})")
          .starts_with("DENY"));
  // The sandbox forces no endpoints at all.
  auto sb = review(sandbox(), body);
  REQUIRE_FALSE(sb.starts_with("DENY"));
  CHECK(field(sb, "NetworkingConfig.EndpointsConfig") == "{}");
}

TEST_CASE("sandbox forces its settings whatever the client sent", "[body_rules]") {
  const std::string body =
      R"({"Image":"dockgate/test-busybox","User":"root","HostConfig":{)"
      R"("Privileged":false,"ReadonlyRootfs":false,"NetworkMode":"host","PidMode":"host",)"
      R"("IpcMode":"host","UTSMode":"host","UsernsMode":"host","CgroupnsMode":"host",)"
      R"("CapDrop":[],"SecurityOpt":["seccomp=unconfined","no-new-privileges=false"],)"
      R"("Memory":-1,"MemorySwap":-1,"NanoCpus":0,"PidsLimit":-1,"ShmSize":99999999999,)"
      R"("Tmpfs":{"/tmp":"exec,size=100g","/workspace":"exec,size=10g"},)"
      R"("Ulimits":[{"Name":"nofile","Soft":1048576,"Hard":1048576}],"RestartPolicy":{"Name":"always"}}})";
  auto out = review(sandbox(), body);
  INFO(out);
  REQUIRE_FALSE(out.starts_with("DENY"));
  const std::pair<std::string_view, std::string> expected[] = {
      {"User", R"("65534:65534")"},
      {"HostConfig.Privileged", "false"},
      {"HostConfig.ReadonlyRootfs", "true"},
      {"HostConfig.NetworkMode", R"("none")"},
      {"HostConfig.PidMode", R"("")"},
      {"HostConfig.IpcMode", R"("private")"},
      {"HostConfig.UTSMode", R"("")"},
      {"HostConfig.UsernsMode", R"("")"},
      {"HostConfig.CgroupnsMode", R"("private")"},
      {"HostConfig.CapDrop", R"(["ALL"])"},
      // (and the profile's own seccomp profile after it: "sandbox runs every container
      // under its own seccomp profile")
      {"HostConfig.SecurityOpt",
       R"(["no-new-privileges",)" + to_json(json_value(sandbox().default_().rules.seccomp)) + "]"},
      {"HostConfig.Memory", "2147483648"},
      {"HostConfig.MemorySwap", "2147483648"},
      {"HostConfig.NanoCpus", "1000000000"},
      {"HostConfig.PidsLimit", "256"},
      {"HostConfig.ShmSize", "67108864"},
      {"HostConfig.Tmpfs",
       R"({"/tmp":"rw,nosuid,nodev,exec,size=256m,mode=1777","/workspace":"rw,nosuid,nodev,size=512m,mode=1777"})"},
      {"HostConfig.Ulimits",
       R"([{"Name":"nofile","Hard":1024,"Soft":1024},{"Name":"core","Hard":0,"Soft":0}])"},
      {"HostConfig.RestartPolicy", R"({"Name":"no"})"},
      {"Labels", R"({"dockgate.owner":"sandbox"})"},
  };
  for (const auto& [path, value] : expected) {
    CAPTURE(path);
    CHECK(field(out, path) == value);
  }
}

TEST_CASE("sandbox bounds the daemon-side log: the driver and its size are the profile's") {
  // A remote log driver, or a local one without rotation, would let an untrusted
  // container ship its output away or fill the daemon's disk.
  for (const std::string log :
       {R"({"Type":"syslog","Config":{"syslog-address":"tcp://1.2.3.4:514"}})",
        R"({"Type":"json-file","Config":{"max-size":"100g"}})", R"({"Type":"","Config":{}})"}) {
    CAPTURE(log);
    auto out = review(sandbox(), "{" + image + R"(,"HostConfig":{"LogConfig":)" + log + "}}");
    CHECK(field(out, "HostConfig.LogConfig") ==
          R"({"Type":"json-file","Config":{"max-file":"3","max-size":"10m"}})");
  }
  CHECK(field(review(cli(), "{" + image + "}"), "HostConfig.LogConfig") ==
        R"({"Type":"json-file","Config":{"max-file":"3","max-size":"10m"}})");
}

TEST_CASE("sandbox refuses what it cannot force", "[body_rules]") {
  struct c {
    std::string body;
    std::string_view reason_part;
  };
  const c cases[] = {
      {R"({"Image":"busybox"})",
       "Image \"docker.io/library/busybox:latest\" is not in the image allowlist"},
      {R"({"Image":"dockgate/x:BAD TAG"})", "not a valid image reference"},
      {"{" + image + R"(,"HostConfig":{"CapAdd":["SYS_ADMIN"]}})",
       "HostConfig.CapAdd value \"SYS_ADMIN\""},
      {"{" + image + R"(,"HostConfig":{"CapAdd":"ALL"}})", "HostConfig.CapAdd value \"ALL\""},
      {"{" + image + R"(,"HostConfig":{"capadd":["cap_net_raw"]}})", "HostConfig.CapAdd"},
      {"{" + image +
           R"(,"HostConfig":{"Devices":[{"PathOnHost":"/dev/sda","PathInContainer":"/dev/sda","CgroupPermissions":"rwm"}]}})",
       "HostConfig.Devices"},
      {"{" + image + R"(,"HostConfig":{"DeviceCgroupRules":["a *:* rwm"]}})",
       "HostConfig.DeviceCgroupRules"},
      {"{" + image + R"(,"HostConfig":{"DeviceRequests":[{"Driver":"nvidia","Count":-1}]}})",
       "HostConfig.DeviceRequests"},
      {"{" + image + R"(,"HostConfig":{"Sysctls":{"kernel.shm_rmid_forced":"1"}}})",
       "HostConfig.Sysctls"},
      {"{" + image + R"(,"HostConfig":{"Tmpfs":{"/dev/shm":"exec"}}})",
       "HostConfig.Tmpfs path \"/dev/shm\" is not allowed"},
      {"{" + image + R"(,"HostConfig":{"Tmpfs":{"/proc/sys":""}}})", "HostConfig.Tmpfs path"},
      {"{" + image + R"(,"HostConfig":{"CgroupParent":"/"}})", "HostConfig.CgroupParent"},
      {"{" + image + R"(,"HostConfig":{"VolumesFrom":["other"]}})", "HostConfig.VolumesFrom"},
      {"{" + image + R"(,"HostConfig":{"Links":["other:alias"]}})", "HostConfig.Links"},
      {"{" + image + R"(,"HostConfig":{"ExtraHosts":["x:1.2.3.4"]}})", "HostConfig.ExtraHosts"},
      {"{" + image + R"(,"HostConfig":{"PortBindings":{"80/tcp":[{"HostPort":"80"}]}}})",
       "HostConfig.PortBindings"},
      {"{" + image + R"(,"HostConfig":{"PublishAllPorts":true}})", "HostConfig.PublishAllPorts"},
      {"{" + image + R"(,"HostConfig":{"OomKillDisable":true}})", "HostConfig.OomKillDisable"},
      {"{" + image + R"(,"HostConfig":{"OomScoreAdj":-1000}})", "HostConfig.OomScoreAdj"},
      {"{" + image + R"(,"HostConfig":{"Runtime":"kata"}})", "HostConfig.Runtime"},
      {"{" + image + R"(,"HostConfig":{"MaskedPaths":[]}})", "HostConfig.MaskedPaths"},
      {"{" + image + R"(,"HostConfig":{"ReadonlyPaths":[]}})", "HostConfig.ReadonlyPaths"},
      {"{" + image + R"(,"HostConfig":{"GroupAdd":["0"]}})", "HostConfig.GroupAdd"},
      {"{" + image + R"(,"HostConfig":{"StorageOpt":{"size":"1T"}}})", "HostConfig.StorageOpt"},
      {"{" + image + R"(,"HostConfig":{"VolumeDriver":"local"}})", "HostConfig.VolumeDriver"},
      {"{" + image + R"(,"HostConfig":{"CpuRealtimeRuntime":950000}})",
       "HostConfig.CpuRealtimeRuntime"},
      {"{" + image + R"(,"HostConfig":{"BlkioDeviceReadBps":[{"Path":"/dev/sda","Rate":1}]}})",
       "HostConfig.BlkioDeviceReadBps"},
      {"{" + image + R"(,"Volumes":{"/data":{}}})", "Volumes"},
      // no client binds at all: the workspace is the profile's to bind
      {"{" + image + R"(,"HostConfig":{"Binds":["/:/workspace"]}})",
       "HostConfig.Binds is not allowed"},
      {"{" + image + R"(,"HostConfig":{"Binds":["/mnt/aimem/s1:/workspace"]}})",
       "HostConfig.Binds is not allowed"},
      {"{" + image +
           R"(,"HostConfig":{"Mounts":[{"Type":"bind","Source":"/mnt/aimem/s1","Target":"/workspace"}]}})",
       "HostConfig.Mounts is not allowed"},
      {"{" + image +
           R"(,"HostConfig":{"Mounts":[{"Type":"volume","Source":"v","Target":"/workspace","VolumeOptions":{"DriverConfig":{"Name":"local","Options":{"type":"none","o":"bind","device":"/"}}}}]}})",
       "HostConfig.Mounts is not allowed"},
      {"{" + image + R"(,"HostConfig":{"Mounts":[{"Type":"tmpfs","Target":"/workspace"}]}})",
       "HostConfig.Mounts is not allowed"},
      // a workspace id that is not a plain name
      {"{" + image + R"(,"Labels":{"dockgate.workspace":"../../etc"}})",
       "label \"dockgate.workspace\" must be"},
      {"{" + image + R"(,"Labels":{"dockgate.workspace":".hidden"}})",
       "label \"dockgate.workspace\" must be"},
      {"{" + image + R"(,"Labels":{"dockgate.workspace":"a/b"}})",
       "label \"dockgate.workspace\" must be"},
      {"{" + image + R"(,"Labels":{"dockgate.workspace":""}})",
       "label \"dockgate.workspace\" must be"},
      // labels under the reserved prefix
      {"{" + image + R"(,"Labels":{"dockgate.owner":"someone-else"}})", "reserved prefix"},
      {"{" + image + R"(,"Labels":{"dockgate.anything":"x"}})", "reserved prefix"},
      // the deprecated top-level host config, when there is no inner HostConfig
      {"{" + image +
           R"(,"Devices":[{"PathOnHost":"/dev/mem","PathInContainer":"/dev/mem","CgroupPermissions":"rwm"}]})",
       "HostConfig.Devices"},
      {"{" + image + R"(,"CapAdd":"ALL"})", "HostConfig.CapAdd"},
  };
  for (const auto& x : cases) {
    CAPTURE(x.body);
    auto out = review(sandbox(), x.body);
    CHECK_THAT(out, Catch::StartsWith("DENY: dockgate: "));
    CHECK_THAT(out, Catch::Contains(std::string(x.reason_part)));
    CHECK_THAT(out, Catch::Contains("(profile sandbox, rule"));
  }
}

TEST_CASE("sandbox forces the deprecated top-level host config too", "[body_rules]") {
  auto out = review(sandbox(),
                    "{" + image + R"(,"Privileged":true,"NetworkMode":"host","HostConfig":null})");
  INFO(out);
  CHECK(field(out, "HostConfig.Privileged") == "false");
  CHECK(field(out, "HostConfig.NetworkMode") == R"("none")");
  CHECK(out.find("\"Privileged\":true") == std::string::npos);
  auto endpoints = review(
      sandbox(),
      "{" + image + R"(,"NetworkingConfig":{"EndpointsConfig":{"host":{"Aliases":["a"]}}}})");
  CHECK(field(endpoints, "NetworkingConfig.EndpointsConfig") == "{}");
}

TEST_CASE("sandbox binds the workspace the label names, and nothing else", "[body_rules]") {
  const std::string body = "{" + image +
                           R"(,"Labels":{"dockgate.workspace":"s1"},)"
                           R"("HostConfig":{"Tmpfs":{"/tmp":"size=1m","/workspace":"size=1m"}}})";
  auto d = review_container_create(sandbox().default_(), body);
  REQUIRE(std::holds_alternative<rewrite>(d));
  const auto& rw = std::get<rewrite>(d);
  INFO(rw.body);
  CHECK(
      field(rw.body, "HostConfig.Mounts") ==
      R"([{"Type":"bind","Source":"/mnt/aimem/s1","Target":"/workspace","ReadOnly":false,"BindOptions":{"Propagation":"rprivate"}}])");
  CHECK(field(rw.body, "HostConfig.Binds") == "");
  CHECK(field(rw.body, "HostConfig.Tmpfs").find("/workspace") ==
        std::string::npos);  // it would hide the bind
  CHECK(field(rw.body, "Labels") == R"({"dockgate.owner":"sandbox","dockgate.workspace":"s1"})");
  // The proxy is told which host path to check (symlinks, owners, FUSE) before forwarding.
  CHECK(rw.workspace_source == "/mnt/aimem/s1");
  CHECK(rw.bind_sources.empty());
  CHECK(sandbox().default_().rules.workspace->require_fuse);
  // The proxy's own output reviews to itself.
  auto again = review_container_create(sandbox().default_(), rw.body);
  REQUIRE(std::holds_alternative<rewrite>(again));
  CHECK(std::get<rewrite>(again).body == rw.body);
  CHECK(std::get<rewrite>(again).changes.empty());
  // A client's bind of the same place is replaced by the profile's own (no propagation).
  CHECK(
      field(
          review(
              sandbox(),
              "{" + image +
                  R"(,"Labels":{"dockgate.workspace":"s1"},"HostConfig":{"Mounts":[{"Type":"bind","Source":"/mnt/aimem/s1","Target":"/workspace","BindOptions":{"Propagation":"rshared"}}]}})"),
          "HostConfig.Mounts") ==
      R"([{"Type":"bind","Source":"/mnt/aimem/s1","Target":"/workspace","ReadOnly":false,"BindOptions":{"Propagation":"rprivate"}}])");
  // Without the label there is no bind; with `required` there must be one.
  CHECK(field(review(sandbox(), "{" + image + "}"), "HostConfig.Mounts") == "");
  auto strict = load(
      R"({"default_profile":"p","profiles":{"p":{"allow":["ContainerCreate"],"images":{"allow":["*"]},)"
      R"("workspace":{"root":"/srv/ws","required":true}}}})");
  CHECK_THAT(review(strict, "{" + image + "}"),
             Catch::Contains("must name the container's workspace"));
  // Reserved labels stay reserved in a profile without a workspace rule.
  CHECK_THAT(review(cli(), "{" + image + R"(,"Labels":{"dockgate.workspace":"s1"}})"),
             Catch::Contains("reserved prefix"));
}

TEST_CASE("bind rules: only from the roots, only to the targets, no propagation back",
          "[body_rules]") {
  const policy binds = load(
      R"({"default_profile":"p","profiles":{"p":{"allow":["ContainerCreate"],"images":{"allow":["*"]},)"
      R"("binds":{"source_roots":["/var/lib/dockgate/workspaces"],"targets":["/workspace"],"require_fuse":true}}}})");
  const std::pair<std::string, std::string_view> refused[] = {
      {"{" + image + R"(,"HostConfig":{"Binds":["/:/workspace"]}})", "HostConfig.Binds entry"},
      {"{" + image + R"(,"HostConfig":{"Binds":["/var/lib/dockgate/workspaces:/workspace"]}})",
       "HostConfig.Binds entry"},
      {"{" + image +
           R"(,"HostConfig":{"Binds":["/var/lib/dockgate/workspaces/../../../etc:/workspace"]}})",
       "HostConfig.Binds entry"},
      {"{" + image + R"(,"HostConfig":{"Binds":["/var/lib/dockgate/workspacesX/a:/workspace"]}})",
       "HostConfig.Binds entry"},
      {"{" + image + R"(,"HostConfig":{"Binds":["/var/lib/dockgate/workspaces/a:/etc"]}})",
       "HostConfig.Binds entry"},
      {"{" + image +
           R"(,"HostConfig":{"Binds":["/var/lib/dockgate/workspaces/a:/workspace:rshared"]}})",
       "option \"rshared\""},
      {"{" + image + R"(,"HostConfig":{"Binds":["named-volume:/workspace"]}})",
       "HostConfig.Binds entry"},
      {"{" + image +
           R"(,"HostConfig":{"Mounts":[{"Type":"volume","Source":"v","Target":"/workspace","VolumeOptions":{"DriverConfig":{"Name":"local","Options":{"type":"none","o":"bind","device":"/"}}}}]}})",
       "of type \"volume\""},
      {"{" + image +
           R"(,"HostConfig":{"Mounts":[{"Type":"bind","Source":"/etc","Target":"/workspace"}]}})",
       "HostConfig.Mounts from \"/etc\""},
      {"{" + image +
           R"(,"HostConfig":{"Mounts":[{"Type":"bind","Source":"/var/lib/dockgate/workspaces/a","Target":"/workspace","BindOptions":{"Propagation":"rshared"}}]}})",
       "propagation"},
      {"{" + image + R"(,"HostConfig":{"Mounts":[{"Type":"tmpfs","Target":"/workspace"}]}})",
       "of type \"tmpfs\""},
  };
  for (const auto& [body, reason] : refused) {
    CAPTURE(body);
    CHECK_THAT(review(binds, body), Catch::Contains(std::string(reason)));
  }
  auto d = review_container_create(
      binds.default_(),
      "{" + image +
          R"(,"HostConfig":{"Binds":["/var/lib/dockgate/workspaces/s1:/workspace:rw"]}})");
  REQUIRE(std::holds_alternative<rewrite>(d));
  CHECK(std::get<rewrite>(d).bind_sources ==
        std::vector<std::string>{"/var/lib/dockgate/workspaces/s1"});
}

TEST_CASE("deprecated top-level host config merges as dockerd merges it", "[body_rules]") {
  // With an inner HostConfig, dockerd ignores the top-level fields but four: those are
  // taken when the inner one is zero.
  auto merged =
      review(cli(), "{" + image + R"(,"Memory":1000,"Privileged":true,"HostConfig":{"Memory":0}})");
  INFO(merged);
  REQUIRE_FALSE(merged.starts_with("DENY"));
  CHECK(field(merged, "HostConfig.Memory") == "1000");
  CHECK(field(merged, "HostConfig.Privileged").empty());  // top-level ignored: inner present
  CHECK(merged.find("\"Privileged\"") == std::string::npos);
  // Without one, the top level is the host config.
  CHECK_THAT(review(cli(), "{" + image + R"(,"Privileged":true})"),
             Catch::Contains("HostConfig.Privileged"));
  auto cpuset = review(cli(), "{" + image + R"(,"Cpuset":"0","HostConfig":{}})");
  CHECK(field(cpuset, "HostConfig.CpusetCpus") == R"("0")");
}

TEST_CASE("docker-cli refuses host namespaces, weakened confinement and devices", "[body_rules]") {
  for (std::string_view host :
       {R"("NetworkMode":"host")", R"("NetworkMode":"container:abc")", R"("PidMode":"host")",
        R"("PidMode":"container:abc")", R"("IpcMode":"host")", R"("IpcMode":"container:abc")",
        R"("UTSMode":"host")", R"("UsernsMode":"host")", R"("Cgroup":"host")",
        R"("Privileged":true)", R"("CapAdd":["SYS_ADMIN"])",
        R"("Devices":[{"PathOnHost":"/dev/kmsg"}])", R"("Binds":["/:/host"])",
        R"("Mounts":[{"Type":"bind","Source":"/","Target":"/host"}])"}) {
    CAPTURE(host);
    CHECK_THAT(review(cli(), "{" + image + R"(,"HostConfig":{)" + std::string(host) + "}}"),
               Catch::StartsWith("DENY"));
  }
  // SecurityOpt is forced: every weakening spelling is replaced.
  for (std::string opt : {"seccomp=unconfined", "seccomp:unconfined", "apparmor=unconfined",
                          "label=disable", "label:disable", "systempaths=unconfined",
                          "no-new-privileges=false", "no-new-privileges:false"}) {
    CAPTURE(opt);
    auto out = review(cli(), "{" + image + R"(,"HostConfig":{"SecurityOpt":[")" + opt + R"("]}})");
    CHECK(field(out, "HostConfig.SecurityOpt") == R"(["no-new-privileges"])");
  }
}

TEST_CASE("without a rule, weakening SecurityOpt entries are refused", "[body_rules]") {
  const auto p =
      load(R"({"profiles":{"p":{"allow":["ContainerCreate"],"images":{"allow":["*"]}}}})");
  for (std::string opt : {"seccomp=unconfined", "seccomp:unconfined", "apparmor=unconfined",
                          "label=disable", "systempaths=unconfined", "no-new-privileges=false"}) {
    CAPTURE(opt);
    CHECK_THAT(review(p, R"({"Image":"x","HostConfig":{"SecurityOpt":[")" + opt + R"("]}})"),
               Catch::Contains("HostConfig.SecurityOpt is not allowed"));
  }
  for (std::string opt :
       {"no-new-privileges", "no-new-privileges:true", "no-new-privileges=true"}) {
    CAPTURE(opt);
    CHECK_FALSE(review(p, R"({"Image":"x","HostConfig":{"SecurityOpt":[")" + opt + R"("]}})")
                    .starts_with("DENY"));
  }
}

TEST_CASE("rules: allow compares capabilities in every spelling, max clamps, deny refuses",
          "[body_rules]") {
  const auto p = load(R"({"profiles":{"p":{"allow":["ContainerCreate"],"images":{"allow":["*"]},
    "container_create":{
      "HostConfig.CapAdd":{"allow":["NET_BIND_SERVICE"]},
      "HostConfig.Memory":{"max":1000},
      "HostConfig.PidsLimit":{"max":50},
      "HostConfig.Ulimits":{"max":{"nofile":100}},
      "HostConfig.Dns":{"deny":true},
      "Hostname":{"allow":["a","b"]}}}}})");
  for (std::string cap :
       {"NET_BIND_SERVICE", "net_bind_service", "CAP_NET_BIND_SERVICE", "cap_net_bind_service"})
    CHECK_FALSE(review(p, R"({"Image":"x","HostConfig":{"CapAdd":[")" + cap + R"("]}})")
                    .starts_with("DENY"));
  CHECK_THAT(review(p, R"({"Image":"x","HostConfig":{"CapAdd":["ALL"]}})"),
             Catch::Contains("rule allow"));
  struct clamp_case {
    std::string in;
    std::string out;
  };
  for (const auto& [in, out] : {clamp_case{"", "1000"},
                                {R"(,"Memory":0)", "1000"},
                                {R"(,"Memory":-1)", "1000"},
                                {R"(,"Memory":999)", "999"},
                                {R"(,"Memory":5000)", "1000"}}) {
    CAPTURE(in);
    CHECK(field(review(p, R"({"Image":"x","HostConfig":{"Binds":null)" + in + "}}"),
                "HostConfig.Memory") == out);
  }
  CHECK(field(review(p, R"({"Image":"x","HostConfig":{"PidsLimit":null}})"),
              "HostConfig.PidsLimit") == "50");
  CHECK(
      field(
          review(
              p,
              R"({"Image":"x","HostConfig":{"Ulimits":[{"Name":"nofile","Soft":1,"Hard":999999}]}})"),
          "HostConfig.Ulimits") == R"([{"Name":"nofile","Hard":100,"Soft":1}])");
  CHECK_THAT(
      review(p,
             R"({"Image":"x","HostConfig":{"Ulimits":[{"Name":"memlock","Soft":-1,"Hard":-1}]}})"),
      Catch::Contains("\"memlock\" is not allowed"));
  CHECK_THAT(review(p, R"({"Image":"x","HostConfig":{"Dns":["1.1.1.1"]}})"),
             Catch::Contains("rule deny"));
  CHECK_FALSE(review(p, R"({"Image":"x","HostConfig":{"Dns":[]}})").starts_with("DENY"));
  CHECK_THAT(review(p, R"({"Image":"x","Hostname":"c"})"), Catch::Contains("Hostname value \"c\""));
}

TEST_CASE("the rewrite is idempotent and passes the same policy unchanged", "[body_rules]") {
  const std::string bodies[] = {
      read_file("tests/policy/data/docker_cli_run.json"),
      "{" + image +
          R"(,"User":"root","HostConfig":{"Memory":-1,"SecurityOpt":["seccomp=unconfined"]}})",
      "{" + image +
          R"(,"Memory":7,"HostConfig":{"Memory":0,"Binds":["/var/lib/dockgate/workspaces/a:/workspace"]}})",
  };
  for (const policy* p : {&sandbox(), &cli()}) {
    for (const auto& body : bodies) {
      auto first = review_container_create(p->default_(), body);
      if (std::holds_alternative<deny>(first)) continue;  // (docker-cli refuses the bind)
      const auto& once = std::get<rewrite>(first);
      auto second = review_container_create(p->default_(), once.body);
      REQUIRE(std::holds_alternative<rewrite>(second));
      CHECK(std::get<rewrite>(second).body == once.body);
      CHECK(std::get<rewrite>(second).changes.empty());
    }
  }
}

TEST_CASE("exec-create: privileged refused, user forced in the sandbox", "[body_rules]") {
  auto exec = [](const policy& p, std::string_view body) {
    auto d = review_container_exec(p.default_(), body);
    if (auto* x = std::get_if<deny>(&d)) return "DENY: " + x->reason;
    return std::get<rewrite>(d).body;
  };
  CHECK(exec(sandbox(), R"({"Cmd":["id"],"User":"root","Privileged":true})") ==
        R"({"User":"1000:1000","Privileged":false,"Cmd":["id"]})");
  // The container's own processes run as 65534 (container_create): no exec is them.
  CHECK(exec(sandbox(), R"({"Cmd":["id"],"User":"65534:65534"})") ==
        R"({"User":"1000:1000","Privileged":false,"Cmd":["id"]})");
  CHECK(exec(sandbox(), R"({"Cmd":["id"]})") ==
        R"({"User":"1000:1000","Privileged":false,"Cmd":["id"]})");
  CHECK_THAT(exec(cli(), R"({"Cmd":["id"],"Privileged":true})"),
             Catch::Contains("Privileged is not allowed"));
  CHECK_THAT(exec(cli(), R"({"Cmd":["id"],"privileged":false,"Privileged":true})"),
             Catch::Contains("given twice"));
  CHECK(exec(cli(), R"({"cmd":"id","AttachStdout":true})") ==
        R"({"AttachStdout":true,"Cmd":["id"]})");
}

TEST_CASE("policy files: rule paths and forced values are checked", "[body_rules]") {
  auto r = parse_policy(R"({"profiles":{"p":{"allow":["ContainerCreate"],"images":{"allow":["*"]},
    "container_create":{
      "HostConfig.NoSuch":{"deny":true},
      "Privileged":{"deny":true},
      "HostConfig.Memory":{"force":"lots"},
      "HostConfig.CapAdd":{"allow":"ALL"},
      "HostConfig.Privileged":{"force":false,"deny":true},
      "HostConfig.PidsLimit":{"max":-5}}}}})");
  CHECK_FALSE(r.value);
  CHECK(r.errors.size() == 6);
  auto no_images = parse_policy(R"({"profiles":{"p":{"allow":["ContainerCreate"]}}})");
  REQUIRE(no_images.errors.size() == 1);
  CHECK_THAT(no_images.errors[0], Catch::Contains("lists no images"));
}

TEST_CASE("container-update: create rules for HostConfig fields apply to the update",
          "[body_rules]") {
  const auto p = load(R"({"profiles":{"p":{"allow":["ContainerUpdate"],
    "container_create":{"HostConfig.Memory":{"max":1000},"HostConfig.Privileged":{"force":false}}}}})");
  auto update = [&](std::string_view body) {
    auto d = review_container_update(p.default_(), body);
    if (auto* x = std::get_if<deny>(&d)) return "DENY: " + x->reason;
    return std::get<rewrite>(d).body;
  };
  CHECK(update(R"({"Memory":5000})") == R"({"Memory":1000})");
  CHECK(update(R"({"memory":0,"CpuShares":5})") == R"({"CpuShares":5,"Memory":1000})");
  CHECK(update(R"({"CpuShares":5})") == R"({"CpuShares":5})");  // only what it names
  CHECK_THAT(update(R"({"Devices":[{"PathOnHost":"/dev/mem"}]})"),
             Catch::Contains("HostConfig.Devices"));
  CHECK(update(R"({"Privileged":true})") ==
        "{}");  // not a field of an update: ignored by dockerd, left out
  CHECK(json_body_limit(operation::ContainerUpdate) < json_body_limit(operation::ContainerCreate));
}

TEST_CASE("a create answer tells the client what the profile changed", "[body_rules][responses]") {
  auto d = review_container_create(
      cli().default_(),
      "{" + image + R"(,"HostConfig":{"Memory":107374182400,"SecurityOpt":["label=disable"]}})");
  REQUIRE(std::holds_alternative<rewrite>(d));
  const auto& warnings = std::get<rewrite>(d).warnings;
  INFO(Catch::Detail::stringify(warnings));
  CHECK(std::find(warnings.begin(), warnings.end(),
                  "dockgate: HostConfig.Memory clamped to 2 GiB (profile docker-cli)") !=
        warnings.end());
  CHECK(
      std::find(
          warnings.begin(), warnings.end(),
          R"(dockgate: HostConfig.SecurityOpt forced to ["no-new-privileges"] (profile docker-cli))") !=
      warnings.end());
  for (const auto& w : warnings)
    CHECK(w.find("owner") == std::string::npos);  // the gate's bookkeeping is not news
  CHECK(add_create_warnings(R"({"Id":"abc","Warnings":["from the daemon"]})", {"dockgate: x"}) ==
        "{\"Id\":\"abc\",\"Warnings\":[\"from the daemon\",\"dockgate: x\"]}\n");
  CHECK(add_create_warnings(R"({"Id":"abc","Warnings":null})", {"dockgate: \"q\""}) ==
        "{\"Id\":\"abc\",\"Warnings\":[\"dockgate: \\\"q\\\"\"]}\n");
  CHECK_FALSE(add_create_warnings(R"({"message":"conflict"})", {"w"}));
}

namespace {

const policy& changing() {
  static const policy p = load(
      R"({"profiles":{"p":{"allow":["ContainerCreate","ContainerExec"],"images":{"allow":["*"]},
    "container_create":{"HostConfig.SecurityOpt":{"force":["no-new-privileges"]},"HostConfig.Memory":{"max":1073741824},
      "HostConfig.RestartPolicy":{"force":{"Name":"no"}},
      "HostConfig.Tmpfs":{"max":{"/tmp":"size=64m","/run":"size=1m"}},"Env":{"force":["SAFE=1"]}},
    "container_exec":{"Env":{"force":[]}}}}})");
  return p;
}

const body_change* change_of(const rewrite& rw, std::string_view field) {
  for (const auto& c : rw.changes)
    if (c.field == field) return &c;
  return nullptr;
}

}  // namespace

TEST_CASE("changes: each field once, what the client sent and what goes up",
          "[body_rules][changes]") {
  // Client value absent (not sent, null, or Docker's zero value) or present, x forced or
  // clamped: `from` only where the client set it, a warning only then.
  struct row {
    std::string host_config;
    std::string field;
    std::optional<std::string> from;
    std::string to;
    std::string warning;  // "" = none
  };
  const row rows[] = {
      {"{}", "HostConfig.SecurityOpt", std::nullopt, R"(["no-new-privileges"])", ""},
      {R"({"SecurityOpt":null})", "HostConfig.SecurityOpt", std::nullopt,
       R"(["no-new-privileges"])", ""},
      {R"({"SecurityOpt":[]})", "HostConfig.SecurityOpt", std::nullopt, R"(["no-new-privileges"])",
       ""},
      {R"({"SecurityOpt":["label=disable"]})", "HostConfig.SecurityOpt", R"(["label=disable"])",
       R"(["no-new-privileges"])",
       R"(dockgate: HostConfig.SecurityOpt forced to ["no-new-privileges"] (profile p))"},
      {R"({"RestartPolicy":{"Name":"","MaximumRetryCount":0}})", "HostConfig.RestartPolicy",
       std::nullopt, R"({"Name":"no"})",
       ""},  // an object of zero values, as the docker CLI sends it
      {R"({"RestartPolicy":{"Name":"always"}})", "HostConfig.RestartPolicy", R"({"Name":"always"})",
       R"({"Name":"no"})",
       R"(dockgate: HostConfig.RestartPolicy forced to {"Name":"no"} (profile p))"},
      {"{}", "HostConfig.Memory", std::nullopt, "1073741824", ""},
      {R"({"Memory":0})", "HostConfig.Memory", std::nullopt, "1073741824", ""},
      {R"({"Memory":8589934592})", "HostConfig.Memory", "8589934592", "1073741824",
       "dockgate: HostConfig.Memory clamped to 1 GiB (profile p)"},
  };
  for (const auto& r : rows) {
    INFO(r.host_config << " " << r.field);
    auto d = review_container_create(changing().default_(),
                                     "{" + image + R"(,"HostConfig":)" + r.host_config + "}");
    REQUIRE(std::holds_alternative<rewrite>(d));
    const auto& rw = std::get<rewrite>(d);
    const auto* c = change_of(rw, r.field);
    REQUIRE(c);
    CHECK(c->from == r.from);
    CHECK(c->to == r.to);
    INFO(Catch::Detail::stringify(rw.warnings));
    const bool warned =
        std::any_of(rw.warnings.begin(), rw.warnings.end(),
                    [&](const std::string& w) { return w.find(r.field) != std::string::npos; });
    CHECK(warned == !r.warning.empty());
    if (!r.warning.empty())
      CHECK(std::find(rw.warnings.begin(), rw.warnings.end(), r.warning) != rw.warnings.end());
  }
  // A field changed in several places is one change: its whole value before and after.
  auto d = review_container_create(
      changing().default_(), "{" + image + R"(,"HostConfig":{"Tmpfs":{"/tmp":"exec","/run":""}}})");
  REQUIRE(std::holds_alternative<rewrite>(d));
  const auto& rw = std::get<rewrite>(d);
  CHECK(std::count_if(rw.changes.begin(), rw.changes.end(),
                      [](const body_change& c) { return c.field == "HostConfig.Tmpfs"; }) == 1);
  const auto* tmpfs = change_of(rw, "HostConfig.Tmpfs");
  REQUIRE(tmpfs);
  CHECK(tmpfs->action == "clamped");
  CHECK(tmpfs->from == R"({"/run":"","/tmp":"exec"})");
  CHECK(tmpfs->to == R"({"/run":"size=1m","/tmp":"size=64m"})");
}

TEST_CASE("changes: values that may carry secrets are never recorded", "[body_rules][changes]") {
  const std::string secret = "TOKEN=s3cr3t-value";
  auto d =
      review_container_create(changing().default_(), "{" + image + R"(,"Env":[")" + secret +
                                                         R"("],"Labels":{"auth":"s3cr3t-value"}})");
  REQUIRE(std::holds_alternative<rewrite>(d));
  const auto& rw = std::get<rewrite>(d);
  const auto* env = change_of(rw, "Env");
  REQUIRE(env);
  CHECK(env->from == R"("<redacted>")");  // the client set it: that much is recorded
  CHECK(env->to == R"("<redacted>")");
  const auto* labels = change_of(rw, "Labels");
  REQUIRE(labels);
  CHECK(labels->action == "owner stamped");
  CHECK(labels->from == R"("<redacted>")");
  for (const auto& c : rw.changes)
    for (const auto& v : {c.from, c.to}) CHECK((!v || v->find("s3cr3t") == std::string::npos));
  // The exec's Env too; a value not set stays absent.
  auto e =
      review_container_exec(changing().default_(), R"({"Cmd":["true"],"Env":["PASSWORD=s3cr3t"]})");
  REQUIRE(std::holds_alternative<rewrite>(e));
  const auto* exec_env = change_of(std::get<rewrite>(e), "Env");
  REQUIRE(exec_env);
  CHECK(exec_env->from == R"("<redacted>")");
  // A long value is not copied into the audit line.
  std::string many = R"(["a")";
  for (int i = 0; i < 100; ++i) many += R"(,"label=level:s0:c)" + std::to_string(i) + R"(")";
  auto l = review_container_create(changing().default_(),
                                   "{" + image + R"(,"HostConfig":{"SecurityOpt":)" + many + "]}}");
  REQUIRE(std::holds_alternative<rewrite>(l));
  const auto* opt = change_of(std::get<rewrite>(l), "HostConfig.SecurityOpt");
  REQUIRE(opt);
  CHECK_THAT(*opt->from, Catch::StartsWith(R"("<omitted: )"));
}

TEST_CASE("older API versions: the rules judge the defaults the daemon gives old clients",
          "[body_rules][version]") {
  const std::string body = "{" + image + "}";
  auto at = [&](const policy& p, api_version v, std::string_view path, bool cgroup_v1 = true) {
    auto d = review_container_create(p.default_(), body, {v, cgroup_v1});
    if (auto* x = std::get_if<deny>(&d)) return "DENY: " + x->reason;
    return field(std::get<rewrite>(d).body, path);
  };
  // Below 1.40 an empty IpcMode is "shareable" (a private, joinable namespace): allowed.
  CHECK(at(cli(), {1, 39}, "HostConfig.IpcMode") == R"("shareable")");
  CHECK(at(cli(), {1, 41}, "HostConfig.IpcMode") == "");
  // Below 1.41 an empty CgroupnsMode is "host" on cgroup v1 hosts: docker-cli forces private...
  CHECK(at(cli(), {1, 40}, "HostConfig.CgroupnsMode") == R"("private")");
  // ... and a profile with no rule for it refuses it, as it refuses "host" spelled out.
  auto bare = load(
      R"({"default_profile":"p","profiles":{"p":{"allow":["ContainerCreate"],"images":{"allow":["*"]}}}})");
  CHECK_THAT(at(bare, {1, 40}, "HostConfig.CgroupnsMode"),
             Catch::Contains("HostConfig.CgroupnsMode"));
  CHECK_FALSE(at(bare, {1, 41}, "HostConfig.CgroupnsMode").starts_with("DENY"));
  CHECK_FALSE(at(bare, {1, 40}, "HostConfig.CgroupnsMode", false)
                  .starts_with("DENY"));  // cgroup v2: private
  // Below 1.25 AutoRemove is off whatever the body says (the client removes).
  auto d = review_container_create(
      cli().default_(), "{" + image + R"(,"HostConfig":{"AutoRemove":true}})", {{1, 24}, true});
  REQUIRE(std::holds_alternative<rewrite>(d));
  CHECK(field(std::get<rewrite>(d).body, "HostConfig.AutoRemove") == "false");
}

TEST_CASE("sandbox: its tmpfs sizes leave the interpreter at least half of the memory limit") {
  // tmpfs pages count against the container's memory: full disks must not take the
  // interpreter's memory (issue 11).
  auto out = review(
      sandbox(),
      "{" + image + R"(,"HostConfig":{"Tmpfs":{"/tmp":"","/home/sandbox":"","/workspace":""}}})");
  auto decoded = decode_body(out, schema::container_create);
  REQUIRE(decoded.value);
  const auto* host = find(*decoded.value->as_object(), "HostConfig")->as_object();
  const auto memory = *find(*host, "Memory")->as_int();
  std::int64_t total = 0;
  for (const auto& m : *find(*host, "Tmpfs")->as_object()) {
    const std::string& opts = *m.value.as_string();
    const auto at = opts.find("size=");
    REQUIRE(at != std::string::npos);
    const std::int64_t n = std::stoll(opts.substr(at + 5));
    const char unit = opts[opts.find_first_not_of("0123456789", at + 5)];
    total += n << (unit == 'g' ? 30 : unit == 'm' ? 20 : unit == 'k' ? 10 : 0);
  }
  CHECK(total <= memory / 2);
}

TEST_CASE("a field rule's hint is told with its refusal", "[body_rules][hint]") {
  const auto p = load(R"({"profiles":{"p":{"allow":["ContainerCreate","ContainerExec"],
    "images":{"allow":["*"]},
    "container_create":{
      "HostConfig.Privileged":{"deny":true,"hint":"use a sysbox runtime"},
      "HostConfig.CapAdd":{"allow":["NET_BIND_SERVICE"],"hint":"ask for a capability profile"},
      "HostConfig.Ulimits":{"max":{"nofile":1024},"hint":"nofile only"},
      "HostConfig.Memory":{"max":1000}},
    "container_exec":{"Privileged":{"deny":true,"hint":"exec unprivileged"}}}}})");
  const auto& prof = p.default_();
  auto create = [&](const std::string& host_config) {
    auto d = review_container_create(prof, "{" + image + R"(,"HostConfig":)" + host_config + "}");
    return std::holds_alternative<deny>(d) ? std::get<deny>(d).reason : std::string("allowed");
  };
  CHECK(create(R"({"Privileged":true})") ==
        "dockgate: HostConfig.Privileged is not allowed: use a sysbox runtime (profile p, rule "
        "deny)");
  CHECK(create(R"({"CapAdd":["SYS_ADMIN"]})") ==
        "dockgate: HostConfig.CapAdd value \"SYS_ADMIN\" is not allowed: ask for a capability "
        "profile (profile p, rule allow)");
  CHECK_THAT(create(R"({"Ulimits":[{"Name":"core","Soft":1,"Hard":1}]})"),
             Catch::EndsWith("is not allowed: nofile only (profile p, rule max)"));
  // What passes still passes; a rule without a hint refuses as before.
  CHECK(create(R"({"Privileged":false,"CapAdd":["NET_BIND_SERVICE"]})") == "allowed");
  auto d = review_body(prof, operation::ContainerExec, R"({"Cmd":["id"],"Privileged":true})");
  REQUIRE(std::holds_alternative<deny>(d));
  CHECK(std::get<deny>(d).reason ==
        "dockgate: Privileged is not allowed: exec unprivileged (profile p, rule deny)");
  CHECK(std::get<deny>(d).rule == "Privileged:deny");
}

TEST_CASE("policy files: a hint is one line of text on a rule that can refuse",
          "[body_rules][hint]") {
  auto r = parse_policy(R"({"profiles":{"p":{"allow":["ContainerCreate"],"images":{"allow":["*"]},
    "container_create":{
      "HostConfig.Privileged":{"force":false,"hint":"never seen"},
      "HostConfig.CapAdd":{"allow":[],"hint":7},
      "HostConfig.Memory":{"max":10,"hint":""},
      "HostConfig.PidsLimit":{"max":10,"hint":"two\nlines"},
      "HostConfig.Devices":{"deny":true,"hint":"ok","comment":"both"},
      "HostConfig.Sysctls":{"hint":"no rule"}}}}})");
  CHECK_FALSE(r.value);
  INFO(Catch::Detail::stringify(r.errors));
  REQUIRE(r.errors.size() == 5);
  CHECK_THAT(r.errors[0], Catch::Contains("Privileged.hint") && Catch::Contains("never refuses"));
  CHECK_THAT(r.errors[1], Catch::Contains("CapAdd.hint"));
  CHECK_THAT(r.errors[2], Catch::Contains("Memory.hint"));
  CHECK_THAT(r.errors[3], Catch::Contains("PidsLimit.hint"));
  CHECK_THAT(r.errors[4], Catch::Contains("Sysctls") && Catch::Contains("exactly one of"));
}

TEST_CASE("bind rules: a source named exactly may be bound itself but not what lies beside it",
          "[body_rules][binds]") {
  const policy binds = load(
      R"({"default_profile":"p","profiles":{"p":{"allow":["ContainerCreate"],"images":{"allow":["*"]},)"
      R"("binds":{"source_roots":["/r/_work"],"sources":["/r/_work","/r/externals"],)"
      R"("targets":["/__w","/__e"]}}}})");
  auto create = [&](const std::string& bind) {
    return review(binds, "{" + image + R"(,"HostConfig":{"Binds":[")" + bind + R"("]}})");
  };
  CHECK_THAT(create("/r/_work:/__w"), !Catch::StartsWith("DENY"));
  CHECK_THAT(create("/r/externals:/__e:ro"), !Catch::StartsWith("DENY"));
  CHECK_THAT(create("/r/_work/_temp:/__w"), !Catch::StartsWith("DENY"));  // under the root
  for (const char* refused : {"/r:/__w", "/r/.credentials:/__w", "/r/externals/node:/__e",
                              "/r/externalsX:/__e", "/r/_work:/etc"}) {
    CAPTURE(refused);
    CHECK_THAT(create(refused), Catch::Contains("rule binds"));
  }
  auto bad =
      parse_policy(R"({"profiles":{"p":{"binds":{"sources":["relative"],"targets":["/w"]}}}})");
  CHECK_FALSE(bad.value);
}

TEST_CASE(
    "the runner and dev container profiles refuse privileged with a hint and the engine socket",
    "[body_rules][hint][profiles]") {
  for (const char* name : {"gitlab-runner", "github-runner", "devcontainer"}) {
    CAPTURE(name);
    const auto p = load(read_file(std::string("compose/policies/") + name + ".json"));
    const auto privileged = review(p, "{" + image + R"(,"HostConfig":{"Privileged":true}})");
    CHECK_THAT(privileged,
               Catch::StartsWith("DENY: dockgate: HostConfig.Privileged is not allowed: "));
    CHECK_THAT(privileged, Catch::Contains("sysbox") && Catch::EndsWith("rule deny)"));
    // The engine socket: github-runner leaves it out (binds.drop), the others refuse it.
    const auto socket =
        review(p, "{" + image +
                      R"(,"HostConfig":{"Binds":["/var/run/docker.sock:/var/run/docker.sock"]}})");
    if (std::string_view(name) == "github-runner")
      CHECK(field(socket, "HostConfig.Binds") == "[]");
    else
      CHECK_THAT(socket, Catch::StartsWith("DENY: dockgate: HostConfig.Binds"));
    CHECK_THAT(review(p, "{" + image +
                             R"(,"HostConfig":{"Binds":["/run/docker.sock:/run/docker.sock"]}})"),
               Catch::StartsWith("DENY"));
    for (const char* ns : {"PidMode", "UTSMode", "UsernsMode", "IpcMode", "NetworkMode"})
      CHECK_THAT(review(p, "{" + image + R"(,"HostConfig":{")" + ns + R"(":"host"}})"),
                 Catch::StartsWith("DENY"));
    CHECK_THAT(review(p, "{" + image +
                             R"(,"HostConfig":{"PortBindings":{"80/tcp":[{"HostPort":"80"}]}}})"),
               Catch::StartsWith("DENY"));
  }
}

TEST_CASE("bind rules: a bind of a drop source is left out and the client is told",
          "[body_rules][binds]") {
  const policy binds = load(
      R"({"default_profile":"p","profiles":{"p":{"allow":["ContainerCreate"],"images":{"allow":["*"]},)"
      R"("binds":{"source_roots":["/r/_work"],"targets":["/__w"],"drop":["/var/run/docker.sock"]}}}})");
  auto d = review_container_create(
      binds.default_(),
      "{" + image +
          R"(,"HostConfig":{"Binds":["/var/run/docker.sock:/var/run/docker.sock","/r/_work/a:/__w"],)"
          R"("Mounts":[{"Type":"bind","Source":"/var/run/docker.sock","Target":"/s"}]}})");
  REQUIRE(std::holds_alternative<rewrite>(d));
  const auto& rw = std::get<rewrite>(d);
  CHECK(field(rw.body, "HostConfig.Binds") == R"(["/r/_work/a:/__w"])");
  CHECK(field(rw.body, "HostConfig.Mounts") == "[]");
  CHECK(rw.bind_sources == std::vector<std::string>{"/r/_work/a"});
  CHECK(rw.warnings ==
        std::vector<std::string>{
            "dockgate: bind /var/run/docker.sock:/var/run/docker.sock left out (profile p, rule "
            "binds.drop)",
            "dockgate: bind /var/run/docker.sock left out (profile p, rule binds.drop)"});
  CHECK(std::count_if(rw.changes.begin(), rw.changes.end(),
                      [](const body_change& c) { return c.action == "dropped"; }) == 2);
  // Only that path, as written: another spelling of it is a bind like any other.
  for (const char* other :
       {"/run/docker.sock:/var/run/docker.sock", "/var/run//docker.sock:/var/run/docker.sock",
        "/var/run/docker.sock/:/x"}) {
    CAPTURE(other);
    CHECK_THAT(review(binds, "{" + image + R"(,"HostConfig":{"Binds":[")" + other + R"("]}})"),
               Catch::Contains("rule binds)"));
  }
}

TEST_CASE("an allow rule's default: a client chooses from the list, the profile decides the rest",
          "[body_rules][runtime]") {
  const policy p = load(
      R"({"default_profile":"p","profiles":{"p":{"allow":["ContainerCreate"],"images":{"allow":["*"]},)"
      R"("container_create":{"HostConfig.Runtime":{"allow":["runsc","runc"],"default":"runsc"}}}}})");
  auto runtime = [&](const std::string& host_config) {
    const auto out = review(p, "{" + image + R"(,"HostConfig":)" + host_config + "}");
    return out.starts_with("DENY") ? out : field(out, "HostConfig.Runtime");
  };
  // Absent, empty or null: the default goes to the daemon (never the daemon's own default).
  CHECK(runtime("{}") == R"("runsc")");
  CHECK(runtime(R"({"Runtime":""})") == R"("runsc")");
  // (null is refused before any rule: dockerd would keep a previous value.)
  CHECK_THAT(runtime(R"({"Runtime":null})"), Catch::Contains("null is not allowed"));
  CHECK(review(p, "{" + image + "}").find(R"("Runtime":"runsc")") != std::string::npos);
  // A listed one passes as asked.
  CHECK(runtime(R"({"Runtime":"runc"})") == R"("runc")");
  CHECK(runtime(R"({"Runtime":"runsc"})") == R"("runsc")");
  // Anything else is refused with the list.
  CHECK(runtime(R"({"Runtime":"io.containerd.runc.v2"})") ==
        "DENY: dockgate: HostConfig.Runtime value \"io.containerd.runc.v2\" is not allowed: the "
        "profile allows runsc, runc (profile p, rule allow)");
  CHECK_THAT(runtime(R"({"Runtime":7})"), Catch::Contains("must be a string"));
  // The audit records the default as a change, and the create answer stays quiet about it:
  // the client asked nothing.
  auto d = review_container_create(p.default_(), "{" + image + "}");
  REQUIRE(std::holds_alternative<rewrite>(d));
  const auto& changes = std::get<rewrite>(d).changes;
  auto runtime_change = std::find_if(changes.begin(), changes.end(), [](const body_change& c) {
    return c.field == "HostConfig.Runtime";
  });
  REQUIRE(runtime_change != changes.end());
  CHECK(runtime_change->action == "defaulted");
  CHECK_FALSE(runtime_change->from);
  CHECK(create_warnings(p.default_(), {}, changes).empty());
}

TEST_CASE("policy files: a default belongs on an allow rule and is one of its values",
          "[body_rules][runtime]") {
  auto r = parse_policy(R"({"profiles":{"p":{"allow":["ContainerCreate"],"images":{"allow":["*"]},
    "container_create":{
      "HostConfig.Runtime":{"allow":["runc"],"default":"runsc"},
      "HostConfig.Privileged":{"force":false,"default":"x"},
      "User":{"allow":["1000"],"default":""},
      "HostConfig.NetworkMode":{"allow":["none"],"default":"none"}}}}})");
  CHECK_FALSE(r.value);
  INFO(Catch::Detail::stringify(r.errors));
  REQUIRE(r.errors.size() == 3);
  CHECK_THAT(r.errors[0], Catch::Contains("Runtime.default") && Catch::Contains("one of its"));
  CHECK_THAT(r.errors[1], Catch::Contains("Privileged.default"));
  CHECK_THAT(r.errors[2], Catch::Contains("User.default") && Catch::Contains("non-empty"));
}

TEST_CASE("sandbox runs every container under its own seccomp profile, whatever the client asked",
          "[body_rules][seccomp]") {
  auto seccomp_of = [](const std::string& body) {
    auto decoded = decode_body(body, schema::container_create);
    REQUIRE(decoded.value);
    const auto* host = find(*decoded.value->as_object(), "HostConfig")->as_object();
    std::vector<std::string> entries, others;
    for (const auto& item : *find(*host, "SecurityOpt")->as_array())
      (item.as_string()->starts_with("seccomp") ? entries : others).push_back(*item.as_string());
    CHECK(others == std::vector<std::string>{"no-new-privileges"});
    return entries;
  };
  for (const std::string& asked :
       {std::string(), std::string(R"(,"SecurityOpt":["seccomp=unconfined"])"),
        std::string(R"(,"SecurityOpt":["seccomp:{\"defaultAction\":\"SCMP_ACT_ALLOW\"}"])")}) {
    CAPTURE(asked);
    const auto out = review(sandbox(), "{" + image + R"(,"HostConfig":{"Memory":1)" + asked + "}}");
    REQUIRE_FALSE(out.starts_with("DENY"));
    const auto entries = seccomp_of(out);
    REQUIRE(entries.size() == 1);
    // The profile the daemon gets is the one in sandbox.json, whole: deny by default, named.
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    REQUIRE(parser.parse(entries[0].substr(8)).get(doc) == simdjson::SUCCESS);
    CHECK(std::string_view(doc["name"]) == "dockgate-python");
    CHECK(std::string_view(doc["defaultAction"]) == "SCMP_ACT_ERRNO");
    std::set<std::string> allowed, refused;
    for (simdjson::dom::element entry : doc["syscalls"].get_array())
      for (simdjson::dom::element name : entry["names"].get_array())
        (std::string_view(entry["action"]) == "SCMP_ACT_ALLOW" ? allowed : refused)
            .emplace(std::string_view(name));
    for (const char* call :
         {"ptrace", "keyctl", "add_key", "request_key", "userfaultfd", "bpf", "perf_event_open",
          "mount", "umount2", "fsopen", "move_mount", "pivot_root", "unshare", "setns",
          "io_uring_setup", "open_by_handle_at", "process_vm_readv", "kexec_load"}) {
      CAPTURE(call);
      CHECK_FALSE(allowed.count(call));
      CHECK(refused.count(call));
    }
    for (const char* call : {"read", "openat", "mmap", "futex", "epoll_wait", "socket", "wait4",
                             "execve", "rt_sigaction", "clone"})
      CHECK(allowed.count(call));
  }
  // A client that named a profile of its own is told it was replaced.
  auto d = review_container_create(
      sandbox().default_(),
      "{" + image + R"(,"HostConfig":{"SecurityOpt":["seccomp=unconfined"]}})");
  REQUIRE(std::holds_alternative<rewrite>(d));
  const auto warnings = create_warnings(sandbox().default_(), {}, std::get<rewrite>(d).changes);
  CHECK(std::any_of(warnings.begin(), warnings.end(), [](const std::string& w) {
    return w.starts_with("dockgate: HostConfig.SecurityOpt forced");
  }));
  // The audit line never carries the profile's bulk.
  for (const auto& c : std::get<rewrite>(d).changes)
    if (c.to) CHECK(c.to->size() < 400);
}

TEST_CASE("policy files: a forced seccomp profile refuses by default and lists its syscalls",
          "[body_rules][seccomp]") {
  auto errors = [](const std::string& seccomp) {
    auto r = parse_policy(R"({"profiles":{"p":{"allow":["ContainerCreate"],"images":{"allow":["*"]},
      "seccomp":)" + seccomp +
                          "}}}");
    return r.value ? std::vector<std::string>() : r.errors;
  };
  CHECK(
      errors(
          R"({"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read"],"action":"SCMP_ACT_ALLOW"}]})")
          .empty());
  CHECK_THAT(
      errors(
          R"({"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["ptrace"],"action":"SCMP_ACT_ERRNO"}]})")
          .at(0),
      Catch::Contains("defaultAction") && Catch::Contains("must refuse"));
  CHECK_THAT(errors(R"({"defaultAction":"SCMP_ACT_ERRNO"})").at(0), Catch::Contains("syscalls"));
  CHECK_THAT(
      errors(
          R"({"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":"read","action":"SCMP_ACT_ALLOW"}]})")
          .at(0),
      Catch::Contains("names"));
  CHECK_THAT(errors(R"("unconfined")").at(0), Catch::Contains("defaultAction"));
  // Without the key, a client's own profile stays refused (widening_fields): tested above in
  // "without a rule, weakening SecurityOpt entries are refused".
}

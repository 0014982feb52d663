// workspace.host_binds: a client's bind of exactly <root>/<id> becomes the gate's checked
// workspace bind at the client's target, with the workspace label stamped; everything
// else under the root, and every other host path, stays refused.
#include <algorithm>
#include <catch2/catch.hpp>

#include "dockgate/policy/body_review.hpp"
#include "dockgate/policy/go_json.hpp"
#include "dockgate/policy/policy_file.hpp"

using namespace dockgate::policy;

namespace {

policy load_workspace(bool host_binds, const std::string& extra = "") {
  auto r = parse_policy(R"({"profiles":{"p":{"allow":["ContainerCreate"],"images":{"allow":["*"]},)"
                        R"("workspace":{"root":"/mnt/aimem","host_binds":)" +
                        std::string(host_binds ? "true" : "false") + "}" + extra + "}}}");
  INFO(Catch::Detail::stringify(r.errors));
  REQUIRE(r.value);
  return std::move(*r.value);
}

const policy& binds_policy() {
  static const policy p = load_workspace(true);
  return p;
}

const std::string image = R"("Image":"dockgate/test-busybox")";

decision create(const policy& p, const std::string& rest) {
  return review_container_create(p.default_(), "{" + image + "," + rest + "}");
}

std::string field(const decision& d, std::string_view path) {
  if (auto* x = std::get_if<deny>(&d)) return "DENY: " + x->reason;
  auto decoded = decode_body(std::get<rewrite>(d).body, schema::container_create);
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

std::string mount_at(std::string_view target, bool read_only, std::string_view id = "s1") {
  return R"([{"Type":"bind","Source":"/mnt/aimem/)" + std::string(id) + R"(","Target":")" +
         std::string(target) + R"(","ReadOnly":)" + (read_only ? "true" : "false") +
         R"(,"BindOptions":{"Propagation":"rprivate"}}])";
}

}  // namespace

TEST_CASE("host binds: a Binds entry of <root>/<id> becomes the checked workspace bind",
          "[workspace_binds]") {
  auto d = create(binds_policy(), R"("HostConfig":{"Binds":["/mnt/aimem/s1:/mnt/data:rw"]})");
  REQUIRE(std::holds_alternative<rewrite>(d));
  const auto& rw = std::get<rewrite>(d);
  INFO(rw.body);
  CHECK(field(d, "HostConfig.Mounts") == mount_at("/mnt/data", false));
  CHECK(field(d, "HostConfig.Binds") == "");
  CHECK(field(d, "Labels") == R"({"dockgate.owner":"p","dockgate.workspace":"s1"})");
  // The proxy checks this source on the host (FUSE, no symlink) as the workspace, and
  // none as a plain bind.
  CHECK(rw.workspace_source == "/mnt/aimem/s1");
  CHECK(rw.bind_sources.empty());
  const auto bound = std::find_if(rw.changes.begin(), rw.changes.end(), [](const body_change& c) {
    return c.field == "HostConfig.Binds";
  });
  REQUIRE(bound != rw.changes.end());
  CHECK(bound->action == "workspace bound");
  // The gate's own output reviews to itself, with nothing left to change.
  auto again = review_container_create(binds_policy().default_(), rw.body);
  REQUIRE(std::holds_alternative<rewrite>(again));
  CHECK(std::get<rewrite>(again).body == rw.body);
  CHECK(std::get<rewrite>(again).changes.empty());
}

TEST_CASE("host binds: read-only, Mounts binds, other binds kept, the label may agree",
          "[workspace_binds]") {
  CHECK(field(create(binds_policy(), R"("HostConfig":{"Binds":["/mnt/aimem/s1:/data:ro"]})"),
              "HostConfig.Mounts") == mount_at("/data", true));
  CHECK(field(create(binds_policy(), R"("HostConfig":{"Binds":["/mnt/aimem/s1:/data"]})"),
              "HostConfig.Mounts") == mount_at("/data", false));
  CHECK(
      field(
          create(
              binds_policy(),
              R"("HostConfig":{"Mounts":[{"Type":"bind","Source":"/mnt/aimem/s1","Target":"/w","ReadOnly":true,"BindOptions":{"Propagation":"private"}}]})"),
          "HostConfig.Mounts") == mount_at("/w", true));
  CHECK(
      field(
          create(
              binds_policy(),
              R"("Labels":{"dockgate.workspace":"s1","app":"x"},"HostConfig":{"Binds":["/mnt/aimem/s1:/data"]})"),
          "Labels") == R"({"app":"x","dockgate.owner":"p","dockgate.workspace":"s1"})");
  // A tmpfs at the client's target would hide the workspace: it goes.
  const policy tmpfs = load_workspace(
      true,
      R"(,"container_create":{"HostConfig.Tmpfs":{"max":{"/data":"size=1m","/tmp":"size=1m"}}})");
  CHECK(
      field(create(
                tmpfs,
                R"("HostConfig":{"Binds":["/mnt/aimem/s1:/data"],"Tmpfs":{"/data":"","/tmp":""}})"),
            "HostConfig.Tmpfs") == R"({"/tmp":"size=1m"})");
  // Without the label and without a bind: no workspace, as before.
  CHECK(field(create(binds_policy(), R"("HostConfig":{})"), "HostConfig.Mounts") == "");
  // The label alone still binds at the rule's target.
  CHECK(field(create(binds_policy(), R"("Labels":{"dockgate.workspace":"s1"})"),
              "HostConfig.Mounts") == mount_at("/workspace", false));
}

TEST_CASE("host binds: anything but one <root>/<id> stays refused", "[workspace_binds]") {
  const std::pair<std::string, std::string_view> refused[] = {
      {R"("HostConfig":{"Binds":["/mnt/aimem:/data"]})", "is not one workspace"},
      {R"("HostConfig":{"Binds":["/mnt/aimem/:/data"]})", "is not one workspace"},
      {R"("HostConfig":{"Binds":["/mnt/aimem/s1/deeper:/data"]})", "is not one workspace"},
      {R"("HostConfig":{"Binds":["/mnt/aimem/other/../x:/data"]})", "is not one workspace"},
      {R"("HostConfig":{"Binds":["/mnt/aimem/..:/data"]})", "is not one workspace"},
      {R"("HostConfig":{"Binds":["/mnt/aimem/.hidden:/data"]})", "is not one workspace"},
      {R"("HostConfig":{"Binds":["/mnt/aimem/s1:/"]})", "target \"/\" is not allowed"},
      {R"("HostConfig":{"Binds":["/mnt/aimem/s1:/proc/x"]})", "target \"/proc/x\""},
      {R"("HostConfig":{"Binds":["/mnt/aimem/s1:/sys"]})", "target \"/sys\""},
      {R"("HostConfig":{"Binds":["/mnt/aimem/s1:/dev/shm"]})", "target \"/dev/shm\""},
      {R"("HostConfig":{"Binds":["/mnt/aimem/s1:data"]})", "target \"data\""},
      {R"("HostConfig":{"Binds":["/mnt/aimem/s1:/a/../b"]})", "target \"/a/../b\""},
      {R"("HostConfig":{"Binds":["/mnt/aimem/s1:/data:rshared"]})",
       "entry \"/mnt/aimem/s1:/data:rshared\""},
      {R"("HostConfig":{"Binds":["/mnt/aimem/s1:/data:z"]})", "entry"},
      {R"("HostConfig":{"Binds":["/mnt/aimem/s1"]})", "entry"},
      {R"("HostConfig":{"Binds":["/mnt/aimem/s1:/data:ro:x"]})", "entry"},
      {R"("HostConfig":{"Binds":["/mnt/aimem/s1:/a","/mnt/aimem/s2:/b"]})",
       "binds a second workspace \"/mnt/aimem/s2\""},
      {R"("HostConfig":{"Binds":["/mnt/aimem/s1:/a"],"Mounts":[{"Type":"bind","Source":"/mnt/aimem/s1","Target":"/b"}]})",
       "binds a second workspace"},
      {R"("Labels":{"dockgate.workspace":"s2"},"HostConfig":{"Binds":["/mnt/aimem/s1:/a"]})",
       "names another workspace"},
      {R"("HostConfig":{"Mounts":[{"Type":"bind","Source":"/mnt/aimem/s1","Target":"/a","BindOptions":{"Propagation":"rshared"}}]})",
       "not allowed with these options"},
      {R"("HostConfig":{"Mounts":[{"Type":"bind","Source":"/mnt/aimem/s1","Target":"/a","BindOptions":{"CreateMountpoint":true}}]})",
       "not allowed with these options"},
      {R"("HostConfig":{"Mounts":[{"Type":"bind","Source":"/mnt/aimem/s1","Target":"/a","BindOptions":{"NonRecursive":true}}]})",
       "not allowed with these options"},
      {R"("HostConfig":{"Mounts":[{"Type":"bind","Source":"/mnt/aimem","Target":"/a"}]})",
       "is not one workspace"},
  };
  for (const auto& [rest, reason] : refused) {
    CAPTURE(rest);
    const auto out = field(create(binds_policy(), rest), "HostConfig.Mounts");
    CHECK_THAT(out, Catch::StartsWith("DENY: dockgate: "));
    CHECK_THAT(out, Catch::Contains(std::string(reason)));
    CHECK_THAT(out, Catch::EndsWith("(profile p, rule workspace)"));
  }
  // Host paths outside the root meet the default deny, as they did.
  for (const char* rest :
       {R"("HostConfig":{"Binds":["/etc:/x"]})", R"("HostConfig":{"Binds":["/mnt/aimemX/s1:/x"]})",
        R"("HostConfig":{"Binds":["/mnt/aimem/s1:/a","/etc:/x"]})",
        R"("HostConfig":{"Mounts":[{"Type":"bind","Source":"/etc","Target":"/x"}]})"}) {
    CAPTURE(rest);
    CHECK_THAT(field(create(binds_policy(), rest), "HostConfig.Mounts"),
               Catch::Contains("is not allowed: the profile has no rule that permits it"));
  }
}

TEST_CASE("host binds: without host_binds a client's bind of a workspace is refused",
          "[workspace_binds]") {
  const policy off = load_workspace(false);
  CHECK_THAT(
      field(create(off, R"("HostConfig":{"Binds":["/mnt/aimem/s1:/data"]})"), "HostConfig.Mounts"),
      Catch::Contains("HostConfig.Binds is not allowed"));
  CHECK_THAT(
      field(
          create(
              off,
              R"("HostConfig":{"Mounts":[{"Type":"bind","Source":"/mnt/aimem/s1","Target":"/data"}]})"),
          "HostConfig.Mounts"),
      Catch::Contains("HostConfig.Mounts is not allowed"));
  auto bad = parse_policy(
      R"({"profiles":{"p":{"allow":[],"workspace":{"root":"/mnt/aimem","host_binds":"yes"}}}})");
  CHECK_THAT(Catch::Detail::stringify(bad.errors),
             Catch::Contains("profiles.p.workspace.host_binds: must be true or false"));
  CHECK(load_workspace(true).default_().rules.workspace->host_binds);
  CHECK_FALSE(off.default_().rules.workspace->host_binds);
}

TEST_CASE("host binds: with a binds rule beside it, the workspace is taken first",
          "[workspace_binds]") {
  const policy both =
      load_workspace(true, R"(,"binds":{"source_roots":["/srv/data"],"targets":["/data"]})");
  auto d = create(both, R"("HostConfig":{"Binds":["/mnt/aimem/s1:/w","/srv/data/x:/data"]})");
  REQUIRE(std::holds_alternative<rewrite>(d));
  CHECK(field(d, "HostConfig.Binds") == R"(["/srv/data/x:/data"])");
  CHECK(field(d, "HostConfig.Mounts") == mount_at("/w", false));
  CHECK(std::get<rewrite>(d).bind_sources == std::vector<std::string>{"/srv/data/x"});
  CHECK(std::get<rewrite>(d).workspace_source == "/mnt/aimem/s1");
}

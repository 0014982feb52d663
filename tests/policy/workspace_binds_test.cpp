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

TEST_CASE("host binds: spellings dockerd reads otherwise stay refused or stay outside",
          "[workspace_binds][redteam]") {
  // Modes beyond ro/rw and a private propagation (SELinux relabels of the host source,
  // a shared propagation, nocopy), unclean or unusual sources and targets, a colon in the
  // path (dockerd splits on every ':'), an id the workspace names cannot be.
  for (const char* spec : {"/mnt/aimem/s1:/data:Z",
                           "/mnt/aimem/s1:/data:ro,z",
                           "/mnt/aimem/s1:/data:rshared",
                           "/mnt/aimem/s1:/data:rslave",
                           "/mnt/aimem/s1:/data:nocopy",
                           "/mnt/aimem/s1:/data:ro,Z",
                           "/mnt/aimem/s1/:/data",
                           "/mnt/aimem//s1:/data",
                           "/mnt/aimem/./s1:/data",
                           "/mnt/aimem/s1:/proc/..",
                           "/mnt/aimem/s1:/workspace/../proc",
                           "/mnt/aimem/s1://proc",
                           "/mnt/aimem/s1:/data/",
                           "/mnt/aimem/s1:/dev",
                           "/mnt/aimem/s1:x:/data",
                           "/mnt/aimem/s1:/data:ro:rw",
                           "/mnt/aimem/s\xc3\xa9:/data",
                           "/mnt/aimem/..:/data",
                           "/mnt/aimem/-s1:/data",
                           "/mnt/aimem/s1:"}) {
    CAPTURE(spec);
    const auto out =
        field(create(binds_policy(), std::string(R"("HostConfig":{"Binds":[")") + spec + R"("]})"),
              "HostConfig.Mounts");
    CHECK_THAT(out, Catch::StartsWith("DENY: dockgate: HostConfig.Binds"));
    CHECK_THAT(out, Catch::EndsWith("(profile p, rule workspace)"));
  }
  // A path that reaches the root only after the daemon cleans it is not the root's to
  // judge: the default deny refuses it as any other host path.
  for (const char* spec : {"//mnt/aimem/s1:/data", "/mnt/./aimem/s1:/data", "/mnt/aimem:/data"}) {
    CAPTURE(spec);
    CHECK_THAT(
        field(create(binds_policy(), std::string(R"("HostConfig":{"Binds":[")") + spec + R"("]})"),
              "HostConfig.Mounts"),
        Catch::StartsWith("DENY: dockgate: HostConfig."));
  }
  // Mounts binds with options that create, recurse differently or come from a volume.
  for (const char* options :
       {R"("BindOptions":{"ReadOnlyNonRecursive":true})",
        R"("BindOptions":{"ReadOnlyForceRecursive":true})",
        R"("BindOptions":{"Propagation":"shared"})", R"("VolumeOptions":{"NoCopy":true})",
        R"("TmpfsOptions":{"SizeBytes":1})"}) {
    CAPTURE(options);
    CHECK_THAT(
        field(
            create(
                binds_policy(),
                std::string(
                    R"("HostConfig":{"Mounts":[{"Type":"bind","Source":"/mnt/aimem/s1","Target":"/a",)") +
                    options + "}]}"),
            "HostConfig.Mounts"),
        Catch::StartsWith("DENY: dockgate: HostConfig.Mounts"));
  }
  // The label names another workspace than a Mounts bind; and a second bind at the same
  // target (a second workspace) refused.
  CHECK_THAT(
      field(
          create(
              binds_policy(),
              R"("Labels":{"dockgate.workspace":"s2"},"HostConfig":{"Mounts":[{"Type":"bind","Source":"/mnt/aimem/s1","Target":"/a"}]})"),
          "HostConfig.Mounts"),
      Catch::Contains("names another workspace"));
  CHECK_THAT(field(create(binds_policy(),
                          R"("HostConfig":{"Binds":["/mnt/aimem/s1:/a","/mnt/aimem/s2:/a"]})"),
                   "HostConfig.Mounts"),
             Catch::Contains("binds a second workspace"));
  // The same workspace twice is still one bind too many (dockerd would mount it twice).
  CHECK_THAT(field(create(binds_policy(),
                          R"("HostConfig":{"Binds":["/mnt/aimem/s1:/a","/mnt/aimem/s1:/b"]})"),
                   "HostConfig.Mounts"),
             Catch::Contains("binds a second workspace"));
}

TEST_CASE("host binds: a container with a checked bind never restarts on the daemon's own",
          "[workspace_binds][redteam]") {
  // The daemon mounts binds again at every restart it makes under a RestartPolicy, with
  // no gate to check them: a workspace whose FUSE mount went away would be bound raw (the
  // directory under the mount point, without nosuid,nodev; seen on dockerd 20.10). So a
  // container the gate binds a host path into restarts only through the gate.
  auto restart = [](const std::string& name, const std::string& more = "") {
    return R"("HostConfig":{"RestartPolicy":{"Name":")" + name + R"("})" + more + "}";
  };
  for (const char* name : {"always", "unless-stopped", "on-failure"}) {
    CAPTURE(name);
    const auto out =
        field(create(binds_policy(), restart(name, R"(,"Binds":["/mnt/aimem/s1:/data"])")),
              "HostConfig.RestartPolicy");
    CHECK_THAT(out, Catch::StartsWith("DENY: dockgate: HostConfig.RestartPolicy"));
    CHECK_THAT(out, Catch::EndsWith("(profile p, rule workspace)"));
    // The workspace named by its label: the same.
    CHECK_THAT(
        field(create(binds_policy(), R"("Labels":{"dockgate.workspace":"s1"},)" + restart(name)),
              "HostConfig.RestartPolicy"),
        Catch::EndsWith("(profile p, rule workspace)"));
    // A binds rule's bind: the same, under its rule.
    const policy both =
        load_workspace(true, R"(,"binds":{"source_roots":["/srv/data"],"targets":["/data"]})");
    CHECK_THAT(field(create(both, restart(name, R"(,"Binds":["/srv/data/x:/data"])")),
                     "HostConfig.RestartPolicy"),
               Catch::EndsWith("(profile p, rule binds)"));
    // No host path bound: the policy as the client asked.
    CHECK(field(create(binds_policy(), restart(name)), "HostConfig.RestartPolicy") ==
          std::string(R"({"Name":")") + name + "\"}");
  }
  for (const char* name : {"no", ""}) {
    CAPTURE(name);
    CHECK_THAT(field(create(binds_policy(), restart(name, R"(,"Binds":["/mnt/aimem/s1:/data"])")),
                     "HostConfig.Mounts"),
               Catch::Contains("/mnt/aimem/s1"));
  }
  // An update cannot give one a restart policy later; "no" it may.
  auto update = [](const policy& p, const std::string& body) {
    auto d = review_container_update(p.default_(), body);
    auto* x = std::get_if<deny>(&d);
    return x ? x->reason : std::string("allowed");
  };
  const policy& updates = binds_policy();
  CHECK_THAT(update(updates, R"({"RestartPolicy":{"Name":"always"}})"),
             Catch::Contains("HostConfig.RestartPolicy"));
  CHECK(update(updates, R"({"RestartPolicy":{"Name":"no"}})") == "allowed");
  CHECK(update(updates, R"({"CpuShares":5})") == "allowed");
}

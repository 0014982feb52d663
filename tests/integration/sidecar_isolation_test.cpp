// The isolation report and the deny-path self-test at create (docs/sidecar.md, "The
// isolation report"; issue 44 item 3), judged by the daemon's record (docker inspect through
// the direct socket) and by what a cell observes, never by the sidecar's own answer alone.
#include <filesystem>
#include <fstream>

#include "sidecar_harness.hpp"

using namespace dockgate::test;

namespace {

std::string inspect_format(const std::string& container, const std::string& format) {
  auto r = run(direct() + " inspect --format '" + format + "' " + container);
  return r.output.substr(0, r.output.find_last_not_of('\n') + 1);
}

// `path` (a/b/c) of the JSON text `json`, minified ("<absent>" if it is not there).
std::string at(const std::string& json, const std::string& path) {
  simdjson::dom::parser p;
  simdjson::dom::element e;
  if (p.parse(json).get(e) != simdjson::SUCCESS) return "<not json>";
  std::string rest = path;
  while (!rest.empty()) {
    const auto slash = rest.find('/');
    if (e.at_key(rest.substr(0, slash)).get(e) != simdjson::SUCCESS) return "<absent>";
    rest = slash == std::string::npos ? "" : rest.substr(slash + 1);
  }
  std::string_view s;
  if (e.get_string().get(s) == simdjson::SUCCESS) return std::string(s);
  return simdjson::minify(e);
}

// The shipped sandbox profile with `from` replaced by `to` (a wall let fall for the test).
std::string profile_with(const std::string& from, const std::string& to) {
  std::ifstream in(repo_root() + "/compose/policies/sandbox.json");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto found = text.find(from);
  REQUIRE(found != std::string::npos);
  return text.replace(found, from.size(), to);
}

// The containers of `instance` the daemon holds, running or not (names, a line each).
std::string containers_of(const std::string& instance) {
  return run(direct() + " ps -a --filter label=sandbox.instance=" + instance +
             " --format '{{.Names}}'")
      .output;
}

}  // namespace

TEST_CASE("isolation: a session's report matches the daemon's record and what its cell sees",
          "[integration][sidecar][isolation][userns]") {
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy, {"SANDBOX_WARM_POOL=0", "SANDBOX_ALLOW_NO_AUTH=1"});
  const std::string sid = new_session(sidecar);
  const std::string container = "dockgate-sbx-" + sid;
  auto got = sidecar.call("GET", "/sessions/" + sid, "");
  INFO(got.body);
  REQUIRE(got.status == 200);
  const std::string report = at(got.body, "isolation");
  CHECK(at(report, "read") == "true");
  CHECK(at(report, "read_at") == "create");
  CHECK(at(report, "self_test/passed") == "true");
  CHECK(at(report, "self_test/root_write") == "EROFS");
  for (const char* wall : {"raw_inet", "raw_packet", "mount", "ptrace"}) {
    CAPTURE(wall);
    const std::string v = at(report, std::string("self_test/") + wall);
    CHECK((v == "EPERM" || v == "EACCES" || v == "ENOSYS" || v == "EAFNOSUPPORT"));
  }
  // The daemon's record, field by field.
  const std::string runtime = inspect_format(container, "{{.HostConfig.Runtime}}");
  CHECK(at(report, "runtime") == runtime);
  CHECK(at(report, "user/container") == inspect_format(container, "{{.Config.User}}"));
  CHECK(at(report, "read_only_root/record") ==
        inspect_format(container, "{{.HostConfig.ReadonlyRootfs}}"));
  CHECK(at(report, "network/mode") == inspect_format(container, "{{.HostConfig.NetworkMode}}"));
  CHECK(at(report, "limits/memory/record") == inspect_format(container, "{{.HostConfig.Memory}}"));
  CHECK(at(report, "limits/nano_cpus/record") ==
        inspect_format(container, "{{.HostConfig.NanoCpus}}"));
  CHECK(at(report, "limits/pids/record") == inspect_format(container, "{{.HostConfig.PidsLimit}}"));
  CHECK(at(report, "capabilities/cap_drop") ==
        inspect_format(container, "{{json .HostConfig.CapDrop}}"));
  CHECK(at(report, "no_new_privileges/record") == "true");
  CHECK(inspect_format(container, "{{json .HostConfig.SecurityOpt}}").find("no-new-privileges") !=
        std::string::npos);
  const std::string tmpfs =
      inspect_format(container, "{{range $k, $v := .HostConfig.Tmpfs}}{{$k}} {{end}}");
  for (const char* path : {"/tmp", "/home/sandbox", "/workspace"}) {
    CAPTURE(path);
    CHECK(tmpfs.find(std::string(path) + " ") != std::string::npos);
    CHECK(report.find("\"path\":\"" + std::string(path) + "\"") != std::string::npos);
  }
  CHECK(at(report, "workspace/backing") == "tmpfs");
  CHECK(at(report, "workspace/seen").starts_with("tmpfs "));
  // What a cell of the session sees is what the report says the session user saw.
  const std::string cell = field(
      sidecar.exec(sid,
                   "import os, resource\n"
                   "s = dict(l.split(':\\t', 1) for l in "
                   "open('/proc/self/status').read().splitlines() if ':\\t' in l)\n"
                   "print(s['CapEff'].strip(), s['CapBnd'].strip(), s['NoNewPrivs'].strip(), "
                   "s['Seccomp'].strip(), ' '.join(s['Uid'].split()), os.statvfs('/').f_flag & 1, "
                   "'%d %d' % resource.getrlimit(resource.RLIMIT_NOFILE))"),
      "stdout");
  CHECK(cell == at(report, "capabilities/effective") + " " + at(report, "capabilities/bounding") +
                    " " + at(report, "no_new_privileges/seen") + " " + at(report, "seccomp/mode") +
                    " " + at(report, "user/uid") + " " + at(report, "read_only_root/seen") + " " +
                    at(report, "limits/nofile/seen") + "\n");
  CHECK(at(report, "capabilities/effective") == "0000000000000000");
  CHECK(at(report, "user/uid") == "1000 1000 1000 1000");
  // OpenSandbox's sandbox info carries the same report in its extensions (a map of strings).
  auto sandbox = sidecar.call("GET", "/v1/sandboxes/" + sid, "", "");
  REQUIRE(sandbox.status == 200);
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  REQUIRE(p.parse(sandbox.body).get(doc) == simdjson::SUCCESS);
  std::string_view text;
  REQUIRE(doc["extensions"]["dockgate.io/isolation"].get_string().get(text) == simdjson::SUCCESS);
  CHECK(at(std::string(text), "self_test") == at(report, "self_test"));
  CHECK(at(std::string(text), "limits") == at(report, "limits"));
  CHECK(sidecar.call("GET", "/sessions/" + std::string(32, 'a'), "").status == 404);
  CHECK(sidecar.call("GET", "/sessions/not-hex", "").status == 400);
}

TEST_CASE("isolation: a session whose walls fell is refused and leaves no container",
          "[integration][sidecar][isolation]") {
  struct loose {
    std::string name, from, to, why;
    std::vector<std::string> env;
  };
  const std::vector<loose> cases = {
      // A profile copy that does not force a read-only root, and a sidecar that does not
      // ask for one: a writable root file system.
      {"writable-root",
       R"("HostConfig.ReadonlyRootfs": {
          "force": true
        },)",
       "",
       "a write to the root file system failed with EACCES, not EROFS",
       {"SANDBOX_READ_ONLY_ROOTFS=0"}},
      // A profile copy that adds NET_RAW to every container: a raw socket opens.
      {"net-raw",
       R"("HostConfig.CapAdd": {
          "allow": []
        },)",
       R"("HostConfig.CapAdd": {"force": ["NET_RAW"]},)",
       "capabilities added: NET_RAW",
       {}},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    proxy_process proxy(profile_with(c.from, c.to));
    std::vector<std::string> env = c.env;
    env.push_back("SANDBOX_WARM_POOL=0");
    env.push_back("SANDBOX_ALLOW_NO_AUTH=1");
    const std::string instance = "iso" + std::to_string(::getpid()) + c.name;
    env.push_back("SANDBOX_INSTANCE=" + instance);
    sidecar_process sidecar(proxy, env);
    auto created = sidecar.create();
    INFO(created.body << "\n" << sidecar.log());
    CHECK(created.status == 500);
    CHECK(field(created.body, "detail").find(c.why) != std::string::npos);
    // OpenSandbox's create: the same refusal in its {code, message}.
    auto sandbox = sidecar.call(
        "POST", "/v1/sandboxes",
        R"({"image":{"uri":")" + runtime_image() + R"("},"entrypoint":["tail","-f","/dev/null"]})",
        "");
    CHECK(sandbox.status == 500);
    CHECK(field(sandbox.body, "code") == "GENERAL::UNKNOWN_ERROR");
    CHECK(field(sandbox.body, "message").find(c.why) != std::string::npos);
    // The daemon's record: nothing of this sidecar's is left (the instance lease is its own).
    std::string left = containers_of(instance);
    CHECK(left.find("dockgate-sbx-") == std::string::npos);
  }
}

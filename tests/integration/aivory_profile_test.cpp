// compose/policies/aivory.json with the real docker CLI: every call the Aivory sandbox
// sidecar makes (docs/aivory-api.md, "Docker calls", its exact argv and flags)
// succeeds through the gate, and the daemon's record of its session container holds every
// hardening value of the profile, whatever the sidecar asked for. A widened call is
// refused, a container the profile does not own is invisible and untouchable.
//
// The profile allows the seed's production image (ghcr.io/hjxwz123/aivory-sandbox:*);
// the test substitutes the private registry's host for ghcr.io, nothing else, and pushes
// the offline runtime image there under the seed's repository name.
#include <simdjson.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <sstream>

#include "hardening_checks.hpp"
#include "harness.hpp"

using namespace dockgate::test;

namespace {

const std::string production_images = "ghcr.io/hjxwz123/aivory-sandbox:*";

std::string direct() {
  return docker_cli() + " -H " + engine_host();
}
std::string repository() {
  return registry() + "/hjxwz123/aivory-sandbox";
}
std::string runtime_image() {
  const char* v = std::getenv("DOCKGATE_TEST_RUNTIME_IMAGE");
  return v && *v ? v : "dockgate/sandbox-runtime:test";
}

// The shipped profile, its image allowlist moved from ghcr.io to the test's registry.
std::string aivory_policy() {
  std::ifstream in(repo_root() + "/compose/policies/aivory.json");
  std::stringstream text;
  text << in.rdbuf();
  std::string policy = text.str();
  const auto at = policy.find('"' + production_images + '"');
  REQUIRE(at != std::string::npos);
  REQUIRE(policy.find(production_images, at + 1 + production_images.size()) == std::string::npos);
  policy.replace(at + 1, production_images.size(), repository() + ":*");
  return policy;
}

// The runtime image tagged under the seed's repository name in the engine (not pushed).
struct tagged_image {
  std::string ref;
  explicit tagged_image(const std::string& tag) : ref(repository() + ":" + tag) {
    REQUIRE(run(direct() + " tag " + runtime_image() + " " + ref).status == 0);
  }
  ~tagged_image() { run(direct() + " rmi " + ref + " >/dev/null 2>&1"); }
  tagged_image(const tagged_image&) = delete;
  tagged_image& operator=(const tagged_image&) = delete;
};

// `docker run -d` exactly as the sidecar builds it (docs/aivory-api.md, "The session
// container", every optional part on).
std::string sidecar_run(const std::string& docker, const std::string& sid,
                        const std::string& image) {
  return docker + " run -d --name aivory-sbx-" + sid +
         " --label aivory.sandbox=1 --label aivory.session_id=" + sid +
         " --label aivory.created_at=1796155610 --network none --memory 2g --memory-swap 2g --cpus "
         "1"
         " --pids-limit 256 --ulimit nofile=1024:1024 --init --user 1000:1000 --security-opt "
         "no-new-privileges"
         " --cap-drop ALL -w /workspace --read-only --tmpfs /tmp:rw,nosuid,nodev,size=256m"
         " --tmpfs /home/sandbox:rw,nosuid,nodev,size=256m --tmpfs "
         "/workspace:rw,nosuid,nodev,size=512m,mode=1777 " +
         image + " sleep infinity";
}

std::string session_id() {
  auto id = unique_name("x");  // x-<10 hex>: padded to the sidecar's 32 hex
  id = id.substr(2);
  return id + std::string(32 - id.size(), '0');
}

// Every hardening value of aivory.json, read from the daemon's `docker inspect`.
std::vector<std::string> hardening_violations(const std::string& inspect_json,
                                              const std::string& image) {
  inspect_record r(inspect_json);
  if (!r.parsed()) return r.violations();
  expect_session_hardening(r, "aivory");
  const inspect_value hc = r.host_config();
  const inspect_value cfg = r.config();
  r.expect(text(member(cfg, "Image")) == image, "Image " + text(member(cfg, "Image")));
  r.expect(compact(member(hc, "Privileged")) == "false", "Privileged");
  r.expect(compact(member(hc, "Tmpfs")) ==
               R"({"/home/sandbox":"rw,nosuid,nodev,exec,size=256m,mode=1777",)"
               R"("/tmp":"rw,nosuid,nodev,exec,size=256m,mode=1777",)"
               R"("/workspace":"rw,nosuid,nodev,size=512m,mode=1777"})",
           "Tmpfs " + compact(member(hc, "Tmpfs")));
  const auto networks = compact(member(member(r.container(), "NetworkSettings"), "Networks"));
  r.expect(networks.starts_with(R"({"none":)") && networks.find("},\"") == std::string::npos,
           "Networks " + networks);
  const auto shm = number(member(hc, "ShmSize"));
  r.expect(shm > 0 && shm <= 67108864, "ShmSize " + std::to_string(shm));
  r.expect(text(member(member(hc, "RestartPolicy"), "Name")) == "no",
           "RestartPolicy " + compact(member(hc, "RestartPolicy")));
  r.expect(is_empty(member(r.container(), "Mounts")),
           "Mounts " + compact(member(r.container(), "Mounts")));
  r.expect(is_empty(member(hc, "Devices")) && is_empty(member(hc, "PortBindings")),
           "Devices/PortBindings");
  return r.violations();
}

std::string inspect(const std::string& name) {
  return run(direct() + " inspect " + name).output;
}

}  // namespace

TEST_CASE(
    "aivory.json: every docker CLI call of the Aivory sidecar succeeds and its session container "
    "is hardened",
    "[integration][policy][aivory]") {
  // The image only in the registry, as on a fresh host: the sidecar inspects, then pulls.
  const std::string tag = unique_name("t");
  const std::string image = repository() + ":" + tag;
  {
    tagged_image pushed(tag);
    REQUIRE(run(direct() + " push " + image + " >/dev/null").status == 0);
  }
  proxy_process proxy(aivory_policy());
  const std::string docker = proxy.docker();
  auto ok = [&](const std::string& command) {
    auto r = run(command);
    INFO(command << "\n" << r.output);
    CHECK(r.status == 0);
    return r.output;
  };

  // Health: the CLI negotiates its version (HEAD /_ping), then GET /version.
  CHECK(ok(docker + " version -f '{{.Server.Version}}'") ==
        run(direct() + " version -f '{{.Server.Version}}'").output);
  // Image present? Not yet: the daemon's own 404, not a refusal. Then the pull.
  auto absent = run(docker + " image inspect " + image);
  CHECK(absent.status != 0);
  CHECK(absent.output.find("No such image") != std::string::npos);
  CHECK(absent.output.find("dockgate") == std::string::npos);
  ok(docker + " pull " + image);
  ok(docker + " image inspect " + image);
  struct cleanup {
    std::string ref;
    ~cleanup() { run(direct() + " rmi -f " + ref + " >/dev/null 2>&1"); }
  } untag{image};

  CHECK(ok(docker + " ps -q --filter label=aivory.sandbox=1").empty());
  const std::string sid = session_id();
  const std::string name = "aivory-sbx-" + sid;
  struct remove {
    std::string name;
    ~remove() { run(direct() + " rm -f " + name + " >/dev/null 2>&1"); }
  } removal{name};
  const auto created = ok(sidecar_run(docker, sid, image));
  CHECK(created.find("error") == std::string::npos);  // the CLI's wait, for one, was answered

  // The daemon's record: every hardening value, the owner label, the sidecar's own labels.
  const auto record = inspect(name);
  INFO(record.substr(0, 4000));
  CHECK(hardening_violations(record, image) == std::vector<std::string>{});
  CHECK(record.find(R"("aivory.session_id": ")" + sid + '"') != std::string::npos);
  CHECK(record.find(R"("Init": true)") != std::string::npos);
  CHECK(record.find(R"("WorkingDir": "/workspace")") != std::string::npos);

  const std::string ex = docker + " exec " + name;
  const std::string exi = docker + " exec -i " + name;
  ok(ex + " mkdir -p /workspace/uploads /workspace/outputs /workspace/skills");
  // Warm-up on stdin (the image has python3 only; the seed's image has python).
  CHECK(ok("echo 'import os; print(\"warm\", os.getuid())' | " + exi + " python3 -") ==
        "warm 1000\n");
  ok(ex +
     " sh -c \"rm -rf -- '/workspace/uploads' '/workspace/skills' && mkdir -p -- "
     "'/workspace/uploads' '/workspace/skills'\"");
  CHECK(ok(docker + " inspect -f '{{.State.Running}}' " + name) == "true\n");

  // One cell, as /exec runs it.
  const std::string token = std::string(32, 'c');
  const std::string cell = "/tmp/aivory-cell-" + token + ".py";
  ok("printf 'open(\"/workspace/outputs/p.txt\",\"w\").write(\"rows 3\")\\nprint(6*7)\\n' | " +
     exi + " sh -c \"cat > '" + cell + "'\"");
  ok(ex +
     " sh -c \"find /workspace/outputs -type f -printf '%p\\t%T@\\t%s\\n' 2>/dev/null || true\"");
  CHECK(ok(docker + " exec -e AIVORY_CELL_TOKEN=" + token + " " + name +
           " timeout --kill-after=2s 120.000s python3 " + cell) == "42\n");
  ok(ex +
     " sh -c 'for d in /proc/[0-9]*; do tr \"\\0\" \"\\n\" < $d/environ 2>/dev/null | grep -qxF "
     "AIVORY_CELL_TOKEN=" +
     token + " && kill -9 ${d#/proc/}; done; true'");
  ok(ex + " rm -f " + cell);
  CHECK(ok(ex + " base64 -w0 -- /workspace/outputs/p.txt") == "cm93cyAz");
  // Files: the symlink guard, the existence test, the listing.
  CHECK(ok(ex + " realpath -m -- /workspace/uploads/a.txt") == "/workspace/uploads/a.txt\n");
  ok(ex + " test -f /workspace/outputs/p.txt");
  CHECK(ok(ex + " sh -c \"find /workspace -maxdepth 6 -type f -printf '%s\\t%P\\0' 2>/dev/null | "
                "head -c 1000000\"") == std::string("6\toutputs/p.txt\0", 16));
  // Archive and restore (the restore's exit status is tar's: the tmpfs root is root's,
  // so `.` keeps its times and mode, directly as through the gate; the files arrive).
  const std::string archive = proxy.dir() + "/ws.tgz";
  ok(ex + " tar czf - --exclude=./uploads --exclude=./skills -C /workspace . > " + archive);
  ok(ex + " rm -rf /workspace/outputs");
  run(exi + " tar --no-same-owner -xzf - -C /workspace < " + archive);
  CHECK(ok(ex + " cat /workspace/outputs/p.txt") == "rows 3");
  // Reconcile on restart, then remove.
  CHECK(ok(docker + " ps -a --filter label=aivory.sandbox=1 --format "
                    "'{{.Names}}\\t{{.State}}\\t{{.CreatedAt}}'")
            .rfind(name + "\trunning\t", 0) == 0);
  CHECK(ok(docker + " ps -q --filter label=aivory.sandbox=1").size() == 13);
  ok(docker + " rm -f " + name);
  CHECK_FALSE(container_exists(name));
  // The removed session, as the sidecar still names it: /exec after a DELETE or a reap
  // asks `docker inspect -f` (it fails, the sidecar answers 404: directly the CLI ends with
  // "No such object", through the gate at the NetworkInspect it tries after the container
  // and the image, refused), and a DELETE after a reap runs `rm -f` again (exit 0 both
  // ways: the gate's 404 is the CLI's not-found).
  const std::string running = " inspect -f '{{.State.Running}}' " + name;
  const auto gone = run(docker + running);
  INFO(gone.output);
  CHECK(gone.status != 0);
  CHECK(gone.output.find("true") == std::string::npos);
  CHECK(run(direct() + running).status == gone.status);
  ok(docker + " rm -f " + name);
  // Nothing the sidecar asked was refused but those lookups of the removed container
  // (the audit flushed by the gate's exit).
  proxy.terminate();
  const auto audit = proxy.audit_log();
  CHECK(audit.find(R"("operation":"ContainerWait","verdict":"allow")") != std::string::npos);
  std::istringstream lines(audit);
  int refused_lookups = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.find(R"("verdict":"deny")") == std::string::npos) continue;
    INFO(line);
    const bool gone_lookup = line.find(R"("name":")" + name + '"') != std::string::npos &&
                             (line.find(R"("rule":"owner")") != std::string::npos ||
                              line.find(R"("operation":"NetworkInspect")") != std::string::npos);
    CHECK(gone_lookup);
    ++refused_lookups;
  }
  CHECK(refused_lookups == 3);  // inspect: container, network; rm -f: container
}

TEST_CASE("aivory.json: a loose sidecar is held to the profile and widened calls are refused",
          "[integration][policy][aivory]") {
  tagged_image image(unique_name("t"));
  proxy_process proxy(aivory_policy());
  const std::string docker = proxy.docker();

  // A sidecar configured loosely (SANDBOX_READ_ONLY_ROOTFS=0, big limits) or compromised:
  // every value the profile holds is still in the daemon's record.
  const std::string loose = unique_name("aivory-sbx-loose");
  struct remove {
    std::string name;
    ~remove() { run(direct() + " rm -f " + name + " >/dev/null 2>&1"); }
  } removal{loose};
  auto r = run(docker + " run -d --name " + loose +
               " --network none --ipc shareable --cgroupns host --user 0:0 --memory 8g "
               "--memory-swap -1 --cpus 4 --pids-limit -1 "
               "--shm-size 1g"
               " --ulimit nofile=1048576:1048576 --restart always --tmpfs /tmp:rw,exec,size=10g "
               "--tmpfs /run "
               "--security-opt seccomp=unconfined " +
               image.ref + " sleep infinity");
  INFO(r.output);
  REQUIRE(r.status == 0);
  const auto record = inspect(loose);
  INFO(record.substr(0, 4000));
  CHECK(hardening_violations(record, image.ref) == std::vector<std::string>{});
  // Processes: the container's own as 65534, every exec as 1000 whatever it asks.
  CHECK(run(docker + " exec -u 0 " + loose + " id -u").output == "1000\n");
  CHECK(
      run(docker + " exec " + loose + " sh -c 'grep ^Uid: /proc/1/status'").output.find("65534") !=
      std::string::npos);
  auto privileged_exec = run(docker + " exec --privileged " + loose + " id -u");
  CHECK(privileged_exec.status != 0);
  CHECK(privileged_exec.output.find("dockgate: Privileged is not allowed") != std::string::npos);

  // Widenings the sidecar never sends: refused, and the daemon holds no such container.
  const std::vector<std::pair<std::string, std::string>> widened = {
      {"--network none --privileged " + image.ref, "HostConfig.Privileged"},
      {"--network host " + image.ref, "HostConfig.NetworkMode"},
      {"--network bridge " + image.ref, "HostConfig.NetworkMode"},
      {"--network none -v /:/host " + image.ref, "HostConfig.Binds"},
      {"--network none --mount type=bind,src=/etc,dst=/workspace " + image.ref,
       "HostConfig.Mounts"},
      {"--network none --cap-add SYS_ADMIN " + image.ref, "HostConfig.CapAdd"},
      {"--network none --pid host " + image.ref, "HostConfig.PidMode"},
      {"--network none --device /dev/mem " + image.ref, "HostConfig.Devices"},
      {"--network none " + test_image(), "Image:images"},
      {"--network none " + registry() + "/dockgate/test-busybox:latest", "Image:images"},
  };
  for (const auto& [flags, rule] : widened) {
    const auto name = unique_name("aivory-sbx-wide");
    auto w = run(docker + " run -d --name " + name + " " + flags + " sleep infinity");
    INFO(flags << "\n" << w.output);
    CHECK(w.status != 0);
    CHECK(w.output.find("dockgate:") != std::string::npos);
    CHECK(proxy.audit_contains(R"("verdict":"deny","rule":")" + rule));
    CHECK_FALSE(container_exists(name));
    run(direct() + " rm -f " + name + " >/dev/null 2>&1");
  }
  // A pull of any other image: refused before the daemon fetches anything.
  auto pull = run(docker + " pull " + registry() + "/dockgate/test-busybox:latest");
  CHECK(pull.status != 0);
  CHECK(pull.output.find("dockgate:") != std::string::npos);
}

TEST_CASE(
    "aivory.json: the seed sidecar image's own default SANDBOX_IMAGE (aivory-sandbox) is a "
    "session image, no other bare name is",
    "[integration][policy][aivory]") {
  // Dockerfile.sidecar sets SANDBOX_IMAGE=aivory-sandbox:latest: a sidecar started without
  // compose's variable asks for the bare name, which the daemon reads as
  // docker.io/library/aivory-sandbox.
  const std::string tag = unique_name("t");
  const std::string bare = "aivory-sandbox:" + tag;
  struct untag {
    std::vector<std::string> refs;
    ~untag() {
      for (const auto& ref : refs) run(direct() + " rmi " + ref + " >/dev/null 2>&1");
    }
  } untagged{{bare, "aivory-sandbox-x:" + tag, "someone/aivory-sandbox:" + tag}};
  for (const auto& ref : untagged.refs)
    REQUIRE(run(direct() + " tag " + runtime_image() + " " + ref).status == 0);
  proxy_process proxy(aivory_policy());
  const std::string docker = proxy.docker();

  const std::string sid = session_id();
  struct remove {
    std::string name;
    ~remove() { run(direct() + " rm -f " + name + " >/dev/null 2>&1"); }
  } removal{"aivory-sbx-" + sid};
  auto r = run(sidecar_run(docker, sid, bare));
  INFO(r.output);
  REQUIRE(r.status == 0);
  const auto record = inspect("aivory-sbx-" + sid);
  INFO(record.substr(0, 4000));
  CHECK(hardening_violations(record, bare) == std::vector<std::string>{});

  // Names that only look like it: another repository, another namespace.
  for (const auto& ref : {untagged.refs[1], untagged.refs[2]}) {
    const auto name = unique_name("aivory-sbx-other");
    auto w = run(docker + " run -d --name " + name + " --network none " + ref + " sleep infinity");
    INFO(ref << "\n" << w.output);
    CHECK(w.status != 0);
    CHECK(w.output.find("dockgate:") != std::string::npos);
    CHECK_FALSE(container_exists(name));
    run(direct() + " rm -f " + name + " >/dev/null 2>&1");
  }
  CHECK(proxy.audit_contains(R"("verdict":"deny","rule":"Image:images")"));
}

TEST_CASE("aivory.json: a container the profile does not own is invisible and untouchable",
          "[integration][policy][aivory][ownership]") {
  tagged_image image(unique_name("t"));
  // Another tenant's container with the sidecar's label and name pattern, made directly.
  const std::string foreign = "aivory-sbx-" + session_id();
  struct remove {
    std::string name;
    ~remove() { run(direct() + " rm -f " + name + " >/dev/null 2>&1"); }
  } removal{foreign};
  REQUIRE(run(direct() + " run -d --name " + foreign + " --label aivory.sandbox=1 --network none " +
              image.ref + " sleep infinity")
              .status == 0);
  proxy_process proxy(aivory_policy());
  const std::string docker = proxy.docker();
  CHECK(run(docker + " ps -a -q --filter label=aivory.sandbox=1").output.empty());
  CHECK(
      run(docker + " ps -a --filter label=aivory.sandbox=1 --format '{{.Names}}'").output.empty());
  CHECK(run(docker + " inspect -f '{{.State.Running}}' " + foreign).status != 0);
  CHECK(run(docker + " exec " + foreign + " id -u").status != 0);
  run(docker + " rm -f " + foreign);  // the CLI's -f reports a missing container as success
  CHECK(proxy.audit_contains(R"("operation":"ContainerDelete")"));
  // The daemon's record: still there, still running, never exec'd into.
  CHECK(run(direct() + " inspect -f '{{.State.Running}} {{len .ExecIDs}}' " + foreign).output ==
        "true 0\n");
}

TEST_CASE(
    "compose/aivory.yml: the Aivory sidecar reaches Docker only through the gate with aivory.json",
    "[integration][aivory][compose]") {
  // Debian's docker-compose 1.29 resolves the file (extends, variables) as `up` would.
  const std::string check = R"(import sys, yaml
c = yaml.safe_load(sys.stdin)
proxy, sandbox = c["services"]["proxy"], c["services"]["sandbox"]
assert "/etc/dockgate/aivory.json" in proxy["command"], proxy["command"]
assert any(v.startswith("/var/run/docker.sock:") for v in proxy["volumes"]), proxy["volumes"]
assert sandbox["environment"]["DOCKER_HOST"] == "tcp://proxy:2375", sandbox["environment"]
assert not any("docker.sock" in v for v in sandbox.get("volumes", [])), sandbox["volumes"]
assert sandbox["environment"]["SANDBOX_IMAGE"].startswith("ghcr.io/hjxwz123/aivory-sandbox:")
assert sandbox["networks"].keys() == proxy["networks"].keys() == {"sandbox"}
assert c["networks"]["sandbox"]["internal"] is True
print("ok")
)";
  const auto r =
      run("cd " + repo_root() +
          "/compose && DOCKER_GID=999 docker-compose -f aivory.yml config | python3 -c '" + check +
          "'");
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output == "ok\n");
  // The profile the stack names is the one the image ships (compose/policies/*.json).
  CHECK(run("test -s " + repo_root() + "/compose/policies/aivory.json").status == 0);
}

// Hostile create and exec bodies through the proxy under compose/policies/sandbox.json.
// The judge is the daemon: either the proxy refused (and no container of that name
// exists), or the container the daemon stored satisfies every sandbox rule.
#include <simdjson.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>

#include "hardening_checks.hpp"
#include "harness.hpp"

using namespace dockgate::test;
using namespace std::chrono_literals;

namespace {

const std::string sandbox_policy = "compose/policies/sandbox.json";
const std::string workspace_root = "/mnt/aimem";  // the shipped profile's workspace root

std::string direct() {
  return docker_cli() + " -H " + engine_host();
}

std::string post_json(const std::string& target, const std::string& body) {
  return "POST " + target +
         " HTTP/1.1\r\nHost: d\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

std::string body_of(const std::string& response) {
  auto at = response.find("\r\n\r\n");
  return at == std::string::npos ? "" : response.substr(at + 4);
}

// Every sandbox rule, checked on `docker inspect` output. Returns the violations.
std::vector<std::string> sandbox_violations(const std::string& inspect_json) {
  inspect_record r(inspect_json);
  if (!r.parsed()) return r.violations();
  expect_session_hardening(r, "sandbox");
  const inspect_value hc = r.host_config();
  r.expect(is_false(member(hc, "Privileged")), "Privileged");
  // tmpfs only at the profile's paths, each with the profile's options.
  static const std::map<std::string, std::string> tmpfs_allowed = {
      {"/tmp", "rw,nosuid,nodev,exec,size=256m,mode=1777"},
      {"/home/sandbox", "rw,nosuid,nodev,exec,size=256m,mode=1777"},
      {"/workspace", "rw,nosuid,nodev,size=512m,mode=1777"}};
  if (auto tmpfs = member(hc, "Tmpfs"); tmpfs && tmpfs->is_object()) {
    simdjson::dom::object mounts;
    r.expect(tmpfs->get_object().get(mounts) == simdjson::SUCCESS, "Tmpfs is an object");
    for (auto [mount, options] : mounts) {
      auto it = tmpfs_allowed.find(std::string(mount));
      r.expect(it != tmpfs_allowed.end() && text(options) == it->second, "Tmpfs " + compact(tmpfs));
    }
  }
  r.expect(number(member(hc, "ShmSize")) <= 67108864, "ShmSize");
  r.expect(text(member(hc, "Cgroup")).empty(), "Cgroup " + text(member(hc, "Cgroup")));
  for (const char* f :
       {"Devices", "DeviceCgroupRules", "DeviceRequests", "Sysctls", "VolumesFrom", "Links",
        "ExtraHosts", "PortBindings", "GroupAdd", "CgroupParent", "VolumeDriver"})
    r.expect(is_empty(member(hc, f)), f);
  r.expect(is_false(member(hc, "PublishAllPorts")), "PublishAllPorts");
  r.expect(is_false(member(hc, "OomKillDisable")), "OomKillDisable");
  r.expect(number(member(hc, "OomScoreAdj")) >= 0, "OomScoreAdj");
  r.expect(text(member(hc, "Runtime")) == "runc", "Runtime " + text(member(hc, "Runtime")));
  // The daemon's default masked and read-only paths stay in place.
  r.expect(!is_empty(member(hc, "MaskedPaths")), "MaskedPaths");
  r.expect(!is_empty(member(hc, "ReadonlyPaths")), "ReadonlyPaths");
  // No client binds; the only mount is the workspace the gate binds from its root.
  simdjson::dom::array list;
  if (auto mounts = member(r.container(), "Mounts");
      mounts && mounts->get_array().get(list) == simdjson::SUCCESS)
    for (simdjson::dom::element m : list)
      r.expect(text(member(m, "Type")) == "bind" &&
                   text(member(m, "Destination")) == "/workspace" &&
                   text(member(m, "Source")).starts_with(workspace_root + "/") &&
                   text(member(m, "Source")).find("..") == std::string::npos,
               "mount " + compact(m));
  return r.violations();
}

}  // namespace

TEST_CASE("hostile create bodies: refused, or the stored container obeys every sandbox rule",
          "[integration][policy][sandbox]") {
  proxy_process proxy(sandbox_policy);
  const std::string img = R"("Image":")" + test_image() + R"(")";
  const std::string ws = workspace_root + "/" + unique_name("ws");
  std::filesystem::create_directories(ws);
  const std::vector<std::string> bodies = {
      // the plain request, and every way to ask for privilege
      "{" + img + "}",
      "{" + img + R"(,"HostConfig":{"Privileged":true}})",
      "{" + img + R"(,"Privileged":true})",
      "{" + img + R"(,"HostConfig":null,"Privileged":true,"CapAdd":["ALL"],"NetworkMode":"host"})",
      "{" + img + R"(,"HostConfig":{},"Privileged":true,"NetworkMode":"host","PidMode":"host"})",
      "{" + img + R"(,"hostconfig":{"privileged":true}})",
      "{" + img + R"(,"HOSTCONFIG":{"PRIVILEGED":true,"READONLYROOTFS":false}})",
      "{" + img + R"(,"HostConfig":{"Privileged":false},"hostConfig":{"Privileged":true}})",
      "{" + img + R"(,"HostConfig":{"Privileged":false,"\u0050rivileged":true}})",
      "{" + img + R"(,"HostConfig":{"\u0050rivileged":true}})",
      "{" + img + R"(,"HostConfig":{"\u017FecurityOpt":["seccomp=unconfined"]}})",
      "{" + img + R"(,"HostConfig":{"Lin\u212As":["x:y"]}})",
      "{" + img + R"(,"HostConfig":{"Privileged":null}})",
      "{" + img + R"(} {"HostConfig":{"Privileged":true}})",
      "{" + img + R"(,"HostConfig":{"CapAdd":"ALL"}})",
      "{" + img + R"(,"HostConfig":{"CapAdd":["CAP_SYS_ADMIN"]}})",
      "{" + img + R"(,"HostConfig":{"CapAdd":["sys_admin"],"CapDrop":[]}})",
      "{" + img +
          R"(,"HostConfig":{"SecurityOpt":["seccomp:unconfined","apparmor=unconfined","label=disable","systempaths=unconfined","no-new-privileges=false"]}})",
      "{" + img + R"(,"HostConfig":{"MaskedPaths":[],"ReadonlyPaths":[]}})",
      "{" + img +
          R"(,"HostConfig":{"Memory":0,"MemorySwap":-1,"NanoCpus":0,"PidsLimit":-1,"ShmSize":0}})",
      "{" + img + R"(,"HostConfig":{"Memory":-5,"PidsLimit":0}})",
      "{" + img +
          R"(,"HostConfig":{"Memory":1099511627776,"NanoCpus":64000000000,"PidsLimit":1000000}})",
      "{" + img + R"(,"Memory":1099511627776,"HostConfig":{"Memory":0}})",
      "{" + img +
          R"(,"HostConfig":{"NetworkMode":"host","PidMode":"host","IpcMode":"host","UTSMode":"host","UsernsMode":"host","CgroupnsMode":"host"}})",
      "{" + img + R"(,"HostConfig":{"Binds":["/:/workspace"]}})",
      "{" + img + R"(,"HostConfig":{"Binds":[")" + workspace_root +
          R"(/../../../etc:/workspace"]}})",
      "{" + img + R"(,"HostConfig":{"Binds":[")" + ws + R"(:/workspace"]}})",
      "{" + img + R"(,"HostConfig":{"Binds":[")" + ws + R"(:/etc"]}})",
      "{" + img +
          R"(,"HostConfig":{"Mounts":[{"Type":"volume","Source":"evil","Target":"/workspace","VolumeOptions":{"DriverConfig":{"Name":"local","Options":{"type":"none","o":"bind","device":"/etc"}}}}]}})",
      "{" + img +
          R"(,"HostConfig":{"Mounts":[{"Type":"bind","Source":"/etc","Target":"/workspace"}]}})",
      "{" + img +
          R"(,"HostConfig":{"Devices":[{"PathOnHost":"/dev/mem","PathInContainer":"/dev/mem","CgroupPermissions":"rwm"}]}})",
      "{" + img + R"(,"HostConfig":{"DeviceCgroupRules":["a *:* rwm"]}})",
      "{" + img + R"(,"User":"0"})",
      "{" + img + R"(,"User":"root:root"})",
      "{" + img + R"(,"Labels":{"dockgate.owner":"docker-cli"}})",
      "{" + img +
          R"(,"HostConfig":{"Ulimits":[{"Name":"nofile","Soft":1048576,"Hard":1048576},{"Name":"memlock","Soft":-1,"Hard":-1}]}})",
      "{" + img + R"(,"HostConfig":{"Tmpfs":{"/tmp":"exec,size=10g","/run":"exec"}}})",
      "{" + img + R"(,"HostConfig":{"Sysctls":{"kernel.shm_rmid_forced":"1"}}})",
      "{" + img + R"(,"HostConfig":{"OomScoreAdj":-1000,"OomKillDisable":true}})",
      "{" + img + R"(,"HostConfig":{"Runtime":"io.containerd.runc.v2"}})",
      "{" + img + R"(,"HostConfig":{"CgroupParent":"/","GroupAdd":["0"]}})",
      "{" + img +
          R"(,"HostConfig":{"VolumesFrom":["x"],"Links":["x:y"],"ExtraHosts":["a:1.2.3.4"]}})",
      "{" + img +
          R"(,"HostConfig":{"PortBindings":{"80/tcp":[{"HostPort":"8080"}]},"PublishAllPorts":true}})",
      "{" + img + R"(,"NetworkingConfig":{"EndpointsConfig":{"host":{}}}})",
      R"({"Image":"busybox"})",
      R"({"Image":"docker.io/library/busybox@sha256:)" + std::string(64, 'a') + R"("})",
  };
  int accepted = 0;
  for (const auto& body : bodies) {
    const auto name = unique_name("dg-hostile");
    auto response =
        raw_exchange(proxy.socket_path(), post_json("/v1.41/containers/create?name=" + name, body));
    INFO("body: " << body);
    INFO("response: " << response.bytes.substr(0, 400));
    const unsigned status = response.status();
    if (status == 201) {
      ++accepted;
      auto inspect = run(direct() + " inspect " + name);
      REQUIRE(inspect.status == 0);
      const auto violations = sandbox_violations(inspect.output);
      INFO("violations: " << Catch::Detail::stringify(violations));
      CHECK(violations.empty());
    } else {
      CHECK(status >= 400);
      CHECK(status < 500);
      CHECK(body_of(response.bytes).starts_with("{\"message\":\"dockgate: "));
      CHECK_FALSE(container_exists(name));
    }
    run(direct() + " rm -f " + name + " >/dev/null 2>&1");
  }
  CHECK(accepted >= 10);  // the forcing rules were exercised on the daemon, not only refusals
  std::filesystem::remove_all(ws);
}

TEST_CASE("a sandbox container runs as its rules say", "[integration][policy][sandbox][userns]") {
  proxy_process proxy(sandbox_policy);
  const auto name = unique_name("dg-sbx-run");
  auto created = raw_exchange(
      proxy.socket_path(),
      post_json("/v1.41/containers/create?name=" + name,
                R"({"Image":")" + test_image() +
                    R"(","Cmd":["sleep","60"],"User":"root","HostConfig":{"Tmpfs":{"/tmp":""}}})"));
  REQUIRE(created.status() == 201);
  CHECK(proxy.audit_contains(
      R"("changes":[{"field":"User","action":"forced","from":"root","to":"65534:65534"})"));
  REQUIRE(run(direct() + " start " + name).status == 0);
  // The container's own user (a direct exec takes it): the keep-alive's, not root's.
  // Execs through the gate run as the session user (below).
  auto id = run(direct() + " exec " + name + " id -u");
  CHECK(id.output == "65534\n");
  auto write_root = run(direct() + " exec " + name + " touch /etc/x");
  CHECK(write_root.status != 0);  // read-only root
  auto write_tmp = run(direct() + " exec " + name + " sh -c 'echo ok > /tmp/x && cat /tmp/x'");
  CHECK(write_tmp.output == "ok\n");
  auto net = run(direct() + " exec " + name + " cat /proc/net/dev");
  CHECK(net.output.find("eth0") == std::string::npos);  // network none: only lo
  // What the kernel says about the process: no capabilities, no-new-privileges, seccomp.
  auto status = run(direct() + " exec " + name + " cat /proc/1/status");
  CHECK(status.output.find("CapEff:\t0000000000000000") != std::string::npos);
  CHECK(status.output.find("CapBnd:\t0000000000000000") != std::string::npos);
  CHECK(status.output.find("NoNewPrivs:\t1") != std::string::npos);
  CHECK(status.output.find("Seccomp:\t2") != std::string::npos);

  // Exec through the proxy: privileged, root and the keep-alive's uid are not to be had.
  for (const std::string exec_body :
       {R"({"Cmd":["id","-u"],"AttachStdout":true,"User":"root","Privileged":true})",
        R"({"Cmd":["id","-u"],"AttachStdout":true,"user":"0"})",
        R"({"Cmd":["id","-u"],"AttachStdout":true,"User":"65534:65534"})",
        R"({"Cmd":["id","-u"],"AttachStdout":true})"}) {
    auto ex = raw_exchange(proxy.socket_path(),
                           post_json("/v1.41/containers/" + name + "/exec", exec_body));
    INFO(ex.bytes);
    REQUIRE(ex.status() == 201);
    const auto body = body_of(ex.bytes);
    const std::string exec_id = body.substr(body.find("\"Id\":\"") + 6, 64);
    auto inspect = run("curl -s --unix-socket " + engine_socket() + " http://d/v1.41/exec/" +
                       exec_id + "/json");
    INFO(inspect.output);
    CHECK(inspect.output.find("\"user\":\"1000:1000\"") != std::string::npos);
    CHECK(inspect.output.find("\"privileged\":false") != std::string::npos);
  }
  auto dup = raw_exchange(proxy.socket_path(),
                          post_json("/v1.41/containers/" + name + "/exec",
                                    R"({"Cmd":["id"],"Privileged":false,"privileged":true})"));
  CHECK(dup.status() == 400);
  run(direct() + " rm -f " + name);
}

TEST_CASE("a sandbox container runs under the profile's own seccomp profile, not docker's default",
          "[integration][policy][sandbox][seccomp][userns]") {
  // The record names the profile the gate forced, and the kernel applies it: what docker's
  // default profile lets an unprivileged process do (ptrace of itself, io_uring, a new
  // user namespace where the kernel allows one) is refused, and ordinary Python runs.
  const char* image = std::getenv("DOCKGATE_TEST_RUNTIME_IMAGE");
  INFO("DOCKGATE_TEST_RUNTIME_IMAGE (scripts/engine.sh sets it)");
  REQUIRE((image && *image));
  if (run("uname -m").output != "x86_64\n") {
    WARN("the probe uses x86_64 syscall numbers: nothing tested on this machine");
    return;
  }
  proxy_process proxy(sandbox_policy);
  const auto name = unique_name("dg-seccomp");
  auto created = raw_exchange(
      proxy.socket_path(),
      post_json(
          "/v1.41/containers/create?name=" + name,
          std::string(R"({"Image":")") + image +
              R"(","Cmd":["sleep","60"],"HostConfig":{"SecurityOpt":["seccomp=unconfined"]}})"));
  INFO(created.bytes);
  REQUIRE(created.status() == 201);
  auto opts = run(direct() + " inspect -f '{{json .HostConfig.SecurityOpt}}' " + name).output;
  CHECK(opts.find("unconfined") == std::string::npos);
  CHECK(opts.find(R"(seccomp={\"name\":\"dockgate-python\")") != std::string::npos);
  REQUIRE(run(direct() + " start " + name).status == 0);
  // errno of each call (0: it ran). x86_64 numbers: ptrace 101, keyctl 250, unshare 272,
  // userfaultfd 323, bpf 321, perf_event_open 298, io_uring_setup 425, mount 165, clone3 435.
  const std::string probe = R"(
import ctypes, subprocess, threading
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def errno_of(n, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(n), *[ctypes.c_long(a) for a in args])
    return 0 if r >= 0 else ctypes.get_errno()
params = ctypes.create_string_buffer(120)
print("ptrace", errno_of(101, 0, 0, 0, 0))
print("keyctl", errno_of(250, 0, 0, 0, 0, 0))
print("unshare", errno_of(272, 0x10000000))
print("userfaultfd", errno_of(323, 0))
print("bpf", errno_of(321, 0, 0, 0))
print("perf_event_open", errno_of(298, 0, 0, -1, -1, 0))
print("io_uring_setup", errno_of(425, 1, ctypes.addressof(params)))
print("mount", errno_of(165, 0, 0, 0, 0, 0))
print("clone3", errno_of(435, 0, 0))
t = threading.Thread(target=lambda: None); t.start(); t.join()
print("subprocess", subprocess.run(["sh", "-c", "echo ok"], capture_output=True).stdout.decode().strip())
)";
  auto out = run(direct() + " exec " + name + " python3 -c '" + probe + "'");
  INFO(out.output);
  CHECK(out.status == 0);
  for (const char* refused : {"ptrace 1\n", "keyctl 1\n", "unshare 1\n", "userfaultfd 1\n",
                              "bpf 1\n", "perf_event_open 1\n", "io_uring_setup 1\n", "mount 1\n"})
    CHECK(out.output.find(refused) != std::string::npos);
  CHECK(out.output.find("clone3 38\n") != std::string::npos);  // ENOSYS: glibc falls back
  CHECK(out.output.find("subprocess ok\n") != std::string::npos);
  run(direct() + " rm -f " + name);
}

TEST_CASE(
    "workspace: the gate binds the live FUSE mount the label names, and nothing a client names",
    "[integration][policy][sandbox][workspace]") {
  // The shipped sandbox profile with its workspace root moved under a test directory.
  const std::string root = "/tmp/" + unique_name("dg-ws-root");
  std::filesystem::create_directories(root);
  ::chmod(root.c_str(), 0755);
  std::ifstream in(repo_root() + "/" + sandbox_policy);
  std::string policy((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(policy.find("\"/mnt/aimem\"") != std::string::npos);
  policy.replace(policy.find("\"/mnt/aimem\""), 12, "\"" + root + "\"");
  proxy_process proxy(policy);

  const std::string id = unique_name("ws");
  const std::string backing = root + "-backing";
  const std::string fuse_ws = root + "/" + id;
  std::filesystem::create_directories(backing);
  std::filesystem::create_directories(fuse_ws);
  std::filesystem::create_directories(root + "/" + id + "-plain");
  std::filesystem::create_symlink("/etc", root + "/" + id + "-link");
  // bindfs: a real FUSE file system, as dockgate-mount's s3fs is.
  REQUIRE(run("bindfs -o nosuid,nodev " + backing + " " + fuse_ws).status == 0);
  struct unmount {
    std::string path;
    ~unmount() { run("fusermount3 -u " + path + " || umount -l " + path); }
  } guard{fuse_ws};

  auto create = [&](const std::string& name, const std::string& labels,
                    const std::string& host = "") {
    const std::string body = R"({"Image":")" + test_image() + R"(","Labels":)" + labels +
                             R"(,"HostConfig":{"Tmpfs":{"/workspace":"size=1m"})" + host + "}}";
    return raw_exchange(proxy.socket_path(),
                        post_json("/v1.41/containers/create?name=" + name, body));
  };
  const auto good = unique_name("dg-ws");
  auto ok = create(good, R"({"dockgate.workspace":")" + id + R"("})");
  INFO(ok.bytes);
  REQUIRE(ok.status() == 201);
  // The daemon's record: the one bind, from the profile's root, and no tmpfs over it.
  CHECK(run(direct() +
            " inspect --format '{{json .HostConfig.Mounts}} {{json .HostConfig.Binds}} {{json "
            ".HostConfig.Tmpfs}}' " +
            good)
            .output ==
        R"([{"Type":"bind","Source":")" + fuse_ws +
            R"(","Target":"/workspace","BindOptions":{"Propagation":"rprivate"}}] null null)"
            "\n");

  // Anything else a client names is refused, and the daemon has no such container.
  const std::pair<std::string, std::string> refused[] = {
      {R"({"dockgate.workspace":")" + id + R"(-plain"})", "is not a FUSE mount"},
      {R"({"dockgate.workspace":")" + id + R"(-link"})", "passes through a symlink"},
      {R"({"dockgate.workspace":")" + id + R"(-missing"})", "No such file or directory"},
      {R"({"dockgate.workspace":"../../etc"})", "must be 1-128 of"},
  };
  for (const auto& [labels, why] : refused) {
    const auto name = unique_name("dg-badws");
    auto r = create(name, labels);
    INFO(labels << " -> " << r.bytes);
    CHECK(r.status() == 403);
    CHECK(r.bytes.find(why) != std::string::npos);
    CHECK_FALSE(container_exists(name));
  }
  for (const std::string& host :
       {R"(,"Binds":[")" + fuse_ws + R"(:/workspace"])",
        R"(,"Mounts":[{"Type":"bind","Source":")" + fuse_ws + R"(","Target":"/workspace"}])"}) {
    const auto name = unique_name("dg-clientbind");
    auto r = create(name, "{}", host);
    INFO(host << " -> " << r.bytes);
    CHECK(r.status() == 403);
    CHECK_FALSE(container_exists(name));
  }

  // A root that someone else could change under the gate is refused too.
  ::chmod(root.c_str(), 0777);
  const auto loose = unique_name("dg-loose");
  auto r = create(loose, R"({"dockgate.workspace":")" + id + R"("})");
  CHECK(r.status() == 403);
  CHECK(r.bytes.find("can be replaced by a user other than root") != std::string::npos);
  ::chmod(root.c_str(), 0755);

  // At start the source is checked again: a workspace whose FUSE mount went away (or
  // whose driver died) does not start.
  run("fusermount3 -u " + fuse_ws + " || umount -l " + fuse_ws);
  auto start =
      raw_exchange(proxy.socket_path(), post_json("/v1.41/containers/" + good + "/start", ""));
  INFO(start.bytes);
  CHECK(start.status() == 403);
  CHECK(start.bytes.find("not started: bind source") != std::string::npos);
  CHECK(run(direct() + " inspect --format '{{.State.Status}}' " + good).output == "created\n");
  run(direct() + " rm -f " + good);
  std::filesystem::remove(root + "/" + id + "-link");
  std::filesystem::remove_all(root);
  std::filesystem::remove_all(backing);
}

namespace {

// compose/policies/sandbox.json with its HostConfig.Runtime rule replaced by `rule`.
std::string sandbox_with_runtime_rule(const std::string& rule) {
  std::string text = run("cat " + repo_root() + "/compose/policies/sandbox.json").output;
  const auto at = text.find("\"HostConfig.Runtime\": {");
  REQUIRE(at != std::string::npos);
  const auto end = text.find('}', at);
  text.replace(at, end + 1 - at, "\"HostConfig.Runtime\": " + rule);
  return text;
}

// POST /containers/create through the gate with `runtime` ("": none named); the answer.
raw_response create_with_runtime(const proxy_process& proxy, const std::string& name,
                                 const std::string& runtime) {
  const std::string body = R"({"Image":")" + test_image() + R"(","Cmd":["true"],"HostConfig":{)" +
                           (runtime.empty() ? std::string() : R"("Runtime":")" + runtime + "\"") +
                           "}}";
  return raw_exchange(
      proxy.socket_path(),
      "POST /v1.41/containers/create?name=" + name +
          " HTTP/1.1\r\nHost: d\r\nContent-Type: application/json\r\nContent-Length: " +
          std::to_string(body.size()) + "\r\n\r\n" + body);
}

}  // namespace

TEST_CASE("a profile holds every container to a named runtime, a client cannot choose another",
          "[integration][policy][runtime]") {
  // The private engine registers Debian's crun as a second runtime (scripts/engine.sh),
  // standing in for gVisor's runsc or Kata. (crun cannot start containers on this host's
  // hybrid cgroups: the daemon's record is the judge here, as for privileged containers.)
  proxy_process proxy(sandbox_with_runtime_rule(R"({"force": "crun"})"));
  for (const std::string& chosen :
       {std::string(), std::string("runc"), std::string("io.containerd.runc.v2")}) {
    CAPTURE(chosen);
    const auto name = unique_name("dg-runtime");
    auto r = create_with_runtime(proxy, name, chosen);
    INFO(r.bytes);
    CHECK(r.status() == 201);
    CHECK(run(direct() + " inspect -f '{{.HostConfig.Runtime}}' " + name).output == "crun\n");
    run(direct() + " rm -f " + name);
  }
}

TEST_CASE("a profile lets a client choose a runtime from its list, and picks the default itself",
          "[integration][policy][runtime]") {
  proxy_process proxy(
      sandbox_with_runtime_rule(R"({"allow": ["runc", "crun"], "default": "crun"})"));
  // None named, or an empty name: the profile's default, never the daemon's own (runc).
  for (const auto& [chosen, stored] : std::vector<std::pair<std::string, std::string>>{
           {"", "crun"}, {"runc", "runc"}, {"crun", "crun"}}) {
    CAPTURE(chosen);
    const auto name = unique_name("dg-runtime");
    auto r = create_with_runtime(proxy, name, chosen);
    INFO(r.bytes);
    CHECK(r.status() == 201);
    CHECK(run(direct() + " inspect -f '{{.HostConfig.Runtime}}' " + name).output == stored + "\n");
    run(direct() + " rm -f " + name);
  }
  // Anything else is refused with the list, and nothing is made.
  const auto name = unique_name("dg-runtime");
  auto r = create_with_runtime(proxy, name, "io.containerd.runc.v2");
  CHECK(r.status() == 403);
  // (Docker's error body: the value's quotes are escaped in the JSON.)
  CHECK(r.bytes.find(R"(HostConfig.Runtime value \"io.containerd.runc.v2\" is not allowed: the )"
                     "profile allows runc, crun (profile sandbox, rule allow)") !=
        std::string::npos);
  CHECK(run(direct() + " inspect " + name).status != 0);
  // The shipped sandbox profile: runc unless a session asks for gVisor.
  proxy_process shipped(sandbox_policy);
  const auto plain = unique_name("dg-runtime");
  REQUIRE(create_with_runtime(shipped, plain, "").status() == 201);
  CHECK(run(direct() + " inspect -f '{{.HostConfig.Runtime}}' " + plain).output == "runc\n");
  run(direct() + " rm -f " + plain);
  CHECK(create_with_runtime(shipped, unique_name("dg-runtime"), "crun").status() == 403);
}

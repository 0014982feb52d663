// Sessions under gVisor (issue 44 item 1; docs/sidecar.md, "gVisor"): the runtime a create
// asks for (SANDBOX_RUNTIMES), written in the container's create body and judged by the
// daemon's record (HostConfig.Runtime), by what a cell observes (gVisor's own kernel) and by
// the bytes the client gets: cells as plain execs (the cell runner's and the kernel
// driver's wall, a non-dumpable /proc/PID/fd, does not hold under this runsc; their kill
// sweep is judged inside the guest: the host's `ps` cannot see gVisor's processes), the
// walls, files and the workspace's archive, kernel sessions refused, the instance lease,
// and whether a host FUSE mount is seen inside a runsc container. Through the gate's sandbox
// profile with a copy that lets a create name runc or runsc. The private engine registers runsc
// when Debian's package is installed (scripts/engine.sh): without it these tests skip with a
// warning, except under scripts/test.sh (DOCKGATE_REQUIRE_RUNSC=1), where a missing runsc fails
// them.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "sidecar_harness.hpp"

using namespace dockgate::test;
using namespace std::chrono_literals;

namespace {

// Whether runsc is registered on the test engine; a loud skip when not (Catch2 2 has no
// SKIP), a failure where CI requires it.
bool runsc_absent() {
  const char* registered = std::getenv("DOCKGATE_TEST_RUNSC");
  if (registered && std::string(registered) == "1") return false;
  const char* required = std::getenv("DOCKGATE_REQUIRE_RUNSC");
  if (required && std::string(required) == "1")
    FAIL(
        "runsc is not registered on the test engine, and DOCKGATE_REQUIRE_RUNSC=1 (CI tests "
        "gVisor, never skips it): install Debian's runsc (scripts/install-deps.sh)");
  WARN(
      "SKIPPED: runsc (gVisor) is NOT registered on the test engine, so gVisor is NOT tested "
      "here: apt-get install runsc, then scripts/engine.sh start again");
  return true;
}
#define REQUIRE_RUNSC() \
  if (runsc_absent()) return

// The shipped sandbox profile with its HostConfig.Runtime rule replaced by `rule`; by
// default the shipped rule itself (runc or runsc, runc when none is named).
std::string runsc_profile(const std::string& rule = {}) {
  std::string text = run("cat " + repo_root() + "/compose/policies/sandbox.json").output;
  const auto at = text.find("\"HostConfig.Runtime\": {");
  REQUIRE(at != std::string::npos);
  if (!rule.empty())
    text.replace(at, text.find('}', at) + 1 - at, "\"HostConfig.Runtime\": " + rule);
  return text;
}

std::string inspected(const std::string& container, const std::string& format) {
  std::string out = run(direct() + " inspect -f '" + format + "' " + container).output;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

std::string session_of(const dockgate::client::http_response& created,
                       const sidecar_process& sidecar) {
  INFO(created.body << "\n" << sidecar.log());
  REQUIRE(created.status == 200);
  return field(created.body, "session_id");
}

// What a cell sees of its kernel and its walls, one line each.
const std::string observe = R"(import os, socket
print(open('/proc/version').read().strip())
print([l for l in open('/proc/self/status').read().splitlines() if l.startswith('CapEff')][0])
try:
    open('/usr/dockgate-root-write', 'w'); print('root writable')
except OSError as e:
    print('root write refused')
print('interfaces', [n for _, n in socket.if_nameindex()])
try:
    s = socket.socket(); s.settimeout(2); s.connect(('10.0.0.1', 80)); print('connected')
except OSError as e:
    print('no route')
)";

// The host's kernel release (uname -r): a gVisor guest reports its own.
std::string host_release() {
  std::string out = run("uname -r").output;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace

TEST_CASE(
    "runsc: a session asks for runsc, its container runs gVisor behind the same walls, cells as "
    "plain execs (no runner), files and its workspace's archive work, a warm runc container is "
    "not taken",
    "[integration][sidecar][runsc]") {
  REQUIRE_RUNSC();
  proxy_process proxy(runsc_profile());
  const std::string store = "/tmp/" + unique_name("dg-runsc-store");
  std::filesystem::create_directories(store);
  sidecar_process sidecar(proxy, {"SANDBOX_RUNTIMES=runc,runsc", "SANDBOX_WARM_POOL=1",
                                  "SANDBOX_LOCAL_STORAGE_DIR=" + store});
  // A warm container (the default runtime's) is ready before the runsc create.
  std::string health;
  for (int i = 0; i < 600 && health.find(R"("warm_pool":1)") == std::string::npos; ++i) {
    health = sidecar.call("GET", "/healthz", "", "").body;
    std::this_thread::sleep_for(50ms);
  }
  REQUIRE(health.find(R"("warm_pool":1)") != std::string::npos);

  const std::string sid = session_of(
      sidecar.create(
          R"({"runtime":"runsc","archive_key":"runsc-ws","storage":{"provider":"local"}})"),
      sidecar);
  const std::string container = "dockgate-sbx-" + sid;
  // The daemon's record: runsc, and the label a restarted sidecar adopts it by; still the
  // sandbox profile's walls.
  CHECK(inspected(container, "{{.HostConfig.Runtime}}") == "runsc");
  CHECK(inspected(container, "{{index .Config.Labels \"sandbox.runtime\"}}") == "runsc");
  // The session's isolation report says so too, and its self-test passed under gVisor
  // (else the create was refused): the runtime from the record, the kernel gVisor's.
  const auto report = sidecar.call("GET", "/sessions/" + sid, "");
  INFO(report.body);
  CHECK(report.status == 200);
  CHECK(report.body.find(R"("runtime":"runsc")") != std::string::npos);
  CHECK(inspected(container,
                  "{{.HostConfig.ReadonlyRootfs}} {{.HostConfig.NetworkMode}} "
                  "{{.HostConfig.CapDrop}} {{index .HostConfig.SecurityOpt 0}} "
                  "{{len .HostConfig.SecurityOpt}}") == "true none [ALL] no-new-privileges 2");
  // The second: the sandbox profile's seccomp profile, applied in the guest (--oci-seccomp).
  CHECK(inspected(container, "{{index .HostConfig.SecurityOpt 1}}")
            .starts_with(R"(seccomp={"name":"dockgate-python",)"));
  // The warm container was not taken: it is still there, on the default runtime.
  CHECK(sidecar.call("GET", "/healthz", "", "").body.find(R"("warm_pool":1)") != std::string::npos);

  // What the cell sees: gVisor's kernel (its own /proc/version, not the host's release), no
  // capabilities, a root it cannot write, a loopback and nothing else.
  const auto since = now_stamp();
  auto seen = sidecar.call("POST", "/exec", exec_body(sid, observe, 30000));
  const auto until = now_stamp();
  INFO(seen.body << "\n" << sidecar.log());
  REQUIRE(seen.status == 200);
  const std::string out = field(seen.body, "stdout");
  CHECK(out.find(host_release()) == std::string::npos);
  CHECK(out.find("CapEff:\t0000000000000000\n") != std::string::npos);
  CHECK(out.find("root write refused\n") != std::string::npos);
  CHECK(out.find("interfaces ['lo']\n") != std::string::npos);
  CHECK(out.find("no route\n") != std::string::npos);
  CHECK(field(seen.body, "exit_code") == "0");
  // No cell runner under gVisor: this runsc lets a process of the session user open a
  // non-dumpable process's /proc/PID/fd, the runner's wall, so the runner's own check
  // (runner.py fd_wall_holds) ends it and every cell is a plain exec.
  CHECK(exec_creates(container, since, until) >= 1);
  CHECK(field(sidecar.exec(sid,
                           "import os\nprint(sum(open('/proc/%s/cmdline' % p, 'rb').read()"
                           ".endswith(b'\\0dockgate-runner\\0') for p in os.listdir('/proc') "
                           "if p.isdigit()))"),
              "stdout") == "0\n");
  // A process a cell leaves is swept, and the next cells are answered.
  auto left = sidecar.call("POST", "/exec",
                           exec_body(sid,
                                     "import subprocess\nsubprocess.Popen(['sleep', '1000'], "
                                     "start_new_session=True)\nprint('left')"));
  CHECK(field(left.body, "stdout") == "left\n");
  auto after = sidecar.exec(sid,
                            "import os\nprint(sorted(p for p in os.listdir('/proc') if "
                            "p.isdigit() and open('/proc/'+p+'/cmdline').read().startswith("
                            "'sleep\\x001000')))");
  CHECK(field(after, "stdout") == "[]\n");

  // Files: an upload read by a cell, an output read back.
  auto put = sidecar.call("POST", "/files",
                          R"({"session_id":")" + sid +
                              R"(","path":"/workspace/uploads/in.txt","data_base64":"Z1Zpc29y"})");
  CHECK(put.status == 200);
  CHECK(field(sidecar.exec(sid,
                           "d = open('/workspace/uploads/in.txt').read()\n"
                           "open('/workspace/outputs/out.txt', 'w').write(d + ' ok')\n"
                           "print(d)"),
              "stdout") == "gVisor\n");
  auto got = sidecar.call("POST", "/files/get",
                          R"({"session_id":")" + sid + R"(","path":"/workspace/outputs/out.txt"})");
  CHECK(field(got.body, "data_base64") == "Z1Zpc29yIG9r");  // "gVisor ok"

  // Never through a symlink: gVisor follows one opened with O_DIRECTORY|O_NOFOLLOW, so each
  // directory the files routes open is checked to be the inode lstat saw.
  REQUIRE(field(sidecar.exec(sid, "import os\nos.symlink('/etc', '/workspace/etc')\nprint(1)"),
                "stdout") == "1\n");
  auto through =
      sidecar.call("POST", "/files/get", R"({"session_id":")" + sid + R"(","path":"etc/passwd"})");
  CHECK(through.status == 400);
  CHECK(through.body.find("cm9vd") == std::string::npos);  // never the image's passwd
  CHECK(sidecar
            .call("POST", "/files",
                  R"({"session_id":")" + sid + R"(","path":"etc/x","data_base64":"aGk="})")
            .status == 400);
  // The workspace's archive: made at delete from the runsc container, restored into the
  // next runsc session of the same key.
  auto deleted = sidecar.call("DELETE", "/sessions/" + sid, R"({"storage":{"provider":"local"}})");
  INFO(deleted.body);
  CHECK(deleted.status == 200);
  CHECK(field(field(deleted.body, "archive"), "status") == "written");
  const std::string again = session_of(
      sidecar.create(
          R"({"runtime":"runsc","archive_key":"runsc-ws","storage":{"provider":"local"}})"),
      sidecar);
  CHECK(inspected("dockgate-sbx-" + again, "{{.HostConfig.Runtime}}") == "runsc");
  auto restored =
      sidecar.call("POST", "/files/get",
                   R"({"session_id":")" + again + R"(","path":"/workspace/outputs/out.txt"})");
  CHECK(field(restored.body, "data_base64") == "Z1Zpc29yIG9r");
  // A session that names no runtime runs on the default (runc), from the warm pool.
  const std::string plain = session_of(sidecar.create(), sidecar);
  CHECK(inspected("dockgate-sbx-" + plain, "{{.HostConfig.Runtime}}") == "runc");
  CHECK(field(sidecar.exec(plain, "print(open('/proc/version').read())"), "stdout")
            .find(host_release()) != std::string::npos);
  std::filesystem::remove_all(store);
}

TEST_CASE(
    "runsc: as the default runtime it holds the instance lease and plain-path sessions, whose "
    "sweep is judged inside the guest",
    "[integration][sidecar][runsc]") {
  REQUIRE_RUNSC();
  proxy_process proxy(runsc_profile());
  // The plain path (no cell runner): every cell is two execs and a sweep judged after it.
  sidecar_process sidecar(
      proxy, {"SANDBOX_RUNTIMES=runsc", "SANDBOX_WARM_POOL=0", "SANDBOX_CELL_RUNNER=0"});
  // The instance lease container runs on runsc too (its PIDs limit is 128: runsc's own
  // threads count against it, and at 64 its heartbeat execs crash the sandbox).
  const std::string lease =
      run(direct() + " ps -q --filter label=sandbox.lease").output.substr(0, 12);
  REQUIRE_FALSE(lease.empty());
  CHECK(inspected(lease, "{{.HostConfig.Runtime}} {{.HostConfig.PidsLimit}} {{.State.Running}}") ==
        "runsc 128 true");

  const std::string sid = session_of(sidecar.create(), sidecar);
  const std::string container = "dockgate-sbx-" + sid;
  CHECK(inspected(container, "{{.HostConfig.Runtime}}") == "runsc");
  // Cells, one leaving a process behind: each answered, the session kept (the host's `ps`
  // would have counted the host's own init as a process the cell left).
  for (const std::string& code :
       {std::string("print(1)"),
        std::string("import subprocess\nsubprocess.Popen(['sleep', '1000'], "
                    "start_new_session=True)\nprint(2)"),
        std::string("print(3)")}) {
    auto r = sidecar.call("POST", "/exec", exec_body(sid, code, 30000));
    INFO(r.body << "\n" << sidecar.log());
    CHECK(r.status == 200);
  }
  // A process the session user cannot end (root's, started from outside the gate): the
  // guest's judge sees it after the next cell's sweep, and the session ends.
  REQUIRE(run(direct() + " exec -d -u 0 " + container + " sleep 1000").status == 0);
  auto tainted = sidecar.call("POST", "/exec", exec_body(sid, "print(4)", 30000));
  INFO(tainted.body << "\n" << sidecar.log());
  CHECK(tainted.status == 500);
  CHECK(tainted.body ==
        R"({"detail":"session ended: a process left by a cell outlived the clean-up"})");
  CHECK_FALSE(container_exists(container));
}

TEST_CASE("runsc: a runtime that is not offered is refused with the list, in each front's format",
          "[integration][sidecar][runsc]") {
  REQUIRE_RUNSC();
  proxy_process proxy(runsc_profile());
  sidecar_process sidecar(
      proxy, {"SANDBOX_RUNTIMES=runc,runsc", "SANDBOX_WARM_POOL=0", "SANDBOX_ALLOW_NO_AUTH=1"});
  const auto before = run(direct() + " ps -aq | wc -l").output;
  auto aivory = sidecar.create(R"({"runtime":"kata"})");
  CHECK(aivory.status == 400);
  CHECK(aivory.body == R"x({"detail":"runtime kata is not offered (offered: runc, runsc)"})x");
  auto opensandbox =
      sidecar.call("POST", "/v1/sandboxes",
                   R"({"image":{"uri":")" + runtime_image() +
                       R"("},"entrypoint":["sleep","infinity"],"timeout":600,"resourceLimits":{},)"
                       R"("extensions":{"secureRuntime":"kata"}})",
                   "");
  CHECK(opensandbox.status == 400);
  CHECK(field(opensandbox.body, "message") ==
        "extensions.secureRuntime: runtime kata is not offered (offered: runc, runsc)");
  CHECK(run(direct() + " ps -aq | wc -l").output == before);  // nothing was made
  // The OpenSandbox choice, asked right: its container runs on runsc.
  auto made = sidecar.call("POST", "/v1/sandboxes",
                           R"({"image":{"uri":")" + runtime_image() +
                               R"("},"entrypoint":["sleep","infinity"],"timeout":600,)"
                               R"("resourceLimits":{},"extensions":{"secureRuntime":"runsc"}})",
                           "");
  INFO(made.body << "\n" << sidecar.log());
  REQUIRE(made.status == 202);
  CHECK(inspected("dockgate-sbx-" + field(made.body, "id"), "{{.HostConfig.Runtime}}") == "runsc");
}

TEST_CASE("runsc: a kernel session is refused on gVisor, where its driver's wall does not hold",
          "[integration][sidecar][runsc][kernel]") {
  REQUIRE_RUNSC();
  const char* full = std::getenv("DOCKGATE_TEST_FULL_RUNTIME_IMAGE");
  if (!full || !*full) {
    WARN(
        "skipped: DOCKGATE_TEST_FULL_RUNTIME_IMAGE is unset (kernel sessions need the full "
        "session image: scripts/runtime-image.sh DOCKER_HOST TAG --full)");
    return;
  }
  proxy_process proxy(runsc_profile());
  sidecar_process sidecar(proxy, {"SANDBOX_IMAGE=" + std::string(full),
                                  "SANDBOX_RUNTIMES=runc,runsc", "SANDBOX_WARM_POOL=0"});
  const auto before = run(direct() + " ps -aq | wc -l").output;
  auto refused = sidecar.create(R"({"kernel":"python","runtime":"runsc"})");
  CHECK(refused.status == 400);
  CHECK(
      refused.body ==
      R"({"detail":"kernel sessions are not offered on runtime runsc (gVisor): a cell could reach the kernel driver's pipes through /proc there"})");
  CHECK(run(direct() + " ps -aq | wc -l").output == before);
  // Its driver's own check ends it where the wall does not hold (kernel.py fd_wall_holds),
  // whatever asked for it: a kernel session on runc still runs.
  const std::string sid = session_of(sidecar.create(R"({"kernel":"python"})"), sidecar);
  auto cell = sidecar.call("POST", "/exec", exec_body(sid, "1 + 1", 60000));
  INFO(cell.body << "\n" << sidecar.log());
  CHECK(cell.status == 200);
}

TEST_CASE(
    "runsc: a host FUSE mount the gate binds as a workspace is seen and written inside a runsc "
    "container, as under runc",
    "[integration][sidecar][runsc][workspace]") {
  REQUIRE_RUNSC();
  // The runsc profile with its workspace root moved under a test directory, and a FUSE file
  // system there (bindfs, as dockgate-mount's s3fs is one) over a backing directory.
  const std::string root = "/tmp/" + unique_name("dg-runsc-ws");
  std::filesystem::create_directories(root);
  ::chmod(root.c_str(), 0755);
  std::string policy = runsc_profile();
  REQUIRE(policy.find("\"/mnt/aimem\"") != std::string::npos);
  policy.replace(policy.find("\"/mnt/aimem\""), 12, "\"" + root + "\"");
  proxy_process proxy(policy);
  const std::string id = unique_name("ws");
  const std::string backing = root + "-backing", fuse_ws = root + "/" + id;
  std::filesystem::create_directories(backing);
  std::filesystem::create_directories(fuse_ws);
  ::chmod(backing.c_str(), 01777);
  std::ofstream(backing + "/from-host.txt") << "host\n";
  REQUIRE(run("bindfs -o nosuid,nodev " + backing + " " + fuse_ws).status == 0);
  struct unmount {
    std::string path;
    ~unmount() { run("fusermount3 -u " + path + " || umount -l " + path); }
  } guard{fuse_ws};
  for (const std::string rt : {"runc", "runsc"}) {
    CAPTURE(rt);
    const std::string name = unique_name("dg-runsc-fuse");
    auto started =
        run(proxy.docker() + " run -d --name " + name + " --runtime " + rt +
            " --label dockgate.workspace=" + id + " " + test_image() + " sleep 1000 2>&1");
    INFO(started.output);
    REQUIRE(started.status == 0);
    CHECK(inspected(name, "{{.HostConfig.Runtime}}") == rt);
    // Read, written, listed inside (busybox's ls: coreutils' statx fails under this runsc).
    auto seen = run(proxy.docker() + " exec " + name + " sh -c 'cat /workspace/from-host.txt; " +
                    "echo " + rt + " > /workspace/from-" + rt + ".txt && ls /workspace' 2>&1");
    INFO(seen.output);
    CHECK(seen.output.starts_with("host\n"));
    CHECK(seen.output.find("from-" + rt + ".txt") != std::string::npos);
    // What the container wrote is in the FUSE file system's backing, on the host.
    CHECK(run("cat " + backing + "/from-" + rt + ".txt").output == rt + "\n");
    run(direct() + " rm -f " + name);
  }
  run("fusermount3 -u " + fuse_ws);
  std::filesystem::remove_all(root);
  std::filesystem::remove_all(backing);
}

TEST_CASE("runsc: the engine's runsc applies a container's seccomp profile inside the guest",
          "[integration][runsc]") {
  REQUIRE_RUNSC();
  // runsc ignores the OCI seccomp profile unless started with --oci-seccomp (scripts/
  // engine.sh registers it so): a profile that refuses mkdir is felt in the guest.
  const std::string dir = "/tmp/" + unique_name("dg-runsc-seccomp");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/no-mkdir.json")
      << R"({"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["mkdir","mkdirat"],)"
         R"("action":"SCMP_ACT_ERRNO"}]})";
  for (const std::string rt : {"runc", "runsc"}) {
    CAPTURE(rt);
    auto r = run(direct() + " run --rm --network none --runtime " + rt +
                 " --security-opt seccomp=" + dir + "/no-mkdir.json " + test_image() +
                 " sh -c 'mkdir /tmp/x 2>/dev/null && echo made || echo refused'");
    CHECK(r.output == "refused\n");
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE(
    "runsc: a restarted sidecar adopts a runsc session on its runtime: swept, judged in the "
    "guest, and answering",
    "[integration][sidecar][runsc]") {
  REQUIRE_RUNSC();
  proxy_process proxy(runsc_profile());
  const std::vector<std::string> env = {"SANDBOX_RUNTIMES=runc,runsc", "SANDBOX_WARM_POOL=0",
                                        "SANDBOX_INSTANCE=" + unique_name("adopt-runsc")};
  std::string sid;
  {
    auto keep = env;
    keep.push_back("SANDBOX_KEEP_SESSIONS_ON_STOP=1");
    sidecar_process first(proxy, keep);
    sid = session_of(first.create(R"({"runtime":"runsc"})"), first);
    REQUIRE(field(first.exec(sid, "print(1)"), "stdout") == "1\n");
    first.stop(SIGTERM);
  }
  const std::string container = "dockgate-sbx-" + sid;
  // A process of the session user left in it, as a cell of the last run could have: the
  // adoption's sweep ends it, and the guest's judge (the label names runsc; the default is
  // runc) finds it clean. Judged on the host's table, the session would be removed.
  REQUIRE(run(direct() + " exec -d -u 1000:1000 " + container + " sleep 1000").status == 0);
  sidecar_process second(proxy, env);
  INFO(second.log());
  REQUIRE(container_exists(container));
  CHECK(inspected(container, "{{.HostConfig.Runtime}}") == "runsc");
  CHECK(field(second.exec(sid,
                          "import os\nprint(sorted(p for p in os.listdir('/proc') if "
                          "p.isdigit() and open('/proc/'+p+'/cmdline').read().startswith("
                          "'sleep\\x001000')))"),
              "stdout") == "[]\n");
}

TEST_CASE(
    "runsc: forced by the gate's profile on a sidecar that names no runtime, the lease starts "
    "and plain cells are judged in the guest",
    "[integration][sidecar][runsc]") {
  REQUIRE_RUNSC();
  // The profile forces runsc on every create (docs/security.md, "Runtimes"); the
  // sidecar has no SANDBOX_RUNTIMES and asks for none: it learns the runtime from the
  // daemon's record when the host's table cannot be read for it.
  proxy_process proxy(runsc_profile(R"({"force": "runsc"})"));
  sidecar_process sidecar(proxy, {"SANDBOX_WARM_POOL=0", "SANDBOX_CELL_RUNNER=0"});
  const std::string sid = session_of(sidecar.create(), sidecar);
  CHECK(inspected("dockgate-sbx-" + sid, "{{.HostConfig.Runtime}}") == "runsc");
  for (const std::string& code :
       {std::string("print(1)"),
        std::string("import subprocess\nsubprocess.Popen(['sleep', '1000'], "
                    "start_new_session=True)\nprint(2)"),
        std::string("print(3)")}) {
    auto r = sidecar.call("POST", "/exec", exec_body(sid, code, 30000));
    INFO(r.body << "\n" << sidecar.log());
    CHECK(r.status == 200);
  }
}

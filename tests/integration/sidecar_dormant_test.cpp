// Dormant sessions against the real daemon: past SANDBOX_DORMANT_AFTER_SECONDS a paused
// sandbox (OpenSandbox's JS SDK, tests/integration/clients/opensandbox_sdk.js) or an idle
// Aivory session loses its container — the daemon has nothing of it — and comes back under
// the same id with its files, by a resume, its next call, or after a sidecar restart.
// Judged by the daemon's record (docker inspect) and by the files a command reads back.
#include "sidecar_harness.hpp"

using namespace dockgate::test;

namespace {

// The daemon's word on a container: `format` of docker inspect, or "" when it is gone.
std::string inspect(const std::string& container, const std::string& format) {
  auto r = run(direct() + " inspect --format '" + format + "' " + container + " 2>/dev/null");
  return r.status == 0 ? r.output : "";
}

// Polls the daemon (up to 15 s) until the container is gone; whether it went.
bool gone_within(const std::string& container) {
  for (int i = 0; i < 300; ++i) {
    if (inspect(container, "{{.Id}}").empty()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

std::vector<std::string> dormant_env(const std::string& store, bool idle) {
  std::vector<std::string> env = {"SANDBOX_LOCAL_STORAGE_DIR=" + store,
                                  "SANDBOX_DORMANT_AFTER_SECONDS=1",
                                  "SANDBOX_IDLE_REAPER_SWEEP_INTERVAL=1", "SANDBOX_WARM_POOL=0"};
  if (idle) env.push_back("SANDBOX_DORMANT_IDLE=1");
  return env;
}

}  // namespace

TEST_CASE(
    "dormant: a paused OpenSandbox sandbox loses its container and comes back with its files by "
    "resume (after a restart) and by its next command",
    "[integration][sidecar][opensandbox][dormant]") {
  const char* modules = std::getenv("DOCKGATE_NODE_PATH");
  REQUIRE((modules && *modules));
  proxy_process proxy("compose/policies/sandbox.json");
  const std::string store = proxy.dir() + "/archives";
  run("mkdir -p " + store);
  auto sidecar = std::make_unique<sidecar_process>(proxy, dormant_env(store, false));
  auto sdk = [&](const std::string& args) {
    return run(std::string("NODE_PATH=") + modules + " OPEN_SANDBOX_DOMAIN=127.0.0.1:" +
               sidecar->port() + " OPEN_SANDBOX_API_KEY=" + api_key + " timeout 60 node " +
               repo_root() + "/tests/integration/clients/opensandbox_sdk.js " + args);
  };
  auto made = sdk("probe " + runtime_image());
  INFO(made.output << sidecar->log());
  REQUIRE(made.status == 0);
  const std::string id = field(made.output, "id");
  const std::string container = "dockgate-sbx-" + id;
  REQUIRE(field(made.output, "put_exit") == "0");

  // Paused, then idle past the setting: the daemon has nothing of it; it is still listed,
  // Paused.
  CHECK(field(sdk("pause " + id).output, "state") == "Paused");
  REQUIRE(gone_within(container));
  auto info = sdk("info " + id);
  INFO(info.output);
  CHECK(field(info.output, "state") == "Paused");
  CHECK(field(info.output, "paused") == "[\"" + id + "\"]");

  // A restarted sidecar keeps it (its record); resume brings it back under its id.
  sidecar->stop(SIGTERM);
  sidecar = std::make_unique<sidecar_process>(proxy, dormant_env(store, false));
  CHECK(inspect(container, "{{.Id}}").empty());
  auto resumed = sdk("resume " + id);
  INFO(resumed.output << sidecar->log());
  CHECK(field(resumed.output, "state") == "Running");
  CHECK(field(resumed.output, "probe") == "dormant-42\n");
  CHECK(inspect(container, "{{.State.Running}} {{.Config.User}} {{.HostConfig.NetworkMode}}") ==
        "true 65534:65534 none\n");

  // Dormant again; its next command (no resume) brings it back.
  CHECK(field(sdk("pause " + id).output, "state") == "Paused");
  REQUIRE(gone_within(container));
  auto read = sdk("read " + id);
  INFO(read.output << sidecar->log());
  CHECK(field(read.output, "probe") == "dormant-42\n");
  CHECK(inspect(container, "{{.State.Running}}") == "true\n");

  CHECK(field(sdk("kill " + id).output, "killed") == "true");
  CHECK(inspect(container, "{{.Id}}").empty());
  CHECK(run("find " + store + "/dockgate-dormant -type f | wc -l").output == "0\n");
}

TEST_CASE(
    "dormant: an idle Aivory session loses its container and its next /exec brings it back with "
    "its files",
    "[integration][sidecar][dormant]") {
  proxy_process proxy("compose/policies/sandbox.json");
  const std::string store = proxy.dir() + "/archives";
  run("mkdir -p " + store);
  sidecar_process sidecar(proxy, dormant_env(store, true));
  auto created = sidecar.create(R"({"archive_key":"idle","storage":{"provider":"local"}})");
  INFO(created.body << sidecar.log());
  REQUIRE(created.status == 200);
  const std::string sid = field(created.body, "session_id");
  const std::string container = "dockgate-sbx-" + sid;
  CHECK(field(sidecar.exec(sid, "open('/workspace/outputs/probe.txt','w').write('kept')"),
              "exit_code") == "0");
  REQUIRE(gone_within(container));
  // Its archive is where a DELETE would have written it.
  CHECK(run("test -s " + store + "/workspaces/workspaces/idle.tgz").status == 0);
  auto back = sidecar.exec(sid, "print(open('/workspace/outputs/probe.txt').read())");
  INFO(back << sidecar.log());
  CHECK(field(back, "stdout") == "kept\n");
  CHECK(inspect(container, "{{.State.Running}}") == "true\n");
}

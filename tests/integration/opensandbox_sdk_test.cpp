// OpenSandbox users on dockgate: OpenSandbox's own JS SDK (npm, scripts/node-clients.sh)
// drives the sidecar's OpenSandbox front through its public API
// (tests/integration/clients/opensandbox_sdk.js), sidecar -> dockgate-proxy (sandbox.json)
// -> the real daemon. Judged by what the SDK got back and by the daemon's own record
// between the steps.
#include "fuse_harness.hpp"
#include "sidecar_harness.hpp"

using namespace dockgate::test;

namespace {

std::string node_path() {
  const char* v = std::getenv("DOCKGATE_NODE_PATH");
  if (!v || !*v)
    FAIL(
        "DOCKGATE_NODE_PATH is not set: scripts/test.sh installs the OpenSandbox SDK "
        "(scripts/node-clients.sh)");
  return v;
}

// The daemon's word on a container: `format` of docker inspect, or "" when it is gone.
std::string inspect(const std::string& container, const std::string& format) {
  auto r = run(direct() + " inspect --format '" + format + "' " + container + " 2>/dev/null");
  return r.status == 0 ? r.output : "";
}

}  // namespace

TEST_CASE(
    "opensandbox SDK: create, commands, files, renew, list, pause, resume and kill through the "
    "OpenSandbox front",
    "[integration][sidecar][opensandbox]") {
  const std::string modules = node_path();
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy);
  auto sdk = [&](const std::string& args) {
    return run("NODE_PATH=" + modules + " OPEN_SANDBOX_DOMAIN=127.0.0.1:" + sidecar.port() +
               " OPEN_SANDBOX_API_KEY=" + api_key + " timeout 180 node " + repo_root() +
               "/tests/integration/clients/opensandbox_sdk.js " + args);
  };

  auto created = sdk("create " + runtime_image());
  INFO(created.output << sidecar.log());
  REQUIRE(created.status == 0);
  const std::string id = field(created.output, "id");
  REQUIRE(id.size() == 32);
  const std::string container = "dockgate-sbx-" + id;
  // The seed's probe: written by one command, read by the next; a failing command's exit
  // status and its output before it; output streamed as it came; a file written and read
  // back by the SDK and by a command.
  CHECK(field(created.output, "put_exit") == "0");
  CHECK(field(created.output, "get") == "probe-42\n");
  CHECK(field(created.output, "failed") == R"({"exit":3,"stdout":"half\n"})");
  CHECK(field(created.output, "streamed") == "line-1\nline-2\nline-3\n");
  CHECK(field(created.output, "read") == "hello from the SDK");
  CHECK(field(created.output, "cat") == "hello from the SDK");
  CHECK(field(created.output, "session") == "hi /workspace/notes\n");
  // An app in the sandbox (python3's http.server on 8080, a background command) answered
  // the test through the endpoint the SDK got, with no port published (below: network
  // none); without the sandbox's token the proxy path is closed; interrupted, it stops.
  CHECK(field(created.output, "app_running") == "true");
  CHECK(field(created.output, "app") == "hello from the SDK");
  CHECK(field(created.output, "app_without_token") == "401");
  // A raw Upgrade through the same endpoint: the app's 101, then bytes both ways.
  CHECK(field(created.output, "websocket") == "HELLO");
  CHECK(field(created.output, "app_after_interrupt") == "false");
  CHECK(field(created.output, "state") == "Running");
  CHECK(field(created.output, "patched") == R"({"stage":"two","team":"dg-test"})");
  CHECK(field(created.output, "renewed") == "true");
  CHECK(field(created.output, "listed") == "[\"" + id + "\"]");

  // The daemon's record: the gate's hardening, running; the client's metadata as labels,
  // on the container or (a warm container served it) on its claim record.
  CHECK(inspect(
            container,
            "{{.Config.User}} {{.HostConfig.ReadonlyRootfs}} {{.HostConfig.NetworkMode}} "
            "{{json .HostConfig.CapDrop}} {{.State.Running}} {{json .HostConfig.PortBindings}}") ==
        "65534:65534 true none [\"ALL\"] true null\n");
  const std::string team = "{{index .Config.Labels \"sandbox.metadata.team\"}}";
  CHECK(inspect(container, team) + inspect(container + "-claim", team) ==
        (inspect(container + "-claim", "{{.Id}}").empty() ? "dg-test\n" : "\ndg-test\n"));
  // The probe is in the container's workspace as the daemon's own exec reads it.
  CHECK(run(direct() + " exec " + container + " cat /workspace/probe.txt").output == "probe-42\n");

  // Files stay under /workspace and never follow a symlink.
  auto escapes = sdk("escapes " + id);
  INFO(escapes.output);
  REQUIRE(escapes.status == 0);
  for (const char* escape : {"outside", "dotdot", "symlink"})
    CHECK(field(escapes.output, escape).find("\"status\":4") != std::string::npos);

  // Pause freezes the container (the daemon says so), resume thaws it and the files remain.
  auto paused = sdk("pause " + id);
  INFO(paused.output);
  CHECK(field(paused.output, "state") == "Paused");
  CHECK(inspect(container, "{{.State.Paused}}") == "true\n");
  auto resumed = sdk("resume " + id);
  INFO(resumed.output);
  CHECK(field(resumed.output, "state") == "Running");
  CHECK(field(resumed.output, "probe") == "probe-42\n");
  CHECK(inspect(container, "{{.State.Paused}}") == "false\n");

  // Kill: the container is gone from the daemon.
  auto killed = sdk("kill " + id);
  INFO(killed.output);
  CHECK(field(killed.output, "killed") == "true");
  CHECK(inspect(container, "{{.Id}}").empty());

  // An entrypoint of its own runs as the session user, detached, as the host sees it.
  auto main = sdk("entrypoint " + runtime_image());
  INFO(main.output);
  REQUIRE(main.status == 0);
  CHECK(field(main.output, "entrypoint") == R"(["sleep","12345"])");
  const std::string other = "dockgate-sbx-" + field(main.output, "id");
  const std::string top = run(direct() + " top " + other + " -o pid,uid,args").output;
  INFO(top);
  CHECK(run("grep -c ' 1000 *sleep 12345$' <<'EOF'\n" + top + "EOF").output == "1\n");
  CHECK(field(sdk("kill " + field(main.output, "id")).output, "killed") == "true");
  CHECK(inspect(other, "{{.Id}}").empty());
}

TEST_CASE(
    "opensandbox SDK: a host volume under the root is the bucket's FUSE workspace, any other is "
    "refused before a container exists",
    "[integration][sidecar][opensandbox][fuse]") {
  REQUIRE(!env_or("DOCKGATE_TEST_S3_ENDPOINT").empty());
  const std::string modules = node_path();
  fuse_setup fs;
  proxy_process proxy(fs.policy);
  auto env = fs.env();
  env.push_back("SANDBOX_HOST_VOLUME_ROOT=" + fs.root);
  sidecar_process sidecar(proxy, env);
  auto sdk = [&](const std::string& path) {
    return run("NODE_PATH=" + modules + " OPEN_SANDBOX_DOMAIN=127.0.0.1:" + sidecar.port() +
               " OPEN_SANDBOX_API_KEY=" + api_key + " timeout 180 node " + repo_root() +
               "/tests/integration/clients/opensandbox_sdk.js volume " + runtime_image() + " " +
               path);
  };
  const std::string key = unique_name("os-ws");
  auto made = sdk(fs.root + "/" + key);
  INFO(made.output << sidecar.log());
  REQUIRE(made.status == 0);
  CHECK(field(made.output, "put_exit") == "0");
  CHECK(field(made.output, "get") == "aimem-42\n");
  // The probe is in the bucket, under the volume's name: the store's record.
  CHECK(fs.object(key + "/probe.txt") == "aimem-42\n");
  // Killed: no container, no mount left.
  CHECK(
      run(direct() + " inspect dockgate-sbx-" + field(made.output, "id") + " 2>/dev/null").status !=
      0);
  CHECK(run("grep -c ' " + fs.root + "/' /proc/mounts").output == "0\n");

  // Escapes: a parent step, another root, a symlink under the root: 400, nothing made.
  ::symlink("/etc", (fs.root + "/link").c_str());
  const auto before = run(direct() + " ps -aq | wc -l").output;
  for (const std::string path :
       {fs.root + "/../etc", "/var/lib/" + key, fs.root + "/link", fs.root + "/a/b"}) {
    auto refused = sdk(path);
    INFO(path << ": " << refused.output);
    CHECK(field(refused.output, "refused").find("\"status\":400") != std::string::npos);
  }
  CHECK(run(direct() + " ps -aq | wc -l").output == before);
}

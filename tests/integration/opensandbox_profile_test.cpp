// opensandbox-server's docker runtime through compose/policies/opensandbox.json, replayed
// (tests/replays/opensandbox_server.py: its Engine API calls in its order), judged by the
// daemon's record: the server's flow completes (execd uploaded into a read-only root,
// started, answering on the published port) and its hardening holds (nothing published
// beyond loopback, the only host path the checked FUSE workspace, no privileges).
#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "harness.hpp"

using namespace dockgate::test;
using namespace std::chrono_literals;

namespace {

std::string direct() {
  return docker_cli() + " -H " + engine_host();
}

std::string field(const std::string& container, const std::string& format) {
  return run(direct() + " inspect --format '" + format + "' " + container).output;
}

// The execd helper image the server copies execd and bootstrap.sh out of: test busybox
// with a stand-in execd (busybox httpd answering /ping on 44772, as execd listens there)
// and a bootstrap that starts it and then runs the sandbox's command, as the real one does.
std::string execd_image(const std::string& dir) {
  const std::string image = "dockgate/test-execd:replay";
  if (run(direct() + " image inspect " + image + " >/dev/null 2>&1").status == 0) return image;
  std::ofstream(dir + "/execd") << "#!/bin/sh\nmkdir -p /tmp/execd && echo execd-ok > "
                                   "/tmp/execd/ping && exec httpd -f -p 44772 -h /tmp/execd\n";
  std::ofstream(dir + "/bootstrap.sh") << "#!/bin/sh\n/opt/opensandbox/execd &\nexec \"$@\"\n";
  const std::string name = unique_name("dg-execd-build");
  REQUIRE(run("chmod 755 " + dir + "/execd " + dir + "/bootstrap.sh && " + direct() +
              " create --name " + name + " " + test_image() + " && " + direct() + " cp " + dir +
              "/execd " + name + ":/execd && " + direct() + " cp " + dir + "/bootstrap.sh " + name +
              ":/bootstrap.sh && " + direct() + " commit " + name + " " + image +
              " >/dev/null && " + direct() + " rm " + name)
              .status == 0);
  return image;
}

// The egress sidecar's image: test busybox answering the server's health poll on 18080.
std::string egress_image() {
  const std::string image = "dockgate/test-egress:replay";
  if (run(direct() + " image inspect " + image + " >/dev/null 2>&1").status == 0) return image;
  const std::string name = unique_name("dg-egress-build");
  REQUIRE(run(direct() + " create --name " + name + " " + test_image() + " && " + direct() +
              " commit --change 'CMD [\"sh\",\"-c\",\"mkdir -p /tmp/e && echo ok > /tmp/e/healthz "
              "&& exec httpd -f -p 18080 -h /tmp/e\"]' " +
              name + " " + image + " >/dev/null && " + direct() + " rm " + name)
              .status == 0);
  return image;
}

std::string through(const proxy_process& gate, const std::string& args) {
  return "curl -s --unix-socket " + gate.socket_path() + " " + args;
}

// The AIStor flow's host side: a workspace root of the test's own with the bucket
// FUSE-mounted at <root>/<sandbox id> before the create (bindfs: a real FUSE file system,
// as dockgate-mount's is), and the shipped profile pointing at that root.
struct aistor_host {
  std::string root = "/tmp/" + unique_name("dg-os-root");
  std::string backing = root + "-backing";
  std::string workspace = root + "/" + unique_name("sbx");
  std::string policy;

  explicit aistor_host(const std::string& profile) {
    std::filesystem::create_directories(workspace);
    std::filesystem::create_directories(backing);
    ::chmod(root.c_str(), 0755);
    std::ifstream in(repo_root() + "/compose/policies/opensandbox.json");
    policy.assign((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    REQUIRE(policy.find("\"/mnt/aimem\"") != std::string::npos);
    for (std::size_t at; (at = policy.find("\"/mnt/aimem\"")) != std::string::npos;)
      policy.replace(at, 12, "\"" + root + "\"");
    const std::string chosen = "\"default_profile\": \"opensandbox\"";
    policy.replace(policy.find(chosen), chosen.size(), "\"default_profile\": \"" + profile + "\"");
    REQUIRE(run("bindfs -o nosuid,nodev,allow_other " + backing + " " + workspace).status == 0);
  }
  ~aistor_host() {
    // What a failed run left (a passing one deletes everything through the gate).
    run(direct() + " rm -fv $(" + direct() +
        " ps -aq --filter label=dockgate.owner=opensandbox) >/dev/null 2>&1");
    run("fusermount3 -u " + workspace + " || umount -l " + workspace);
    run("rm -rf " + root + " " + backing);
  }
  // The replay through `gate`; its JSON line's members as text.
  std::map<std::string, std::string> replay(const proxy_process& gate, const std::string& extra) {
    auto r = run("python3 " + repo_root() + "/tests/replays/opensandbox_server.py --keep " +
                 gate.socket_path() + " --image " + test_image() + " --execd-image " +
                 execd_image(backing) + " --host-path " + workspace +
                 " --cmd '[\"sh\",\"-c\",\"echo from-sandbox > /workspace/probe.txt; exec sleep "
                 "600\"]' " +
                 extra);
    INFO(r.output << gate.audit_log());
    REQUIRE(r.status == 0);
    std::map<std::string, std::string> out;
    for (const char* key : {"container", "helper", "execd_answer", "paused", "sidecar"}) {
      const auto k = r.output.find("\"" + std::string(key) + "\": ");
      REQUIRE(k != std::string::npos);
      auto v = r.output.substr(k + std::strlen(key) + 4);
      v = v.substr(0, v.find_first_of(",}"));
      if (v.size() > 1 && v.front() == '"') v = v.substr(1, v.size() - 2);
      out[key] = v;
    }
    return out;
  }
  // What the sandbox wrote is in the bucket's mount on the host.
  std::string probe() const {
    for (int i = 0; i < 100 && !std::filesystem::exists(backing + "/probe.txt"); ++i)
      std::this_thread::sleep_for(50ms);
    return run("cat " + backing + "/probe.txt").output;
  }
};

// Deletes as the server does (v=False): the container and its upload volume go.
void server_delete(const proxy_process& gate, const std::string& cid) {
  const std::string volume =
      field(cid, "{{range .Mounts}}{{if eq .Type \"volume\"}}{{.Name}}{{end}}{{end}}");
  REQUIRE(volume.size() > 1);
  auto removed = run(through(gate, "-o /dev/null -w '%{http_code}' -X DELETE ") +
                     "'http://d/v1.41/containers/" + cid + "?v=False&link=False&force=True'");
  CHECK(removed.output == "204");
  CHECK_FALSE(container_exists(cid));
  CHECK(run(direct() + " volume inspect " + volume.substr(0, volume.size() - 1)).status != 0);
}

}  // namespace

TEST_CASE(
    "opensandbox.json: opensandbox-server's create, upload, start, renew, pause and delete "
    "complete and the sandbox is held to loopback ports, the FUSE workspace and a read-only root",
    "[integration][opensandbox_profile]") {
  aistor_host host("opensandbox");
  proxy_process gate(host.policy);
  auto out = host.replay(gate, "");
  const std::string cid = out["container"];
  // The flow: execd (uploaded by archive into the read-only root's /opt/opensandbox) answered
  // on its published port, pause reached the daemon, the helper container is gone.
  CHECK(out["execd_answer"] == "execd-ok");
  CHECK(out["paused"] == "true");
  CHECK_FALSE(container_exists(out["helper"]));
  // The daemon's record of the sandbox.
  CHECK(field(cid,
              "{{.HostConfig.ReadonlyRootfs}} {{.HostConfig.Privileged}} "
              "{{json .HostConfig.CapDrop}} {{json .HostConfig.SecurityOpt}} "
              "{{.HostConfig.PidMode}}|{{.HostConfig.NetworkMode}}") ==
        "true false [\"ALL\"] [\"no-new-privileges\"] |bridge\n");
  const std::string ports = field(cid, "{{json .NetworkSettings.Ports}}");
  INFO(ports);
  CHECK(ports.find("\"HostIp\":\"127.0.0.1\"") != std::string::npos);
  CHECK(ports.find("0.0.0.0") == std::string::npos);
  // Mounts: the checked FUSE workspace at /workspace, the upload volume at /opt/opensandbox,
  // nothing else.
  const std::string mounts =
      field(cid, "{{range .Mounts}}{{.Type}} {{.Source}} {{.Destination}} {{.RW}};{{end}}");
  INFO(mounts);
  CHECK(mounts.find("bind " + host.workspace + " /workspace true;") != std::string::npos);
  CHECK(mounts.find(" /opt/opensandbox true;") != std::string::npos);
  CHECK(std::count(mounts.begin(), mounts.end(), ';') == 2);
  CHECK(host.probe() == "from-sandbox\n");

  // /info: the platform, nothing of the host.
  const auto info = run(through(gate, "http://d/v1.41/info")).output;
  CHECK(info.find("\"OSType\":\"linux\"") != std::string::npos);
  CHECK(info.find("\"Name\"") == std::string::npos);
  CHECK(info.find("\"Containers\"") == std::string::npos);

  // What the profile refuses, with the rule's name.
  const std::string create = through(gate, "-H 'Content-Type: application/json' -X POST ") +
                             "http://d/v1.41/containers/create -d ";
  const std::string img = R"('{"Image":")" + test_image() + R"(","HostConfig":)";
  const std::pair<std::string, std::string> refused[] = {
      {img + R"({"Binds":["/etc:/host-etc"]}}')", "HostConfig.Binds"},
      {img + R"({"Binds":[")" + host.root + R"(/../etc:/workspace"]}}')", "HostConfig.Binds"},
      {img + R"({"Privileged":true}}')", "HostConfig.Privileged"},
      {img + R"({"PortBindings":{"44772/tcp":[{"HostIp":"10.9.9.9"}]}}}')", "rule ports"},
      {img + R"({"NetworkMode":"host"}}')", "HostConfig.NetworkMode"},
      {img + R"({"CapAdd":["NET_ADMIN"]}}')", "HostConfig.CapAdd"},
      {img + R"({"NetworkMode":"container:)" + cid + R"("}}')", "HostConfig.NetworkMode"},
  };
  for (const auto& [body, rule] : refused) {
    auto r = run(create + body);
    INFO(body << " -> " << r.output);
    CHECK(r.output.find(rule) != std::string::npos);
    CHECK(r.output.find("\"Id\"") == std::string::npos);
  }
  // An archive write outside the upload target, into the live sandbox.
  auto outside =
      run("printf x > " + host.root + "-f && tar -C /tmp -cf " + host.root + ".tar $(basename " +
          host.root + "-f) && " + through(gate, "-X PUT -T " + host.root + ".tar ") +
          "'http://d/v1.41/containers/" + cid + "/archive?path=/etc'");
  INFO(outside.output);
  CHECK(outside.output.find("rule uploads") != std::string::npos);
  run("rm -f " + host.root + "-f " + host.root + ".tar");
  server_delete(gate, cid);
}

TEST_CASE(
    "opensandbox.json: with a networkPolicy the sandbox shares its egress sidecar's network, "
    "only the sidecar's ports are published, on loopback, and only an owned container is joined",
    "[integration][opensandbox_profile]") {
  aistor_host host("opensandbox-egress");
  proxy_process gate(host.policy);
  auto out = host.replay(gate, "--egress-image " + egress_image());
  const std::string cid = out["container"];
  const std::string sidecar = out["sidecar"];
  // execd in the sandbox answered through the sidecar's published 44772.
  CHECK(out["execd_answer"] == "execd-ok");
  CHECK(field(cid,
              "{{.HostConfig.NetworkMode}} {{json .HostConfig.CapAdd}} "
              "{{json .HostConfig.PortBindings}}") == "container:" + sidecar + " null null\n");
  CHECK(field(sidecar,
              "{{json .HostConfig.CapAdd}} {{json .HostConfig.CapDrop}} "
              "{{.HostConfig.Privileged}} {{.HostConfig.NetworkMode}}") ==
        "[\"NET_ADMIN\"] [\"ALL\"] false bridge\n");
  const std::string ports = field(sidecar, "{{json .NetworkSettings.Ports}}");
  INFO(ports);
  CHECK(std::count(ports.begin(), ports.end(), '{') == 4);  // three ports, each on 127.0.0.1
  CHECK(ports.find("0.0.0.0") == std::string::npos);
  CHECK(host.probe() == "from-sandbox\n");
  // A container the profile does not own: its network is not joined.
  const std::string foreign = unique_name("dg-foreign");
  REQUIRE(run(direct() + " create --name " + foreign + " " + test_image()).status == 0);
  auto joined = run(through(gate, "-H 'Content-Type: application/json' -X POST ") +
                    "http://d/v1.41/containers/create -d '{\"Image\":\"" + test_image() +
                    "\",\"HostConfig\":{\"NetworkMode\":\"container:" + foreign + "\"}}'");
  INFO(joined.output);
  CHECK(joined.output.find("no such container") != std::string::npos);
  run(direct() + " rm -f " + foreign);
  server_delete(gate, cid);
  run(through(gate, "-X DELETE 'http://d/v1.41/containers/" + sidecar + "?force=True'"));
  CHECK_FALSE(container_exists(sidecar));
}

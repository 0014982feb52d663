// compose.json: docker-compose 1.29 runs a three-service project (a network, a named
// volume, aliases) through the gate as it does straight against the engine, and networks
// and volumes are confined to their owner like containers. Judged by the daemon (asked
// directly), not by the gate's answers.
#include <catch2/catch.hpp>
#include <fstream>

#include "harness.hpp"

using namespace dockgate::test;

namespace {
const std::string compose_policy = "compose/policies/compose.json";
std::string direct() {
  return docker_cli() + " -H " + engine_host();
}
std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}
// A request to the gate, its status and body.
raw_response gate(const proxy_process& proxy, const std::string& method, const std::string& target,
                  const std::string& body = {}) {
  std::string request = method + " " + target + " HTTP/1.1\r\nHost: d\r\nConnection: close\r\n";
  if (!body.empty() || method == "POST")
    request +=
        "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  return raw_exchange(proxy.socket_path(), request + "\r\n" + body);
}

const char* project_file = R"(version: "3.8"
services:
  web:
    image: IMAGE
    command: ["sh", "-c", "echo web up; while true; do sleep 1; done"]
    networks: [backend]
    volumes: ["data:/data"]
  worker:
    image: IMAGE
    command: ["sh", "-c", "echo worker up; while true; do sleep 1; done"]
    networks:
      backend:
        aliases: [jobs]
  db:
    image: IMAGE
    command: ["sh", "-c", "echo db up > /data/db.txt; while true; do sleep 1; done"]
    networks: [backend]
    volumes: ["data:/data"]
networks:
  backend: {}
volumes:
  data: {}
)";

struct project {
  std::string dir;
  std::string name;
  std::string host;
  project(std::string project_name, std::string docker_host)
      : name(std::move(project_name)), host(std::move(docker_host)) {
    dir = trim(run("mktemp -d").output);
    std::string text = project_file;
    for (auto at = text.find("IMAGE"); at != std::string::npos; at = text.find("IMAGE"))
      text.replace(at, 5, test_image());
    std::ofstream(dir + "/docker-compose.yml") << text;
  }
  ~project() {
    run("cd " + dir + " && DOCKER_HOST=" + engine_host() + " timeout 120 docker-compose -p " +
        name + " down -v -t 0");
    run("rm -rf " + dir);
  }
  command_result compose(const std::string& args) const {
    return run("cd " + dir + " && DOCKER_HOST=" + host +
               " timeout 120 docker-compose --ansi never -p " + name + " " + args);
  }
};

// What the daemon holds of a project, by compose's own labels: "kind name" lines, sorted,
// with the project name taken out so that two projects compare.
std::string daemon_state(const std::string& name) {
  const std::string filter = "--filter label=com.docker.compose.project=" + name;
  auto r =
      run("{ " + direct() + " ps -a " + filter + " --format 'container {{.Names}} {{.State}}'; " +
          direct() + " network ls " + filter + " --format 'network {{.Name}} {{.Driver}}'; " +
          direct() + " volume ls " + filter +
          " --format 'volume {{.Name}} {{.Driver}}'; } | sed 's/" + name + "/P/g' | sort");
  return r.output;
}
}  // namespace

TEST_CASE(
    "docker-compose 1.29 runs a three-service project through compose.json as it does directly",
    "[integration][compose][clients]") {
  proxy_process proxy(compose_policy);
  project straight(unique_name("dgcs"), engine_host());
  project gated(unique_name("dgcg"), proxy.host());
  for (const project* p : {&straight, &gated}) {
    CAPTURE(p->name);
    auto up = p->compose("up -d");
    INFO(up.output);
    REQUIRE(up.status == 0);
    // The services find each other by name and alias on the project network, and share
    // the named volume.
    auto exec = p->compose(
        "exec -T worker sh -c 'ping -c1 -W2 jobs >/dev/null && ping -c1 -W2 db >/dev/null && echo "
        "resolved'");
    INFO(exec.output);
    CHECK(trim(exec.output) == "resolved");
    bool written = false;
    for (int i = 0; i < 50 && !written; ++i)
      written =
          p->compose("exec -T web cat /data/db.txt").output.find("db up") != std::string::npos;
    CHECK(written);
    auto ps = p->compose("ps --services");
    CHECK(ps.output.find("web") != std::string::npos);
    CHECK(ps.output.find("worker") != std::string::npos);
    CHECK(ps.output.find("db") != std::string::npos);
    auto logs = p->compose("logs --no-color web");
    CHECK(logs.output.find("web up") != std::string::npos);
  }
  // The daemon holds the same project either way.
  const std::string straight_state = daemon_state(straight.name);
  CHECK(straight_state == daemon_state(gated.name));
  CHECK(straight_state.find("network P_backend bridge") != std::string::npos);
  CHECK(straight_state.find("volume P_data local") != std::string::npos);
  // What the gate created is the profile's, and its containers got the profile's settings.
  CHECK(trim(run(direct() + " network inspect -f '{{index .Labels \"dockgate.owner\"}}' " +
                 gated.name + "_backend")
                 .output) == "compose");
  CHECK(trim(run(direct() + " volume inspect -f '{{index .Labels \"dockgate.owner\"}}' " +
                 gated.name + "_data")
                 .output) == "compose");
  CHECK(trim(run(direct() + " inspect -f '{{.HostConfig.SecurityOpt}}' " + gated.name + "_web_1")
                 .output) == "[no-new-privileges]");
  // down -v leaves nothing behind.
  for (const project* p : {&straight, &gated}) {
    auto down = p->compose("down -v -t 1");
    INFO(down.output);
    CHECK(down.status == 0);
    CHECK(daemon_state(p->name).empty());
  }
}

TEST_CASE("compose.json: networks and volumes are confined to their owner",
          "[integration][compose][ownership]") {
  proxy_process proxy(compose_policy);
  const auto foreign_net = unique_name("dg-fnet");
  const auto foreign_vol = unique_name("dg-fvol");
  const auto foreign_ctr = unique_name("dg-fctr");
  const auto mine_net = unique_name("dg-mnet");
  const auto mine_ctr = unique_name("dg-mctr");
  struct cleanup {
    std::string cmd;
    ~cleanup() { run(cmd); }
  } c{"{ " + direct() + " rm -f " + foreign_ctr + " " + mine_ctr + "; " + direct() +
      " network rm " + foreign_net + " " + mine_net + "; " + direct() + " volume rm " +
      foreign_vol + "; } >/dev/null 2>&1"};
  // Another tenant's network, volume and container, made straight on the daemon.
  REQUIRE(run(direct() + " network create " + foreign_net).status == 0);
  REQUIRE(run(direct() + " volume create " + foreign_vol).status == 0);
  REQUIRE(run(direct() + " run -d --name " + foreign_ctr + " --network " + foreign_net + " -v " +
              foreign_vol + ":/secret " + test_image() + " sleep 60")
              .status == 0);
  // The profile's own network, with its own container and the foreign one on it.
  REQUIRE(run(proxy.docker() + " network create " + mine_net).status == 0);
  REQUIRE(run(proxy.docker() + " run -d --name " + mine_ctr + " --network " + mine_net + " " +
              test_image() + " sleep 60")
              .status == 0);
  REQUIRE(run(direct() + " network connect " + mine_net + " " + foreign_ctr).status == 0);

  // Lists show only what the profile owns.
  auto networks = run(proxy.docker() + " network ls --format '{{.Name}}'");
  CHECK(networks.output.find(mine_net) != std::string::npos);
  CHECK(networks.output.find(foreign_net) == std::string::npos);
  auto volumes = run(proxy.docker() + " volume ls --format '{{.Name}}'");
  CHECK(volumes.output.find(foreign_vol) == std::string::npos);
  auto df = run(proxy.docker() + " system df -v");
  CHECK(df.output.find(foreign_ctr) == std::string::npos);
  CHECK(df.output.find(foreign_vol) == std::string::npos);
  // The own network's inspect lists the own container only: not the foreign one's name or address.
  auto inspect = run(proxy.docker() + " network inspect " + mine_net);
  CHECK(inspect.output.find(mine_ctr) != std::string::npos);
  CHECK(inspect.output.find(foreign_ctr) == std::string::npos);
  const std::string foreign_address =
      trim(run(direct() + " inspect -f '{{(index .NetworkSettings.Networks \"" + mine_net +
               "\").IPAddress}}' " + foreign_ctr)
               .output);
  REQUIRE(!foreign_address.empty());
  CHECK(inspect.output.find(foreign_address) == std::string::npos);

  // Every way of naming the foreign network or volume is refused, and the daemon shows
  // them untouched.
  const std::string foreign_net_id =
      trim(run(direct() + " network inspect -f '{{.Id}}' " + foreign_net).output);
  for (const std::string& ref : {foreign_net, foreign_net_id, foreign_net_id.substr(0, 12)}) {
    CAPTURE(ref);
    for (const std::string& cmd : {"network inspect " + ref, "network rm " + ref,
                                   "network disconnect -f " + ref + " " + foreign_ctr,
                                   "network connect " + ref + " " + mine_ctr,
                                   "run --rm --network " + ref + " " + test_image() + " true"}) {
      CAPTURE(cmd);
      auto r = run("timeout 20 env " + proxy.docker() + " " + cmd);
      INFO(r.output);
      CHECK(r.status != 0);
    }
  }
  // A foreign container on an owned network cannot be disconnected or connected elsewhere.
  CHECK(run(proxy.docker() + " network disconnect -f " + mine_net + " " + foreign_ctr).status != 0);
  for (const std::string& cmd :
       {"volume inspect " + foreign_vol, "volume rm -f " + foreign_vol,
        "run --rm -v " + foreign_vol + ":/x " + test_image() + " cat /x/nothing",
        "run --rm --mount type=volume,source=" + foreign_vol + ",target=/x " + test_image() +
            " true",
        "volume create " + foreign_vol}) {
    CAPTURE(cmd);
    auto r = run("timeout 20 env " + proxy.docker() + " " + cmd);
    INFO(r.output);
    CHECK(r.status != 0);
  }
  CHECK(trim(run(direct() + " network inspect -f '{{len .Containers}}' " + foreign_net).output) ==
        "1");
  CHECK(trim(run(direct() + " inspect -f '{{len .NetworkSettings.Networks}}' " + foreign_ctr)
                 .output) == "2");
  CHECK(
      trim(run(direct() + " inspect -f '{{len .NetworkSettings.Networks}}' " + mine_ctr).output) ==
      "1");
  CHECK(run(direct() + " volume inspect " + foreign_vol).status == 0);
  CHECK(run(direct() + " volume inspect -f '{{index .Labels \"dockgate.owner\"}}' " + foreign_vol)
            .output.find("compose") == std::string::npos);

  // Prunes remove only what the profile owns.
  const auto idle_foreign = unique_name("dg-fidle");
  const auto idle_mine = unique_name("dg-midle");
  REQUIRE(run(direct() + " network create " + idle_foreign + " && " + direct() + " volume create " +
              idle_foreign)
              .status == 0);
  REQUIRE(run(proxy.docker() + " network create " + idle_mine + " && " + proxy.docker() +
              " volume create " + idle_mine)
              .status == 0);
  CHECK(run(proxy.docker() + " network prune -f").status == 0);
  CHECK(run(proxy.docker() + " volume prune -f").status == 0);
  CHECK(run(direct() + " network inspect " + idle_foreign).status == 0);
  CHECK(run(direct() + " volume inspect " + idle_foreign).status == 0);
  CHECK(run(direct() + " network inspect " + idle_mine).status != 0);
  CHECK(run(direct() + " volume inspect " + idle_mine).status != 0);
  run(direct() + " network rm " + idle_foreign + "; " + direct() + " volume rm " + idle_foreign +
      "; " + direct() + " volume rm " + idle_mine);

  // A container's volume that does not exist yet is created as the profile's, not the daemon's.
  const auto fresh = unique_name("dg-fresh");
  CHECK(run(proxy.docker() + " run --rm -v " + fresh + ":/data " + test_image() + " true").status ==
        0);
  CHECK(trim(run(direct() + " volume inspect -f '{{index .Labels \"dockgate.owner\"}}' " + fresh)
                 .output) == "compose");
  CHECK(run(proxy.docker() + " volume rm " + fresh).status == 0);
}

TEST_CASE("compose.json: networks and volumes without host options", "[integration][compose]") {
  proxy_process proxy(compose_policy);
  struct {
    std::string body;
    std::string refused;  // what the message names
  } networks[] = {
      {R"({"Name":"dg-n1","Driver":"macvlan"})", "Driver"},
      {R"({"Name":"dg-n1","Driver":"host"})", "Driver"},
      {R"({"Name":"dg-n1","Options":{"com.docker.network.bridge.name":"eth0"}})", "Options"},
      {R"({"Name":"dg-n1","IPAM":{"Config":[{"Subnet":"10.0.0.0/8"}]}})", "IPAM.Config"},
      {R"({"Name":"dg-n1","ConfigFrom":{"Network":"x"}})", "ConfigFrom"},
      {R"({"Name":"dg-n1","Labels":{"dockgate.owner":"someone"}})", "reserved"},
      {R"({"Name":"dg n1"})", "Name"},
  };
  for (const auto& n : networks) {
    CAPTURE(n.body);
    auto r = gate(proxy, "POST", "/v1.41/networks/create", n.body);
    INFO(r.bytes);
    CHECK(r.status() == 403);
    CHECK(r.bytes.find(n.refused) != std::string::npos);
  }
  CHECK(run(direct() + " network inspect dg-n1").status != 0);
  for (const std::string& body :
       {std::string(R"({"Name":"dg-v1","DriverOpts":{"type":"none","o":"bind","device":"/etc"}})"),
        std::string(R"({"Name":"dg-v1","Driver":"nfs"})"),
        std::string(R"({"Name":"dg-v1","ClusterVolumeSpec":{}})")}) {
    CAPTURE(body);
    auto r = gate(proxy, "POST", "/v1.41/volumes/create", body);
    INFO(r.bytes);
    CHECK(r.status() == 403);
  }
  CHECK(run(direct() + " volume inspect dg-v1").status != 0);
  // Binds of host paths stay refused; endpoint settings beyond aliases too.
  for (const std::string& cmd :
       {"run --rm -v /etc:/host " + test_image() + " true",
        "run --rm --mount type=bind,source=/etc,target=/host " + test_image() + " true",
        "run --rm --network host " + test_image() + " true"}) {
    CAPTURE(cmd);
    auto r = run(proxy.docker() + " " + cmd);
    INFO(r.output);
    CHECK(r.status != 0);
    CHECK(r.output.find("dockgate") != std::string::npos);
  }
  // A malformed container reference in a connect body never reaches a request line.
  auto r =
      gate(proxy, "POST", "/v1.41/networks/bridge/connect", "{\"Container\":\"x/../../info?\"}");
  CHECK(r.status() == 404);
}

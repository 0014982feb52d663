// Published ports through docker-cli.json (issue 42): the docker CLI's -p goes up bound to
// the host's loopback, the CLI prints the gate's warning, an address the profile does not
// name and -P are refused. Judged by the daemon's record (inspect) and by the sockets the
// daemon's port proxy listens on.
#include <catch2/catch.hpp>
#include <sstream>
#include <vector>

#include "harness.hpp"
#include "sidecar_harness.hpp"

using namespace dockgate::test;

TEST_CASE("published ports: docker run -p is bound to loopback, with the gate's warning",
          "[integration][ports]") {
  proxy_process proxy("compose/policies/docker-cli.json");
  const auto name = unique_name("dg-ports");
  // -p 0:80 (any host address, a port the daemon picks) and an explicit 0.0.0.0.
  auto r = run(proxy.docker() + " run -d --name " + name + " -p 0:80 -p 0.0.0.0::81 " +
               test_image() + " sleep 30");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find("dockgate: published ports bound to loopback, not every interface: "
                      "127.0.0.1:0->80/tcp, 127.0.0.1:0->81/tcp (profile docker-cli)") !=
        std::string::npos);
  // The daemon's record: both bindings on 127.0.0.1, as asked and as bound.
  auto asked = run(direct() + " inspect --format '{{range $p, $b := .HostConfig.PortBindings}}" +
                   "{{$p}}{{range $b}} {{.HostIp}};{{end}}{{end}}' " + name);
  CHECK(asked.output == "80/tcp 127.0.0.1;81/tcp 127.0.0.1;\n");
  auto bound = run(direct() + " inspect --format '{{range $p, $b := .NetworkSettings.Ports}}" +
                   "{{range $b}}{{.HostIp}}:{{.HostPort}} {{end}}{{end}}' " + name);
  INFO(bound.output);
  std::istringstream words(bound.output);
  std::vector<std::string> ports;
  for (std::string w; words >> w;) {
    CHECK(w.starts_with("127.0.0.1:"));
    if (w.starts_with("127.0.0.1:")) ports.push_back(w.substr(10));
  }
  REQUIRE(ports.size() == 2);
  // What listens on those ports listens on loopback only.
  for (const auto& port : ports) {
    auto listening = run("ss -Hltn 'sport = :" + port + "' | awk '{print $4}'");
    CHECK(listening.output == "127.0.0.1:" + port + "\n");
  }
  CHECK(proxy.audit_contains("bound to loopback"));
  run(direct() + " rm -f " + name);

  // An address the profile does not name, and -P: refused, nothing created.
  const std::pair<std::string, std::string> refused[] = {
      {"-p 10.1.2.3:8080:80",
       "HostConfig.PortBindings address \"10.1.2.3\" is not allowed (the profile publishes on "
       "127.0.0.1, ::1) (profile docker-cli, rule ports)"},
      {"-P --expose 80", "HostConfig.PublishAllPorts is not allowed"},
      {"-p 127.0.0.1:80:80", "host port \"80\" is not allowed"},
  };
  for (const auto& [flags, why] : refused) {
    const auto other = unique_name("dg-ports-refused");
    auto no = run(proxy.docker() + " create --name " + other + " " + flags + " " + test_image() +
                  " true");
    INFO(flags << " -> " << no.output);
    CHECK(no.status != 0);
    CHECK(no.output.find(why) != std::string::npos);
    CHECK_FALSE(container_exists(other));
  }
}

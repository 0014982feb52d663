// A name is resolved by the daemon on every request; only positive ownership answers are
// cached, by full ID (proxy/src/upstream_lookups.cpp). So a container renamed after the gate
// checked it changes nothing: own container A, another tenant's B; the gate has checked
// (and cached) A; then A is renamed away and B takes A's old name. A request by that name
// must not act on B, and a request by A's full ID still acts on A. Judged by the daemon's
// record of both containers, asked directly.
#include <catch2/catch.hpp>

#include "harness.hpp"

using namespace dockgate::test;

namespace {

std::string direct() {
  return docker_cli() + " -H " + engine_host();
}

std::string inspect(const std::string& ref, const std::string& format) {
  auto out = run(direct() + " inspect --format '" + format + "' " + ref).output;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace

TEST_CASE("ownership: a container renamed after the check is not acted on under its old name",
          "[integration][ownership]") {
  proxy_process proxy("compose/policies/docker-cli.json");
  const auto name = unique_name("dg-rn");
  const auto moved = name + "-moved";
  const auto other = unique_name("dg-rn-other");
  struct cleanup {
    std::vector<std::string> names;
    ~cleanup() {
      for (const auto& n : names) run(direct() + " rm -f " + n + " >/dev/null 2>&1");
    }
  } c{{name, moved, other}};
  REQUIRE(
      run(proxy.docker() + " run -d --name " + name + " " + test_image() + " sleep 60").status ==
      0);
  REQUIRE(run(direct() + " run -d --name " + other + " " + test_image() + " sleep 60").status == 0);
  const std::string mine_id = inspect(name, "{{.Id}}");
  const std::string other_id = inspect(other, "{{.Id}}");
  REQUIRE(mine_id.size() == 64);
  REQUIRE(other_id.size() == 64);

  // The gate checks A by name, and by its full ID (its cache holds A's ID now).
  REQUIRE(run(proxy.docker() + " inspect " + name).status == 0);
  REQUIRE(run(proxy.docker() + " inspect " + mine_id).status == 0);

  // A is renamed away; B takes A's old name (on the engine, by another tenant).
  REQUIRE(run(direct() + " rename " + name + " " + moved).status == 0);
  REQUIRE(run(direct() + " rename " + other + " " + name).status == 0);
  REQUIRE(inspect(name, "{{.Id}}") == other_id);

  // By the old name: refused, and B is untouched.
  for (const std::string& cmd :
       {"kill " + name, "stop -t 0 " + name, "rm -f " + name, "pause " + name}) {
    CAPTURE(cmd);
    auto r = run("timeout 20 env " + proxy.docker() + " " + cmd);
    INFO(r.output);
    CHECK(r.output.find("such container") != std::string::npos);
  }
  CHECK(inspect(other_id, "{{.State.Running}} {{.State.Paused}} {{.Name}}") ==
        "true false /" + name);

  // By A's full ID: A, under its new name, is the one acted on.
  CHECK(run("timeout 20 env " + proxy.docker() + " kill " + mine_id).status == 0);
  CHECK(inspect(mine_id, "{{.State.Running}} {{.Name}}") == "false /" + moved);
  CHECK(inspect(other_id, "{{.State.Running}}") == "true");
}

TEST_CASE("ownership: a shared network namespace is only ever an owned container's",
          "[integration][ownership][redteam]") {
  // networks.join_owned_containers: "container:<ref>" where the daemon resolves <ref> to
  // another tenant's container (by name, by ID prefix, by full ID, or by a name that is a
  // prefix of an owned container's ID: the daemon takes the name first) makes nothing;
  // an owned one is shared by its full ID. Judged by the daemon's record.
  proxy_process proxy(
      R"({"profiles":{"p":{"allow":["ContainerCreate","ContainerStart","ContainerInspect",)"
      R"("ContainerDelete"],"images":{"allow":["*"]},"networks":{"join_owned_containers":true}}}})");
  const auto own = unique_name("dg-share-own");
  const auto foreign = unique_name("dg-share-foreign");
  std::vector<std::string> names{own, foreign};
  struct cleanup {
    std::vector<std::string>& names;
    ~cleanup() {
      for (const auto& n : names) run(direct() + " rm -f " + n + " >/dev/null 2>&1");
    }
  } c{names};
  auto create = [&](const std::string& name, const std::string& mode) {
    const std::string body = R"({"Image":")" + test_image() +
                             R"(","Cmd":["true"],"HostConfig":{"NetworkMode":")" + mode + R"("}})";
    return raw_exchange(proxy.socket_path(),
                        "POST /v1.41/containers/create?name=" + name +
                            " HTTP/1.1\r\nHost: d\r\nContent-Type: application/json\r\n"
                            "Content-Length: " +
                            std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body);
  };
  REQUIRE(create(own, "bridge").status() == 201);
  REQUIRE(run(direct() + " create --name " + foreign + " " + test_image() + " true").status == 0);
  const std::string own_id = inspect(own, "{{.Id}}");
  const std::string foreign_id = inspect(foreign, "{{.Id}}");
  const std::string decoy = own_id.substr(0, 12);  // a foreign container named like own's ID
  names.push_back(decoy);
  REQUIRE(run(direct() + " create --name " + decoy + " " + test_image() + " true").status == 0);
  for (const std::string& ref : {foreign, foreign_id.substr(0, 12), foreign_id, decoy}) {
    const auto name = unique_name("dg-share");
    names.push_back(name);
    auto r = create(name, "container:" + ref);
    INFO(ref << " -> " << r.bytes);
    CHECK(r.status() == 404);
    CHECK(r.bytes.find("no such container") != std::string::npos);
    CHECK_FALSE(container_exists(name));
  }
  const auto shared = unique_name("dg-share");
  names.push_back(shared);
  auto ok = create(shared, "container:" + own);
  INFO(ok.bytes);
  REQUIRE(ok.status() == 201);
  CHECK(inspect(shared, "{{.HostConfig.NetworkMode}}") == "container:" + own_id);
}

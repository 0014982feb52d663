// Transparent by construction (issue 9, first part): what dockerd ignores the gate leaves
// out instead of refusing — query parameters the operation does not take, body keys that
// name no field, a body on an operation that takes none — and parameters refused for
// what they do are refused only for the values that do it. The requests are the ones
// real clients send (python3-docker, dockerode, the docker CLI); the daemon's state is
// the judge.
#include <catch2/catch.hpp>

#include "harness.hpp"

using namespace dockgate::test;
using namespace std::chrono_literals;

namespace {

const std::string cli_policy = "compose/policies/docker-cli.json";

std::string direct() {
  return docker_cli() + " -H " + engine_host();
}

std::string request(const std::string& method, const std::string& target,
                    const std::string& body = "", bool json = true) {
  std::string r = method + " " + target + " HTTP/1.1\r\nHost: docker\r\n";
  if (!body.empty() || method == "POST")
    r += std::string(json ? "Content-Type: application/json\r\n" : "") +
         "Content-Length: " + std::to_string(body.size()) + "\r\n";
  return r + "Connection: close\r\n\r\n" + body;
}

// A client workload run straight at the daemon (names "<prefix>-a...") and through the
// gate ("<prefix>-b..."): the two JSON summaries must be the same but for the names.
void same_results(const command_result& straight, const command_result& gated,
                  const std::string& prefix) {
  INFO("straight: " << straight.output << "\ngated:    " << gated.output);
  REQUIRE(straight.status == 0);
  REQUIRE(gated.status == 0);
  std::string expected = straight.output;
  for (std::size_t at; (at = expected.find(prefix + "-a")) != std::string::npos;)
    expected.replace(at, prefix.size() + 2, prefix + "-b");
  CHECK(gated.output == expected);
  CHECK(gated.output.find("error:") == std::string::npos);
}

std::string state(const std::string& name) {
  return run(direct() + " inspect --format '{{.State.Status}}' " + name + " 2>/dev/null").output;
}

}  // namespace

TEST_CASE("transparency: what the daemon ignores is left out, not refused",
          "[integration][transparency]") {
  proxy_process proxy(cli_policy);
  const std::string name = unique_name("dg-transparent");
  REQUIRE(
      run(proxy.docker() + " run -d --name " + name + " " + test_image() + " sleep 300").status ==
      0);

  // python3-docker's containers.list / images.list: parameters this API version does not take.
  auto list =
      raw_exchange(proxy.socket_path(),
                   request("GET", "/v1.41/containers/json?all=1&limit=-1&size=0&trunc_cmd=0"));
  INFO(list.bytes);
  CHECK(list.status() == 200);
  CHECK(list.bytes.find(name) != std::string::npos);
  CHECK(proxy.audit_contains("\"dropped\":\"query:trunc_cmd\""));
  CHECK(raw_exchange(proxy.socket_path(), request("GET", "/v1.41/images/json?only_ids=0&all=0"))
            .status() == 200);

  // The docker CLI's logs --since/--until (fractional Unix time) and --details.
  auto logs = raw_exchange(
      proxy.socket_path(),
      request(
          "GET",
          "/v1.41/containers/" + name +
              "/logs?stdout=1&stderr=1&since=1000000000.123456789&until=4000000000.5&details=1"));
  CHECK(logs.status() == 200);

  // python3-docker's exec_run body carries a key this API version does not read.
  auto exec =
      raw_exchange(proxy.socket_path(),
                   request("POST", "/v1.41/containers/" + name + "/exec",
                           R"({"AttachStdout":true,"Cmd":["true"],"SomethingNewer":{"x":1}})"));
  INFO(exec.bytes);
  CHECK(exec.status() == 201);
  CHECK(proxy.audit_contains("\"dropped\":\"body:SomethingNewer\""));

  // dockerode stops and kills with an empty JSON body: read, never forwarded.
  auto stop = raw_exchange(proxy.socket_path(),
                           request("POST", "/v1.41/containers/" + name + "/stop?t=0", "{}"));
  INFO(stop.bytes);
  CHECK(stop.status() == 204);
  CHECK(state(name) == "exited\n");
  CHECK(proxy.audit_contains("\"dropped\":\"body\""));
  auto start = raw_exchange(proxy.socket_path(),
                            request("POST", "/v1.41/containers/" + name + "/start", "{}"));
  CHECK(start.status() == 204);
  CHECK(state(name) == "running\n");

  // link is refused only for the value that removes a link; link=false (python3-docker's
  // remove_container sends it) removes the container.
  auto linked = raw_exchange(proxy.socket_path(),
                             request("DELETE", "/v1.41/containers/" + name + "?link=1&force=1"));
  CHECK(linked.status() == 403);
  CHECK(state(name) == "running\n");
  auto removed = raw_exchange(
      proxy.socket_path(),
      request("DELETE", "/v1.41/containers/" + name + "?v=False&link=False&force=True"));
  INFO(removed.bytes);
  CHECK(removed.status() == 204);
  CHECK_FALSE(container_exists(name));
}

// docker logs --details prints each line's attributes (the labels and environment the
// container's log options name) before it, and a space even without any: a gate that
// dropped `details` (the specification omits it for ContainerLogs) gave the bare lines.
TEST_CASE("transparency: logs with details are the same bytes through docker-cli as straight",
          "[integration][transparency][logs]") {
  proxy_process proxy(cli_policy);
  const std::string probe = unique_name("dg-owner-probe");
  REQUIRE(run(proxy.docker() + " create --name " + probe + " " + test_image() + " true").status ==
          0);
  const std::string owner =
      run(direct() + " inspect --format '{{index .Config.Labels \"dockgate.owner\"}}' " + probe)
          .output;
  run(direct() + " rm -f " + probe);
  REQUIRE(owner.size() > 1);
  // Made straight (the profile forces its own log options), labelled as the gate labels
  // what the profile owns, so the gate serves its logs.
  const std::string name = unique_name("dg-details");
  REQUIRE(run(direct() + " run --name " + name +
              " --label dockgate.owner=" + owner.substr(0, owner.size() - 1) +
              " --label team=blue --env STAGE=canary --log-driver json-file --log-opt labels=team "
              "--log-opt env=STAGE " +
              test_image() + " sh -c 'echo one; echo two >&2; echo three'")
              .status == 0);

  const std::string query =
      "/v1.41/containers/" + name + "/logs?details=1&stdout=1&stderr=1&timestamps=0";
  auto body = [&](const std::string& socket) {
    return run("curl -sf --unix-socket " + socket + " 'http://docker" + query + "' | od -An -c");
  };
  const auto straight = body(engine_socket());
  const auto gated = body(proxy.socket_path());
  INFO("straight:\n" << straight.output << "\ngated:\n" << gated.output);
  REQUIRE(straight.status == 0);
  // The attribute column is there to lose (od's lines may cut it: read it as text).
  CHECK(run("curl -sf --unix-socket " + engine_socket() + " 'http://docker" + query +
            "' | tr -c '[:print:]' '.'")
            .output.find("STAGE=canary,team=blue") != std::string::npos);
  CHECK(gated.status == 0);
  CHECK(gated.output == straight.output);

  // The docker CLI's own rendering, both streams.
  const auto cli_straight = run(direct() + " logs --details " + name + " 2>&1");
  const auto cli_gated = run(proxy.docker() + " logs --details " + name + " 2>&1");
  INFO("cli straight:\n" << cli_straight.output << "\ncli gated:\n" << cli_gated.output);
  CHECK(cli_straight.output.find("STAGE=canary,team=blue one\n") != std::string::npos);
  CHECK(cli_gated.status == 0);
  CHECK(cli_gated.output == cli_straight.output);
  run(direct() + " rm -f " + name);
}

TEST_CASE("transparency: a create answer says what the profile changed",
          "[integration][transparency]") {
  // Docker's convention: a warning where what the client asked for could not be honoured.
  // What the profile fills in where the client set nothing is silent to the client (the
  // audit line records it); a value the client set and the profile clamped is printed.
  proxy_process proxy(cli_policy);
  auto docker_run = [&](const std::string& name, const std::string& flags) {
    auto r = run("{ " + proxy.docker() + " run --name " + name + " " + flags + " " + test_image() +
                 " true 2>" + proxy.dir() + "/run.err; }");
    const std::string err = run("cat " + proxy.dir() + "/run.err").output;
    INFO(name << ": " << r.output << err);
    CHECK(r.status == 0);
    return err;
  };
  auto inspect = [&](const std::string& name, const std::string& format) {
    return run(direct() + " inspect --format '" + format + "' " + name).output;
  };
  const std::string plain = unique_name("dg-plain");
  const std::string err = docker_run(plain, "");
  INFO(err);
  CHECK(err.find("WARNING: dockgate:") == std::string::npos);
  // Silent, yet in force: the daemon holds what the profile filled in, the audit line says so.
  CHECK(inspect(plain, "{{.HostConfig.SecurityOpt}} {{.HostConfig.Memory}}") ==
        "[no-new-privileges] 2147483648\n");
  CHECK(
      proxy.audit_contains(R"({"field":"HostConfig.Memory","action":"clamped","to":2147483648})"));
  const std::string clamped = unique_name("dg-warned");
  const std::string warned = docker_run(clamped, "--memory 8g");
  INFO(warned);
  CHECK(warned.find("WARNING: dockgate: HostConfig.Memory clamped to 2 GiB (profile docker-cli)") !=
        std::string::npos);
  std::size_t lines = 0;
  for (std::size_t at = 0; (at = warned.find("WARNING: dockgate:", at)) != std::string::npos; ++at)
    ++lines;
  CHECK(lines == 1);  // the clamp the user asked about, nothing the user did not set
  CHECK(inspect(clamped, "{{.HostConfig.Memory}}") == "2147483648\n");
  CHECK(proxy.audit_contains(
      R"({"field":"HostConfig.Memory","action":"clamped","from":8589934592,"to":2147483648})"));
  run(direct() + " rm -f " + plain + " " + clamped);
}

TEST_CASE(
    "transparency: a create's warnings stay with its own answer, not a later one on the connection",
    "[integration][transparency]") {
  // One keep-alive connection (as the SDKs keep one): a create the profile clamps (its
  // answer warns), then, on the same connection, a start, an exec create and a create in
  // which the client set nothing the profile changes. Neither later answer carries the
  // first one's warning.
  proxy_process proxy(cli_policy);
  const std::string warned = unique_name("dg-warn"), plain = unique_name("dg-quiet");
  auto create = [&](const std::string& name, const std::string& host_config) {
    const std::string body = "{\"Image\":\"" + test_image() +
                             "\",\"Cmd\":[\"sleep\",\"30\"],\"HostConfig\":" + host_config + "}";
    return "POST /containers/create?name=" + name +
           " HTTP/1.1\r\nHost: d\r\nContent-Type: application/json\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body;
  };
  const std::string exec_body = R"({"Cmd":["true"],"AttachStdout":true})";
  const std::string pipelined =
      create(warned, R"({"Memory":8589934592})") + "POST /containers/" + warned +
      "/start HTTP/1.1\r\nHost: d\r\nContent-Length: 0\r\n\r\n" + "POST /containers/" + warned +
      "/exec HTTP/1.1\r\nHost: d\r\nContent-Type: application/json\r\nContent-Length: " +
      std::to_string(exec_body.size()) + "\r\n\r\n" + exec_body + create(plain, "{}");
  auto r = raw_exchange(proxy.socket_path(), pipelined, true, 10s);
  INFO(r.bytes);
  CHECK(r.count() == 4);
  const auto first = r.bytes.find("HTTP/1.1 201");
  const auto start = r.bytes.find("HTTP/1.1 204");
  const auto exec = r.bytes.find("HTTP/1.1 201", start);
  const auto last = r.bytes.find("HTTP/1.1 201", exec + 1);
  REQUIRE(first != std::string::npos);
  REQUIRE(start != std::string::npos);
  REQUIRE(exec != std::string::npos);
  REQUIRE(last != std::string::npos);
  // The clamp is in the first answer only.
  CHECK(r.bytes.substr(first, start - first).find("HostConfig.Memory clamped") !=
        std::string::npos);
  CHECK(r.bytes.find("HostConfig.Memory clamped", start) == std::string::npos);
  // The exec create's answer is the daemon's: an Id and nothing else.
  CHECK(r.bytes.substr(exec, last - exec).find("Warnings") == std::string::npos);
  run(direct() + " rm -f " + warned + " " + plain);
}

TEST_CASE("docker-cli: what a person does with their own containers works, others' stay untouched",
          "[integration][transparency][cli]") {
  proxy_process proxy(cli_policy);
  const std::string mine = unique_name("dg-mine");
  const std::string stopped = unique_name("dg-mine-stopped");
  const std::string foreign = unique_name("dg-foreign");
  REQUIRE(
      run(proxy.docker() + " run -d --name " + mine + " " + test_image() + " sleep 300").status ==
      0);
  REQUIRE(run(proxy.docker() + " create --name " + stopped + " " + test_image() + " true").status ==
          0);
  REQUIRE(run(direct() + " create --name " + foreign + " " + test_image() + " true").status ==
          0);  // not the profile's
  auto ok = [&](const std::string& args) {
    auto r = run("{ " + proxy.docker() + " " + args + " 2>" + proxy.dir() + "/cli.err; }");
    INFO(args << " -> " << r.output << run("cat " + proxy.dir() + "/cli.err").output);
    CHECK(r.status == 0);
    return r.output;
  };
  CHECK(ok("stats --no-stream --format '{{.Name}}' " + mine) == mine + "\n");
  CHECK(ok("top " + mine).find("sleep 300") != std::string::npos);
  ok("exec " + mine + " sh -c 'echo changed > /tmp/marker'");
  CHECK(ok("diff " + mine).find("/tmp/marker") != std::string::npos);
  // cp both ways
  run("echo from-host > " + proxy.dir() + "/in.txt");
  ok("cp " + proxy.dir() + "/in.txt " + mine + ":/tmp/in.txt");
  CHECK(run(direct() + " exec " + mine + " cat /tmp/in.txt").output == "from-host\n");
  ok("cp " + mine + ":/tmp/marker " + proxy.dir() + "/out.txt");
  CHECK(run("cat " + proxy.dir() + "/out.txt").output == "changed\n");
  // pause, unpause, restart, rename, update (within the profile's limits)
  ok("pause " + mine);
  CHECK(run(direct() + " inspect --format '{{.State.Status}}' " + mine).output == "paused\n");
  ok("unpause " + mine);
  ok("restart -t 0 " + mine);
  CHECK(run(direct() + " inspect --format '{{.State.Status}}' " + mine).output == "running\n");
  ok("update --memory 64m --memory-swap 64m " + mine);
  CHECK(run(direct() + " inspect --format '{{.HostConfig.Memory}}' " + mine).output ==
        "67108864\n");
  // (this engine, without a bridge, cannot rename a container after a restart, gated or
  // not: the stopped one is renamed)
  ok("rename " + stopped + " " + stopped + "-2");
  CHECK(container_exists(stopped + "-2"));
  // read-only views
  ok("network ls");
  ok("volume ls");
  ok("system df");
  // prune removes the profile's stopped containers only
  ok("container prune -f");
  CHECK_FALSE(container_exists(stopped + "-2"));
  CHECK(container_exists(foreign));
  CHECK(container_exists(mine));
  // and what the profile refuses stays refused
  auto bind = run(proxy.docker() + " run --rm -v /:/host " + test_image() + " true");
  CHECK(bind.status != 0);
  CHECK(bind.output.find("dockgate: HostConfig.Binds") != std::string::npos);
  CHECK(run(proxy.docker() + " rename " + foreign + " stolen").status != 0);
  CHECK(container_exists(foreign));
  run(direct() + " rm -f " + mine + " " + foreign);
}

TEST_CASE(
    "python3-docker: everyday operations give the same results straight and through docker-cli",
    "[integration][transparency][clients]") {
  if (run("/usr/bin/python3 -c 'import docker'").status != 0)
    FAIL("python3-docker is missing: scripts/install-deps.sh installs it");
  proxy_process proxy(cli_policy);
  const std::string script = repo_root() + "/tests/integration/clients/python_docker.py";
  const std::string prefix = unique_name("dg-py");
  same_results(run("DOCKER_HOST=" + engine_host() + " /usr/bin/python3 " + script + " " +
                   test_image() + " " + prefix + "-a"),
               run("DOCKER_HOST=" + proxy.host() + " /usr/bin/python3 " + script + " " +
                   test_image() + " " + prefix + "-b"),
               prefix);
}

TEST_CASE(
    "a client pinned to /v1.24: python3-docker, the docker CLI and /info are the same through "
    "docker-cli",
    "[integration][transparency][clients][version]") {
  proxy_process proxy(cli_policy);
  const std::string script = repo_root() + "/tests/integration/clients/python_docker.py";
  const std::string prefix = unique_name("dg-v124");
  same_results(run("DOCKER_HOST=" + engine_host() + " /usr/bin/python3 " + script + " " +
                   test_image() + " " + prefix + "-a 1.24"),
               run("DOCKER_HOST=" + proxy.host() + " /usr/bin/python3 " + script + " " +
                   test_image() + " " + prefix + "-b 1.24"),
               prefix);
  CHECK(proxy.audit_contains("\"path\":\"/v1.24/containers/create\""));
  // The CLI pinned the same way: run, exec, logs, ps, inspect, stop, rm.
  auto workload = [&](const std::string& docker, const std::string& name) {
    const std::string cli = "DOCKER_API_VERSION=1.24 " + docker;
    return run("{ " + cli + " run -d --name " + name + " " + test_image() +
               " sh -c 'echo started; sleep 30' >/dev/null && " + cli + " exec " + name +
               " echo exec-ok && sleep 0.5 && " + cli + " logs " + name + " && " + cli +
               " ps -a --filter name=" + name + " --format '{{.Status}}' | cut -c1-2 && " + cli +
               " inspect -f '{{.State.Running}} {{.Config.Image}}' " + name + " && " + cli +
               " stop -t 1 " + name + " >/dev/null && " + cli + " rm " + name +
               " >/dev/null && echo done; }");
  };
  const std::string a = unique_name("dg-v124cli"), b = a + "-b";
  auto straight = workload(docker_cli() + " -H " + engine_host(), a);
  auto gated = workload(proxy.docker(), b);
  INFO(straight.output << "\n---\n" << gated.output);
  CHECK(straight.status == 0);
  // No difference: the run sets nothing the profile changes, so its answer has no
  // dockgate warning (what the profile filled in is in the audit line).
  CHECK(gated.output.find("WARNING: dockgate:") == std::string::npos);
  CHECK(gated.output == straight.output);
  // /v1.24/info in the 1.24 format (the daemon's answer to that version), not the newest.
  auto keys = [&](const std::string& socket) {
    return run("curl -s --unix-socket " + socket + " http://d/v1.24/info | jq -S 'keys'").output;
  };
  CHECK(keys(proxy.socket_path()) == keys(engine_socket()));
}

TEST_CASE(
    "dockerode: create, attach with stdin, exec demux, logs follow, stop, kill, remove, events are "
    "the same through docker-cli",
    "[integration][transparency][clients]") {
  const char* node_path = std::getenv("DOCKGATE_NODE_PATH");
  if (!node_path || !*node_path)
    FAIL(
        "DOCKGATE_NODE_PATH is not set: scripts/test.sh installs dockerode "
        "(scripts/node-clients.sh)");
  proxy_process proxy(cli_policy);
  const std::string script = repo_root() + "/tests/integration/clients/dockerode.js";
  const std::string prefix = unique_name("dg-node");
  auto node = [&](const std::string& socket, const std::string& suffix) {
    return run("NODE_PATH=" + std::string(node_path) + " node " + script + " " + socket + " " +
               test_image() + " " + prefix + suffix);
  };
  same_results(node(engine_socket(), "-a"), node(proxy.socket_path(), "-b"), prefix);
  // What dockerode sends that the daemon ignores was left out, and said so.
  CHECK(proxy.audit_contains("\"dropped\":\"query:hijack,body\""));
}

TEST_CASE(
    "testcontainers (npm): a busybox container starts, execs, logs, copies and stops the same "
    "through docker-cli",
    "[integration][transparency][clients]") {
  const char* node_path = std::getenv("DOCKGATE_NODE_PATH");
  if (!node_path || !*node_path)
    FAIL(
        "DOCKGATE_NODE_PATH is not set: scripts/test.sh installs testcontainers "
        "(scripts/node-clients.sh)");
  proxy_process proxy(cli_policy);
  const std::string script = repo_root() + "/tests/integration/clients/testcontainers.js";
  auto node = [&](const std::string& host) {
    return run("TESTCONTAINERS_RYUK_DISABLED=true DOCKER_HOST=" + host + " NODE_PATH=" +
               std::string(node_path) + " timeout 120 node " + script + " " + test_image());
  };
  auto straight = node(engine_host());
  auto gated = node(proxy.host());
  INFO(straight.output);
  INFO(gated.output);
  REQUIRE(straight.status == 0);
  CHECK(gated.status == 0);
  CHECK(gated.output == straight.output);
  CHECK(gated.output.find("\"start\":\"started\"") != std::string::npos);
  // It inspects the daemon's bridge network at start (to find the host): readable by all.
  CHECK(proxy.audit_contains("\"operation\":\"NetworkInspect\",\"verdict\":\"allow\""));
}

TEST_CASE(
    "Tecnativa's variables, without a policy file, make an equivalent profile (with dockgate's "
    "body checks)",
    "[integration][transparency][tecnativa]") {
  {
    // CONTAINERS=1 with Tecnativa's POST=0: reads only.
    proxy_process proxy("", {}, {"CONTAINERS=1"});
    CHECK(run(proxy.docker() + " ps").status == 0);
    CHECK(run(proxy.docker() + " version").status == 0);  // VERSION=1 by default
    auto refused = run(proxy.docker() + " create " + test_image() + " true");
    CHECK(refused.status != 0);
    CHECK(refused.output.find("ContainerCreate is not allowed by profile tecnativa") !=
          std::string::npos);
    CHECK(run(proxy.docker() + " image ls").output.find("ImageList is not allowed") !=
          std::string::npos);
  }
  {
    // POST=1: containers can be created and started, but never privileged (Tecnativa
    // would let that through; the daemon has no such container).
    proxy_process proxy("", {}, {"CONTAINERS=1", "POST=1"});
    const std::string name = unique_name("dg-tecnativa");
    CHECK(
        run(proxy.docker() + " run -d --name " + name + " " + test_image() + " sleep 30").status ==
        0);
    CHECK(container_exists(name));
    const std::string evil = unique_name("dg-tecnativa-priv");
    auto privileged =
        run(proxy.docker() + " create --privileged --name " + evil + " " + test_image() + " true");
    CHECK(privileged.status != 0);
    CHECK_FALSE(container_exists(evil));
    // EXEC=0: exec create is under /containers (allowed), exec start under /exec (not).
    CHECK(run(proxy.docker() + " exec " + name + " true").status != 0);
    CHECK(proxy.audit_contains(
        "\"reason\":\"dockgate: ExecStart is not allowed by profile tecnativa\""));
    run(direct() + " rm -f " + name);
  }
}

TEST_CASE(
    "transparency: the client's API version is forwarded, a newer one answered as the daemon "
    "answers",
    "[integration][transparency][version]") {
  proxy_process proxy(cli_policy);
  auto get = [&](const std::string& socket, const std::string& target) {
    return raw_exchange(socket,
                        "GET " + target + " HTTP/1.1\r\nHost: d\r\nConnection: close\r\n\r\n");
  };
  // Too new: the same status and message as straight from the daemon.
  // (a newer CLI than the daemon: 1.45 against this engine's 1.41)
  auto straight = get(engine_socket(), "/v1.45/version");
  auto gated = get(proxy.socket_path(), "/v1.45/version");
  INFO(straight.bytes << "\n---\n" << gated.bytes);
  CHECK(gated.status() == straight.status());
  CHECK(straight.bytes.find("is too new. Maximum supported API version is") != std::string::npos);
  CHECK(gated.bytes.find(straight.bytes.substr(straight.bytes.find("client version"), 60)) !=
        std::string::npos);
  // A client speaking 1.39 gets what the daemon gives 1.39 clients: an empty IpcMode
  // becomes shareable (daemon's record), exactly as straight.
  auto create = [&](const std::string& socket, const std::string& name) {
    // (as every real client does, with a HostConfig: without one the daemon uses its own
    // default, and the gate, which always sends one, cannot say "the daemon's default")
    const std::string body =
        R"({"Image":")" + test_image() + R"(","Cmd":["true"],"HostConfig":{}})";
    return raw_exchange(socket, "POST /v1.39/containers/create?name=" + name +
                                    " HTTP/1.1\r\nHost: d\r\nContent-Type: "
                                    "application/json\r\nContent-Length: " +
                                    std::to_string(body.size()) + "\r\n\r\n" + body);
  };
  const std::string a = unique_name("dg-v139-a"), b = unique_name("dg-v139-b");
  REQUIRE(create(engine_socket(), a).status() == 201);
  REQUIRE(create(proxy.socket_path(), b).status() == 201);
  const std::string ipc = " inspect --format '{{.HostConfig.IpcMode}}' ";
  CHECK(run(direct() + ipc + b).output == run(direct() + ipc + a).output);
  CHECK(run(direct() + ipc + b).output == "shareable\n");
  CHECK(proxy.audit_contains("\"path\":\"/v1.39/containers/create\""));
  run(direct() + " rm -f " + a + " " + b);
  // Beyond the newest version the gate models (1.56), still the daemon's words; below its
  // floor (1.24), the same form of refusal, naming the gate's floor.
  auto beyond = get(proxy.socket_path(), "/v1.99/version");
  CHECK(beyond.status() == 400);
  CHECK(beyond.bytes.find("client version 1.99 is too new. Maximum supported API version is") !=
        std::string::npos);
  auto below = get(proxy.socket_path(), "/v1.23/version");
  CHECK(below.status() == 400);
  CHECK(below.bytes.find("client version 1.23 is too old. Minimum supported API version is 1.24") !=
        std::string::npos);
}

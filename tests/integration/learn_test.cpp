// `dockgate-proxy learn` (docs/policy.md, "Learning a profile"): a client's workload run
// once through the learning profile (compose/policies/learn.json), the profile learned from
// the audit lines, and the same workload through the learned profile behaves as it does
// straight at the daemon (exit codes, output, the daemon's inspect), while a request
// outside what was seen is refused or held to what was seen, and what the invariants
// forbid is listed as seen and refused, never learned. And the log is not trusted: an
// edited line (a widening list emptied, an operation the profile never allows, no record at
// all) teaches nothing, is named with its number, and the learned gate still refuses it.
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <set>
#include <sstream>

#include "harness.hpp"

using namespace dockgate::test;

namespace {

std::string direct() {
  return docker_cli() + " -H " + engine_host();
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

struct learned {
  std::string policy;  // the learned policy file's text
  std::string report;  // learn's stderr (and stdout)
  std::string file;    // where it was written (a root-owned directory: check reads it)
};

// Stops the learning gate (SIGTERM writes every line) and learns from its audit log.
learned learn_from(proxy_process& gate, const std::string& name) {
  gate.terminate();
  // check reads only files root controls: a directory of its own (mkdtemp: 0700, root's).
  char dir[] = "/tmp/dockgate-learned.XXXXXX";
  REQUIRE(::mkdtemp(dir) != nullptr);
  const std::string file = std::string(dir) + "/" + name + ".json";
  // --policy: the policy the gate recorded under (its own copy).
  auto r = run(proxy_bin() + " learn --policy " + gate.dir() + "/policy.json --audit " +
               gate.dir() + "/audit.log --profile learn --name " + name + " -o " + file + " 2>&1");
  INFO(r.output);
  REQUIRE(r.status == 0);
  return {slurp(file), r.output, file};
}

void check_passes(const learned& l) {
  ::chmod(l.file.c_str(), 0644);
  auto c = run(proxy_bin() + " check --policy " + l.file + " 2>&1");
  INFO(c.output << "\n" << l.policy);
  REQUIRE(c.status == 0);
}

std::string inspect(const std::string& name, const std::string& format) {
  return run(direct() + " inspect --format '" + format + "' " + name + " 2>&1").output;
}

// The docker CLI's workload: run (foreground and detached), ps, logs, exec, rm. Returns
// what a user sees, and what the daemon recorded, with `tag` in the names replaced.
std::string cli_workload(const std::string& docker, const std::string& prefix,
                         const std::string& tag) {
  const std::string fg = prefix + "-" + tag + "-fg", bg = prefix + "-" + tag + "-bg";
  std::string seen;
  auto step = [&](const std::string& what, const std::string& cmd) {
    auto r = run(docker + " " + cmd + " 2>&1");
    std::string out = r.output;
    for (std::size_t at; (at = out.find("-" + tag + "-")) != std::string::npos;)
      out.replace(at, tag.size() + 2, "-T-");
    seen += what + " rc=" + std::to_string(r.status) + " " + out + "\n";
  };
  step("run", "run --name " + fg + " --memory 64m --user 1000 " + test_image() + " echo hello");
  step("run -d", "run -d --name " + bg + " --memory 64m --cap-drop ALL " + test_image() +
                     " sleep 60 >/dev/null");
  step("ps",
       "ps -a --filter name=" + prefix + "-" + tag + " --format '{{.Names}} {{.Image}}' | sort");
  step("logs", "logs " + fg);
  step("exec", "exec " + bg + " sh -c 'echo in exec; id -u'");
  seen +=
      "daemon fg " +
      inspect(fg, "{{.Config.User}} {{.HostConfig.Memory}} {{.Config.Image}} {{.State.ExitCode}}");
  seen += "daemon bg " +
          inspect(bg, "{{.HostConfig.Memory}} {{.HostConfig.CapDrop}} {{.State.Running}}");
  step("rm", "rm -f " + fg + " " + bg);
  return seen;
}

}  // namespace

TEST_CASE(
    "learn: the docker CLI's workload, learned, runs as it does directly and nothing else passes",
    "[integration][learn]") {
  const std::string prefix = unique_name("dg-learn-cli");
  const std::string straight = cli_workload(direct(), prefix, "a");
  INFO("straight:\n" << straight);
  REQUIRE(straight.find("run rc=0 hello") != std::string::npos);

  learned l;
  {
    proxy_process gate("compose/policies/learn.json");
    CHECK(cli_workload(gate.docker(), prefix, "b") == straight);
    // The invariants hold while learning: refused, and reported, never learned.
    auto priv = run(gate.docker() + " run --rm --name " + prefix + "-priv --privileged " +
                    test_image() + " true 2>&1");
    CHECK(priv.status != 0);
    CHECK_FALSE(container_exists(prefix + "-priv"));
    l = learn_from(gate, "cli");
  }
  INFO("learned:\n" << l.policy << "\nreport:\n" << l.report);
  check_passes(l);
  CHECK(l.report.find(
            "seen and refused, not learned: ContainerCreate: dockgate: HostConfig.Privileged") !=
        std::string::npos);
  CHECK(l.policy.find(
            "\"refused_seen\": [\n          \"ContainerCreate: dockgate: HostConfig.Privileged") !=
        std::string::npos);

  proxy_process gate(l.policy);
  CHECK(cli_workload(gate.docker(), prefix, "c") == straight);

  // Outside what was seen: another operation, another image repository, a larger memory,
  // and --privileged.
  auto networks = run(gate.docker() + " network ls 2>&1");
  CHECK(networks.status != 0);
  CHECK(networks.output.find("NetworkList") != std::string::npos);
  REQUIRE(run(direct() + " tag " + test_image() + " dockgate/learn-other:latest").status == 0);
  auto other = run(gate.docker() + " run --rm --name " + prefix +
                   "-other dockgate/learn-other:latest true 2>&1");
  CHECK(other.status != 0);
  CHECK(other.output.find("dockgate/learn-other") != std::string::npos);
  CHECK_FALSE(container_exists(prefix + "-other"));
  const std::string big = prefix + "-big";
  REQUIRE(run(gate.docker() + " run --name " + big + " --memory 128m " + test_image() + " true")
              .status == 0);
  CHECK(inspect(big, "{{.HostConfig.Memory}}") == "67108864\n");  // held to the largest seen
  run(direct() + " rm -f " + big);
  auto priv = run(gate.docker() + " run --rm --name " + prefix + "-priv2 --privileged " +
                  test_image() + " true 2>&1");
  CHECK(priv.status != 0);
  CHECK_FALSE(container_exists(prefix + "-priv2"));
}

TEST_CASE("learn: python3-docker's workload, learned, gives the same results as directly",
          "[integration][learn][clients]") {
  if (run("/usr/bin/python3 -c 'import docker'").status != 0)
    FAIL("python3-docker is missing: scripts/install-deps.sh installs it");
  const std::string script = repo_root() + "/tests/integration/clients/python_docker.py";
  const std::string prefix = unique_name("dg-learn-py");
  auto workload = [&](const std::string& host, const std::string& tag) {
    auto r = run("DOCKER_HOST=" + host + " /usr/bin/python3 " + script + " " + test_image() + " " +
                 prefix + "-" + tag);
    for (std::size_t at; (at = r.output.find(prefix + "-" + tag)) != std::string::npos;)
      r.output.replace(at, prefix.size() + 1 + tag.size(), "P");
    return r;
  };
  const auto straight = workload(engine_host(), "a");
  INFO("straight: " << straight.output);
  REQUIRE(straight.status == 0);
  learned l;
  {
    proxy_process gate("compose/policies/learn.json");
    auto learning = workload(gate.host(), "b");
    CHECK(learning.status == 0);
    CHECK(learning.output == straight.output);
    l = learn_from(gate, "python");
  }
  INFO("learned:\n" << l.policy << "\nreport:\n" << l.report);
  check_passes(l);
  proxy_process gate(l.policy);
  auto gated = workload(gate.host(), "c");
  CHECK(gated.status == 0);
  CHECK(gated.output == straight.output);
  CHECK(gated.output.find("error:") == std::string::npos);
  // The SDK never asked for the version or the networks: the learned profile refuses them.
  auto networks =
      raw_exchange(gate.socket_path(), "GET /v1.41/networks HTTP/1.1\r\nHost: d\r\n\r\n");
  CHECK(networks.status() == 403);
}

namespace {

const char* learn_project = R"(version: "3.8"
services:
  web:
    image: IMAGE
    command: ["sh", "-c", "echo web up; while true; do sleep 1; done"]
    networks:
      backend:
        aliases: [front]
    volumes: ["data:/data"]
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

// docker-compose up -d, ps, down -v of a two-service project (a network with an alias, a
// named volume): exit codes, and the daemon's record of the project while it was up.
std::string compose_workload(const std::string& host, const std::string& name) {
  std::string dir = run("mktemp -d").output;
  dir.pop_back();  // the newline
  std::string text = learn_project;
  for (auto at = text.find("IMAGE"); at != std::string::npos; at = text.find("IMAGE"))
    text.replace(at, 5, test_image());
  std::ofstream(dir + "/docker-compose.yml") << text;
  auto compose = [&](const std::string& args) {
    return run("cd " + dir + " && DOCKER_HOST=" + host +
               " timeout 120 docker-compose --ansi never -p " + name + " " + args + " 2>&1");
  };
  std::string seen = "up rc=" + std::to_string(compose("up -d").status) + "\n";
  auto ps = compose("ps --services");
  seen += "ps rc=" + std::to_string(ps.status) + " " + ps.output;
  const std::string filter = "--filter label=com.docker.compose.project=" + name;
  seen +=
      run("{ " + direct() + " ps -a " + filter +
          " --format 'container {{.Names}} {{.State}} {{.Image}}'; " + direct() + " network ls " +
          filter + " --format 'network {{.Name}} {{.Driver}}'; " + direct() + " volume ls " +
          filter + " --format 'volume {{.Name}} {{.Driver}}'; } | sed 's/" + name + "/P/g' | sort")
          .output;
  seen +=
      inspect(name + "_web_1", "web aliases {{json .NetworkSettings.Networks}}").find("front") !=
              std::string::npos
          ? "web alias front\n"
          : "web alias missing\n";
  seen += "down rc=" + std::to_string(compose("down -v -t 0").status) + "\n";
  run("cd " + dir + " && DOCKER_HOST=" + engine_host() + " docker-compose -p " + name +
      " down -v -t 0 >/dev/null 2>&1; rm -rf " + dir);
  return seen;
}

}  // namespace

TEST_CASE("learn: docker-compose's workload, learned, runs as it does directly",
          "[integration][learn][compose]") {
  const std::string prefix = unique_name("dglearn").substr(0, 20);
  std::string lower;
  for (char c : prefix) lower += c == '-' ? 'x' : c;
  const std::string straight = compose_workload(engine_host(), lower + "a");
  INFO("straight:\n" << straight);
  REQUIRE(straight.find("up rc=0") != std::string::npos);
  learned l;
  {
    proxy_process gate("compose/policies/learn.json");
    CHECK(compose_workload(gate.host(), lower + "b") == straight);
    l = learn_from(gate, "compose");
  }
  INFO("learned:\n" << l.policy << "\nreport:\n" << l.report);
  check_passes(l);
  CHECK(l.policy.find("\"networks\": {\"join_owned\": true, \"aliases\": true}") !=
        std::string::npos);
  CHECK(l.policy.find("\"volumes\": {\"mount_owned\": true}") != std::string::npos);
  proxy_process gate(l.policy);
  CHECK(compose_workload(gate.host(), lower + "c") == straight);
  // Outside what was seen: another repository, and a bind from the host.
  REQUIRE(run(direct() + " tag " + test_image() + " dockgate/learn-other:latest").status == 0);
  auto other = run(gate.docker() + " create --name " + lower +
                   "-other dockgate/learn-other:latest true 2>&1");
  CHECK(other.status != 0);
  CHECK_FALSE(container_exists(lower + "-other"));
  auto bind = run(gate.docker() + " create --name " + lower + "-bind -v /etc:/host " +
                  test_image() + " true 2>&1");
  CHECK(bind.status != 0);
  CHECK_FALSE(container_exists(lower + "-bind"));
}

TEST_CASE("learn: a read-only monitor, learned, reads as before and can change nothing",
          "[integration][learn]") {
  auto workload = [](const std::string& docker) {
    std::string seen;
    for (const std::string cmd :
         {"version --format '{{.Server.APIVersion}}'", "ps -q --filter name=dg-learn-nothing-here",
          "events --since 1 --until 2 --filter container=dg-learn-nothing-here",
          "system df --format '{{.Type}}'"}) {
      auto r = run(docker + " " + cmd + " 2>&1");
      seen += cmd + " rc=" + std::to_string(r.status) + " " + r.output + "\n";
    }
    return seen;
  };
  const std::string straight = workload(direct());
  INFO("straight:\n" << straight);
  learned l;
  {
    proxy_process gate("compose/policies/learn.json");
    CHECK(workload(gate.docker()) == straight);
    l = learn_from(gate, "monitor");
  }
  INFO("learned:\n" << l.policy);
  check_passes(l);
  CHECK(l.policy.find("ContainerCreate") == std::string::npos);
  proxy_process gate(l.policy);
  CHECK(workload(gate.docker()) == straight);
  const std::string name = unique_name("dg-learn-mon");
  auto create = run(gate.docker() + " run --name " + name + " " + test_image() + " true 2>&1");
  CHECK(create.status != 0);
  CHECK(create.output.find("ContainerCreate") != std::string::npos);
  CHECK_FALSE(container_exists(name));
}

namespace {

// A line of `log` that contains every one of `parts`.
std::string line_with(const std::string& log, std::initializer_list<std::string_view> parts) {
  std::istringstream in(log);
  for (std::string l; std::getline(in, l);)
    if (std::all_of(parts.begin(), parts.end(),
                    [&](std::string_view p) { return l.find(p) != std::string::npos; }))
      return l;
  return {};
}

// `line` with `text` inserted after the first `after`.
std::string edited(std::string line, const std::string& after, const std::string& text) {
  const auto at = line.find(after);
  REQUIRE(at != std::string::npos);
  return line.insert(at + after.size(), text);
}

}  // namespace

TEST_CASE(
    "learn: an edited audit log teaches nothing: forged lines are named, and the learned gate "
    "still refuses a host PID namespace and seccomp=unconfined",
    "[integration][learn]") {
  const std::string prefix = unique_name("dg-learn-forged");
  std::string recorded, policy_copy;
  char dir[] = "/tmp/dockgate-forged.XXXXXX";
  REQUIRE(::mkdtemp(dir) != nullptr);
  {
    proxy_process gate("compose/policies/learn.json");
    REQUIRE(run(gate.docker() + " create --name " + prefix + "-seed --memory 64m " + test_image() +
                " true")
                .status == 0);
    gate.terminate();
    recorded = slurp(gate.dir() + "/audit.log");
    policy_copy = std::string(dir) + "/learn.json";
    REQUIRE(run("cp " + gate.dir() + "/policy.json " + policy_copy).status == 0);
  }
  run(direct() + " rm -f " + prefix + "-seed");
  // The gate's own line for that create, edited three ways: a host PID namespace and an
  // unconfined seccomp added to its values (its "widening" left as it was: []), and the
  // same record made a swarm init, an operation learn.json never allows.
  const std::string create = line_with(
      recorded, {"\"operation\":\"ContainerCreate\"", "\"verdict\":\"allow\"", "\"widening\":[]"});
  INFO("recorded:\n" << recorded);
  REQUIRE(!create.empty());
  const std::string pid_host = edited(create, "\"values\":{", "\"HostConfig.PidMode\":\"host\",");
  const std::string seccomp =
      edited(create, "\"values\":{", "\"HostConfig.SecurityOpt\":[\"seccomp=unconfined\"],");
  std::string swarm = line_with(recorded, {"\"verdict\":\"allow\"", "\"operation\":\"SystemPing"});
  REQUIRE(!swarm.empty());
  {
    const auto at = swarm.find("\"operation\":\"") + 13;
    swarm.replace(at, swarm.find('"', at) - at, "SwarmInit");
  }
  const std::string no_record = R"({"profile":"learn","operation":"PluginPull","verdict":"allow"})";

  const std::string log = std::string(dir) + "/forged.log";
  std::ofstream(log) << recorded << pid_host << "\n"
                     << seccomp << "\n"
                     << swarm << "\n"
                     << no_record << "\n";
  std::size_t recorded_lines = std::count(recorded.begin(), recorded.end(), '\n');
  const std::string out = std::string(dir) + "/forged.json";
  auto learn = run(proxy_bin() + " learn --policy " + policy_copy + " --audit " + log +
                   " --profile learn --name forged -o " + out + " 2>&1");
  INFO("learn:\n" << learn.output);
  CHECK(learn.status == 0);  // the gate's own lines are still learned
  auto named = [&](std::size_t n, const std::string& why) {
    return learn.output.find("refused line " + log + ":" + std::to_string(recorded_lines + n) +
                             ": " + why) != std::string::npos;
  };
  CHECK(named(1, "seen.widening leaves out HostConfig.PidMode"));
  CHECK(named(2, "seen.widening leaves out HostConfig.SecurityOpt"));
  CHECK(named(3, "operation SwarmInit is not one profile learn allows"));
  CHECK(named(4, "not an audit line (docs/audit.schema.json): (line): has no \"time\""));
  const std::string learned = slurp(out);
  INFO("learned:\n" << learned);
  CHECK(learned.find("SwarmInit") == std::string::npos);
  CHECK(learned.find("PluginPull") == std::string::npos);
  CHECK(learned.find("seccomp") == std::string::npos);
  CHECK(learned.find("PidMode") == std::string::npos);

  // A gate running what was learned: the same create passes, the forged values do not,
  // by the daemon's record.
  proxy_process gate(learned);
  const std::string ok = prefix + "-ok", pid = prefix + "-pid", unconfined = prefix + "-seccomp";
  CHECK(run(gate.docker() + " create --name " + ok + " --memory 64m " + test_image() + " true")
            .status == 0);
  CHECK(container_exists(ok));
  auto refused_pid = run(gate.docker() + " create --name " + pid + " --pid host --memory 64m " +
                         test_image() + " true 2>&1");
  CHECK(refused_pid.status != 0);
  CHECK(refused_pid.output.find("HostConfig.PidMode") != std::string::npos);
  CHECK_FALSE(container_exists(pid));
  auto refused_seccomp =
      run(gate.docker() + " create --name " + unconfined +
          " --security-opt seccomp=unconfined --memory 64m " + test_image() + " true 2>&1");
  CHECK(refused_seccomp.status != 0);
  CHECK(refused_seccomp.output.find("HostConfig.SecurityOpt") != std::string::npos);
  CHECK_FALSE(container_exists(unconfined));
  run(direct() + " rm -f " + ok + " " + pid + " " + unconfined);

  // Only forged lines: nothing valid, nothing written, exit 1.
  const std::string only = std::string(dir) + "/only.log", none = std::string(dir) + "/none.json";
  std::ofstream(only) << pid_host << "\n" << swarm << "\n" << no_record << "\n";
  auto nothing = run(proxy_bin() + " learn --policy " + policy_copy + " --audit " + only +
                     " --profile learn -o " + none + " 2>&1");
  INFO("only forged:\n" << nothing.output);
  CHECK(nothing.status == 1);
  CHECK(nothing.output.find("refused line " + only +
                            ":1: seen.widening leaves out "
                            "HostConfig.PidMode") != std::string::npos);
  CHECK(nothing.output.find("refused line " + only + ":2: operation SwarmInit") !=
        std::string::npos);
  CHECK(nothing.output.find("refused line " + only + ":3: not an audit line") != std::string::npos);
  CHECK(nothing.output.find("nothing valid was learned") != std::string::npos);
  struct stat st {};
  CHECK(::stat(none.c_str(), &st) != 0);  // nothing written
  run(std::string("rm -rf ") + dir);
}

TEST_CASE(
    "learn: --help is its usage, and lines recorded without record fields say to record "
    "under learn.json",
    "[integration][learn]") {
  auto help = run(proxy_bin() + " learn --help 2>&1");
  CHECK(help.status == 0);
  CHECK(help.output.find("dockgate-proxy learn --policy FILE --audit FILE") != std::string::npos);
  CHECK(help.output.find("unknown argument") == std::string::npos);

  // A profile that records no fields: its create lines carry no "seen".
  const std::string plain =
      R"({"default_profile":"plain","profiles":{"plain":{"allow":["SystemPing","SystemPingHead",)"
      R"("ContainerCreate","ContainerDelete"],"images":{"allow":["*"]}}}})";
  const std::string name = unique_name("dg-learn-plain");
  char dir[] = "/tmp/dockgate-plain.XXXXXX";
  REQUIRE(::mkdtemp(dir) != nullptr);
  {
    proxy_process gate(plain);
    REQUIRE(run(gate.docker() + " create --name " + name + " " + test_image() + " true").status ==
            0);
    gate.terminate();
    REQUIRE(run("cp " + gate.dir() + "/policy.json " + gate.dir() + "/audit.log " + dir).status ==
            0);
  }
  run(direct() + " rm -f " + name);
  auto r = run(proxy_bin() + " learn --policy " + dir + "/policy.json --audit " + dir +
               "/audit.log --profile plain -o " + dir + "/out.json 2>&1");
  INFO(r.output);
  // No "seen": no image was learned for the create, so the result does not load (as
  // docs/policy.md says); either way learn says how to record.
  CHECK(r.status == 1);
  CHECK(r.output.find("lists no images") != std::string::npos);
  CHECK(r.output.find("profile plain was recorded without \"record\": \"fields\": 1 create/exec "
                      "line(s) carry no \"seen\"") != std::string::npos);
  CHECK(r.output.find("record the client under compose/policies/learn.json") != std::string::npos);
  run(std::string("rm -rf ") + dir);
}

// The lines learn refuses as no audit record are exactly those docs/audit.schema.json
// refuses, as python3-jsonschema reads the schema (scripts/check-audit-log.py): every
// keyword, pattern edge and transport condition, one mutation of a good line each.
TEST_CASE("learn: the lines it refuses as no audit record are those python3-jsonschema refuses",
          "[integration][learn]") {
  const std::string good =
      R"({"time":"2026-12-01T21:00:00.000000Z","request_id":"0123abcd-0123456789ab",)"
      R"("client":{"transport":"unix","uid":0,"gid":0,"pid":7,"process":"docker"},)"
      R"("profile":"learn","method":"HEAD","path":"/_ping","operation":"SystemPingHead",)"
      R"("verdict":"allow","status":200,"bytes_in":0,"bytes_out":0,"duration_ms":0.25})";
  auto with = [&](const std::string& from, const std::string& to) {
    std::string l = good;
    const auto at = l.find(from);
    REQUIRE(at != std::string::npos);
    return l.replace(at, from.size(), to);
  };
  auto added = [&](const std::string& member) {
    return with(R"("status":200)", member + R"(,"status":200)");
  };
  const std::string hex64(64, 'a');
  const std::string client =
      R"("client":{"transport":"unix","uid":0,"gid":0,"pid":7,"process":"docker"})";
  const std::vector<std::string> lines{
      good,
      with("21:00:00.000000Z", "23:59:60.999999Z"),
      with("2026-12-01", "2026-00-01"),
      with("2026-12-01", "2026-12-32"),
      with("21:00:00", "24:00:00"),
      with("00.000000Z", "00.00000Z"),
      with("000000Z", "000000z"),
      with(".000000Z", ".000000+00:00"),
      with("0123456789ab\"", "0123456789abcdef\""),
      with("0123456789ab\"", "0123456789abcdef0\""),
      with("0123456789ab\"", "0123456789a\""),
      with("0123abcd-", "0123ABCD-"),
      with("0123abcd-", "0123abc-"),
      with("\"SystemPingHead\"", "\"\""),
      with("\"SystemPingHead\"", "\"systemPing\""),
      with("\"SystemPingHead\"", "\"System1\""),
      with("\"SystemPingHead\"", "\"S\""),
      added(R"("object":{"type":"image","digest":"sha256:)" + hex64 + "\"}"),
      added(R"("object":{"type":"image","digest":"sha256:short"})"),
      added(R"("object":{"type":"image","digest":"sha256+b64u:)" + std::string(32, 'A') + "\"}"),
      added(R"("object":{"type":"image","digest":"-sha256:)" + hex64 + "\"}"),
      added(R"("object":{"type":"image","digest":"sha..256:)" + hex64 + "\"}"),
      added(R"("object":{"type":"image","digest":"SHA256:)" + hex64 + "\"}"),
      added(R"("object":{"type":"exec","exec_id":")" + hex64 + "\"}"),
      added(R"("object":{"type":"exec","exec_id":")" + hex64.substr(1) + "\"}"),
      added(R"("object":{"type":"container"})"),
      added(R"("object":{"type":"container","name":""})"),
      added(R"("object":{"type":"daemon","name":"x"})"),
      added(R"("object":{"type":"container","name":"x","owner":"y"})"),
      with(client, R"("client":{"transport":"unix","uid":0,"address":"1.2.3.4"})"),
      with(client, R"("client":{"transport":"tls","address":"1.2.3.4","port":1,"subject":"CN=a"})"),
      with(client, R"("client":{"transport":"tls","subject":"CN=a","uid":0})"),
      with(client, R"("client":{"transport":"tcp","address":"1.2.3.4","port":65535})"),
      with(client, R"("client":{"transport":"tcp","address":"1.2.3.4","port":65536})"),
      with(client, R"("client":{"transport":"tcp","address":"1.2.3.4","uid":0})"),
      with(client, R"("client":{"transport":"unknown","uid":0,"address":"a"})"),
      with(client, R"("client":{"transport":"unix","uid":1.0})"),
      with(client, R"("client":{"transport":"unix","uid":1.5})"),
      with(client, R"("client":{"transport":"unix","uid":-1})"),
      with(client, R"("client":{"transport":"unix","process":""})"),
      with(client, R"("client":{"uid":0})"),
      with(client, R"("client":{"transport":"vsock"})"),
      with(client, R"("client":"unix")"),
      with(R"("status":200)", R"("status":0)"),
      with(R"("status":200)", R"("status":1)"),
      with(R"("status":200)", R"("status":99)"),
      with(R"("status":200)", R"("status":100)"),
      with(R"("status":200)", R"("status":599)"),
      with(R"("status":200)", R"("status":600)"),
      with(R"("status":200)", R"("status":200.0)"),
      with(R"("duration_ms":0.25)", R"("duration_ms":0)"),
      with(R"("duration_ms":0.25)", R"("duration_ms":-0.1)"),
      with(R"("duration_ms":0.25)", R"("duration_ms":"1")"),
      with(R"("bytes_in":0)", R"("bytes_in":-1)"),
      added(R"("hijacked":true)"),
      added(R"("hijacked":false)"),
      added(R"("changes":"")"),
      added(R"("changes":"x forced")"),
      added(R"("changes":[])"),
      added(R"("changes":[{"field":"a","action":"b","from":1,"to":null}])"),
      added(R"("changes":[{"field":"a"}])"),
      added(R"("changes":[{"field":"a","action":"b","why":1}])"),
      added(R"("changes":5)"),
      added(R"("seen":{"fields":[],"values":{"Envy":1},"widening":[]})"),
      added(R"("seen":{"fields":[],"values":{"Env.x":1},"widening":[]})"),
      added(R"("seen":{"fields":[],"values":{"HostConfig.LogConfig":1},"widening":[]})"),
      added(R"("seen":{"fields":[],"values":{"HostConfig.LogConfigs":1},"widening":[]})"),
      added(R"("seen":{"fields":[""],"values":{},"widening":[]})"),
      added(R"("seen":{"fields":[],"values":[],"widening":[]})"),
      added(R"("seen":{"fields":[],"values":{},"widening":[],"trusted":true})"),
      added(R"("rule":"")"),
      added(R"("would":"dockgate: x")"),
      added(R"("dropped":"")"),
      added(R"("extra":1)"),
      with(R"("verdict":"allow")", R"("verdict":"deny")"),
      with(R"("verdict":"allow")", R"("verdict":"Allow")"),
      with(R"("profile":"learn")", R"("profile":"")"),
      with(R"("method":"HEAD",)", ""),
      with(R"("path":"/_ping")", R"("path":5)"),
      "[]",
      "not json",
  };
  char dir[] = "/tmp/dockgate-schema.XXXXXX";
  REQUIRE(::mkdtemp(dir) != nullptr);
  const std::string log = std::string(dir) + "/lines.log";
  {
    std::ofstream out(log);
    for (const auto& l : lines) out << l << "\n";
  }
  auto numbers = [&](const std::string& output, const std::string& marker) {
    std::set<std::size_t> out;
    const std::string prefix = log + ":";
    for (std::size_t at = 0; (at = output.find(prefix, at)) != std::string::npos;) {
      at += prefix.size();
      const auto end = output.find('\n', at);
      const std::string rest = output.substr(at, end - at);
      if (rest.find(marker) != std::string::npos) out.insert(std::stoul(rest));
    }
    return out;
  };
  auto python = run("/usr/bin/python3 " + repo_root() + "/scripts/check-audit-log.py " +
                    repo_root() + "/docs/audit.schema.json " + log + " 2>&1");
  auto learn = run(proxy_bin() + " learn --policy " + repo_root() +
                   "/compose/policies/learn.json --audit " + log + " -o " + dir + "/out.json 2>&1");
  INFO("python3-jsonschema:\n" << python.output << "\nlearn:\n" << learn.output);
  const auto by_schema = numbers(python.output, ":");
  const auto by_learn = numbers(learn.output, "not an audit line");
  CHECK(by_schema.size() > 30);  // the table does reach the schema's refusals
  CHECK_FALSE(by_schema.contains(1));
  CHECK(by_learn == by_schema);
  CHECK(learn.status == 0);  // the good lines are learned
  run(std::string("rm -rf ") + dir);
}

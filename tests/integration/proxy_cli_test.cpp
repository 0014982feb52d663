// The docker CLI, pointed at dockgate-proxy, does its everyday work; outcomes are checked
// against the daemon's own record (asked directly on the engine socket).
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <thread>

#include "harness.hpp"

using namespace dockgate::test;
using namespace std::chrono_literals;

namespace {
const std::string cli_policy = "compose/policies/docker-cli.json";
const std::string ro_policy = "compose/policies/read-only.json";

std::string direct() {
  return docker_cli() + " -H " + engine_host();
}

// Removes a container directly on the engine when a test ends.
struct container_cleanup {
  std::string name;
  ~container_cleanup() { run(direct() + " rm -f " + name + " >/dev/null 2>&1"); }
};
}  // namespace

TEST_CASE("docker version through the proxy", "[integration][cli]") {
  proxy_process proxy(cli_policy);
  auto r = run(proxy.docker() + " version --format '{{.Server.APIVersion}} {{.Server.Version}}'");
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output.rfind("1.41 ", 0) == 0);
  CHECK(proxy.audit_contains("\"operation\":\"SystemVersion\",\"verdict\":\"allow\""));
}

TEST_CASE("docker run --rm prints the container's output", "[integration][cli]") {
  proxy_process proxy(cli_policy);
  const auto name = unique_name("dg-run");
  container_cleanup cleanup{name};
  auto r = run(proxy.docker() + " run --rm --name " + name + " " + test_image() +
               " sh -c 'echo hello from $(hostname); echo to-stderr >&2; exit 3'");
  INFO(r.output);
  CHECK(r.status == 3);
  CHECK(r.output.find("hello from") != std::string::npos);
  CHECK(r.output.find("to-stderr") != std::string::npos);
  // --rm: the daemon no longer has it.
  for (int i = 0; i < 50 && container_exists(name); ++i) std::this_thread::sleep_for(100ms);
  CHECK_FALSE(container_exists(name));
}

TEST_CASE("docker run -i passes piped stdin and its EOF", "[integration][cli][hijack]") {
  proxy_process proxy(cli_policy);
  // `cat` ends only when stdin reaches EOF; output continues after the half-close.
  // (stderr apart: the CLI prints the create answer's warnings of what the profile changed)
  auto r = run("{ printf 'line1\\nline2\\n' | " + proxy.docker() + " run --rm -i " + test_image() +
               " sh -c 'cat; echo after-eof' 2>" + proxy.dir() + "/cli.err; }");
  INFO(r.output << run("cat " + proxy.dir() + "/cli.err").output);
  CHECK(r.status == 0);
  CHECK(r.output == "line1\nline2\nafter-eof\n");
}

TEST_CASE("docker exec -i passes stdin into a running container", "[integration][cli][hijack]") {
  proxy_process proxy(cli_policy);
  const auto name = unique_name("dg-exec");
  container_cleanup cleanup{name};
  REQUIRE(
      run(proxy.docker() + " run -d --name " + name + " " + test_image() + " sleep 60").status ==
      0);
  auto r = run("printf 'a\\nb\\nc\\n' | " + proxy.docker() + " exec -i " + name +
               " sh -c 'wc -l; echo done'");
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output.find("3") != std::string::npos);
  CHECK(r.output.find("done") != std::string::npos);
  auto plain = run(proxy.docker() + " exec " + name + " echo exec-ok");
  CHECK(plain.output == "exec-ok\n");
}

TEST_CASE("docker logs -f streams lines as they are written", "[integration][cli][stream]") {
  proxy_process proxy(cli_policy);
  const auto name = unique_name("dg-logs");
  container_cleanup cleanup{name};
  REQUIRE(run(proxy.docker() + " run -d --name " + name + " " + test_image() +
              " sh -c 'echo first; sleep 2; echo second; sleep 60'")
              .status == 0);
  const auto start = std::chrono::steady_clock::now();
  background logs(proxy.docker() + " logs -f " + name);
  CHECK(logs.read_line(10s) == std::optional<std::string>("first"));
  CHECK(logs.read_line(10s) == std::optional<std::string>("second"));
  // The stream is still open (the container sleeps 60 s): "second" came through live.
  CHECK(std::chrono::steady_clock::now() - start < 8s);
  CHECK(logs.wait(0ms) == -1);
  run(direct() + " kill " + name);
  CHECK(logs.wait(10s) == 0);  // the follow ends when the container stops
}

TEST_CASE("docker events sees a container's lifecycle", "[integration][cli][stream]") {
  proxy_process proxy(cli_policy);
  const auto name = unique_name("dg-events");
  container_cleanup cleanup{name};
  background events(proxy.docker() + " events --filter container=" + name +
                    " --format '{{.Action}}'");
  std::this_thread::sleep_for(500ms);  // let the stream open before the first event
  REQUIRE(run(proxy.docker() + " run --name " + name + " " + test_image() + " true").status == 0);
  REQUIRE(run(proxy.docker() + " rm " + name).status == 0);
  std::vector<std::string> actions;
  while (auto line = events.read_line(10s)) {
    actions.push_back(*line);
    if (*line == "destroy") break;
  }
  INFO(Catch::Detail::stringify(actions));
  auto has = [&](const char* a) {
    return std::find(actions.begin(), actions.end(), a) != actions.end();
  };
  CHECK(has("create"));
  CHECK(has("start"));
  CHECK(has("die"));
  CHECK(has("destroy"));
}

TEST_CASE("docker pull from the local registry", "[integration][cli][stream]") {
  proxy_process proxy(cli_policy);
  const std::string ref = registry() + "/dockgate/test-busybox:latest";
  run(direct() + " rmi -f " + ref + " >/dev/null 2>&1");
  auto r = run(proxy.docker() + " pull " + ref);
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output.find("Digest: sha256:") != std::string::npos);
  CHECK(run(direct() + " image inspect " + ref).status == 0);
}

TEST_CASE("docker kill and rm act on the daemon", "[integration][cli]") {
  proxy_process proxy(cli_policy);
  const auto name = unique_name("dg-kill");
  container_cleanup cleanup{name};
  REQUIRE(
      run(proxy.docker() + " run -d --name " + name + " " + test_image() + " sleep 60").status ==
      0);
  CHECK(run(proxy.docker() + " kill " + name).status == 0);
  auto state = run(direct() + " inspect --format '{{.State.Running}} {{.State.ExitCode}}' " + name);
  CHECK(state.output == "false 137\n");
  CHECK(run(proxy.docker() + " rm " + name).status == 0);
  CHECK_FALSE(container_exists(name));
}

TEST_CASE("read-only profile: ps works, create is refused with the proxy's message",
          "[integration][cli]") {
  proxy_process proxy(ro_policy);
  CHECK(run(proxy.docker() + " ps").status == 0);
  const auto name = unique_name("dg-ro");
  container_cleanup cleanup{name};
  auto r = run(proxy.docker() + " run --name " + name + " " + test_image() + " true");
  INFO(r.output);
  CHECK(r.status != 0);
  CHECK(r.output.find("dockgate: ContainerCreate is not allowed by profile read-only") !=
        std::string::npos);
  CHECK_FALSE(container_exists(name));
}

TEST_CASE("unix listener mode and a TCP listener", "[integration][listener]") {
  {
    proxy_process proxy(cli_policy);
    struct stat st {};
    REQUIRE(::stat(proxy.socket_path().c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0660);
  }
  {
    const auto port = free_tcp_port();
    proxy_process proxy(cli_policy,
                        {"--socket-mode", "0600", "--listen", "tcp://127.0.0.1:" + port});
    struct stat st {};
    REQUIRE(::stat(proxy.socket_path().c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0600);
    auto r = run("DOCKER_HOST=tcp://127.0.0.1:" + port + " " + docker_cli() +
                 " version --format '{{.Server.APIVersion}}'");
    CHECK(r.output == "1.41\n");
    CHECK(proxy.audit_contains(
        "\"client\":{\"transport\":\"tcp\",\"address\":\"127.0.0.1\",\"port\":"));
  }
}

TEST_CASE("docker run -it works on a terminal", "[integration][cli][hijack]") {
  proxy_process proxy(cli_policy);
  // `script` gives the CLI a pseudo-terminal, as a person's shell would.
  auto r = run("printf 'echo hi-from-tty; tty; exit 5\\n' | timeout 30 script -qec \"" +
               proxy.docker() + " run --rm -it " + test_image() + " sh\" /dev/null");
  INFO(r.output);
  CHECK(r.status == 5);
  CHECK(r.output.find("hi-from-tty") != std::string::npos);
  CHECK(r.output.find("/dev/pts/") != std::string::npos);
}

TEST_CASE("a newer docker CLI (28, from the machine image) runs through docker-cli",
          "[integration][cli]") {
  const std::string cli28 = "/usr/local/bin/docker";
  if (run("test -x " + cli28).status != 0) {
    WARN("no " + cli28 + " here: nothing to test");
    return;
  }
  proxy_process proxy(cli_policy);
  // -m 8g: the one value it sets that the profile changes, the one warning it prints.
  auto r =
      run("{ printf 'in\\n' | DOCKER_HOST=" + proxy.host() + " " + cli28 + " run --rm -i -m 8g " +
          test_image() + " sh -c 'cat; echo out' 2>" + proxy.dir() + "/cli.err; }");
  const std::string err = run("cat " + proxy.dir() + "/cli.err").output;
  INFO(r.output << err);
  const auto warning = err.find("WARNING: dockgate: HostConfig.Memory clamped to 2 GiB");
  CHECK(warning != std::string::npos);
  CHECK(err.find("WARNING: dockgate:") == warning);
  CHECK(err.rfind("WARNING: dockgate:") == warning);
  CHECK(r.status == 0);
  CHECK(r.output == "in\nout\n");
}

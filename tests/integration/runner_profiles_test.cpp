// compose/policies/github-runner.json and gitlab-runner.json, judged by the daemon's record.
//
// GitHub: the exact docker CLI commands the Actions runner runs for a container job with a
// service (actions/runner, src/Runner.Worker: ContainerOperationProvider.cs and
// Container/DockerCommandManager.cs; argv as it builds them), through the gate, with the
// runner's directories laid out as it lays them out in a temporary runner root.
// GitLab: a replay of the docker executor's Engine API calls (tests/integration/clients/
// gitlab_docker_executor.py, python3-docker as the runner's Go client sends them).
// Dev containers: the real Dev Containers CLI (npm, scripts/node-clients.sh): up, exec,
// up --remove-existing-container, through the gate's unix socket.
#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "hardening_checks.hpp"
#include "harness.hpp"

using namespace dockgate::test;

namespace {

std::string direct() {
  return docker_cli() + " -H " + engine_host();
}

std::string shipped(const std::string& file) {
  std::ifstream in(repo_root() + "/compose/policies/" + file);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Every occurrence of `from` in `text` replaced by `to`.
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

// The runner's directories (src/Runner.Common/HostContext.cs: _work, its _temp, _actions,
// _tool, externals beside it, the runner's own files at the root).
struct runner_root {
  std::string root;
  runner_root() {
    root = "/tmp/" + unique_name("dg-gh") + "/actions-runner";
    REQUIRE(run("mkdir -p " + root + "/_work/_temp/_github_home " + root +
                "/_work/_temp/_github_workflow " + root + "/_work/_actions " + root +
                "/_work/_tool " + root + "/_work/app/app " + root + "/externals && echo '{}' > " +
                root + "/.credentials && chmod -R a+rwX " + root)
                .status == 0);
  }
  ~runner_root() { run("rm -rf " + root.substr(0, root.rfind('/'))); }
  runner_root(const runner_root&) = delete;
  runner_root& operator=(const runner_root&) = delete;
};

// The image only in the test registry, as a job's `container: image` names it.
struct pushed_image {
  std::string ref;
  pushed_image() : ref(registry() + "/dockgate/" + unique_name("ci") + ":1") {
    REQUIRE(run(direct() + " tag " + test_image() + " " + ref + " && " + direct() + " push " + ref +
                " >/dev/null && " + direct() + " rmi " + ref + " >/dev/null")
                .status == 0);
  }
  ~pushed_image() { run(direct() + " rmi -f " + ref + " >/dev/null 2>&1"); }
  pushed_image(const pushed_image&) = delete;
  pushed_image& operator=(const pushed_image&) = delete;
};

// The hardening every runner profile keeps, from `docker inspect`.
std::vector<std::string> runner_violations(const std::string& inspect_json,
                                           const std::vector<std::string>& bind_sources) {
  inspect_record r(inspect_json);
  if (!r.parsed()) return r.violations();
  const inspect_value hc = r.host_config();
  r.expect(compact(member(hc, "Privileged")) == "false", "Privileged");
  for (const char* ns : {"PidMode", "UTSMode", "UsernsMode"})
    r.expect(text(member(hc, ns)).empty(), std::string(ns) + " " + text(member(hc, ns)));
  r.expect(text(member(hc, "IpcMode")) != "host", "IpcMode host");
  r.expect(text(member(hc, "NetworkMode")) != "host", "NetworkMode host");
  r.expect(text(member(hc, "CgroupnsMode")) == "private", "CgroupnsMode");
  r.expect(is_empty(member(hc, "CapAdd")) && is_empty(member(hc, "Devices")), "CapAdd/Devices");
  // Published ports only on the host's loopback.
  const auto ports = member(hc, "PortBindings");
  if (ports && ports->is_object())
    for (auto [port, bindings] : ports->get_object())
      for (auto b : bindings.get_array()) {
        const auto ip = text(member(inspect_value(b), "HostIp"));
        r.expect(ip == "127.0.0.1" || ip == "::1",
                 "PortBindings " + std::string(port) + " on " + ip);
      }
  r.expect(text(member(member(hc, "LogConfig"), "Type")) == "json-file", "LogConfig");
  const auto memory = number(member(hc, "Memory"));
  r.expect(memory > 0 && memory <= 8589934592, "Memory " + std::to_string(memory));
  const auto mounts = member(r.container(), "Mounts");
  if (mounts && mounts->is_array())
    for (auto m : mounts->get_array()) {
      const inspect_value mount = m;
      if (text(member(mount, "Type")) != "bind") continue;
      const auto source = text(member(mount, "Source"));
      r.expect(std::find(bind_sources.begin(), bind_sources.end(), source) != bind_sources.end(),
               "bind from " + source);
    }
  return r.violations();
}

}  // namespace

TEST_CASE("github-runner.json: the runner's docker CLI calls for a container job with a service",
          "[integration][runners]") {
  runner_root dirs;
  pushed_image image;
  const std::string policy =
      replaced(shipped("github-runner.json"), "/home/runner/actions-runner", dirs.root);
  proxy_process proxy(policy);
  const std::string docker = proxy.docker();
  auto ok = [&](const std::string& command) {
    auto r = run(command);
    INFO(command << "\n" << r.output);
    CHECK(r.status == 0);
    return r.output;
  };
  // DockerInstanceLabel: 6 hex of the runner's .runner file's hash; the job network's name.
  const std::string label = "a1b2c3";
  const std::string network = "github_network_" + unique_name("n").substr(2) + "0000";
  const std::string job = unique_name("job");
  const std::string service = unique_name("redis");
  struct cleanup {
    std::vector<std::string> containers;
    std::string network;
    ~cleanup() {
      for (const auto& c : containers) run(direct() + " rm -f " + c + " >/dev/null 2>&1");
      run(direct() + " network rm " + network + " >/dev/null 2>&1");
    }
  } leftovers{{job, service}, network};

  // StartContainersAsync: versions, leftovers of earlier jobs, the job network.
  CHECK_FALSE(ok(docker + " version --format '{{.Server.APIVersion}}'").empty());
  ok(docker + " version --format '{{.Client.APIVersion}}'");
  CHECK(ok(docker + " ps --all --quiet --no-trunc --filter \"label=" + label + "\"").empty());
  ok(docker + " network prune --force --filter \"label=" + label + "\"");
  ok(docker + " network create --label " + label + " " + network);
  ok(docker + " pull " + image.ref);

  // A service container (services: redis: image): its network alias, the runner's env.
  const std::string env = " -e GITHUB_ACTIONS=true -e CI=true ";
  // services: redis: ports: [6379]: the daemon picks the host port, the gate the address.
  const auto service_created =
      ok(docker + " create --name " + service + " --label " + label + " --network " + network +
         " --network-alias redis -p 6379" + env + image.ref + " sleep 300");
  CHECK_THAT(service_created,
             Catch::Contains("WARNING: dockgate: published ports bound to loopback"));
  const std::string service_id = service_created.substr(service_created.size() - 65, 64);
  // The job container as the runner creates it: the engine socket is refused by name ...
  const std::string w = dirs.root + "/_work";
  const std::string volumes =
      " -v \"" + w + "\":\"/__w\" -v \"" + dirs.root + "/externals\":\"/__e\":ro -v \"" + w +
      "/_temp\":\"/__w/_temp\" -v \"" + w + "/_actions\":\"/__w/_actions\" -v \"" + w +
      "/_tool\":\"/__t\" -v \"" + w + "/_temp/_github_home\":\"/github/home\" -v \"" + w +
      "/_temp/_github_workflow\":\"/github/workflow\"";
  const std::string job_create = " create --name " + job + " --label " + label +
                                 " --workdir /__w/app/app --network " + network + env +
                                 "-e \"HOME=/github/home\"";
  const std::string entry = " --entrypoint \"tail\" " + image.ref + " \"-f\" \"/dev/null\"";
  // The job container exactly as the runner creates it: the engine socket it adds is left
  // out (binds.drop) with a warning in the job's log, and any other way to it is refused.
  auto via_run = run(docker + job_create + " -v \"/run/docker.sock\":\"/var/run/docker.sock\"" +
                     volumes + entry);
  CHECK_THAT(via_run.output,
             Catch::Contains("HostConfig.Binds entry \"/run/docker.sock:/var/run/docker.sock\" "
                             "is not allowed (profile github-runner, rule binds)"));
  CHECK_FALSE(container_exists(job));
  // ... and so is the runner's own root (its .credentials), to any target.
  auto root_bind =
      run(docker + " create --label " + label + " -v \"" + dirs.root + "\":\"/__w\" " + image.ref);
  CHECK_THAT(root_bind.output, Catch::Contains("rule binds"));
  // ... and a privileged job, with the profile's hint.
  auto privileged = run(docker + " create --privileged " + image.ref);
  CHECK_THAT(privileged.output, Catch::Contains("HostConfig.Privileged is not allowed: a job that "
                                                "builds images can use rootless BuildKit"));
  const auto created =
      ok(docker + job_create + " -v \"/var/run/docker.sock\":\"/var/run/docker.sock\"" + volumes +
         entry);
  CHECK_THAT(created,
             Catch::Contains("WARNING: dockgate: bind /var/run/docker.sock:/var/run/docker.sock "
                             "left out (profile github-runner, rule binds.drop)"));
  const auto id_at = created.find_first_of("0123456789abcdef", created.rfind("binds.drop)") + 11);
  REQUIRE(id_at != std::string::npos);
  const std::string job_id = created.substr(id_at, 64);
  REQUIRE(job_id.size() == 64);
  for (const auto& c : {service_id, job_id}) {
    ok(docker + " start " + c);
    CHECK(ok(docker + " ps --all --filter id=" + c +
             " --filter status=running --no-trunc --format "
             "\"{{.ID}} {{.Status}}\"")
              .find(" Up ") != std::string::npos);
  }
  // Services: ports, health; the job: its PATH.
  CHECK_THAT(ok(docker + " port " + service), Catch::StartsWith("6379/tcp -> 127.0.0.1:"));
  CHECK(
      ok(docker +
         " inspect --format=\"{{if .Config.Healthcheck}}{{print .State.Health.Status}}{{end}}\" " +
         service) == "\n");
  CHECK_THAT(
      ok(docker + " inspect " + job_id + " --format \"{{range .Config.Env}}{{println .}}{{end}}\""),
      Catch::Contains("PATH="));

  // A step: the runner writes the script into _temp and execs it in the job container.
  {
    std::ofstream step(w + "/_temp/step.sh");
    step << "echo built > /__w/app/app/out.txt\nnslookup redis >/dev/null\nid -u\n";
  }
  CHECK(ok(docker + " exec -i --workdir /__w/app/app -e GITHUB_ACTIONS -e CI " + job_id +
           " sh -e /__w/_temp/step.sh") == "0\n");
  std::ifstream out(w + "/app/app/out.txt");
  std::string line;
  std::getline(out, line);
  CHECK(line == "built");
  ok(docker + " logs --details " + service);

  // The daemon's record of both.
  const std::vector<std::string> binds = {w,
                                          dirs.root + "/externals",
                                          w + "/_temp",
                                          w + "/_actions",
                                          w + "/_tool",
                                          w + "/_temp/_github_home",
                                          w + "/_temp/_github_workflow"};
  CHECK(runner_violations(run(direct() + " inspect " + job_id).output, binds) ==
        std::vector<std::string>{});
  CHECK(runner_violations(run(direct() + " inspect " + service).output, {}) ==
        std::vector<std::string>{});
  const auto record = run(direct() + " inspect " + job_id).output;
  CHECK(record.find("docker.sock") == std::string::npos);
  CHECK(record.find(R"("Destination": "/__e")") != std::string::npos);

  // StopContainersAsync.
  ok(docker + " rm --force " + job_id);
  ok(docker + " rm --force " + service);
  ok(docker + " network rm " + network);
  CHECK_FALSE(container_exists(job));
  CHECK(run(direct() + " network inspect " + network).status != 0);
}

TEST_CASE("gitlab-runner.json: a replay of the docker executor's Engine API calls",
          "[integration][runners]") {
  if (run("/usr/bin/python3 -c 'import docker'").status != 0)
    FAIL("python3-docker is missing: scripts/install-deps.sh installs it");
  pushed_image image;
  proxy_process proxy("compose/policies/gitlab-runner.json");
  const std::string prefix = unique_name("runner-dg");
  const std::string script = repo_root() + "/tests/integration/clients/gitlab_docker_executor.py";
  struct cleanup {
    std::string prefix;
    ~cleanup() {
      run(direct() + " ps -aq --filter name=" + prefix + " | xargs -r " + direct() +
          " rm -fv >/dev/null 2>&1");
      run(direct() + " volume ls -q --filter name=" + prefix + " | xargs -r " + direct() +
          " volume rm >/dev/null 2>&1");
      run(direct() + " network ls -q --filter name=" + prefix + " | xargs -r " + direct() +
          " network rm >/dev/null 2>&1");
    }
  } leftovers{prefix};
  auto r = run("DOCKER_HOST=" + proxy.host() + " /usr/bin/python3 " + script + " " + image.ref +
               " " + prefix + " 2>&1");
  INFO(r.output);
  REQUIRE(r.status == 0);
  // What the replay saw: the job's script ran with its services reachable and its cache
  // kept; the privileged job and the host bind were refused with the profile's words.
  CHECK_THAT(r.output, Catch::Contains("job output: cached=1 service=ok"));
  // Its import of the prebuilt helper tarball is refused; it pulls instead.
  CHECK_THAT(r.output, Catch::Contains("helper import: 403 dockgate: ImageCreate is allowed only "
                                       "as a pull (fromImage)"));
  CHECK_THAT(r.output,
             Catch::Contains("privileged: dockgate: HostConfig.Privileged is not allowed: build "
                             "images with rootless BuildKit or kaniko"));
  CHECK_THAT(r.output, Catch::Contains("(profile gitlab-runner, rule deny)"));
  CHECK_THAT(r.output, Catch::Contains("socket: dockgate: HostConfig.Binds entry "
                                       "\"/var/run/docker.sock:/var/run/docker.sock\""));
  // The daemon's record: the build container the replay kept for it, its cache volume.
  const std::string build = prefix + "-build-kept";
  const auto record = run(direct() + " inspect " + build).output;
  INFO(record.substr(0, 3000));
  CHECK(runner_violations(record, {}) == std::vector<std::string>{});
  CHECK(record.find(R"("dockgate.owner": "gitlab-runner")") != std::string::npos);
  const auto volume = run(direct() + " volume inspect " + prefix +
                          "-project-1-concurrent-0-cache-3c3f060a0374fc8bc39395164f415a70")
                          .output;
  CHECK(volume.find(R"("dockgate.owner": "gitlab-runner")") != std::string::npos);
  CHECK(volume.find(R"("com.gitlab.gitlab-runner.type": "cache")") != std::string::npos);
}

TEST_CASE("devcontainer.json: the Dev Containers CLI's up and exec and its removal",
          "[integration][runners][devcontainer]") {
  const char* modules = std::getenv("DOCKGATE_NODE_PATH");
  if (!modules || !*modules)
    FAIL("DOCKGATE_NODE_PATH is not set: scripts/node-clients.sh installs @devcontainers/cli");
  const std::string cli = std::string(modules) + "/.bin/devcontainer";
  const std::string base = "/tmp/" + unique_name("dg-dc");
  const std::string root = base + "/workspaces";
  const std::string project = root + "/app";
  struct cleanup {
    std::string base, project;
    ~cleanup() {
      run(direct() + " ps -aq --filter label=devcontainer.local_folder=" + project +
          " | xargs -r " + direct() + " rm -f >/dev/null 2>&1");
      run("rm -rf " + base);
    }
  } leftovers{base, project};
  // The project's devcontainer.json: the image, no UID-update image build; the workspace at
  // the CLI's own target, /workspaces/app.
  auto project_config = [&](const std::string& dir, const std::string& extra) {
    REQUIRE(run("mkdir -p " + dir + "/.devcontainer").status == 0);
    std::ofstream(dir + "/.devcontainer/devcontainer.json")
        << "{\"image\": \"" << test_image() << "\", \"updateRemoteUserUID\": false" << extra
        << "}\n";
  };
  project_config(project, "");
  proxy_process proxy(replaced(shipped("devcontainer.json"), "/srv/workspaces", root));
  const std::string dc = "cd " + base + " && DOCKER_HOST=" + proxy.host() + " " + cli;
  auto ok = [&](const std::string& command) {
    auto r = run(command + " 2>&1");
    INFO(command << "\n" << r.output);
    CHECK(r.status == 0);
    return r.output;
  };
  const std::string folder = " --workspace-folder " + project;
  const auto up = ok(dc + " up" + folder);
  CHECK_THAT(up, Catch::Contains(R"("outcome":"success")"));
  const std::string find_it =
      direct() + " ps -q --no-trunc --filter label=devcontainer.local_folder=" + project;
  const auto first = run(find_it).output;
  REQUIRE(first.size() == 65);
  CHECK_THAT(ok(dc + " exec" + folder + " id -u"), Catch::EndsWith("0\n"));
  ok(dc + " exec" + folder + " sh -c 'echo from-container > /workspaces/app/made.txt'");
  std::ifstream made(project + "/made.txt");
  std::string line;
  std::getline(made, line);
  CHECK(line == "from-container");

  // The daemon's record: the workspace is the one bind, the hardening holds.
  const auto record = run(direct() + " inspect " + first.substr(0, 64)).output;
  INFO(record.substr(0, 3000));
  CHECK(runner_violations(record, {project}) == std::vector<std::string>{});
  CHECK(record.find(R"("Destination": "/workspaces/app")") != std::string::npos);
  CHECK(record.find(R"("dockgate.workspace": "app")") != std::string::npos);
  CHECK(record.find(R"("dockgate.owner": "devcontainer")") != std::string::npos);

  // The CLI's own removal: up --remove-existing-container removes the old one first.
  CHECK_THAT(ok(dc + " up --remove-existing-container" + folder),
             Catch::Contains(R"("outcome":"success")"));
  const auto second = run(find_it).output;
  CHECK(second.size() == 65);
  CHECK(second != first);
  CHECK(run(direct() + " inspect " + first.substr(0, 64)).status != 0);

  // A privileged dev container is refused with the profile's hint; a folder outside the
  // workspace root is a host bind like any other (default deny).
  const std::string loose = root + "/loose";
  project_config(loose, ", \"privileged\": true");
  auto privileged = run(dc + " up --workspace-folder " + loose + " 2>&1");
  CHECK(privileged.status != 0);
  CHECK_THAT(privileged.output, Catch::Contains("HostConfig.Privileged is not allowed: a dev "
                                                "container runs unprivileged here"));
  const std::string outside = base + "/elsewhere";
  project_config(outside, "");
  auto elsewhere = run(dc + " up --workspace-folder " + outside + " 2>&1");
  CHECK(elsewhere.status != 0);
  CHECK_THAT(elsewhere.output, Catch::Contains("dockgate: HostConfig.Mounts is not allowed") &&
                                   Catch::Contains("(profile devcontainer, rule default)"));

  // Removal as a person does it: docker rm -f of the container the CLI labelled.
  ok("DOCKER_HOST=" + proxy.host() + " " + docker_cli() + " rm -f " + second.substr(0, 64));
  CHECK(run(find_it).output.empty());
}

// Operator features against a real daemon: audit mode, per-client profiles, the
// plaintext-TCP opt-in.
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <memory>
#include <thread>

#include "harness.hpp"

using namespace dockgate::test;
using namespace std::chrono_literals;

TEST_CASE("audit mode lets refused requests through and records what it would do",
          "[integration][operator]") {
  proxy_process proxy(
      R"({"profiles":{"learn":{"mode":"audit","allow":["SystemPing","SystemPingHead","ContainerCreate",
      "ContainerDelete"],"images":{"allow":["docker.io/library/*"]},"container_create":{"HostConfig.Memory":{"max":1000000000}}}}})");
  // VolumeList is not allowed: in audit mode it goes through, and the log says so.
  auto r = raw_exchange(proxy.socket_path(),
                        "GET /v1.41/volumes HTTP/1.1\r\nHost: d\r\nConnection: close\r\n\r\n");
  CHECK(r.status() == 200);
  CHECK(proxy.audit_contains("\"would\":\"dockgate: VolumeList is not allowed by profile learn\""));
  // A create the profile would refuse (image) and change (memory) goes up as sent.
  const auto name = unique_name("dg-audit");
  const std::string body = R"({"Image":")" + test_image() + R"(","HostConfig":{"Memory":0}})";
  auto created =
      raw_exchange(proxy.socket_path(), "POST /v1.41/containers/create?name=" + name +
                                            " HTTP/1.1\r\nHost: d\r\nContent-Type: "
                                            "application/json\r\nContent-Length: " +
                                            std::to_string(body.size()) + "\r\n\r\n" + body);
  INFO(created.bytes);
  CHECK(created.status() == 201);
  CHECK(run(docker_cli() + " -H " + engine_host() + " inspect --format '{{.HostConfig.Memory}}' " +
            name)
            .output == "0\n");
  CHECK(proxy.audit_contains("is not in the image allowlist"));
  // Malformed requests are refused in audit mode too.
  auto dup =
      raw_exchange(proxy.socket_path(), "GET /v1.41/_ping?a=%zz HTTP/1.1\r\nHost: d\r\n\r\n");
  CHECK(dup.status() == 400);
  run(docker_cli() + " -H " + engine_host() + " rm -f " + name);
}

TEST_CASE("the unix peer's uid selects its profile", "[integration][operator]") {
  proxy_process proxy(R"({"clients":[{"uid":4242,"profile":"ro"}],"default_profile":"cli",
      "profiles":{"cli":{"allow":["SystemPing","SystemPingHead","SystemVersion"]},
                  "ro":{"allow":["SystemPing","SystemPingHead"]}}})",
                      {"--socket-mode", "0666"});
  ::chmod(proxy.dir().c_str(), 0755);  // let uid 4242 reach the socket
  const std::string as_4242 = "HOME=/tmp setpriv --reuid 4242 --regid 4242 --clear-groups ";
  auto other =
      run(as_4242 + "env " + proxy.docker() + " version --format '{{.Server.APIVersion}}'");
  INFO(other.output);
  CHECK(other.output.find("dockgate: SystemVersion is not allowed by profile ro") !=
        std::string::npos);
  auto root = run(proxy.docker() + " version --format '{{.Server.APIVersion}}'");
  CHECK(root.output == "1.41\n");
  CHECK(proxy.audit_contains(
      "\"client\":{\"transport\":\"unix\",\"uid\":4242,\"gid\":4242,\"pid\":"));
}

TEST_CASE("a client no rule matches is refused when there is no default",
          "[integration][operator]") {
  proxy_process proxy(
      R"({"clients":[{"uid":4242,"profile":"ro"}],"profiles":{"ro":{"allow":["SystemPing"]}}})");
  auto r = raw_exchange(proxy.socket_path(), "GET /v1.41/_ping HTTP/1.1\r\nHost: d\r\n\r\n");
  CHECK(r.status() == 403);
  CHECK(r.bytes.find("dockgate: no profile for client unix:uid=0") != std::string::npos);
}

TEST_CASE("plaintext TCP on a non-loopback address needs an explicit opt-in",
          "[integration][operator]") {
  CHECK_THROWS_WITH(proxy_process("compose/policies/read-only.json",
                                  {"--listen", "tcp://0.0.0.0:" + free_tcp_port()}),
                    Catch::Contains("--allow-insecure-tcp"));
}

// A start refused for one listener never accepted on another: every listener is bound
// first, and only then does any listen. Judged by a client that tries the unix listener
// as fast as it can while the refused gate lives: not one connect may succeed.
TEST_CASE("a refused start accepts no connection on any listener, not even briefly",
          "[integration][operator]") {
  char tmpl[] = "/tmp/dockgate-refused.XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  const std::string policy = root_owned_copy("compose/policies/read-only.json");
  const std::string socket = dir + "/gate.sock";
  std::vector<std::string> args = {
      proxy_bin(),        "--upstream", engine_host(),
      "--policy",         policy,       "--listen",
      "unix://" + socket, "--listen",   "tcp://0.0.0.0:" + free_tcp_port()};
  const pid_t pid = ::fork();
  if (pid == 0) {
    int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::dup2(null, 2);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket.c_str(), sizeof addr.sun_path - 1);
  int accepted = 0, status = 0, tries = 0;
  for (;;) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) ++accepted;
    ::close(fd);
    ++tries;
    if (::waitpid(pid, &status, WNOHANG) == pid) break;
  }
  INFO("connect attempts while the refused gate ran: " << tries);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) != 0);
  CHECK(accepted == 0);
  run("rm -rf " + dir + " " + policy.substr(0, policy.rfind('/')));
}

TEST_CASE("metrics and health on their own listener", "[integration][operator][metrics]") {
  const std::string port = free_tcp_port();
  proxy_process proxy("compose/policies/docker-cli.json", {"--metrics", "tcp://127.0.0.1:" + port});
  const std::string base = "curl -s http://127.0.0.1:" + port;
  CHECK(run(base + "/healthz").output == R"({"status":"ok","daemon":"answers"})");
  CHECK(run(proxy.docker() + " ps").status == 0);
  CHECK(run(proxy.docker() + " volume create x").status != 0);
  // A held events stream counts as an open stream while it lasts.
  background events(proxy.docker() + " events");
  std::string text;
  for (int i = 0; i < 50; ++i) {
    text = run(base + "/metrics").output;
    if (text.find("dockgate_open_streams 1\n") != std::string::npos) break;
    std::this_thread::sleep_for(100ms);
  }
  INFO(text);
  CHECK(text.find("dockgate_open_streams 1\n") != std::string::npos);
  CHECK(text.find("dockgate_requests_total{profile=\"docker-cli\",operation=\"ContainerList\","
                  "verdict=\"allow\",status=\"200\"}") != std::string::npos);
  CHECK(text.find("dockgate_requests_total{profile=\"docker-cli\",operation=\"VolumeCreate\","
                  "verdict=\"deny\",status=\"403\"} 1") != std::string::npos);
  CHECK(text.find("dockgate_refusals_total{profile=\"docker-cli\",rule=\"operation\"} 1") !=
        std::string::npos);
  CHECK(text.find("dockgate_daemon_up 1\n") != std::string::npos);
  events.kill();
  // The gate's listeners do not serve metrics, and the health check asks the daemon.
  CHECK(run("curl -s --unix-socket " + proxy.socket_path() + " http://d/metrics")
            .output.find("dockgate_requests_total") == std::string::npos);
  const std::string port2 = free_tcp_port();
  proxy_process orphan("compose/policies/docker-cli.json",
                       {"--metrics", "tcp://127.0.0.1:" + port2}, {},
                       "unix:///nonexistent/docker.sock");
  CHECK(
      run("curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:" + port2 + "/healthz").output ==
      "503");
  CHECK(
      run("curl -s http://127.0.0.1:" + port2 + "/metrics").output.find("dockgate_daemon_up 0\n") !=
      std::string::npos);
}

// The shipped dashboard and alerting rules (compose/monitoring) select only metrics a
// running gate declares on /metrics: a panel or alert on a name the gate does not export
// would show nothing, or never fire.
TEST_CASE("the shipped dashboard and alerting rules ask only for metrics a running gate exports",
          "[integration][operator][metrics]") {
  const std::string port = free_tcp_port();
  proxy_process proxy("compose/policies/docker-cli.json", {"--metrics", "tcp://127.0.0.1:" + port});
  const std::string scrape = proxy.dir() + "/scrape.txt";
  REQUIRE(run("curl -sf -o " + scrape + " http://127.0.0.1:" + port + "/metrics").status == 0);
  const auto checked =
      run("cd " + repo_root() + " && /usr/bin/python3 tests/monitoring/check_exprs.py " + scrape +
          " compose/monitoring/grafana-dashboard.json compose/monitoring/alerts.yml 2>&1");
  INFO(checked.output);
  CHECK(checked.status == 0);
}

TEST_CASE("systemd socket activation: the listener systemd opened is used, and left to it",
          "[integration][operator]") {
  if (run("command -v systemd-socket-activate").status != 0)
    FAIL("systemd-socket-activate is missing (package systemd)");
  std::string dir = run("mktemp -d").output;
  dir.pop_back();  // the newline
  const std::string sock = dir + "/activated.sock";
  // systemd-socket-activate listens, then execs the proxy with LISTEN_FDS=1 on the first
  // connection, as systemd does for dockgate-proxy.socket.
  background activated("systemd-socket-activate -l " + sock + " " + proxy_bin() + " --upstream " +
                       engine_host() + " --listen unix://" + sock + " --policy " +
                       root_owned_copy("compose/policies/read-only.json"));
  for (int i = 0; i < 100 && run("test -S " + sock).status != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  auto ping = raw_exchange(sock, "GET /_ping HTTP/1.1\r\nHost: d\r\nConnection: close\r\n\r\n");
  CHECK(ping.status() == 200);
  auto refused = raw_exchange(
      sock, "POST /v1.41/containers/create HTTP/1.1\r\nHost: d\r\nContent-Length: 2\r\n\r\n{}");
  CHECK(refused.status() == 403);  // the policy holds on the inherited socket
  activated.kill();
  CHECK(run("test -S " + sock).status == 0);  // systemd's file: the proxy does not remove it
  run("rm -rf " + dir);
}

namespace {
// Holds N connections to a unix socket, each with `GET /events` sent; prints how many got
// a status line within 10 s, then whether a fresh client's /_ping is answered while they
// are held, then waits for stdin to close.
const char* hold_events = R"(
import socket, sys, select, time
path, n = sys.argv[1], int(sys.argv[2])
held = []
for i in range(n):
    s = socket.socket(socket.AF_UNIX); s.connect(path)
    s.sendall(b'GET /v1.41/events HTTP/1.1\r\nHost: d\r\n\r\n'); held.append(s)
answered, deadline = 0, time.time() + 10
pending = list(held)
while pending and time.time() < deadline:
    ready, _, _ = select.select(pending, [], [], 0.5)
    for s in ready:
        if s.recv(64).startswith(b'HTTP/1.1 200'): answered += 1
        pending.remove(s)
print('answered', answered, flush=True)
p = socket.socket(socket.AF_UNIX); p.connect(path); p.settimeout(float(sys.argv[3]))
p.sendall(b'GET /_ping HTTP/1.1\r\nHost: d\r\nConnection: close\r\n\r\n')
try: print('ping', p.recv(64).split(b'\r\n')[0].decode(), flush=True)
except socket.timeout: print('ping timeout', flush=True)
if len(sys.argv) > 4:  # close one held stream: the waiting ping is accepted now
    held[0].close()
    p.settimeout(5)
    try: print('after close', p.recv(64).split(b'\r\n')[0].decode(), flush=True)
    except socket.timeout: print('after close timeout', flush=True)
sys.stdin.read()
)";
}  // namespace

TEST_CASE(
    "descriptors: the soft limit is raised, every held stream is served, and a new client too",
    "[integration][operator][limits]") {
  std::string dir = run("mktemp -d").output;
  dir.pop_back();
  const std::string sock = dir + "/gate.sock";
  std::ofstream(dir + "/hold.py") << hold_events;
  // Started as with the default soft limit of many hosts (here 256), under a hard limit of 4096.
  background gate("prlimit --nofile=256:4096 " + proxy_bin() + " --upstream " + engine_host() +
                  " --listen unix://" + sock + " --policy " +
                  root_owned_copy("compose/policies/read-only.json") + " 2>" + dir + "/err");
  for (int i = 0; i < 200 && run("test -S " + sock).status != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  // (the proxy itself: prlimit execs it; the shell that started prlimit is not it)
  const std::string pid =
      run("pgrep -f '^" + proxy_bin() + " .*listen unix://" + sock + "' | head -n 1").output;
  INFO(run("cat " + dir + "/err").output);
  CHECK(run("grep 'Max open files' /proc/" + pid.substr(0, pid.size() - 1) + "/limits")
            .output.find("4096                 4096") != std::string::npos);
  // 600 held streams need 1200 descriptors: more than the soft limit it started with.
  background holder("/usr/bin/python3 " + dir + "/hold.py " + sock + " 600 5");
  auto answered = holder.read_line(std::chrono::seconds(30));
  auto ping = holder.read_line(std::chrono::seconds(10));
  CHECK(answered.value_or("") == "answered 600");
  CHECK(ping.value_or("") == "ping HTTP/1.1 200 OK");
  holder.kill();
  gate.kill();
  run("rm -rf " + dir);
}

TEST_CASE("descriptors: at the connection limit the gate stops accepting instead of starving",
          "[integration][operator][limits]") {
  const std::string port = free_tcp_port();
  proxy_process proxy("compose/policies/read-only.json",
                      {"--max-connections", "5", "--metrics", "tcp://127.0.0.1:" + port});
  std::ofstream(proxy.dir() + "/hold.py") << hold_events;
  background holder("/usr/bin/python3 " + proxy.dir() + "/hold.py " + proxy.socket_path() +
                    " 5 1 close-one");
  CHECK(holder.read_line(std::chrono::seconds(20)).value_or("") == "answered 5");
  // The sixth client is not accepted (it waits in the backlog), not accepted and starved...
  CHECK(holder.read_line(std::chrono::seconds(10)).value_or("") == "ping timeout");
  // ...and is served as soon as a held stream closes.
  CHECK(holder.read_line(std::chrono::seconds(10)).value_or("") == "after close HTTP/1.1 200 OK");
  CHECK(run("curl -s http://127.0.0.1:" + port + "/metrics")
            .output.find("dockgate_connection_limit 5") != std::string::npos);
  CHECK(run("grep -c 'connection limit 5 reached' " + proxy.dir() + "/proxy.err").output != "0\n");
}

TEST_CASE("SIGHUP reloads the policy for new requests, a bad one is refused and the old one stays",
          "[integration][operator][signals]") {
  const std::string allow_list =
      R"({"default_profile":"p","profiles":{"p":{"confine_to_owned":false,"allow":["SystemPing","SystemEvents","ContainerList"]}}})";
  proxy_process proxy(allow_list);
  auto get = [&](const std::string& target) {
    return raw_exchange(proxy.socket_path(),
                        "GET " + target + " HTTP/1.1\r\nHost: d\r\nConnection: close\r\n\r\n")
        .status();
  };
  CHECK(get("/v1.41/containers/json") == 200);
  // A stream that started under the old policy.
  background events("curl -sN --unix-socket " + proxy.socket_path() +
                    " 'http://d/v1.41/events?filters=%7B%22type%22%3A%5B%22container%22%5D%7D'");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // The new policy: no more ContainerList.
  std::ofstream(proxy.dir() + "/policy.json")
      << R"({"default_profile":"p","profiles":{"p":{"confine_to_owned":false,"allow":["SystemPing","SystemEvents"]}}})";
  ::kill(proxy.pid(), SIGHUP);
  for (int i = 0; i < 50 && get("/v1.41/containers/json") != 403; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(get("/v1.41/containers/json") == 403);
  CHECK(get("/_ping") == 200);
  // The held stream still delivers: an event arrives on it.
  const auto name = unique_name("dg-hup");
  run(docker_cli() + " -H " + engine_host() + " run --rm --name " + name + " " + test_image() +
      " true");
  auto line = events.read_line(std::chrono::seconds(10));
  CHECK(line.value_or("").find(name) != std::string::npos);
  // A broken policy: refused, the current one stays, the gate lives on.
  std::ofstream(proxy.dir() + "/policy.json")
      << R"({"profiles":{"p":{"allow":["NoSuchOperation"]}}})";
  ::kill(proxy.pid(), SIGHUP);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(get("/_ping") == 200);
  CHECK(get("/v1.41/containers/json") == 403);
  CHECK(run("grep -c 'keeping the current one' " + proxy.dir() + "/proxy.err").output == "1\n");
  CHECK(::kill(proxy.pid(), 0) == 0);
}

// A refused SIGHUP leaves the old policy in force: the metrics say so (the alert
// DockgatePolicyReloadFailed) until a reload applies again.
TEST_CASE("a refused SIGHUP reload shows on /metrics until one applies",
          "[integration][operator][signals][metrics]") {
  const std::string port = free_tcp_port();
  const std::string good =
      R"({"default_profile":"p","profiles":{"p":{"confine_to_owned":false,"allow":["SystemPing"]}}})";
  proxy_process proxy(good, {"--metrics", "tcp://127.0.0.1:" + port});
  const std::string scrape = "curl -s http://127.0.0.1:" + port + "/metrics";
  auto has = [&](const std::string& what) {
    return run(scrape).output.find(what) != std::string::npos;
  };
  // Bounded: until the gate has acted on the signal, as its metrics say.
  auto hangup_until = [&](const std::string& what) {
    ::kill(proxy.pid(), SIGHUP);
    for (int i = 0; i < 100 && !has(what); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return has(what);
  };
  CHECK(has("dockgate_policy_last_reload_successful 1\n"));
  CHECK(has("dockgate_policy_reloads_total{result=\"failure\"} 0\n"));
  CHECK_FALSE(
      has("dockgate_policy_last_reload_success_timestamp_seconds 0.000\n"));  // set at start
  std::ofstream(proxy.dir() + "/policy.json")
      << R"({"profiles":{"p":{"allow":["NoSuchOperation"]}}})";
  CHECK(hangup_until("dockgate_policy_reloads_total{result=\"failure\"} 1\n"));
  CHECK(has("dockgate_policy_last_reload_successful 0\n"));
  CHECK(has("dockgate_policy_reloads_total{result=\"success\"} 0\n"));
  CHECK(run("grep -c 'keeping the current one' " + proxy.dir() + "/proxy.err").output == "1\n");
  std::ofstream(proxy.dir() + "/policy.json") << good;
  CHECK(hangup_until("dockgate_policy_reloads_total{result=\"success\"} 1\n"));
  CHECK(has("dockgate_policy_last_reload_successful 1\n"));
  CHECK(has("dockgate_policy_reloads_total{result=\"failure\"} 1\n"));
}

TEST_CASE("the daemon goes away: streams end cleanly, 502 while it is down, back as soon as it is",
          "[integration][operator][upstream]") {
  // The gate's upstream is a relay to the engine that the test stops and starts: the
  // daemon going away and coming back, as the gate sees it.
  std::string dir = run("mktemp -d").output;
  dir.pop_back();
  const std::string relay_sock = dir + "/daemon.sock";
  std::ofstream(dir + "/relay.py") << R"(
import os, socket, sys, threading
up, path = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX); s.bind(path); s.listen(64)
print('up', flush=True)
def pipe(a, b):
    try:
        while True:
            d = a.recv(65536)
            if not d: break
            b.sendall(d)
    except OSError: pass
    for x in (a, b):
        try: x.shutdown(socket.SHUT_RDWR)
        except OSError: pass
while True:
    c, _ = s.accept(); u = socket.socket(socket.AF_UNIX); u.connect(up)
    threading.Thread(target=pipe, args=(c, u), daemon=True).start()
    threading.Thread(target=pipe, args=(u, c), daemon=True).start()
)";
  const std::string engine_path = engine_host().substr(7);
  auto relay = std::make_unique<background>("exec /usr/bin/python3 " + dir + "/relay.py " +
                                            engine_path + " " + relay_sock);
  REQUIRE(relay->read_line(std::chrono::seconds(10)).value_or("") == "up");
  proxy_process proxy("compose/policies/read-only.json", {}, {}, "unix://" + relay_sock);
  auto get = [&](const std::string& target) {
    return raw_exchange(proxy.socket_path(),
                        "GET " + target + " HTTP/1.1\r\nHost: d\r\nConnection: close\r\n\r\n");
  };
  CHECK(get("/v1.41/version").status() == 200);
  background events("curl -sN --unix-socket " + proxy.socket_path() +
                    " http://d/v1.41/events; echo \"curl exit $?\"");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  relay.reset();  // the daemon is gone
  run("rm -f " + relay_sock);
  // The held stream ends as a stream ends (curl: exit 0), not cut (curl: 18).
  CHECK(events.read_line(std::chrono::seconds(10)).value_or("") == "curl exit 0");
  auto down = get("/v1.41/version");
  CHECK(down.status() == 502);
  CHECK(down.bytes.find("{\"message\":\"dockgate: cannot reach the Docker daemon\"}") !=
        std::string::npos);
  relay = std::make_unique<background>("exec /usr/bin/python3 " + dir + "/relay.py " + engine_path +
                                       " " + relay_sock);
  REQUIRE(relay->read_line(std::chrono::seconds(10)).value_or("") == "up");
  CHECK(get("/v1.41/version").status() == 200);
  CHECK(get("/_ping").status() == 200);
  // The daemon's version was learned again after it came back (it may have been upgraded).
  CHECK(run("grep -c 'daemon API version' " + proxy.dir() + "/proxy.err").output == "2\n");
  relay.reset();
  run("rm -rf " + dir);
}

// The gate reads only files root controls (issue 18): a policy a user other than root
// could change, or reach through a symlink, is refused at start (the gate does not run)
// and at SIGHUP (the policy in force stays). Judged by what a request gets.
TEST_CASE(
    "a policy file a user could change is refused at start and at SIGHUP, the one in force stays",
    "[integration][operator][signals][trust]") {
  const std::string in_force =
      R"({"default_profile":"p","profiles":{"p":{"confine_to_owned":false,"allow":["SystemPing","ContainerList"]}}})";
  // What a user would make of it: one more operation.
  const std::string wider =
      R"({"default_profile":"p","profiles":{"p":{"confine_to_owned":false,"allow":["SystemPing","ContainerList","SystemInfo"]}}})";
  proxy_process proxy(in_force);
  const std::string policy = proxy.dir() + "/policy.json";
  auto info = [&] {
    return raw_exchange(proxy.socket_path(),
                        "GET /v1.41/info HTTP/1.1\r\nHost: d\r\nConnection: close\r\n\r\n")
        .status();
  };
  auto count = [&](const std::string& text) {
    return std::stoi(run("grep -c '" + text + "' " + proxy.dir() + "/proxy.err").output);
  };
  // SIGHUP, then (bounded) until the gate has said what it made of it.
  auto hangup = [&](const std::string& outcome) {
    const int before = count(outcome);
    ::kill(proxy.pid(), SIGHUP);
    for (int i = 0; i < 250 && count(outcome) == before; ++i) std::this_thread::sleep_for(20ms);
    return count(outcome) > before;
  };
  const std::string kept = "keeping the current one";
  REQUIRE(info() == 403);

  // (a) The path swapped for a symlink to a file in a user's directory, owned by the user.
  const std::string home = proxy.dir() + "/home";
  REQUIRE(run("mkdir -m 0755 " + home + " && chown 1000:1000 " + home).status == 0);
  std::ofstream(home + "/policy.json") << wider;
  REQUIRE(run("chown 1000:1000 " + home + "/policy.json && ln -s " + home + "/policy.json " +
              policy + ".new && mv -T " + policy + ".new " + policy)
              .status == 0);
  CHECK(hangup(kept));
  CHECK(info() == 403);
  CHECK(run("grep -c 'home\" (a directory above it) is owned by uid 1000' " + proxy.dir() +
            "/proxy.err")
            .output == "1\n");

  // (b) The file itself chowned to the user and made writable by anyone.
  REQUIRE(run("rm " + policy).status == 0);
  std::ofstream(policy) << wider;
  REQUIRE(run("chown 1000:1000 " + policy + " && chmod 0666 " + policy).status == 0);
  CHECK(hangup(kept));
  CHECK(info() == 403);
  CHECK(run("grep -c 'policy.json\" is owned by uid 1000' " + proxy.dir() + "/proxy.err").output ==
        "1\n");
  // ... or root's but writable by anyone.
  REQUIRE(run("chown 0:0 " + policy).status == 0);
  CHECK(hangup(kept));
  CHECK(info() == 403);
  CHECK(run("grep -c 'is writable by group or others (mode 0666)' " + proxy.dir() + "/proxy.err")
            .output == "1\n");

  // The same file, once root controls it again, is loaded: the refusals were the rule's.
  REQUIRE(run("chmod 0644 " + policy).status == 0);
  CHECK(hangup("policy reloaded"));
  CHECK(info() == 200);
  CHECK(::kill(proxy.pid(), 0) == 0);

  // (c) At start: the gate does not run, and says which file and why.
  REQUIRE(run("chown 1000:1000 " + policy).status == 0);
  CHECK_THROWS_WITH(
      proxy_process("", {"--policy", policy}),
      Catch::Contains("--policy: refused: \"" + policy + "\" is owned by uid 1000, not root"));
  REQUIRE(run("chown 0:0 " + policy + " && ln -s " + home + "/policy.json " + proxy.dir() +
              "/link.json")
              .status == 0);
  CHECK_THROWS_WITH(proxy_process("", {"--policy", proxy.dir() + "/link.json"}),
                    Catch::Contains("(a directory above it) is owned by uid 1000"));
  // A symlink root made, in directories only root can write, to a file root controls: read.
  REQUIRE(run("ln -s policy.json " + proxy.dir() + "/root-link.json").status == 0);
  CHECK_NOTHROW(proxy_process("", {"--policy", proxy.dir() + "/root-link.json"}));
}

#pragma once
// dockgate-sidecar end-to-end helpers: a sidecar process talking to a dockgate-proxy
// (harness.hpp) in front of the test engine, and small JSON helpers for its answers.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <simdjson.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <functional>
#include <memory>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "dockgate/client/http_client.hpp"
#include "harness.hpp"

namespace dockgate::test {

using namespace std::chrono_literals;

inline const std::string api_key = "test-key-0123456789";

inline std::string runtime_image() {
  const char* v = std::getenv("DOCKGATE_TEST_RUNTIME_IMAGE");
  return v && *v ? v : "dockgate/sandbox-runtime:test";
}

inline std::string field(const std::string& json, const char* key) {
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  if (p.parse(json).get(doc) != simdjson::SUCCESS) return "<not json>";
  simdjson::dom::element v;
  if (doc.at_key(key).get(v) != simdjson::SUCCESS) return "<absent>";
  std::string_view s;
  if (v.get_string().get(s) == simdjson::SUCCESS) return std::string(s);
  return simdjson::minify(v);
}

inline std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

// A POST /exec body; timeout_ms 0 leaves the sidecar's default.
inline std::string exec_body(const std::string& sid, const std::string& code, int timeout_ms = 0) {
  return "{\"session_id\":\"" + sid + "\",\"code\":" + quoted(code) +
         (timeout_ms ? ",\"timeout_ms\":" + std::to_string(timeout_ms) : std::string()) + "}";
}

// Starts dockgate-sidecar with exactly `env`, its stdout and stderr to `log`; its PID (the
// caller waits for it). `hosts_file`: it runs in a mount namespace of its own where that
// file is /etc/hosts.
inline pid_t spawn_sidecar(std::vector<std::string> env, const std::string& log,
                           const std::string& hosts_file = {}) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  if (!hosts_file.empty() &&
      (::unshare(CLONE_NEWNS) != 0 ||
       ::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
       ::mount(hosts_file.c_str(), "/etc/hosts", nullptr, MS_BIND, nullptr) != 0))
    ::_exit(126);
  int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ::dup2(out, 1);
  ::dup2(out, 2);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  char* argv[] = {const_cast<char*>(DOCKGATE_SIDECAR_BIN), nullptr};
  ::execve(argv[0], argv, envp.data());
  ::_exit(127);
}

// A dockgate-sidecar process talking to `proxy`. Its SANDBOX_INSTANCE is the proxy's
// (unless the test names one), so that sidecars of other tests on the shared engine are
// never counted, adopted or reaped, and a restarted sidecar on the same proxy adopts.
// `hosts_file`: the sidecar runs in a mount namespace of its own where that file is
// /etc/hosts (names for virtual-hosted object storage on 127.0.0.1).
class sidecar_process {
 public:
  sidecar_process(const proxy_process& proxy, std::vector<std::string> env = {},
                  std::string hosts_file = {}) {
    port_ = free_tcp_port();
    // A test that lists its members' addresses ahead (a fleet) chooses the port itself.
    for (const auto& e : env)
      if (e.starts_with("SANDBOX_LISTEN=127.0.0.1:")) port_ = e.substr(25);
    // The test's variables come first: getenv returns the first of a name.
    std::vector<std::string> full = env;
    // The test's S3 endpoint (s3rver) is one the operator allows.
    const char* s3 = std::getenv("DOCKGATE_TEST_S3_ENDPOINT");
    full.push_back("SANDBOX_STORAGE_ENDPOINTS=" + std::string(s3 ? s3 : ""));
    // An engine with userns-remap (scripts/test.sh's userns stage): the FUSE workspaces'
    // files belong to the ids the session user maps to on the host (dockgate-mount).
    if (const char* userns = std::getenv("DOCKGATE_MOUNT_USERNS"); userns && *userns)
      full.push_back("DOCKGATE_MOUNT_USERNS=" + std::string(userns));
    for (std::string d :
         {"DOCKER_HOST=" + proxy.host(), "SANDBOX_LISTEN=127.0.0.1:" + port_,
          "SANDBOX_API_KEY=" + api_key, "SANDBOX_IMAGE=" + runtime_image(),
          std::string("SANDBOX_QUEUE_TIMEOUT_SECONDS=5"),
          "SANDBOX_INSTANCE=t" + std::to_string(std::hash<std::string>{}(proxy.dir()) % 1000000007),
          std::string("PATH=/usr/bin:/bin")})
      full.push_back(d);
    // SANDBOX_FLEET_URL=self: this sidecar's own address, once its port is chosen.
    for (auto& e : full)
      if (e == "SANDBOX_FLEET_URL=self") e = "SANDBOX_FLEET_URL=http://127.0.0.1:" + port_;
    log_ = proxy.dir() + "/sidecar-" + port_ + ".log";
    pid_ = spawn_sidecar(std::move(full), log_, hosts_file);
    // Up to 30 s: a start takes the instance lease first (a container created and started
    // through the gate), which a loaded machine or a sanitizer build makes slow.
    for (int i = 0; i < 1200; ++i) {
      if (call("GET", "/healthz", "", "").status != 0) return;
      siginfo_t info{};
      if (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
          info.si_pid == pid_)
        break;  // it exited (a refusal): no use waiting
      std::this_thread::sleep_for(25ms);
    }
    FAIL("dockgate-sidecar did not start: " + run("cat " + log_).output);
  }
  ~sidecar_process() { stop(SIGTERM); }
  const std::string& port() const { return port_; }
  void stop(int signo) {
    if (pid_ <= 0) return;
    ::kill(pid_, signo);
    int status = 0;
    for (int i = 0; i < 400 && ::waitpid(pid_, &status, WNOHANG) == 0; ++i)
      std::this_thread::sleep_for(25ms);
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  dockgate::client::http_response call(const std::string& method, const std::string& path,
                                       const std::string& body,
                                       const std::string& key = api_key) const {
    dockgate::client::transport ep{{dockgate::common::endpoint::kind::tcp, "", "127.0.0.1",
                                    static_cast<std::uint16_t>(std::stoi(port_))},
                                   nullptr};
    const std::string auth = key.empty() ? "" : "Authorization: Bearer " + key + "\r\n";
    return dockgate::client::http_request(ep, method, path, body, 120s, 64 * 1024 * 1024, auth);
  }
  std::string log() const { return run("cat " + log_).output; }
  pid_t pid() const { return pid_; }

  // POST /sessions with `body`: the whole answer (status checked by the caller).
  dockgate::client::http_response create(const std::string& body = "{}") const {
    return call("POST", "/sessions", body);
  }
  // Runs `code` in session `sid`: the answer's body.
  std::string exec(const std::string& sid, const std::string& code) const {
    return call("POST", "/exec", exec_body(sid, code)).body;
  }

 private:
  pid_t pid_ = -1;
  std::string port_;
  std::string log_;
};

inline std::string direct() {
  return docker_cli() + " -H " + engine_host();
}

// A new session of `sidecar` (REQUIREd to be created); its ID.
inline std::string new_session(const sidecar_process& sidecar) {
  auto created = sidecar.create();
  INFO(created.body << sidecar.log());
  REQUIRE(created.status == 200);
  return field(created.body, "session_id");
}

// The container's processes as the daemon sees them (docker top): one command line per
// line; the session's cell runner (`python3 -I -c <runner.py> dockgate-runner`) as <runner>.
// In a fixed order (init, its sleep, the runner, the rest as top lists them): PIDs wrap on
// a busy test machine, so top's order (by PID) is not the order they started in.
// The pair the runner forks ahead of the next cell (forkserver.py Pair) is left out: the
// runner's child titled "timeout (next cell)" and its child "python3 (next cell)" (each
// with the title of its parent for the instant before it sets its own). They run nothing
// of the session's until their go; next_cell_pair() shows them.
struct top_process {
  std::string pid, ppid, args;  // pid and ppid as the host sees them
};
inline std::vector<top_process> top_processes(const std::string& container) {
  std::vector<top_process> all;
  std::istringstream in(run(direct() + " top " + container + " -o pid,ppid,args").output);
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    top_process p;
    fields >> p.pid >> p.ppid >> std::ws;
    std::getline(fields, p.args);
    all.push_back(p);
  }
  return all;
}

inline std::string processes(const std::string& container) {
  const auto all = top_processes(container);
  auto titled_runner = [](const std::string& args) {
    return args.starts_with("python3 -I -c ") && args.ends_with(" dockgate-runner");
  };
  auto args_of = [&](const std::string& pid) {
    for (const auto& p : all)
      if (p.pid == pid) return p.args;
    return std::string();
  };
  std::set<std::string> runners, pair;
  for (const auto& p : all)
    if (titled_runner(p.args) && !titled_runner(args_of(p.ppid))) runners.insert(p.pid);
  for (bool grew = true; grew && pair.size() < 2;) {
    grew = false;
    for (const auto& p : all) {
      const bool titled = p.args == "timeout (next cell)" || p.args == "python3 (next cell)" ||
                          titled_runner(p.args);
      if (titled && !runners.contains(p.pid) &&
          (runners.contains(p.ppid) || pair.contains(p.ppid)) && pair.size() < 2 &&
          pair.insert(p.pid).second)
        grew = true;
    }
  }
  std::string lines[4];
  for (const auto& p : all) {
    if (pair.contains(p.pid)) continue;
    const int rank = p.args.starts_with("/sbin/docker-init ") ? 0
                     : p.args == "sleep infinity"             ? 1
                     : runners.contains(p.pid)                ? 2
                                                              : 3;
    lines[rank] += (rank == 2 ? std::string("<runner>") : p.args) + "\n";
  }
  return lines[0] + lines[1] + lines[2] + lines[3];
}

// The runner's pair for the next cell, which `processes` leaves out: "<title> <owner of
// /proc/PID/fd> <its fds>" a line, the stand-in first (the owner is root while the
// process is not dumpable); empty if there is none.
inline std::string next_cell_pair(const std::string& container) {
  std::string out;
  for (const char* title : {"timeout (next cell)", "python3 (next cell)"})
    for (const auto& p : top_processes(container))
      if (p.args == title)
        out +=
            std::string(title) + " " +
            run("echo $(stat -c %U /proc/" + p.pid + "/fd) $(ls /proc/" + p.pid + "/fd | sort -n)")
                .output;
  return out;
}

// A time stamp for `docker events --since/--until`.
inline std::string now_stamp() {
  return run("date +%s.%N").output.substr(0, 20);
}

// exec_create events the daemon recorded for `container` between two stamps: which path a
// cell took (the cell runner makes none).
inline int exec_creates(const std::string& container, const std::string& since,
                        const std::string& until) {
  auto r = run(direct() + " events --since " + since + " --until " + until +
               " --filter container=" + container +
               " --filter event=exec_create --format '{{.Action}}' | grep -c exec_create");
  return std::atoi(r.output.c_str());
}

// The exec_create events between two stamps whose command is `mkdir` (the workspace's
// folders made by an exec of their own).
inline int mkdir_execs(const std::string& container, const std::string& since,
                       const std::string& until) {
  auto r =
      run(direct() + " events --since " + since + " --until " + until +
          " --filter container=" + container +
          " --filter event=exec_create --format '{{.Action}}' | grep -c '^exec_create: mkdir '");
  return std::atoi(r.output.c_str());
}

// The session's workspace folders as the daemon's own exec (the session user) sees them:
// "<path> <uid>:<gid> <mode> <type>" a line.
inline std::string workspace_folders(const std::string& container) {
  return run(direct() + " exec -u 1000:1000 " + container +
             " stat -c '%n %u:%g %a %F' /workspace/uploads /workspace/outputs /workspace/skills "
             "2>&1")
      .output;
}

inline const std::string made_folders =
    "/workspace/uploads 1000:1000 755 directory\n/workspace/outputs 1000:1000 755 directory\n"
    "/workspace/skills 1000:1000 755 directory\n";

// A sidecar started by hand: sidecar_process must answer within seconds, and a start
// that waits for a lease to expire, or refuses, does not.
struct started_sidecar {
  pid_t pid = -1;
  std::string port, log;
  ~started_sidecar() {
    if (pid <= 0) return;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  std::string log_text() const { return run("cat " + log).output; }
};

inline std::unique_ptr<started_sidecar> start_sidecar(const proxy_process& proxy,
                                                      const std::vector<std::string>& env) {
  auto s = std::make_unique<started_sidecar>();
  s->port = free_tcp_port();
  s->log = proxy.dir() + "/started-" + s->port + ".log";
  std::vector<std::string> full = env;
  for (std::string d : {"DOCKER_HOST=" + proxy.host(), "SANDBOX_LISTEN=127.0.0.1:" + s->port,
                        "SANDBOX_API_KEY=" + api_key, "SANDBOX_IMAGE=" + runtime_image(),
                        std::string("PATH=/usr/bin:/bin")})
    full.push_back(d);
  for (auto& e : full)
    if (e == "SANDBOX_FLEET_URL=self") e = "SANDBOX_FLEET_URL=http://127.0.0.1:" + s->port;
  s->pid = spawn_sidecar(std::move(full), s->log);
  return s;
}

// The exit status of `pid` once it has exited (reaped), or -1 if it still runs after
// `limit` (bounded polling, no timing judged).
inline int wait_exit(pid_t& pid, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) return -1;
    std::this_thread::sleep_for(50ms);
  }
  pid = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace dockgate::test

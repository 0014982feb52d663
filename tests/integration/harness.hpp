#pragma once
// Integration-test helpers: a real dockgate-proxy process in front of the private test
// engine (scripts/engine.sh), the docker CLI, raw sockets for framing attacks, and the
// daemon's own view for assertions.

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace dockgate::test {

// Environment set by scripts/test.sh (from scripts/engine.sh).
std::string engine_socket();  // path of the private engine's unix socket
std::string engine_host();    // unix://... for DOCKER_HOST
std::string registry();       // 127.0.0.1:PORT
std::string test_image();     // local busybox image
std::string docker_cli();     // the docker CLI binary
std::string repo_root();
// The gate under test: $DOCKGATE_TEST_PROXY_BIN if set (scripts/test.sh's ThreadSanitizer
// pass runs these tests against the tsan build's gate), else this build's dockgate-proxy.
std::string proxy_bin();
std::string unique_name(const std::string& prefix);
std::string free_tcp_port();  // a loopback port that was free a moment ago

struct command_result {
  int status = -1;     // exit status, or -1 if it did not exit normally
  std::string output;  // stdout and stderr together
};

// Runs `sh -c command` and waits for it.
command_result run(const std::string& command);

// A dockgate-proxy process; stopped with SIGTERM (then SIGKILL) when destroyed.
class proxy_process {
 public:
  // `policy_file` is a path (relative to the repository root; the gate reads a copy in
  // its root-owned directory) or JSON text; empty: no
  // --policy (the proxy reads Tecnativa's variables from `env`).
  // `env` holds NAME=VALUE pairs added to the proxy's environment.
  // `upstream` defaults to the test engine.
  explicit proxy_process(const std::string& policy, std::vector<std::string> extra_args = {},
                         std::vector<std::string> env = {}, std::string upstream = {});
  ~proxy_process();
  proxy_process(const proxy_process&) = delete;
  proxy_process& operator=(const proxy_process&) = delete;

  const std::string& socket_path() const { return socket_; }
  const std::string& dir() const { return dir_; }
  std::string host() const { return "unix://" + socket_; }
  std::string docker() const { return "DOCKER_HOST=" + host() + " " + docker_cli(); }
  pid_t pid() const { return pid_; }
  std::string audit_log() const;  // what the proxy wrote to stdout
  // Whether the audit log contains `text` within `timeout` (a line is written once the
  // response has gone out, so a client may finish just before it).
  bool audit_contains(const std::string& text,
                      std::chrono::milliseconds timeout = std::chrono::milliseconds(3000)) const;
  // Sends SIGTERM and waits; returns the exit status (or -1) and the time it took.
  std::pair<int, std::chrono::milliseconds> terminate();

 private:
  std::string dir_;
  std::string socket_;
  pid_t pid_ = -1;
};

struct raw_response {
  std::string bytes;
  bool closed = false;      // the peer closed the connection (as opposed to our read timeout)
  unsigned status() const;  // status code of the first response, 0 if none
  unsigned count() const;   // number of "HTTP/1." status lines seen
};

// A connected unix stream socket (close-on-exec), or -1.
int connect_unix(const std::string& path);

// Connects to a unix socket, writes `request`, optionally shuts down the write side, and
// reads until the peer closes or `timeout` passes without data.
raw_response raw_exchange(const std::string& socket_path, const std::string& request,
                          bool shutdown_write = false,
                          std::chrono::milliseconds timeout = std::chrono::milliseconds(3000));

// A shell command running in the background, its stdout and stderr read line by line.
// Destroying it kills its whole process group.
class background {
 public:
  explicit background(const std::string& command);
  ~background();
  background(const background&) = delete;
  background& operator=(const background&) = delete;
  // The next line (without newline), or nullopt on EOF or when `timeout` passes.
  std::optional<std::string> read_line(std::chrono::milliseconds timeout);
  // Waits up to `timeout` for the command to exit by itself; its exit status or -1.
  int wait(std::chrono::milliseconds timeout);
  void kill();

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  std::string pending_;
  int status_ = -1;
};

// A CA (ca.pem), a server certificate for 127.0.0.1 (server.pem/key) and a client
// certificate CN=ci-runner,O=dockgate (client.pem/key, also as cert.pem/key.pem for
// DOCKER_CERT_PATH), made with openssl in a new temporary directory.
std::string make_pki();

// A copy of a file of the repository (a policy) in a new root-owned directory under /tmp:
// the gate reads only files root controls, and a checkout may belong to its user.
std::string root_owned_copy(const std::string& repo_path);

// Daemon's view: does a container with this name exist? (asked directly, not via proxy)
bool container_exists(const std::string& name);

}  // namespace dockgate::test

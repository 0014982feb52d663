#pragma once
// Commands: a client's shell commands run in a session's container as the session user
// (OpenSandbox's execd POST /command and its background commands), over the engine seam.
// The requests come typed from a front (front/opensandbox/execd/); the answers are values
// or refusals, never HTTP. Internal to the sidecar library; the invariants are in
// commands.cpp.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "dockgate/sidecar/config.hpp"
#include "engine/container_engine.hpp"
#include "util/refusal.hpp"

namespace dockgate::sidecar {

class session_registry;
struct session;

struct command_run {
  std::string session_id;
  std::string command;
  std::string cwd;                         // "": the container's working directory
  std::optional<std::int64_t> timeout_ms;  // >= 1; none: no limit of its own
  std::map<std::string, std::string> envs;
};

// What a foreground command says while it runs: its id once it is about to start, then its
// output as it comes (1 stdout, 2 stderr), at most SANDBOX_MAX_OUTPUT_BYTES of each.
class command_events {
 public:
  virtual ~command_events() = default;
  virtual void started(const std::string& id) = 0;
  virtual void output(int stream, std::string_view data) = 0;
  // Every 3 s without output while a command runs: the front's keep-alive (execd's `ping`
  // event), which is also how a silent command learns that its client went away.
  virtual void idle() {}
  // Whether the client still reads (false: its command is killed at its next output or
  // its next idle beat).
  virtual bool listening() const { return true; }
};

struct command_finished {
  std::int64_t exit_code = -1;
  bool timed_out = false;
  // Set when the command never ran (its cwd is not a directory, the exec failed): why.
  std::string start_error;
  std::chrono::milliseconds took{0};
};

struct command_status {
  std::string id;
  std::string content;  // the command as given
  bool running = false;
  std::optional<std::int64_t> exit_code;
  std::string started_at;   // RFC 3339
  std::string finished_at;  // RFC 3339, "" while running
};

struct command_logs {
  std::string text;
  std::int64_t next_cursor = 0;
};

struct command_killed {};

struct sandbox_metrics {
  std::int64_t cpu_count = 0;
  double cpu_used_pct = 0;
  double mem_total_mib = 0;
  double mem_used_mib = 0;
};

// What the relay of commands::connect writes on stderr when nothing listens on the port,
// and when the image has none of python3, bash or nc to relay with.
inline constexpr std::string_view connect_failed_marker = "dockgate:connect-failed";
inline constexpr std::string_view no_relay_marker = "dockgate:no-relay";

// Whether `id` is one of ours (hex, 1..64): anything else names no command, and never a path.
bool valid_command_id(std::string_view id);

class commands {
 public:
  commands(const config& c, const container_engine& engine, session_registry& registry)
      : config_(c), engine_(engine), registry_(registry) {}

  // A foreground command run to its end (or its timeout, which kills its process group).
  outcome<command_finished> run(const command_run& r, command_events& events) const;
  // A background command started, detached; its id.
  outcome<std::string> start(const command_run& r) const;
  outcome<command_status> status(const std::string& session_id, const std::string& id) const;
  // Its combined output from line `cursor` (0-based) on.
  outcome<command_logs> logs(const std::string& session_id, const std::string& id,
                             std::int64_t cursor) const;
  // Its process group killed (not_found: no such command).
  outcome<command_killed> kill(const std::string& session_id, const std::string& id) const;
  // Bash sessions (execd's /session): a shell state kept in the container
  // (/tmp/.dockgate-shells/<id>: its working directory and exported variables), restored
  // before each command and saved after it. Its id; `cwd` "" keeps the container's.
  outcome<std::string> create_shell(const std::string& session_id, const std::string& cwd) const;
  // `r.command` run in shell `shell_id` as run() runs it (r.cwd "": the shell's own).
  outcome<command_finished> run_in_shell(const std::string& shell_id, command_run r,
                                         command_events& events) const;
  outcome<command_killed> delete_shell(const std::string& session_id,
                                       const std::string& shell_id) const;
  // The container's CPU and memory as its cgroup says.
  outcome<sandbox_metrics> metrics(const std::string& session_id) const;
  // A byte stream to 127.0.0.1:`port` inside the sandbox (port_forward.cpp): a relay
  // exec'd as the session user, its stdin the bytes to the port, its stdout the bytes
  // back, as `kubectl port-forward` reaches a pod. The sandbox's network is never opened.
  // A refused connection shows as the stream's end with stderr "dockgate:connect-failed"
  // (connect_failed_marker), an image with no relay tool as "dockgate:no-relay".
  outcome<client::exec_stream> connect(const std::string& session_id, std::uint16_t port,
                                       client::clock_type::time_point deadline) const;

 private:
  // The session a command may run in now: found, not ending, not frozen; its container.
  outcome<std::shared_ptr<session>> session_of(const std::string& session_id) const;
  outcome<std::string> container_of(const std::string& session_id) const;
  client::exec_result exec(const std::string& container, std::vector<std::string> cmd,
                           std::chrono::milliseconds timeout,
                           std::vector<std::string> env = {}) const;

  const config& config_;
  const container_engine& engine_;
  session_registry& registry_;
};

}  // namespace dockgate::sidecar

#pragma once
// The session containers on the engine: the body they are created with, the list of this
// instance's, whether one runs, removing one, a command run in one as the session user,
// the workspace a new one starts with, and the kill sweep of what a cell left. Holds no
// state of its own but whether the image was seen. Internal to the sidecar library.

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "dockgate/client/engine.hpp"
#include "dockgate/sidecar/config.hpp"
#include "egress/egress_policy.hpp"
#include "engine/container_engine.hpp"
#include "sessions/executor_hooks.hpp"

namespace dockgate::sidecar {

// The sweep's shell script: every process of the session user in the container killed
// but the container's init and its `sleep` (and the shell itself); see the .cpp.
std::string kill_cell_processes();

class session_containers {
 public:
  // `executors`: how a new container's cell runner is started (make_workspace).
  session_containers(const config& c, const container_engine& engine,
                     const executor_hooks& executors)
      : config_(c), engine_(engine), executors_(executors) {}

  bool running(const std::string& container) const;
  void remove(const std::string& container) const;
  client::exec_result run_in(const std::string& container, std::vector<std::string> cmd,
                             std::chrono::milliseconds timeout, std::string stdin_data = {},
                             bool attach_stdin = false, std::vector<std::string> env = {},
                             std::size_t max_out = 64 * 1024 * 1024) const;

  // The body of a session's container create. `pool`: a warm pool container's (no
  // request's labels); `claim_of`: the claim record of that pool container for `s`.
  enum class body_kind { session, pool, claim };
  std::string create_body(const std::string& sid, const session& s,
                          body_kind kind = body_kind::session,
                          const std::string& claim_of = {}) const;
  // The create body's labels (what adoption reads back), appended to `b` after its "{".
  void append_labels(std::string& b, const std::string& sid, const session& s, body_kind kind,
                     const std::string& claim_of) const;

  // The session containers of this instance (running only, or all); nullopt if the
  // engine could not be asked.
  struct listed {
    std::string id;
    std::string state;
    std::map<std::string, std::string> labels;
  };
  std::optional<std::vector<listed>> own(bool all) const;

  // The workspace a new session starts with (uploads, outputs, skills), made in a
  // started container as the session user; the error ("" when made). With `runner` (and
  // SANDBOX_CELL_RUNNER on) the container's cell runner is started now and makes them
  // (executor_hooks::start_runner): no exec of their own; it is left in *runner. Otherwise (or if
  // the runner does not come up) one exec makes them.
  // With `probe_output`, the isolation probe (executor_hooks::isolation_probe, if set) runs
  // after them, on the runner or as an exec, its answer left there (isolation.hpp).
  std::string make_workspace(const std::string& container,
                             std::shared_ptr<cell_runner>* runner = nullptr,
                             std::string* probe_output = nullptr) const;
  // The isolation probe run as an exec of its own (an adopted container); its answer.
  std::string run_isolation_probe(const std::string& container) const;

  // The plain kill sweep: every process of the session user in `container` killed but
  // the container's init and its `sleep`, then the outcome judged from the host
  // (only_own_processes). A plain sweep is an exec of the session user: a process a cell
  // left can stop or trace it, so its own word is never taken.
  // `runtime`: the session's (session::runtime; "": the default).
  enum class sweep_outcome { clean, tainted, unknown };
  sweep_outcome sweep_cell_processes(const std::string& container,
                                     const std::string& runtime) const;
  // Whether only the container's own processes live in `container`: on runc (and any
  // runtime whose processes are the host's) the engine's process table (ContainerTop, read
  // on the host): clean when every process is the container's own (the keep-alive's uid)
  // or a zombie with no live thread; tainted when a process of the session user lives;
  // unknown when the engine could not say. On gVisor (runsc), whose processes the host
  // cannot see, the guest's own judge (guest_processes, the .cpp says why its word holds).
  sweep_outcome only_own_processes(const std::string& container, const std::string& runtime) const;

  // The configured image's ID ("" if it cannot be inspected).
  std::string image_id() const;
  // Whether the configured image is on the engine now (asked; remembered when it is).
  bool image_present();
  // Whether the image was seen since start (not asked again).
  bool image_seen() const { return image_ready_; }

  // SANDBOX_NETWORK=allowlist: the session container `sid`'s own network
  // (egress_network_name), created through the gate if it is not on the engine (internal:
  // no route off it), `rules` written as its list for the proxy (egress_policy.hpp), and
  // the proxy's URL on its gateway ("http://GATEWAY:PORT"); "" when the engine could not
  // make or show it or the list could not be written.
  std::string egress_proxy(const std::string& sid, const egress_rules& rules) const;
  // After a create for `sid` failed: its network, if made, removed (the daemon refuses to
  // remove one a container still uses). Nothing without SANDBOX_NETWORK=allowlist.
  void remove_unused_network(const std::string& sid) const;

 private:
  sweep_outcome host_processes(const std::string& container) const;
  sweep_outcome guest_processes(const std::string& container) const;
  // HostConfig.Runtime as the daemon recorded it ("" if it cannot be read).
  std::string runtime_of(const std::string& container) const;

  const config& config_;
  const container_engine& engine_;
  const executor_hooks& executors_;
  std::atomic<bool> image_ready_{false};
};

}  // namespace dockgate::sidecar

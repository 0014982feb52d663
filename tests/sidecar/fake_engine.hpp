#pragma once
// A container_engine that keeps containers in memory, for unit tests of the session core
// and its fronts (no dockerd). It answers in the Engine API's shapes the core reads
// (create → {"Id"}, inspect → State/Config.Labels/HostConfig, list → [{Id, State,
// Labels}], top → Titles/Processes, version → {"Version"}), records every call, and can
// be told to fail an operation. Execs are answered by `on_exec` (default: started, exit
// 0, no output; the isolation probe's answer is `probe_output`); held execs by `on_attach`
// (default: refused, as an engine without the runner's interpreter would).

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/container_engine.hpp"

namespace dockgate::sidecar::testing {

// What the isolation probe (sessions/isolation/isolation.hpp) prints in a container whose
// walls all hold (runc under the sandbox profile).
inline const std::string hardened_probe_output =
    "deny.root_write=EROFS\ndeny.raw_inet=EPERM\ndeny.raw_packet=EPERM\ndeny.mount=EPERM\n"
    "deny.ptrace=EPERM\nstatus.Uid=1000 1000 1000 1000\nstatus.Gid=1000 1000 1000 1000\n"
    "status.CapPrm=0000000000000000\nstatus.CapEff=0000000000000000\n"
    "status.CapBnd=0000000000000000\nstatus.CapAmb=0000000000000000\nstatus.NoNewPrivs=1\n"
    "status.Seccomp=2\nroot.ro=1\nmount./tmp=tmpfs 268435456 rw,nosuid,nodev,size=262144k\n"
    "nofile=1024 1024\nmemory=2147483648\nend=1\n";

// Whether `cmd` is the isolation probe (its argv[5] names it).
inline bool is_isolation_probe(const std::vector<std::string>& cmd) {
  return cmd.size() > 5 && cmd[0] == "python3" && cmd[5] == "dockgate-probe";
}

class fake_engine final : public container_engine {
 public:
  struct container {
    std::string id, name;
    std::string state = "created";  // created, running, paused, exited
    std::map<std::string, std::string> labels;
    std::string network_mode;
    std::string body;  // the create body, as sent
  };

  engine_answer version(timeout t) const override;
  engine_answer image_inspect(std::string_view ref, timeout t) const override;
  engine_answer create(std::string_view name, std::string_view body, timeout t) const override;
  engine_answer start(std::string_view id, timeout t) const override;
  engine_answer inspect(std::string_view id, timeout t) const override;
  engine_answer list(std::string_view label, bool all, timeout t) const override;
  engine_answer top(std::string_view id, std::string_view ps_args, timeout t) const override;
  engine_answer pause(std::string_view id, timeout t) const override;
  engine_answer unpause(std::string_view id, timeout t) const override;
  engine_answer remove(std::string_view id, timeout t) const override;
  engine_answer network_inspect(std::string_view name, timeout t) const override;
  engine_answer network_create(std::string_view body, timeout t) const override;
  engine_answer network_remove(std::string_view name, timeout t) const override;
  client::exec_result exec(std::string_view container,
                           const client::exec_options& options) const override;
  std::optional<client::exec_stream> exec_attach(std::string_view container,
                                                 const std::vector<std::string>& cmd,
                                                 std::string_view user,
                                                 client::clock_type::time_point deadline,
                                                 std::string* error) const override;

  // Test controls. Every operation's next answer for `op` (its method name above) is
  // `status` with `message`, `times` times.
  void fail(const std::string& op, unsigned status, std::string message = "injected",
            int times = 1);
  // Calls so far, each "op target" (e.g. "create sbx-…", "start <id>", "exec <name>").
  std::vector<std::string> calls() const;
  std::size_t count(const std::string& op) const;
  // A container as the fake holds it (by id or name), or nullptr. Copies: for asserting.
  std::optional<container> find(std::string_view id_or_name) const;
  std::vector<container> containers() const;
  // Something outside the core changed the engine: a container made (running) or stopped.
  std::string add_running(const std::string& name, std::map<std::string, std::string> labels);
  void set_state(std::string_view id_or_name, const std::string& state);

  std::function<client::exec_result(const container&, const client::exec_options&)> on_exec;
  std::function<std::optional<client::exec_stream>(
      const container&, const std::vector<std::string>&, std::string* error)>
      on_attach;
  // Called with the name of every create before it is answered (outside the fake's lock):
  // a test can hold creates there.
  std::function<void(std::string_view name)> on_create;
  bool image_present = true;
  // What the isolation probe prints when an exec runs it (before on_exec, which never sees
  // it): a hardened container's, by default.
  std::string probe_output = hardened_probe_output;
  // What top answers for every running container (its "Processes": pid, uid, stat,
  // threads). Default: the container's own init (pid 1, inspect's State.Pid), as the
  // keep-alive's uid (session_containers.cpp): a clean sweep.
  std::string top_processes = R"([["1","65534","Ss","1"]])";

 private:
  std::optional<engine_answer> injected(const std::string& op, std::string_view target) const;
  container* lookup(std::string_view id_or_name) const;
  struct failure {
    unsigned status;
    std::string message;
    int times;
  };
  mutable std::mutex mutex_;
  mutable std::map<std::string, container> by_id_;
  mutable std::map<std::string, failure> failures_;
  mutable std::vector<std::string> calls_;
  mutable std::map<std::string, std::string> networks_;  // name → inspect body
  mutable unsigned next_id_ = 1;
  mutable unsigned next_network_ = 0;
};

}  // namespace dockgate::sidecar::testing

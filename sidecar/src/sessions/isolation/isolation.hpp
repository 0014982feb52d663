#pragma once
// The isolation in force for one session (docs/sidecar.md, "The isolation report"): read
// back from its live container, never from what was asked, and judged before the session is
// handed out. Internal to the sidecar library.
//
// Invariants it keeps:
// - What the report says comes from the daemon's record of the container (ContainerInspect)
//   and from what a process of the session user sees inside it (the probe, run as a cell
//   runs); a value neither could read is said to be unreadable, never filled in.
// - The deny-path self-test is judged on positive evidence only: each wall (a write to the
//   root file system, a raw socket of either family, a mount, a ptrace of PID 1) must have
//   been tried and have failed with an errno that means "refused"; a probe that did not run
//   to its end, a line missing, an errno that could mean something else (ENOENT: the test
//   itself went wrong) all fail it. A session that fails is refused and its container
//   removed (session_lifecycle.cpp, pool_sessions.cpp).
// - What the session asked of the engine (the create body it sent) and the record must
//   agree on the runtime, memory, CPUs, PIDs, read-only root and network: a control asked
//   for and not applied refuses the session, never drops silently.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dockgate/client/engine.hpp"
#include "dockgate/sidecar/config.hpp"
#include "engine/container_engine.hpp"

namespace dockgate::sidecar {

struct session;

// What a container's create body asked for, of the walls the record is compared on (each
// none when the body did not say).
struct isolation_asked {
  std::optional<std::string> runtime, network;
  std::optional<std::int64_t> memory, memory_swap, nano_cpus, pids;
  std::optional<bool> read_only_root;
};
isolation_asked isolation_asked_of(std::string_view create_body);

// The daemon's record of the container: the fields the report shows.
struct isolation_record {
  bool read = false;  // the inspect answered and parsed
  bool running = false;
  std::string runtime, user, network;
  bool privileged = true, read_only_root = false, no_new_privileges = false;
  std::vector<std::string> cap_add, cap_drop;
  // "default" (the daemon's own profile: none named), "unconfined", "custom"; and the
  // custom profile's name (its top-level "name"; "custom" when it has none).
  std::string seccomp = "default", seccomp_profile;
  std::vector<std::pair<std::string, std::string>> tmpfs;  // path, options
  std::int64_t memory = 0, memory_swap = 0, nano_cpus = 0, pids = 0;
  std::optional<std::pair<std::int64_t, std::int64_t>> nofile;  // soft, hard
  std::vector<std::pair<std::string, std::string>> mounts;      // type, destination
  std::string workspace_label;  // dockgate.workspace (the gate binds its FUSE mount)
  std::string gateway;          // its network's gateway (an egress network's: its list's name)
};
isolation_record read_isolation_record(std::string_view inspect_body);

// What the probe printed: its `key=value` lines (the first '=' splits), bounded.
std::map<std::string, std::string> read_probe_output(std::string_view out);

// The probe: run as the session user in the new container (through its runner, or an exec
// of its own), the folders to make appended. A Python program (both images hold python3;
// nothing else it needs is assumed); it makes the folders (exit 1 if it cannot), tries each
// wall and prints what the container shows, `end=1` last. Its argv[5] is "dockgate-probe".
std::vector<std::string> isolation_probe_command();

// The probe's answer as the judge reads it: its stdout, after a line `exit=<code>` when it
// did not exit 0 (and what its stderr said, as `stderr=` lines), or `exit=not started`.
std::string isolation_probe_answer(const client::exec_result& r);

// Why the session may not be handed out (empty: every wall holds and every asked value is
// in the record). `asked` none: nothing is compared to a request (an adopted container).
std::vector<std::string> isolation_failures(const std::optional<isolation_asked>& asked,
                                            const isolation_record& record,
                                            const std::map<std::string, std::string>& seen);

struct isolation_report {
  std::optional<isolation_asked> asked;
  isolation_record record;
  std::map<std::string, std::string> seen;  // the probe's lines ("" when it gave none)
  std::string read_at;                      // create, pool, adopt, wake
  std::chrono::system_clock::time_point read_time;
  std::vector<std::string> failures;
  std::chrono::microseconds cost{0};  // the inspect's and the judging's time (not the probe's)
  // Under SANDBOX_NETWORK=allowlist: the list the egress proxy reads for its network's
  // gateway, as the file holds it (none: no file, or not an egress network).
  std::optional<std::string> egress_list;
};

// The record read and judged for `container`, with the probe's output (`probe_output`, as
// it came back: empty when the probe did not run). One Engine API call (the inspect); under
// SANDBOX_NETWORK=allowlist one small file read (its egress list).
std::shared_ptr<isolation_report> read_isolation(const config& c, const container_engine& engine,
                                                 const std::string& container,
                                                 std::optional<isolation_asked> asked,
                                                 std::string_view probe_output,
                                                 std::string read_at);

// The report as a JSON object (docs/aivory-api.md, "GET /sessions/{id}"), from what was read
// at its last (re)start and the session's own workspace and egress facts; {"read":false,...}
// when nothing was read.
std::string isolation_json(const session& s, const config& c);

}  // namespace dockgate::sidecar

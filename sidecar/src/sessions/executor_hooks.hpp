#pragma once
// What the sessions room asks of a session's executors (the cell runner and the kernel
// driver: cells/), which sit a floor above it: sessions never includes cells. The core
// (core/session_executors.cpp) wires these to the cells room's functions; unit tests set
// their own. A session holds its executors as opaque pointers (session.hpp); only these
// hooks act on them. Internal to the sidecar library.

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dockgate::sidecar {

class cell_runner;  // cells/runner.hpp
struct session;     // session.hpp

struct executor_hooks {
  // A cell runner started in the new container `container` as the session user, that ran
  // `mkdir` (the workspace's folders) and answered: the session's first cell then waits
  // for no exec of its own. nullptr with `why` when it did not (the folders are then made
  // with an exec, and the session's first cell starts a runner). Unset: no runner.
  // `mkdir` may be the isolation probe, which makes the folders too (isolation/isolation.hpp:
  // the deny-path self-test rides on this one request): with `output`, its stdout is left
  // there.
  std::function<std::shared_ptr<cell_runner>(const std::string& container,
                                             const std::vector<std::string>& mkdir,
                                             std::string* output, std::string& why)>
      start_runner;
  // Whether a warm container's runner answers a round trip now, within a short bound (a
  // frozen or stopped one never does), with no process started for it (the runner's W,
  // answered at once once warm). Unset: no runner is ever ready.
  std::function<bool(cell_runner& runner, std::chrono::milliseconds within)> runner_ready;
  // Waits until a runner's warm-up (its fork server's imports, which go on after its
  // hello beside the requests it answers) has ended: the warm pool hands out only warm
  // runners, a pool miss's answer waits for none. false: the runner failed meanwhile.
  // Unset: not waited for.
  std::function<bool(cell_runner& runner)> runner_warm;
  // A kernel session's kernel driver started in its container (its cell runner, if it
  // has one, closed first: a kernel session runs none); "" when it runs, else the error.
  // Unset: every kernel start fails.
  std::function<std::string(session& s)> start_kernel;
  // The isolation probe (isolation/isolation.hpp isolation_probe_command) every new session
  // container runs before it is handed out; empty: no self-test and no report (unit tests
  // of other rooms; the core always sets it).
  std::vector<std::string> isolation_probe;
  // The kernel a session names (a request, a label, a record), by the name it is known
  // by; nullopt for an unknown one. Unset: none is known.
  std::function<std::optional<std::string>(std::string_view requested)> kernel_name;
};

}  // namespace dockgate::sidecar

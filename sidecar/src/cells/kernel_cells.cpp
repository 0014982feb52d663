// The kernel executor: a kernel session's cells (POST /exec) and its restart (POST
// /sessions/{id}/restart), the cell run in the session's IPython kernel through its kernel
// driver (kernel.hpp).
//
// Invariants (docs/design.md, "Cell walls"; docs/sidecar.md, "Kernel sessions"):
// - What persists between cells is the kernel's state (its memory, threads, open files),
//   nothing else: after every cell the driver's sweep ends every process of the session
//   user but the kernel and itself; a driver that faults is dropped, and the plain sweep
//   (judged from the host, session_containers::sweep_cell_processes) ends the kernel with
//   everything else before a new driver starts.
// - No driver starts while the host may see a process of the session user (the driver's
//   window before it makes itself undumpable): in a new container, or after a clean sweep.
// - A cell is answered only from a whole answer of the driver that ran it; a dead kernel or
//   driver is a 500 "kernel died", never a partial answer, and the cell is not run again.
// - A restart is the sidecar's: the driver closed, the container swept as judged from the
//   host, a new driver (and kernel) started; never the driver's word that it restarted.
#include <iostream>

#include "cells/executors.hpp"
#include "cells/kernel.hpp"
#include "engine/container_engine.hpp"
#include "sessions/session.hpp"
#include "sessions/session_containers.hpp"
#include "sessions/session_lifecycle.hpp"

namespace dockgate::sidecar {

using namespace std::chrono_literals;

namespace {

constexpr std::string_view outputs_dir = "/workspace/outputs";
constexpr auto kill_grace = 2s;          // after the interrupt, as timeout's --kill-after
constexpr auto restart_allowance = 60s;  // a kernel restart (an IPython start) on a loaded host
constexpr auto driver_start = 90s;
constexpr std::size_t listing_cap = 64 * 1024 * 1024;

refusal kernel_died(std::string message) {
  return refuse(refusal_kind::failed, "kernel died: " + std::move(message));
}

}  // namespace

// The session's driver ended and its container swept (everything of the session user, the
// kernel too, judged from the host); a refusal when a process outlived the sweep (the
// session is then ended).
std::optional<refusal> kernel_executor::drop_driver(session& s, std::string_view why) const {
  std::cerr << "dockgate-sidecar: session " << s.id << ": kernel driver dropped (" << why
            << "); the next cell starts a new kernel" << std::endl;
  if (s.kernel_driver) s.kernel_driver->close();
  s.kernel_driver.reset();
  s.kernel_replaced = true;
  // The kernel is multi-threaded: killed, it shows as a zombie with live threads ("Zl",
  // alive to only_own_processes) until its last thread has gone. A process still there is
  // swept again, up to three times, before it counts as one that outlived the sweep.
  auto outcome = ctx_.containers.sweep_cell_processes(s.container, s.runtime);
  for (int again = 0; again < 3 && outcome == session_containers::sweep_outcome::tainted; ++again)
    outcome = ctx_.containers.sweep_cell_processes(s.container, s.runtime);
  s.sweep_before_runner = outcome != session_containers::sweep_outcome::clean;
  if (outcome == session_containers::sweep_outcome::tainted) return end_tainted_session(ctx_, s);
  return std::nullopt;
}

// A driver for `s` where none runs: only where the host sees no process of the session
// user (a plain sweep first when that is not known).
std::optional<refusal> kernel_executor::ensure_driver(session& s) const {
  if (s.kernel_driver && s.kernel_driver->usable()) return std::nullopt;
  if (s.kernel_driver || s.sweep_before_runner) {
    if (auto ended = drop_driver(s, "a new driver starts")) return ended;
    if (s.sweep_before_runner)
      return refuse(refusal_kind::failed,
                    "kernel unavailable: the container's processes could not be checked; try "
                    "again");
  }
  std::string why;
  s.kernel_driver = start_kernel_driver(ctx_.engine, s.container, driver_start, &why);
  if (!s.kernel_driver) {
    s.sweep_before_runner = true;  // whatever it left is swept before the next try
    return refuse(refusal_kind::failed, why);
  }
  return std::nullopt;
}

outcome<executed> kernel_executor::run(const cell_job& job) {
  session& s = job.s;
  if (auto refused = ensure_driver(s)) return *refused;
  const std::size_t cap = static_cast<std::size_t>(ctx_.cfg.max_output_bytes);
  std::function<void(int, std::string_view)> on_output;
  if (job.output)
    on_output = [out = job.output](int stream, std::string_view data) {
      out->output(stream, data);
    };
  const runner_probe probe = probe_in(ctx_.containers, s.container);
  // A sound driver answers by the cell's timeout and the grace after the interrupt; one
  // that has not is probed, and only one found running (a kernel restart on a loaded host)
  // is waited for further, up to the hard deadline.
  const auto timeout = std::chrono::milliseconds(job.timeout_ms);
  const cell_runner::patience cell_wait{timeout + kill_grace + 1s,
                                        timeout + kill_grace + restart_allowance + 30s, probe};
  std::string status_text;
  auto ran = s.kernel_driver->run_request(
      kernel_cell_request(job.code, job.timeout_ms, std::chrono::milliseconds(kill_grace).count(),
                          outputs_dir,
                          static_cast<std::uint32_t>(std::min<std::size_t>(cap, 1u << 31))),
      cap, cell_wait, on_output, listing_cap, {5s, 30s, probe}, &status_text);
  const auto status = parse_kernel_status(status_text);
  if (ran.run.state != cell_runner::outcome::done || !ran.listing || !status) {
    const std::string why = ran.run.why.empty() ? "malformed status frame" : ran.run.why;
    if (auto ended = drop_driver(s, why)) return *ended;
    const std::string what =
        ran.run.found == runner_state::stopped ? "was stopped" : "stopped answering";
    return kernel_died("the kernel's driver " + what + " (" + why +
                       "); the next cell starts a new kernel");
  }
  executed out{{}, parse_cell_listing(*ran.listing), {}};
  s.last_used = std::chrono::steady_clock::now();
  if (status->died) {
    // The driver starts a new kernel for the next cell (and says so in its answer).
    if (out.listing.oom_after > out.listing.oom_before)
      return kernel_died("out of memory (the session's limit is " + ctx_.cfg.memory +
                         "; files in /tmp, /home/sandbox and /workspace count against it); "
                         "the next cell starts a new kernel");
    return kernel_died(
        "the kernel's process ended while the cell ran; the next cell starts a new kernel");
  }
  cell_result& c = out.result;
  c.exit_code = ran.run.result.exit_code;
  c.timed_out = c.exit_code == 124;
  take_output(ran.run.result, ctx_.cfg, c);
  if (c.timed_out) {
    c.stderr_text +=
        "\n[sandbox] execution exceeded " + seconds_text(job.timeout_ms) + " and was killed";
    c.stderr_text +=
        status->restarted
            ? "\n[sandbox] the kernel did not stop at the interrupt and was restarted: its "
              "state is gone"
            : "\n[sandbox] the kernel was interrupted (KeyboardInterrupt): its state is kept";
  }
  c.kernel = cell_kernel{s.kernel, *status};
  c.kernel->status.restarted = status->restarted || s.kernel_replaced;
  s.kernel_replaced = false;
  // Artifacts: the same listing and limits as a plain cell's; the images the kernel
  // displayed are files the driver wrote to outputs/. Read with plain execs (a kernel
  // session has no cell runner).
  out.read = [this, &s](std::vector<std::string> cmd, std::chrono::milliseconds t,
                        std::size_t max_out) {
    return ctx_.containers.run_in(s.container, std::move(cmd), t, {}, false, {}, max_out);
  };
  return out;
}

outcome<kernel_restart> kernel_executor::restart(session& s) const {
  if (s.kernel.empty())
    return refuse(refusal_kind::invalid,
                  "session has no kernel (create it with {\"kernel\": \"python\"})");
  if (auto ended = drop_driver(s, "restart")) return *ended;
  if (auto refused = ensure_driver(s)) return *refused;
  s.kernel_replaced = false;  // this answer says it
  s.last_used = std::chrono::steady_clock::now();
  return kernel_restart{{s.kernel, {true, false, 0}}};
}

}  // namespace dockgate::sidecar

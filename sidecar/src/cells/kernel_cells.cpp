// A kernel session's cells (POST /exec) and its restart (POST /sessions/{id}/restart):
// the cell run in the session's IPython kernel through its kernel driver (kernel.hpp).
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
#include <cstdio>
#include <iostream>

#include "cells/cell_listing.hpp"
#include "cells/cells.hpp"
#include "cells/kernel.hpp"
#include "engine/labels.hpp"
#include "front/aivory/replies.hpp"
#include "front/request.hpp"
#include "cells/runner.hpp"
#include "sessions/session.hpp"
#include "sessions/session_containers.hpp"
#include "sessions/session_lifecycle.hpp"
#include "sessions/session_registry.hpp"
#include "util/util.hpp"

namespace dockgate::sidecar {

using namespace std::chrono_literals;

namespace {

constexpr std::string_view outputs_dir = "/workspace/outputs";
constexpr auto kill_grace = 2s;          // after the interrupt, as timeout's --kill-after
constexpr auto restart_allowance = 60s;  // a kernel restart (an IPython start) on a loaded host
constexpr auto driver_start = 90s;
constexpr std::size_t listing_cap = 64 * 1024 * 1024;

// The driver's process, looked at when it has not answered by the time a sound one
// would have (as the runner's: cells.cpp).
runner_probe probe_for(const session_containers& containers, const std::string& container) {
  return [&containers, container](int pid) {
    auto st = containers.run_in(container, {"cat", "/proc/" + std::to_string(pid) + "/stat"}, 10s,
                                {}, false, {}, 4096);
    if (!st.started) return runner_state::unknown;
    if (st.exit_code != 0) return runner_state::gone;
    return parse_runner_stat(st.stdout_data);
  };
}

// The session's driver ended and its container swept (everything of the session user,
// the kernel too, judged from the host); false when a process outlived the sweep (the
// session is then ended) — `ended` holds the answer.
bool drop_driver(session& s, const session_containers& containers, session_lifecycle& lifecycle,
                 std::string_view why, std::optional<http_reply>& ended) {
  std::cerr << "dockgate-sidecar: session " << s.id << ": kernel driver dropped (" << why
            << "); the next cell starts a new kernel" << std::endl;
  if (s.kernel_driver) s.kernel_driver->close();
  s.kernel_driver.reset();
  s.kernel_replaced = true;
  // The kernel is multi-threaded: killed, it shows as a zombie with live threads ("Zl",
  // alive to only_own_processes) until its last thread has gone. A process still there is
  // swept again, up to three times, before it counts as one that outlived the sweep.
  auto outcome = containers.sweep_cell_processes(s.container);
  for (int again = 0; again < 3 && outcome == session_containers::sweep_outcome::tainted; ++again)
    outcome = containers.sweep_cell_processes(s.container);
  s.sweep_before_runner = outcome != session_containers::sweep_outcome::clean;
  if (outcome == session_containers::sweep_outcome::tainted) {
    std::cerr
        << "dockgate-sidecar: session " << s.id
        << ": a process left by a cell outlived the kill sweep; the session's container is ended"
        << std::endl;
    s.terminating = true;
    lifecycle.remove_session_containers(s);
    ended = detail(500, "session ended: a process left by a cell outlived the clean-up");
    return false;
  }
  return true;
}

// A driver for `s` where none runs: only where the host sees no process of the session
// user (a plain sweep first when that is not known). "" when it runs, else the error.
std::string ensure_driver(session& s, const client::engine& docker,
                          const session_containers& containers, session_lifecycle& lifecycle,
                          std::optional<http_reply>& ended) {
  if (s.kernel_driver && s.kernel_driver->usable()) return {};
  if (s.kernel_driver || s.sweep_before_runner) {
    if (!drop_driver(s, containers, lifecycle, "a new driver starts", ended)) return "ended";
    if (s.sweep_before_runner)
      return "kernel unavailable: the container's processes could not be checked; try again";
  }
  std::string why;
  s.kernel_driver = start_kernel_driver(docker, s.container, driver_start, &why);
  if (!s.kernel_driver) {
    // Whatever it left is swept before the next try.
    s.sweep_before_runner = true;
    return why;
  }
  return {};
}

}  // namespace

http_reply cells::run_kernel_cell(session& s, const std::string& code, std::int64_t ms,
                                  cell_events& events) {
  std::optional<http_reply> ended;
  if (auto error = ensure_driver(s, docker_, containers_, lifecycle_, ended); !error.empty())
    return ended ? *ended : detail(500, error);
  const std::size_t cap = static_cast<std::size_t>(config_.max_output_bytes);
  std::function<void(int, std::string_view)> on_output;
  if (events.active())
    on_output = [&events](int stream, std::string_view data) { events.output(stream, data); };
  const runner_probe probe = probe_for(containers_, s.container);
  // A sound driver answers by the cell's timeout and the grace after the interrupt; one
  // that has not is probed, and only one found running (a kernel restart on a loaded host)
  // is waited for further, up to the hard deadline.
  const auto timeout = std::chrono::milliseconds(ms);
  const cell_runner::patience cell_wait{timeout + kill_grace + 1s,
                                        timeout + kill_grace + restart_allowance + 30s, probe};
  std::string status_text;
  auto ran = s.kernel_driver->run_request(
      kernel_cell_request(code, ms, std::chrono::milliseconds(kill_grace).count(), outputs_dir,
                          static_cast<std::uint32_t>(std::min<std::size_t>(cap, 1u << 31))),
      cap, cell_wait, on_output, listing_cap, {5s, 30s, probe}, &status_text);
  const auto status = parse_kernel_status(status_text);
  if (ran.run.state != cell_runner::outcome::done || !ran.listing || !status) {
    const std::string why = ran.run.why.empty() ? "malformed status frame" : ran.run.why;
    if (!drop_driver(s, containers_, lifecycle_, why, ended)) return *ended;
    const std::string what =
        ran.run.found == runner_state::stopped ? "was stopped" : "stopped answering";
    return detail(500, "kernel died: the kernel's driver " + what + " (" + why +
                           "); the next cell starts a new kernel");
  }
  const auto listing = parse_cell_listing(*ran.listing);
  s.last_used = std::chrono::steady_clock::now();
  if (status->died) {
    // The driver starts a new kernel for the next cell (and says so in its answer).
    if (listing.oom_after > listing.oom_before)
      return detail(500, "kernel died: out of memory (the session's limit is " + config_.memory +
                             "; files in /tmp, /home/sandbox and /workspace count against it); "
                             "the next cell starts a new kernel");
    return detail(500,
                  "kernel died: the kernel's process ended while the cell ran; the next "
                  "cell starts a new kernel");
  }
  auto& result = ran.run.result;
  const std::int64_t exit_code = result.exit_code;
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.3fs", static_cast<double>(ms) / 1000.0);
  const std::string kb = std::to_string(config_.max_output_bytes / 1024) + "KB";
  std::string out = valid_utf8(result.stdout_data);
  std::string errs = valid_utf8(result.stderr_data);
  if (result.stdout_dropped) out += "\n... [truncated, stdout exceeded " + kb + "]";
  if (result.stderr_dropped) errs += "\n... [truncated, stderr exceeded " + kb + "]";
  if (exit_code == 124) {
    errs += std::string("\n[sandbox] execution exceeded ") + seconds + " and was killed";
    errs += status->restarted
                ? "\n[sandbox] the kernel did not stop at the interrupt and was restarted: its "
                  "state is gone"
                : "\n[sandbox] the kernel was interrupted (KeyboardInterrupt): its state is kept";
  }
  kernel_status reported = *status;
  reported.restarted = status->restarted || s.kernel_replaced;
  s.kernel_replaced = false;
  // Artifacts: the same listing and limits as a plain cell's; the images the kernel
  // displayed are files the driver wrote to outputs/. Read with plain execs (a kernel
  // session has no cell runner).
  const artifact_reader read = [this, &s](std::vector<std::string> cmd, std::chrono::milliseconds t,
                                          std::size_t max_out) {
    return containers_.run_in(s.container, std::move(cmd), t, {}, false, {}, max_out);
  };
  const std::string files = artifacts(listing, read, errs);
  while (!errs.empty() && (errs.front() == '\n' || errs.front() == ' ')) errs.erase(0, 1);
  std::string body = "{\"stdout\":";
  client::append_json_string(body, out);
  body += ",\"stderr\":";
  client::append_json_string(body, errs);
  body += ",\"exit_code\":" + std::to_string(exit_code) + ",\"files\":" + files +
          ",\"kernel\":" + kernel_json(s.kernel, reported) + "}";
  return {200, body};
}

http_reply cells::restart_kernel(std::string_view id) {
  held_session held;
  if (auto refused = registry_.acquire(std::string(id), held)) return aivory::reply(*refused);
  session& s = *held.s;
  if (s.kernel.empty())
    return detail(400, "session has no kernel (create it with {\"kernel\": \"python\"})");
  std::optional<http_reply> ended;
  if (!drop_driver(s, containers_, lifecycle_, "restart", ended)) return *ended;
  if (auto error = ensure_driver(s, docker_, containers_, lifecycle_, ended); !error.empty())
    return ended ? *ended : detail(500, error);
  s.kernel_replaced = false;  // this answer says it
  s.last_used = std::chrono::steady_clock::now();
  return {200, "{\"ok\":true,\"kernel\":" + kernel_json(s.kernel, {true, false, 0}) + "}"};
}

}  // namespace dockgate::sidecar

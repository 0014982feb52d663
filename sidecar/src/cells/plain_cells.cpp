// The plain executor: a cell as two Docker execs of the session user (the cell, then its
// clean-up), and the answer both shell-cell executors (plain, runner) give from what ran.
// See cells.cpp for the invariants (nothing a cell starts outlives its answer; a sweep's
// outcome is judged on the host).
#include <cstdio>
#include <iostream>

#include "cells/executors.hpp"
#include "engine/container_engine.hpp"
#include "engine/labels.hpp"
#include "sessions/session.hpp"
#include "sessions/session_containers.hpp"
#include "sessions/session_lifecycle.hpp"
#include "util/ids.hpp"
#include "util/util.hpp"

namespace dockgate::sidecar {

using namespace std::chrono_literals;

namespace {

// Regular files under /workspace/outputs: path, mtime and size, each field NUL-terminated.
// (The runner lists them itself in the same format: protocol.py listing().)
constexpr std::string_view find_outputs =
    "find /workspace/outputs -type f -printf '%p\\0%T@\\0%s\\0' 2>/dev/null";

// The memory cgroup's OOM-kill count (cgroup v2 memory.events, v1 memory.oom_control), one line.
constexpr std::string_view oom_count =
    "o=0; for f in /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control; do "
    "[ -r $f ] && while read -r k v; do [ \"$k\" = oom_kill ] && o=$v; done < $f; done; echo $o";

// Why a cell ended with SIGKILL that nobody asked for: the memory limit (tmpfs files count
// against it too), or the timeout's second signal for a cell that ignored SIGTERM.
void explain_kill(const config& c, const cell_listing& listing, bool overran,
                  const std::string& seconds, cell_result& out) {
  if (listing.oom_after > listing.oom_before) {
    out.oom = true;
    out.stderr_text += "\n[sandbox] the cell was killed: out of memory (the session's limit is " +
                       c.memory + "; files in /tmp, /home/sandbox and /workspace count against it)";
  } else if (overran) {
    out.stderr_text +=
        "\n[sandbox] execution exceeded " + seconds + ", ignored SIGTERM and was killed";
  } else {
    out.stderr_text += "\n[sandbox] the cell was killed (SIGKILL)";
  }
}

}  // namespace

refusal end_tainted_session(const cell_context& ctx, session& s) {
  std::cerr << "dockgate-sidecar: session " << s.id
            << ": a process left by a cell outlived the kill sweep; the session's container is "
               "ended"
            << std::endl;
  s.terminating = true;
  if (s.runner) s.runner->close();
  s.runner.reset();
  ctx.lifecycle.remove_session_containers(s);
  return refuse(refusal_kind::failed,
                "session ended: a process left by a cell outlived the clean-up");
}

runner_probe probe_in(const session_containers& containers, const std::string& container) {
  return [&containers, container](int pid) {
    auto st = containers.run_in(container, {"cat", "/proc/" + std::to_string(pid) + "/stat"}, 10s,
                                {}, false, {}, 4096);
    if (!st.started) return runner_state::unknown;
    if (st.exit_code != 0) return runner_state::gone;
    return parse_runner_stat(st.stdout_data);
  };
}

std::string seconds_text(std::int64_t ms) {
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.3fs", static_cast<double>(ms) / 1000.0);
  return seconds;
}

void take_output(const client::exec_result& r, const config& c, cell_result& out) {
  const std::string kb = std::to_string(c.max_output_bytes / 1024) + "KB";
  out.stdout_text = valid_utf8(r.stdout_data);
  out.stderr_text = valid_utf8(r.stderr_data);
  if (r.stdout_dropped) out.stdout_text += "\n... [truncated, stdout exceeded " + kb + "]";
  if (r.stderr_dropped) out.stderr_text += "\n... [truncated, stderr exceeded " + kb + "]";
}

plain_executor::cell_files plain_executor::files_for(std::int64_t timeout_ms) {
  const std::string token = random_hex(16);
  return {"/tmp/dockgate-cell-" + token + ".py", "/tmp/dockgate-before-" + token,
          "/tmp/dockgate-oom-" + token, seconds_text(timeout_ms)};
}

client::exec_options plain_executor::cell_exec(const cell_job& job, const cell_files& f) const {
  // The first of the two commands around the cell: it records the memory cgroup's OOM-kill
  // count, snapshots /workspace/outputs, writes the cell from stdin and becomes `timeout
  // ... python3`.
  client::exec_options run;
  run.cmd = {"sh", "-c",
             std::string(oom_count) + " > " + shell_quote(f.oom_file) + "; " +
                 std::string(find_outputs) + " > " + shell_quote(f.before_file) + "; cat > " +
                 shell_quote(f.cell) + " || exit 125; exec timeout --kill-after=2s " + f.seconds +
                 " python3 " + shell_quote(f.cell)};
  run.stdin_data = job.code;
  run.attach_stdin = true;
  run.user = session_user;
  run.max_stdout = run.max_stderr = static_cast<std::size_t>(ctx_.cfg.max_output_bytes);
  run.timeout = std::chrono::milliseconds(job.timeout_ms) + 15s;  // the host-side wall clock
  if (job.output)
    run.on_output = [out = job.output](int stream, std::string_view data) {
      out->output(stream, data);
    };
  return run;
}

std::optional<std::string> plain_executor::clean_up(session& s, const cell_files& f,
                                                    refusal& ended) const {
  // Nothing the cell started outlives its answer, whatever it did to its environment,
  // session, process group or PID: every process but the container's init and its `sleep`
  // (and the runner) is killed (kill_cell_processes), then outputs are listed again.
  // After a runner fault this is a plain exec, whose sweep ends the runner too. Its sweep
  // is judged from the host before the answer; what it listed is only the cell's files.
  std::vector<std::string> cmd{
      "sh", "-c",
      kill_cell_processes() + " rm -f " + shell_quote(f.cell) + "; " + std::string(oom_count) +
          "; cat " + shell_quote(f.oom_file) + " 2>/dev/null; cat " + shell_quote(f.before_file) +
          " 2>/dev/null; printf '\\0'; " + std::string(find_outputs) + "; rm -f " +
          shell_quote(f.before_file) + " " + shell_quote(f.oom_file)};
  std::string listing = ctx_.containers.run_in(s.container, std::move(cmd), 15s).stdout_data;
  const auto outcome = ctx_.containers.only_own_processes(s.container, s.runtime);
  if (outcome == session_containers::sweep_outcome::tainted) {
    ended = end_tainted_session(ctx_, s);
    return std::nullopt;
  }
  s.sweep_before_runner = outcome != session_containers::sweep_outcome::clean;
  return listing;
}

session_containers::sweep_outcome plain_executor::sweep(session& s) const {
  const auto outcome = ctx_.containers.sweep_cell_processes(s.container, s.runtime);
  s.sweep_before_runner = outcome != session_containers::sweep_outcome::clean;
  return outcome;
}

artifact_reader plain_executor::reader(session& s) const {
  return
      [this, &s](std::vector<std::string> cmd, std::chrono::milliseconds t, std::size_t max_out) {
        return ctx_.containers.run_in(s.container, std::move(cmd), t, {}, false, {}, max_out);
      };
}

outcome<executed> plain_executor::run(const cell_job& job) {
  const auto f = files_for(job.timeout_ms);
  const auto started = std::chrono::steady_clock::now();
  auto result = ctx_.engine.exec(job.s.container, cell_exec(job, f));
  const how_it_ran how{std::chrono::steady_clock::now() - started};
  refusal ended;
  auto listing = clean_up(job.s, f, ended);
  if (!listing) return ended;
  return answer(job, f, result, *listing, how, reader(job.s));
}

outcome<executed> plain_executor::answer(const cell_job& job, const cell_files& f,
                                         const client::exec_result& r,
                                         const std::string& listing_text, const how_it_ran& how,
                                         artifact_reader read) const {
  if (!r.started &&
      (r.error.find("409") != std::string::npos || r.error.find("404") != std::string::npos))
    return refuse(refusal_kind::not_found, "session not found or not running");
  if (r.started && r.exit_code == 125 && !r.timed_out)
    return refuse(refusal_kind::failed, "write cell failed: " + r.stderr_data);
  executed out{{}, parse_cell_listing(listing_text), std::move(read)};
  if (!r.started) return refuse(refusal_kind::failed, "exec failed: " + r.error);
  cell_result& c = out.result;
  c.exit_code = r.timed_out ? 124 : r.exit_code;
  c.timed_out = c.exit_code == 124;
  take_output(r, ctx_.cfg, c);
  if (c.timed_out)
    c.stderr_text += "\n[sandbox] execution exceeded " + f.seconds + " and was killed";
  if (how.runner_stopped)
    c.stderr_text +=
        "\n[sandbox] the cell's runner was stopped (SIGSTOP) while the cell ran: its output "
        "ends here and its exit status is unknown; the next cell gets a new runner";
  else if (how.runner_lost && !r.timed_out)
    c.stderr_text +=
        "\n[sandbox] the cell's runner stopped answering while the cell ran (was it "
        "killed?); its exit status is unknown";
  if (c.exit_code == 137)
    explain_kill(ctx_.cfg, out.listing, how.elapsed >= std::chrono::milliseconds(job.timeout_ms),
                 f.seconds, c);
  return out;
}

}  // namespace dockgate::sidecar

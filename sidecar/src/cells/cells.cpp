// Cells: POST /exec, the run, the clean-up and the artifacts (seed §1.5).
//
// Invariants (docs/design.md, "Cell walls"; docs/security.md, "What a cell can do to its
// own container"):
// - Nothing a cell starts outlives its answer: after every cell a kill sweep (the
//   runner's own, or the plain clean-up's kill_cell_processes, session_containers.cpp)
//   ends every process of the session user but the runner.
// - A plain sweep is an exec of the session user, which a process the cell left can stop
//   or trace: its outcome is judged on the host (session_containers::only_own_processes,
//   ContainerTop), and a process that lives on ends the session's container.
// - No runner starts until the host has shown no process of the session user
//   (session::sweep_before_runner).
// - A runner that stops answering is probed and given up: the cell is answered as what
//   happened, never run twice, and the next cell gets a new runner.
// - One cell at a time per session (the session's lock; 429 after the queue timeout).
#include "cells/cells.hpp"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>

#include "cells/cell_listing.hpp"
#include "engine/labels.hpp"
#include "front/request.hpp"
#include "util/ids.hpp"
#include "cells/runner.hpp"
#include "sessions/session.hpp"
#include "sessions/session_containers.hpp"
#include "sessions/session_lifecycle.hpp"
#include "sessions/session_registry.hpp"
#include "util/util.hpp"

namespace dockgate::sidecar {

using namespace std::chrono_literals;

namespace {

// Regular files under /workspace/outputs: path, mtime and size, each field NUL-terminated.
// (The runner lists them itself in the same format: runner.py listing().)
constexpr std::string_view outputs_dir = "/workspace/outputs";
constexpr std::string_view find_outputs = "find /workspace/outputs -type f -printf '%p\\0%T@\\0%s\\0' 2>/dev/null";

// The memory cgroup's OOM-kill count (cgroup v2 memory.events, v1 memory.oom_control), one line.
constexpr std::string_view oom_count =
    "o=0; for f in /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control; do "
    "[ -r $f ] && while read -r k v; do [ \"$k\" = oom_kill ] && o=$v; done < $f; done; echo $o";

}  // namespace

http_reply cells::exec(const http_request& r) {
  // With `Accept: text/event-stream` the answer is a stream of events: the cell's output
  // as it comes, then the same result object as a plain answer. An error before any
  // output is still a plain error answer (its status and body).
  cell_events events(r.stream && wants_event_stream(r.accept) ? r.stream : nullptr);
  auto reply = run_cell(r, events);
  if (!events.active() || (reply.status != 200 && !events.opened())) return reply;
  events.flush();
  events.send(reply.status == 200 ? "result" : "error", reply.body, true);
  return {200, {}, true};
}

http_reply cells::run_cell(const http_request& r, cell_events& events) {
  body_fields f(r.body);
  if (f.error) return *f.error;
  std::optional<http_reply> err;
  auto sid = f.string("session_id", true, err);
  auto code = f.string("code", true, err);
  auto timeout_ms = f.integer("timeout_ms", err);
  if (err) return *err;
  if (utf8_chars(*code) > static_cast<std::size_t>(config_.max_code_bytes))
    return invalid("code", "ensure this value has at most " + std::to_string(config_.max_code_bytes) + " characters",
                   "value_error.any_str.max_length");
  if (code->size() > static_cast<std::size_t>(config_.max_code_bytes)) return detail(413, "code too large");
  if (!valid_session_id(*sid)) return detail(400, "invalid session_id");
  const std::int64_t ms = std::clamp<std::int64_t>(timeout_ms && *timeout_ms ? *timeout_ms : config_.default_exec_timeout_ms,
                                                   1000, config_.exec_timeout_cap_ms);
  auto s = registry_.find(*sid);
  if (!s || s->terminating) return detail(404, "session not found or not running");
  // One cell at a time per session: the lock also guards the session's runner.
  std::unique_lock lock(s->lock, std::defer_lock);
  if (!lock.try_lock_for(std::chrono::seconds(config_.queue_timeout_seconds))) return detail(429, "session is busy");
  if (config_.max_concurrent_execs > 0 && !exec_slots_.try_acquire_for(std::chrono::seconds(config_.queue_timeout_seconds)))
    return detail(429, "exec queue is full");
  struct release {
    std::counting_semaphore<1 << 20>* s;
    ~release() {
      if (s) s->release();
    }
  } slot{config_.max_concurrent_execs > 0 ? &exec_slots_ : nullptr};
  if (s->terminating) return detail(404, "session not found or not running");
  // A kernel session's cells run in its kernel (kernel_cells.cpp).
  if (!s->kernel.empty()) return run_kernel_cell(*s, *code, ms, events);

  // Two commands around the cell: the first records the memory cgroup's OOM-kill count,
  // snapshots /workspace/outputs, writes the cell from stdin and becomes `timeout ...
  // python3`; the second kills whatever the cell left behind, removes it and snapshots
  // outputs again. Each is a request to the session's runner, or (no runner, or after
  // its first fault) a Docker exec of its own: three Engine API calls.
  const std::string token = random_hex(16);
  const std::string cell = "/tmp/dockgate-cell-" + token + ".py";
  const std::string before_file = "/tmp/dockgate-before-" + token;
  const std::string oom_file = "/tmp/dockgate-oom-" + token;
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.3fs", static_cast<double>(ms) / 1000.0);
  client::exec_options run;
  run.cmd = {"sh", "-c",
             std::string(oom_count) + " > " + shell_quote(oom_file) + "; " + std::string(find_outputs) + " > " +
                 shell_quote(before_file) + "; cat > " + shell_quote(cell) + " || exit 125; exec timeout --kill-after=2s " +
                 seconds + " python3 " + shell_quote(cell)};
  run.stdin_data = *code;
  run.attach_stdin = true;
  run.user = session_user;
  run.max_stdout = run.max_stderr = static_cast<std::size_t>(config_.max_output_bytes);
  run.timeout = std::chrono::milliseconds(ms) + 15s;  // the host-side wall clock
  if (events.active()) run.on_output = [&events](int stream, std::string_view data) { events.output(stream, data); };

  // The runner: started with the session's container (make_workspace), else by a cell.
  // A runner that faults is dropped (its process ends in the plain clean-up's sweep) and
  // the next cell starts another; one that cannot start leaves the session to plain
  // execs for good. A runner is started only where no process of the session user is
  // alive (runner.py's window before it makes itself undumpable): in a new container, or
  // after a plain sweep (an adopted session, a dropped runner).
  auto drop_runner = [&](std::string_view why) {
    std::cerr << "dockgate-sidecar: session " << s->id << ": cell runner dropped (" << why
              << "); the next cell starts another" << std::endl;
    if (s->runner) s->runner->close();
    s->runner.reset();
    s->sweep_before_runner = true;
  };
  // A process that resisted the sweep may have stopped or traced every exec since, and
  // would meet the next runner before it is undumpable: the session's container ends
  // with it (its files are the cell's to lose, never a neighbour's).
  auto end_tainted = [&] {
    std::cerr << "dockgate-sidecar: session " << s->id
              << ": a process left by a cell outlived the kill sweep; the session's container is ended" << std::endl;
    s->terminating = true;
    if (s->runner) s->runner->close();
    s->runner.reset();
    lifecycle_.remove_session_containers(*s);
    return detail(500, "session ended: a process left by a cell outlived the clean-up");
  };
  auto plain_sweep = [&] {
    const auto outcome = containers_.sweep_cell_processes(s->container);
    s->sweep_before_runner = outcome != session_containers::sweep_outcome::clean;
    return outcome;
  };
  if (config_.cell_runner && !s->runner && !s->runner_refused) {
    // Only where the host sees no process of the session user (an unknown answer: no
    // runner this time, a plain exec instead).
    if (s->sweep_before_runner && plain_sweep() == session_containers::sweep_outcome::tainted) return end_tainted();
    if (!s->sweep_before_runner) {
      std::string why;
      s->runner = cell_runner::start(docker_, s->container, 20s, &why);
      if (!s->runner) {
        std::cerr << "dockgate-sidecar: session " << s->id << ": cell runner did not start (" << why
                  << "), plain execs from now on" << std::endl;
        s->runner_refused = true;
      }
    }
  }
  // The runner's process, looked at when it has not answered by the time a sound one
  // would have: a plain exec reads its stat line (the state after the comm is the
  // kernel's; no such file: it is gone).
  const runner_probe probe = [this, &s](int pid) {
    auto st = containers_.run_in(s->container, {"cat", "/proc/" + std::to_string(pid) + "/stat"}, 10s, {}, false, {}, 4096);
    if (!st.started) return runner_state::unknown;
    if (st.exit_code != 0) return runner_state::gone;
    return parse_runner_stat(st.stdout_data);
  };
  constexpr auto kill_grace = 2s;  // timeout's --kill-after, below
  constexpr auto answer_margin = 1s;

  // Nothing the cell started outlives its answer, whatever it did to its environment,
  // session, process group or PID: every process but the container's init and its
  // `sleep` (and the runner) is killed (kill_cell_processes), then outputs are listed
  // again. After a runner fault this is a plain exec, whose sweep ends the runner too.
  auto cleanup_cmd = [&]() -> std::vector<std::string> {
    return {"sh", "-c",
            kill_cell_processes() + " rm -f " + shell_quote(cell) + "; " + std::string(oom_count) + "; cat " +
                shell_quote(oom_file) + " 2>/dev/null; cat " + shell_quote(before_file) + " 2>/dev/null; printf '\\0'; " +
                std::string(find_outputs) + "; rm -f " + shell_quote(before_file) + " " + shell_quote(oom_file)};
  };
  constexpr std::size_t listing_cap = 64 * 1024 * 1024;  // run_in's cap for the plain clean-up

  const auto started = std::chrono::steady_clock::now();
  auto elapsed = std::chrono::steady_clock::duration::zero();
  client::exec_result result;
  std::optional<std::string> listing_text;
  bool runner_lost = false, runner_stopped = false;
  if (s->runner) {
    // One request: the plain path's two execs, done by the runner (runner.py cell()),
    // with the same paths and the same sweep.
    // The cell still starts from `sh -c 'exec timeout ...'`: the shell's environment (PWD
    // exported, its order of variables) is what the cell sees on the plain path.
    runner_cell c{{"sh", "-c", "exec timeout --kill-after=2s " + std::string(seconds) + " python3 " + shell_quote(cell)},
                  *code,
                  cell,
                  before_file,
                  oom_file,
                  std::string(outputs_dir),
                  {},  // the sweep: the runner's own (kill_sweep), no shell to start
                  // A fork of the runner's warm interpreter in argv's shape where it can.
                  std::to_string(ms)};
    // A sound runner answers by the cell's timeout plus the kill grace; after that, only
    // a runner found running is waited for (up to the host's wall clock).
    const cell_runner::patience cell_wait{
        std::chrono::milliseconds(ms) + kill_grace + answer_margin, run.timeout, probe};
    auto ran = s->runner->run_cell(c, run.max_stdout, cell_wait, run.on_output, listing_cap,
                                   {3s, 15s, probe});
    elapsed = std::chrono::steady_clock::now() - started;
    if (ran.run.state == cell_runner::outcome::done) {
      result = std::move(ran.run.result);
      elapsed = ran.exited - started;
      if (ran.listing) listing_text = std::move(ran.listing);
      else drop_runner(ran.run.why);  // the cell's answer stands; the plain clean-up follows
    } else {
      drop_runner(ran.run.why);
      if (ran.run.state == cell_runner::outcome::not_started) {
        // The runner never acknowledged the cell, so it did not run: run it as a plain
        // exec, once the runner's process is gone (a stopped one, continued, would run it
        // a second time).
        if (plain_sweep() == session_containers::sweep_outcome::tainted) return end_tainted();
        result = docker_.exec(s->container, run);
        elapsed = std::chrono::steady_clock::now() - started;
      } else {
        // It may have run (its output so far is kept): it is not run twice.
        result = std::move(ran.run.result);
        runner_lost = true;
        runner_stopped = ran.run.found == runner_state::stopped;
      }
    }
  } else {
    result = docker_.exec(s->container, run);
    elapsed = std::chrono::steady_clock::now() - started;
  }
  // A command that is no user code (reading an artifact): through the runner while it
  // is sound, else (or after a fault mid-way) as a plain exec.
  auto in_container = [&](std::vector<std::string> cmd, std::chrono::milliseconds timeout, std::size_t max_out) {
    if (s->runner) {
      auto ran = s->runner->run(cmd, {}, max_out,
                                {std::min<std::chrono::milliseconds>(timeout, 3s), timeout, probe},
                                nullptr);
      if (ran.state == cell_runner::outcome::done) return std::move(ran.result);
      drop_runner(ran.why);
    }
    return containers_.run_in(s->container, std::move(cmd), timeout, {}, false, {}, max_out);
  };
  if (!listing_text) {
    // The plain clean-up (the runner failed, or there is none): its sweep is judged from
    // the host before the answer; what it listed is only the cell's own files.
    listing_text = containers_.run_in(s->container, cleanup_cmd(), 15s).stdout_data;
    const auto outcome = containers_.only_own_processes(s->container);
    if (outcome == session_containers::sweep_outcome::tainted) return end_tainted();
    s->sweep_before_runner = outcome != session_containers::sweep_outcome::clean;
  }
  if (!result.started && result.error.find("409") != std::string::npos) return detail(404, "session not found or not running");
  if (!result.started && result.error.find("404") != std::string::npos) return detail(404, "session not found or not running");
  if (result.started && result.exit_code == 125 && !result.timed_out)
    return detail(500, "write cell failed: " + result.stderr_data);
  const auto listing = parse_cell_listing(*listing_text);
  if (!result.started) return detail(500, "exec failed: " + result.error);
  std::int64_t exit_code = result.timed_out ? 124 : result.exit_code;
  const std::string kb = std::to_string(config_.max_output_bytes / 1024) + "KB";
  std::string out = valid_utf8(result.stdout_data);
  std::string errs = valid_utf8(result.stderr_data);
  if (result.stdout_dropped) out += "\n... [truncated, stdout exceeded " + kb + "]";
  if (result.stderr_dropped) errs += "\n... [truncated, stderr exceeded " + kb + "]";
  if (exit_code == 124) errs += std::string("\n[sandbox] execution exceeded ") + seconds + " and was killed";
  if (runner_stopped)
    errs += "\n[sandbox] the cell's runner was stopped (SIGSTOP) while the cell ran: its output ends here and its exit "
            "status is unknown; the next cell gets a new runner";
  else if (runner_lost && !result.timed_out)
    errs += "\n[sandbox] the cell's runner stopped answering while the cell ran (was it killed?); its exit status is unknown";
  // A SIGKILL nobody asked for: the memory limit (tmpfs files count against it too), or
  // the timeout's second signal for a cell that ignored SIGTERM.
  if (exit_code == 137) {
    if (listing.oom_after > listing.oom_before)
      errs += "\n[sandbox] the cell was killed: out of memory (the session's limit is " + config_.memory +
              "; files in /tmp, /home/sandbox and /workspace count against it)";
    else if (elapsed >= std::chrono::milliseconds(ms))
      errs += std::string("\n[sandbox] execution exceeded ") + seconds + ", ignored SIGTERM and was killed";
    else
      errs += "\n[sandbox] the cell was killed (SIGKILL)";
  }
  s->last_used = std::chrono::steady_clock::now();

  const std::string files = artifacts(listing, in_container, errs);
  while (!errs.empty() && (errs.front() == '\n' || errs.front() == ' ')) errs.erase(0, 1);
  std::string body = "{\"stdout\":";
  client::append_json_string(body, out);
  body += ",\"stderr\":";
  client::append_json_string(body, errs);
  body += ",\"exit_code\":" + std::to_string(exit_code) + ",\"files\":" + files + "}";
  return {200, body};
}

std::string cells::artifacts(const cell_listing& listing, const artifact_reader& read,
                             std::string& errs) const {
  // Artifacts: new or changed regular files under /workspace/outputs, by path. The
  // listing is NUL-separated (no name can forge a record) and every path is checked
  // again here; sizes are those of the bytes read, not of the listing.
  std::vector<std::string> changed;
  for (const auto& [path, stamp] : listing.after) {
    if (!path.starts_with("/workspace/outputs/") || path.find("/../") != std::string::npos ||
        path.find("/./") != std::string::npos || path.ends_with("/..") || path.ends_with("/."))
      continue;
    auto it = listing.before.find(path);
    if (it == listing.before.end() || it->second != stamp) changed.push_back(path);
  }
  std::string files = "[";
  std::int64_t total = 0, count = 0, skipped = 0;
  const auto collect_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(config_.max_collect_seconds);
  for (const auto& path : changed) {
    const std::string& stamp = listing.after.at(path);
    const std::int64_t size = std::strtoll(stamp.substr(stamp.find('\t') + 1).c_str(), nullptr, 10);
    if (std::chrono::steady_clock::now() > collect_deadline || size > config_.max_artifact_bytes ||
        count >= config_.max_files_per_exec || total + size > config_.max_total_artifact_bytes) {
      ++skipped;
      continue;
    }
    auto data = read({"cat", "--", path}, std::chrono::seconds(config_.collect_file_timeout_s),
                     static_cast<std::size_t>(config_.max_artifact_bytes));
    if (!data.started || data.exit_code != 0 || data.stdout_dropped ||
        total + static_cast<std::int64_t>(data.stdout_data.size()) > config_.max_total_artifact_bytes) {
      ++skipped;
      continue;
    }
    const std::string name = path.substr(path.rfind('/') + 1);
    if (count++) files += ',';
    files += "{\"name\":";
    client::append_json_string(files, valid_utf8(name));
    files += ",\"mime_type\":";
    client::append_json_string(files, mime_type_for(name));
    files += ",\"data_base64\":\"" + base64_encode(data.stdout_data) + "\"}";
    total += static_cast<std::int64_t>(data.stdout_data.size());
  }
  files += ']';
  if (skipped) {
    errs += "\n[sandbox] skipped " + std::to_string(skipped) + " output file(s) because artifact limits are " +
            std::to_string(config_.max_files_per_exec) + " files, " + std::to_string(config_.max_artifact_bytes) +
            " bytes per file, " + std::to_string(config_.max_total_artifact_bytes) + " bytes total";
  }
  return files;
}

}  // namespace dockgate::sidecar

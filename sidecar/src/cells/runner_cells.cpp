// The runner executor: a cell as one request to the session's cell runner (runner.hpp),
// the plain path's two execs done by the runner with the same paths and the same sweep.
// See cells.cpp for the invariants (no runner starts until the host has shown no process
// of the session user; a runner that stops answering is probed and given up, the cell
// answered as what happened, never run twice).
#include <iostream>

#include "cells/executors.hpp"
#include "engine/container_engine.hpp"
#include "sessions/session.hpp"
#include "sessions/session_containers.hpp"
#include "util/util.hpp"

namespace dockgate::sidecar {

using namespace std::chrono_literals;

namespace {

constexpr auto kill_grace = 2s;  // timeout's --kill-after
constexpr auto answer_margin = 1s;
constexpr std::size_t listing_cap = 64 * 1024 * 1024;  // as run_in's cap for the plain clean-up
// While other cells run, a runner makes its next cell's fork only after this long without a
// request: a burst of cells across sessions is not slowed by the forks for the cells after
// it (half a cell's CPU), and a session's next cell that comes sooner forks its own.
constexpr std::string_view pair_after_when_busy = "1000";

}  // namespace

void runner_executor::drop(session& s, std::string_view why) {
  std::cerr << "dockgate-sidecar: session " << s.id << ": cell runner dropped (" << why
            << "); the next cell starts another" << std::endl;
  if (s.runner) s.runner->close();
  s.runner.reset();
  s.sweep_before_runner = true;
}

std::optional<refusal> runner_executor::ensure(session& s) const {
  // The runner: started with the session's container (make_workspace), else by a cell. One
  // that cannot start leaves the session to plain execs for good. A runner is started only
  // where no process of the session user is alive (runner.py's window before it makes
  // itself undumpable): in a new container, or after a plain sweep (an adopted session, a
  // dropped runner); an unknown answer: no runner this time, a plain exec instead.
  if (!ctx_.cfg.cell_runner || s.runner || s.runner_refused) return std::nullopt;
  if (s.sweep_before_runner && plain_.sweep(s) == session_containers::sweep_outcome::tainted)
    return end_tainted_session(ctx_, s);
  if (s.sweep_before_runner) return std::nullopt;
  std::string why;
  s.runner = cell_runner::start(ctx_.engine, s.container, 20s, &why);
  if (!s.runner) {
    std::cerr << "dockgate-sidecar: session " << s.id << ": cell runner did not start (" << why
              << "), plain execs from now on" << std::endl;
    s.runner_refused = true;
  }
  return std::nullopt;
}

artifact_reader runner_executor::reader(session& s, runner_probe probe) const {
  // A command that is no user code (reading an artifact): through the runner while it is
  // sound, else (or after a fault mid-way) as a plain exec.
  return [this, &s, probe = std::move(probe)](
             std::vector<std::string> cmd, std::chrono::milliseconds timeout, std::size_t max_out) {
    if (s.runner) {
      auto ran = s.runner->run(cmd, {}, max_out,
                               {std::min<std::chrono::milliseconds>(timeout, 3s), timeout, probe},
                               nullptr);
      if (ran.state == cell_runner::outcome::done) return std::move(ran.result);
      drop(s, ran.why);
    }
    return ctx_.containers.run_in(s.container, std::move(cmd), timeout, {}, false, {}, max_out);
  };
}

outcome<executed> runner_executor::run(const cell_job& job) {
  session& s = job.s;
  const auto f = plain_executor::files_for(job.timeout_ms);
  const client::exec_options plain_run = plain_.cell_exec(job, f);
  const runner_probe probe = probe_in(ctx_.containers, s.container);
  // The cell still starts from `sh -c 'exec timeout ...'`: the shell's environment (PWD
  // exported, its order of variables) is what the cell sees on the plain path. The sweep
  // is the runner's own (kill_sweep); fork_timeout_ms lets it fork the cell from its warm
  // interpreter in argv's shape where it can.
  const runner_cell c{
      {"sh", "-c", "exec timeout --kill-after=2s " + f.seconds + " python3 " + shell_quote(f.cell)},
      job.code,
      f.cell,
      f.before_file,
      f.oom_file,
      "/workspace/outputs",
      {},
      std::to_string(job.timeout_ms),
      job.others_running ? std::string(pair_after_when_busy) : std::string()};
  // A sound runner answers by the cell's timeout plus the kill grace; after that, only a
  // runner found running is waited for (up to the host's wall clock).
  const cell_runner::patience cell_wait{
      std::chrono::milliseconds(job.timeout_ms) + kill_grace + answer_margin, plain_run.timeout,
      probe};
  const auto started = std::chrono::steady_clock::now();
  auto ran = s.runner->run_cell(c, plain_run.max_stdout, cell_wait, plain_run.on_output,
                                listing_cap, {3s, 15s, probe});
  plain_executor::how_it_ran how{std::chrono::steady_clock::now() - started};
  client::exec_result result;
  std::optional<std::string> listing;
  if (ran.run.state == cell_runner::outcome::done) {
    result = std::move(ran.run.result);
    how.elapsed = ran.exited - started;
    if (ran.listing)
      listing = std::move(ran.listing);
    else
      drop(s, ran.run.why);  // the cell's answer stands; the plain clean-up follows
  } else if (ran.run.state == cell_runner::outcome::not_started) {
    // The runner never acknowledged the cell, so it did not run: run it as a plain exec,
    // once the runner's process is gone (a stopped one, continued, would run it twice).
    drop(s, ran.run.why);
    if (plain_.sweep(s) == session_containers::sweep_outcome::tainted)
      return end_tainted_session(ctx_, s);
    result = ctx_.engine.exec(s.container, plain_run);
    how.elapsed = std::chrono::steady_clock::now() - started;
  } else {
    // It may have run (its output so far is kept): it is not run twice.
    drop(s, ran.run.why);
    result = std::move(ran.run.result);
    how.runner_lost = true;
    how.runner_stopped = ran.run.found == runner_state::stopped;
  }
  refusal ended;
  if (!listing && !(listing = plain_.clean_up(s, f, ended))) return ended;
  return plain_.answer(job, f, result, *listing, how, reader(s, probe));
}

}  // namespace dockgate::sidecar

// Cells: a cell's steps (the session found and locked, an exec slot, the executor chosen
// and run, the artifacts collected) over the three executors (executors.hpp).
//
// Invariants (docs/design.md, "Cell walls"; docs/security.md, "What a cell can do to its
// own container"):
// - Nothing a cell starts outlives its answer: after every cell a kill sweep (the
//   runner's own, or the plain clean-up's kill_cell_processes, session_containers.cpp)
//   ends every process of the session user but the runner (plain_cells.cpp).
// - A plain sweep is an exec of the session user, which a process the cell left can stop
//   or trace: its outcome is judged on the host (session_containers::only_own_processes,
//   ContainerTop), and a process that lives on ends the session's container
//   (end_tainted_session).
// - No runner starts until the host has shown no process of the session user
//   (session::sweep_before_runner; runner_executor::ensure).
// - A runner that stops answering is probed and given up: the cell is answered as what
//   happened, never run twice, and the next cell gets a new runner (runner_cells.cpp).
// - One cell at a time per session (the session's lock; busy after the queue timeout).
#include "cells/cells.hpp"

#include <algorithm>
#include <mutex>

#include "sessions/session.hpp"
#include "sessions/session_registry.hpp"

namespace dockgate::sidecar {

namespace {

refusal not_running() {
  return refuse(refusal_kind::not_found, "session not found or not running");
}

// An exec slot (SANDBOX_MAX_CONCURRENT_EXECS), given back when the cell is answered.
struct exec_slot {
  std::counting_semaphore<1 << 20>* held = nullptr;
  exec_slot() = default;
  exec_slot(const exec_slot&) = delete;
  exec_slot& operator=(const exec_slot&) = delete;
  ~exec_slot() {
    if (held) held->release();
  }
};

// A cell counted among those running while it runs; `others`: it was not alone.
struct running_cell {
  std::atomic<int>& count;
  bool others;
  explicit running_cell(std::atomic<int>& c) : count(c), others(c.fetch_add(1) > 0) {}
  running_cell(const running_cell&) = delete;
  running_cell& operator=(const running_cell&) = delete;
  ~running_cell() { count.fetch_sub(1); }
};

}  // namespace

std::int64_t cells::timeout_of(const cell_request& request) const {
  const auto& c = context_.cfg;
  const std::int64_t asked =
      request.timeout_ms && *request.timeout_ms ? *request.timeout_ms : c.default_exec_timeout_ms;
  return std::clamp<std::int64_t>(asked, 1000, c.exec_timeout_cap_ms);
}

outcome<cell_executor*> cells::executor_for(session& s) {
  // A kernel session's cells run in its kernel (kernel_cells.cpp).
  if (!s.kernel.empty()) return static_cast<cell_executor*>(&kernel_);
  if (auto ended = runner_.ensure(s)) return *ended;
  if (s.runner) return static_cast<cell_executor*>(&runner_);
  return static_cast<cell_executor*>(&plain_);
}

outcome<cell_result> cells::run(const cell_request& request, cell_output* output) {
  const auto& c = context_.cfg;
  const std::int64_t ms = timeout_of(request);
  auto s = registry_.find(request.session_id);
  if (!s || s->terminating) return not_running();
  // One cell at a time per session: the lock also guards the session's runner.
  std::unique_lock lock(s->lock, std::defer_lock);
  if (!lock.try_lock_for(std::chrono::seconds(c.queue_timeout_seconds)))
    return refuse(refusal_kind::busy, "session is busy");
  exec_slot slot;
  if (c.max_concurrent_execs > 0) {
    if (!exec_slots_.try_acquire_for(std::chrono::seconds(c.queue_timeout_seconds)))
      return refuse(refusal_kind::busy, "exec queue is full");
    slot.held = &exec_slots_;
  }
  if (s->terminating) return not_running();
  auto executor = executor_for(*s);
  if (!executor) return executor.error();
  const running_cell counted(running_);
  auto ran = executor.value()->run({*s, request.code, ms, output, counted.others});
  if (!ran) return ran.error();
  s->last_used = std::chrono::steady_clock::now();
  cell_result result = std::move(ran->result);
  result.files = collect_artifacts(c, ran->listing, ran->read, result.stderr_text);
  auto& errs = result.stderr_text;
  errs.erase(0, std::min(errs.size(), errs.find_first_not_of("\n ")));
  return result;
}

}  // namespace dockgate::sidecar

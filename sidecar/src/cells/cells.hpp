#pragma once
// Cells: one cell run in a session's container by one of its three executors (plain
// execs, the session's cell runner, a kernel session's kernel: executors.hpp), the
// clean-up that nothing a cell started outlives, and the artifacts. A front parses the
// request (cell_contract.hpp) and writes the result in its API's shape; cells know no HTTP.
// Internal to the sidecar library; the invariants are at the top of cells.cpp.

#include <atomic>
#include <semaphore>
#include <string_view>

#include "cells/cell_contract.hpp"
#include "cells/cell_output.hpp"
#include "cells/executors.hpp"
#include "dockgate/sidecar/config.hpp"
#include "util/refusal.hpp"

namespace dockgate::sidecar {

class container_engine;
class session_containers;
class session_lifecycle;
class session_registry;
struct session;

class cells {
 public:
  cells(const config& c, const container_engine& engine, const session_containers& containers,
        session_registry& registry, session_lifecycle& lifecycle)
      : registry_(registry),
        context_{c, engine, containers, lifecycle},
        plain_(context_),
        runner_(context_, plain_),
        kernel_(context_),
        exec_slots_(c.max_concurrent_execs > 0 ? c.max_concurrent_execs : (1 << 20)) {}

  // A cell, run to its answer; its output also goes to `output` as it comes (null: not
  // streamed). Refused: not_found (no such session, or it is ending), busy (the session
  // past the queue timeout, or no exec slot), failed (the cell could not be run, or its
  // clean-up ended the session).
  outcome<cell_result> run(const cell_request& request, cell_output* output);
  // POST /sessions/{id}/restart on a session its caller holds (session_registry::acquire):
  // its kernel replaced by a new one; invalid for a session without a kernel.
  outcome<kernel_restart> restart_kernel(session& s) { return kernel_.restart(s); }

  // The executor a cell of `s` runs on: the kernel for a kernel session, else the
  // session's runner where it has (or now starts) one, else plain execs. Refused when the
  // sweep before a new runner ended the session. Under the session's lock.
  outcome<cell_executor*> executor_for(session& s);

 private:
  std::int64_t timeout_of(const cell_request& request) const;

  session_registry& registry_;
  cell_context context_;
  plain_executor plain_;
  runner_executor runner_;
  kernel_executor kernel_;
  std::counting_semaphore<1 << 20> exec_slots_;
  std::atomic<int> running_{0};  // cells past their session's lock and exec slot
};

}  // namespace dockgate::sidecar

#pragma once
// Cells: POST /exec, one cell run in a session's container (through its cell runner, or
// plain execs), the clean-up that nothing a cell started outlives, and the artifacts.
// Internal to the sidecar library; the invariants are at the top of cells.cpp.

#include <chrono>
#include <functional>
#include <semaphore>
#include <string>
#include <vector>

#include "dockgate/client/engine.hpp"
#include "dockgate/sidecar/config.hpp"
#include "front/http_server.hpp"

namespace dockgate::sidecar {

class cell_events;  // runner.hpp
struct cell_listing;  // cell_listing.hpp
struct session;       // session.hpp
class session_containers;
class session_lifecycle;
class session_registry;

class cells {
 public:
  cells(const config& c, const client::engine& docker, const session_containers& containers,
        session_registry& registry, session_lifecycle& lifecycle)
      : config_(c),
        docker_(docker),
        containers_(containers),
        registry_(registry),
        lifecycle_(lifecycle),
        exec_slots_(c.max_concurrent_execs > 0 ? c.max_concurrent_execs : (1 << 20)) {}

  http_reply exec(const http_request& r);
  // POST /sessions/{id}/restart: a kernel session's kernel replaced by a new one
  // (kernel_cells.cpp); 404 for an unknown session, 400 for one without a kernel.
  http_reply restart_kernel(std::string_view id);

 private:
  http_reply run_cell(const http_request& r, cell_events& events);
  // A cell of a kernel session, under the session's lock (kernel_cells.cpp).
  http_reply run_kernel_cell(session& s, const std::string& code, std::int64_t ms,
                             cell_events& events);
  // A command that is no user code, run in the session's container (an artifact's `cat`).
  using artifact_reader = std::function<client::exec_result(
      std::vector<std::string>, std::chrono::milliseconds, std::size_t)>;
  // The answer's `files` array: new or changed regular files under /workspace/outputs,
  // read with `read`, within the artifact limits (what is skipped is said in `errs`).
  std::string artifacts(const cell_listing& listing, const artifact_reader& read,
                        std::string& errs) const;

  const config& config_;
  const client::engine& docker_;
  const session_containers& containers_;
  session_registry& registry_;
  session_lifecycle& lifecycle_;  // a session whose clean-up failed is ended
  std::counting_semaphore<1 << 20> exec_slots_;
};

}  // namespace dockgate::sidecar

#pragma once
// Cells: POST /exec, one cell run in a session's container (through its cell runner, or
// plain execs), the clean-up that nothing a cell started outlives, and the artifacts.
// Internal to the sidecar library; the invariants are at the top of cells.cpp.

#include <semaphore>

#include "dockgate/client/engine.hpp"
#include "dockgate/sidecar/config.hpp"
#include "dockgate/sidecar/http_server.hpp"

namespace dockgate::sidecar {

class cell_events;  // runner.hpp
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

 private:
  http_reply run_cell(const http_request& r, cell_events& events);

  const config& config_;
  const client::engine& docker_;
  const session_containers& containers_;
  session_registry& registry_;
  session_lifecycle& lifecycle_;  // a session whose clean-up failed is ended
  std::counting_semaphore<1 << 20> exec_slots_;
};

}  // namespace dockgate::sidecar

#pragma once
// The sessions room's executor hooks (sessions/executor_hooks.hpp) wired to the cells
// room's functions: the cell runner and the kernel driver. Internal to the sidecar library.

#include "dockgate/client/engine.hpp"
#include "sessions/executor_hooks.hpp"

namespace dockgate::sidecar {

// The hooks over `docker` (the client the cells room still starts its execs with; it
// outlives them).
executor_hooks session_executors(const client::engine& docker);

}  // namespace dockgate::sidecar

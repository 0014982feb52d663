#pragma once
// The sessions room's executor hooks (sessions/executor_hooks.hpp) wired to the cells
// room's functions: the cell runner and the kernel driver. Internal to the sidecar library.

#include "engine/container_engine.hpp"
#include "sessions/executor_hooks.hpp"

namespace dockgate::sidecar {

// The hooks over `engine` (the seam the cells room starts its execs through; it
// outlives them).
executor_hooks session_executors(const container_engine& engine);

}  // namespace dockgate::sidecar

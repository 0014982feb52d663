#pragma once
// The session core: the sidecar's objects, wired to each other, that every API front
// serves (front/aivory today). It knows no HTTP: a front parses its API's requests, calls
// these objects, and writes their results and refusals in its API's shapes.
// Internal to the sidecar library.

#include "cells/cells.hpp"
#include "dockgate/sidecar/config.hpp"
#include "engine/container_engine.hpp"
#include "files/files.hpp"
#include "sessions/executor_hooks.hpp"
#include "sessions/pool/pool_sessions.hpp"
#include "sessions/session_containers.hpp"
#include "sessions/session_controls.hpp"
#include "sessions/session_lifecycle.hpp"
#include "sessions/session_limit.hpp"
#include "sessions/session_registry.hpp"
#include "sessions/workspace/archive_store.hpp"
#include "sessions/workspace/workspace_mounts.hpp"

namespace dockgate::sidecar {

class store_lease;

// Declared in the order they depend on each other: each gets its collaborators, declared
// before it, by reference; they go in the reverse order (the warm pool, which removes its
// containers through `containers`, before those).
struct session_core {
  // `engine`: the seam to the engine (engine/container_engine.hpp), the only way the rooms
  // reach Docker.
  session_core(const config& c, const container_engine& engine, store_lease* lease);

  const config& config_of;
  const container_engine& engine;
  // The sessions room's way to start a session's executors (cells/): session_executors.hpp.
  executor_hooks executors;
  session_containers containers;
  workspace_mounts mounts;
  session_registry registry;
  session_limit limit;
  archive_store archives;
  session_pool pool;
  session_lifecycle lifecycle;
  session_controls controls;
  class cells cells;
  class files files;
};

}  // namespace dockgate::sidecar

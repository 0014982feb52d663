#pragma once
// One session's state, shared by the objects that serve it (the registry holds it; cells,
// files, the archive store and the lifecycle work on it under its lock). Internal to the
// sidecar library.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "storage/storage.hpp"

namespace dockgate::sidecar {

class cell_runner;  // runner.hpp

struct session {
  std::string id;
  std::string container;  // name
  std::timed_mutex lock;
  std::atomic<std::chrono::steady_clock::time_point> last_used{};
  std::int64_t ttl_seconds = 0;
  std::string archive_key;
  std::optional<storage_spec> storage;  // where its workspace is archived; none: not kept
  std::string restore_status = "none";
  // The archive's generation when the workspace was restored ("" if there was none);
  // nullopt when unknown. The archive is replaced only if it is still that generation.
  std::optional<std::string> restored_generation;
  std::atomic<bool> terminating{false};
  bool fuse = false;  // /workspace is its own FUSE mount (dockgate-mount), bound by the gate
  // The generation of its FUSE workspace it mounted (fleet_store.hpp): "" the key's own
  // prefix, g.<hex> one a takeover made.
  std::string generation;
  // Its record is in the fleet's store (fleet_store.hpp), naming this instance: removed
  // when the session ends, kept when it is handed over (a fleet member's stop).
  bool recorded = false;
  // The in-container cell runner (cells.cpp, runner.hpp), started with the session's
  // container (make_workspace), else by a cell; one that faults is dropped and the next
  // cell starts another; one that cannot start is never tried again (runner_refused).
  // sweep_before_runner: a process of the session user may be alive in the container
  // (an adopted session, a dropped runner): a plain sweep goes before the next runner.
  // All under `lock`.
  std::shared_ptr<cell_runner> runner;
  bool runner_refused = false;
  bool sweep_before_runner = false;
  bool pooled = false;  // its container came from the warm pool: a claim record goes with it
  // A kernel session (kernel.hpp, kernel_cells.cpp): the kernel's name ("" for a plain
  // session, which never has a driver); its driver, which holds the kernel, under `lock`.
  // A driver that faults is dropped and the next cell starts another (after a sweep judged
  // from the host, sweep_before_runner); kernel_replaced: the next answer says the kernel
  // was restarted (its state is gone). A kernel session has no cell runner.
  std::string kernel;
  std::shared_ptr<cell_runner> kernel_driver;
  bool kernel_replaced = false;
};

// A session found and locked for one request (session_registry::acquire).
struct held_session {
  std::shared_ptr<session> s;
  std::unique_lock<std::timed_mutex> lock;
};

}  // namespace dockgate::sidecar

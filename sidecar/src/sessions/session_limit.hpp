#pragma once
// SANDBOX_MAX_SESSIONS across the two places that create session containers: a session's
// own create (session_lifecycle) and the warm pool's (session_pool). Both count the
// engine's running containers of this instance and the containers being made under
// `mutex`, and take their place there (`reserved`, held until the container runs or is
// gone), so two creates never both take the last place; the create and start themselves
// run outside it, so concurrent creates overlap at the engine. Internal to the sidecar
// library.

#include <atomic>
#include <cstdint>
#include <mutex>

namespace dockgate::sidecar {

struct session_limit {
  std::mutex mutex;
  // Containers being created, not yet running: counted against SANDBOX_MAX_SESSIONS.
  std::atomic<std::int64_t> reserved{0};
};

// One place of `reserved`, given back when it goes (the container then runs, counted by
// the engine's list, or is gone).
struct limit_place {
  std::atomic<std::int64_t>& reserved;
  explicit limit_place(std::atomic<std::int64_t>& n) : reserved(n) {}
  limit_place(const limit_place&) = delete;
  limit_place& operator=(const limit_place&) = delete;
  ~limit_place() { --reserved; }
};

}  // namespace dockgate::sidecar

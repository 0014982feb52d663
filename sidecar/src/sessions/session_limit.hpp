#pragma once
// SANDBOX_MAX_SESSIONS across the two places that create session containers: a session's
// own create (session_lifecycle) and the warm pool's (session_pool). Both count the
// engine's running containers of this instance and the pool containers being made under
// `mutex`, and create under it, so two creates never both take the last place. Internal
// to the sidecar library.

#include <atomic>
#include <cstdint>
#include <mutex>

namespace dockgate::sidecar {

struct session_limit {
  std::mutex mutex;
  // Pool containers being created, not yet running: counted against SANDBOX_MAX_SESSIONS.
  std::atomic<std::int64_t> reserved{0};
};

}  // namespace dockgate::sidecar

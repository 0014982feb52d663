#include "core/session_core.hpp"

#include "core/session_executors.hpp"
#include "sessions/session.hpp"

namespace dockgate::sidecar {

session_core::session_core(const config& c, const container_engine& e, store_lease* lease)
    : config_of(c),
      engine(e),
      executors(session_executors(e)),
      containers(c, e, executors),
      mounts(c),
      registry(c, containers),
      archives(c, containers),
      pool(c, e, executors, containers, registry, limit),
      lifecycle(c, e, executors, containers, registry, archives, mounts, pool, limit, lease),
      controls(c, e, registry),
      cells(c, e, containers, registry, lifecycle),
      files(c, containers, registry) {
  registry.set_waker([this](session& s) { return lifecycle.wake(s); });
}

}  // namespace dockgate::sidecar

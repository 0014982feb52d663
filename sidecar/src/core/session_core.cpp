#include "core/session_core.hpp"

namespace dockgate::sidecar {

session_core::session_core(const config& c, const container_engine& e, const client::engine& docker,
                           store_lease* lease)
    : config_of(c),
      engine(e),
      containers(c, docker),
      mounts(c),
      registry(c, containers),
      archives(c, containers),
      pool(c, docker, containers, registry, limit),
      lifecycle(c, docker, containers, registry, archives, mounts, pool, limit, lease),
      cells(c, docker, containers, registry, lifecycle),
      files(c, containers, registry) {}

}  // namespace dockgate::sidecar

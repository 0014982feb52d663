#pragma once
// SANDBOX_NETWORK=allowlist: the sessions' one network (docs/sidecar.md, Egress).

#include <string>

#include "dockgate/client/engine.hpp"
#include "dockgate/sidecar/config.hpp"

namespace dockgate::sidecar {

// The egress network (config.egress_network), created through the gate if the engine does
// not show it, and the egress proxy's URL on its gateway ("http://GATEWAY:PORT"); "" with
// `why` when it cannot be made, is not internal or has no IPv4 gateway.
std::string egress_network(const client::engine& docker, const config& c, std::string& why);

}  // namespace dockgate::sidecar

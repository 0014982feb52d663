#pragma once
// SANDBOX_NETWORK=allowlist: each session's own network (docs/sidecar.md, Egress).

#include <string>
#include <string_view>

#include "dockgate/sidecar/config.hpp"
#include "engine/container_engine.hpp"

namespace dockgate::sidecar {

// The network of the session container named for `sid`: "<egress_network>-<sid>".
std::string egress_network_name(const config& c, std::string_view sid);

// The network `name` (egress_network_name), created through the gate if the engine does
// not show it, and its IPv4 gateway (where the egress proxy listens); "" with `why` when
// it cannot be made, is not internal or has no IPv4 gateway.
std::string egress_network(const container_engine& engine, const config& c, const std::string& name,
                           std::string& why);
// The egress proxy's URL on `gateway` ("http://GATEWAY:PORT").
std::string egress_proxy_url(const config& c, const std::string& gateway);

// Whether `name` is a session's egress network of this configuration (by its name).
bool is_egress_network(const config& c, std::string_view name);

// The network removed (after its container: the daemon refuses one still in use), and
// its session's list (egress_policy.hpp) before it.
void remove_egress_network(const container_engine& engine, const config& c,
                           const std::string& name);

}  // namespace dockgate::sidecar

#pragma once

#include <functional>
#include <optional>

#include "dockgate/policy/policy_file.hpp"
#include "dockgate/proxy/options.hpp"

namespace dockgate::proxy {

// Runs the proxy until SIGTERM or SIGINT, then shuts down gracefully: stops accepting,
// lets in-flight requests finish until the shutdown deadline, then closes the rest.
// Returns the process exit status. Throws only for start-up errors (bad listen address,
// socket in use), with a message for the operator.
// `reload` reads the policy again (SIGHUP): nullopt when it has errors (it reports them).
using policy_loader = std::function<std::optional<policy::policy>()>;
int serve(const serve_options& options, policy::policy policy, const policy_loader& reload);

}  // namespace dockgate::proxy

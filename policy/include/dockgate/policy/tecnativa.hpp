#pragma once
// Tecnativa's docker-socket-proxy configuration (environment variables) as a dockgate
// policy, so the gate drops in where that proxy was. The mapping follows its haproxy.cfg:
// a variable allows every path under its prefix (CONTAINERS: /containers..., EXEC:
// /exec/..., IMAGES: /images..., ...); POST=0 allows only GET and HEAD, whatever else is
// set; ALLOW_START, ALLOW_STOP and ALLOW_RESTARTS allow those container actions (with
// POST=1) without CONTAINERS. Defaults as Tecnativa's image: EVENTS, PING and VERSION on,
// everything else off.
//
// What dockgate adds on top: requests are parsed strictly, create bodies are checked
// (privileged, capabilities, host namespaces, binds, devices... stay refused: no rule
// permits them), and nothing is confined to owned containers (Tecnativa has no owners).

#include <map>
#include <span>
#include <string>
#include <string_view>

#include "dockgate/policy/policy_file.hpp"

namespace dockgate::policy {

// The variables dockgate reads, with Tecnativa's defaults, in the order of its docs.
struct tecnativa_variable {
  std::string_view name;
  bool default_on;
  std::string_view prefix;  // the first path segment it opens; empty for POST/ALLOW_*
};
std::span<const tecnativa_variable> tecnativa_variables();

// A policy with one profile, "tecnativa", from the environment. Values: 1/0 (also
// true/false, yes/no, on/off); anything else is an error.
policy_load_result tecnativa_policy(const std::map<std::string, std::string>& env);

}  // namespace dockgate::policy

#pragma once

#include <optional>
#include <string>

#include "dockgate/policy/route.hpp"

namespace dockgate::proxy {

// What the gate knows of the daemon: the API version every forwarded request is pinned to
// (the daemon's own, from /version, capped at the newest the route table knows) and its
// cgroup version (from /info). Learned on first use, forgotten when the daemon is found
// unreachable: when it is back it may be another version (an upgrade).
struct daemon_facts {
  std::optional<std::string> api_version;
  policy::api_version version{};  // the same, as numbers
  bool cgroup_v1 = true;
};

}  // namespace dockgate::proxy

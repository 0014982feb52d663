#pragma once
// The one rule for a workspace (sandbox) id that becomes a host path component below the
// workspace root: the gate's `dockgate.workspace` label, dockgate-mount's ids, the
// sidecar's sessions. 1-128 of [A-Za-z0-9_.-], starting with a letter or digit: never
// ".", "..", hidden, or holding a slash.

#include <cctype>
#include <string_view>

namespace dockgate::common {

// The container label by which a client names its workspace to the gate.
inline constexpr std::string_view workspace_label = "dockgate.workspace";

inline bool valid_workspace_id(std::string_view id) {
  if (id.empty() || id.size() > 128 || !std::isalnum(static_cast<unsigned char>(id.front())))
    return false;
  for (char ch : id)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-' || ch == '.'))
      return false;
  return true;
}

}  // namespace dockgate::common

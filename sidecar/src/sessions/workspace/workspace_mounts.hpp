#pragma once
// FUSE workspaces (SANDBOX_WORKSPACE_MODE=fuse): dockgate-mount run for a session's
// /workspace. Internal to the sidecar library; see workspace_mounts.cpp.

#include <optional>
#include <string>

#include "dockgate/sidecar/config.hpp"

namespace dockgate::sidecar {

class workspace_mounts {
 public:
  explicit workspace_mounts(const config& c) : config_(c) {}
  // dockgate-mount for a session's FUSE workspace: the error, if the mount is not live.
  std::optional<std::string> mount(const std::string& sid, const std::string& key) const;
  void unmount(const std::string& sid) const;

 private:
  const config& config_;
};

}  // namespace dockgate::sidecar

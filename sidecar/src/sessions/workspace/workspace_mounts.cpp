// FUSE workspaces (SANDBOX_WORKSPACE_MODE=fuse): each session's /workspace is a FUSE
// mount of object storage that dockgate-mount makes on the host at <root>/<session>; the
// container names it with the label dockgate.workspace and the gate binds it. The bucket
// is the workspace's storage: nothing is archived, the next session with the same archive
// key mounts the same prefix. A mount that does not come up is an error (never a silent
// empty workspace); one left behind is cleaned when the session ends or at start-up.
#include "sessions/workspace/workspace_mounts.hpp"

#include <iostream>

#include "util/util.hpp"

namespace dockgate::sidecar {

std::optional<std::string> workspace_mounts::mount(const std::string& sid,
                                                   const std::string& key) const {
  auto r =
      run_command({config_.mount_command, "mount", sid, "--key", key}, std::chrono::seconds(90));
  if (r.exit_code == 0) return std::nullopt;
  std::string why = r.err.empty() ? r.out : r.err;
  while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
  if (why.empty())
    why = r.exit_code < 0 ? "dockgate-mount did not finish"
                          : "dockgate-mount exited " + std::to_string(r.exit_code);
  return why;
}

void workspace_mounts::unmount(const std::string& sid) const {
  auto r = run_command({config_.mount_command, "cleanup", sid}, std::chrono::seconds(60));
  if (r.exit_code != 0)
    std::cerr << "dockgate-sidecar: cleanup of the workspace mount of " << sid
              << " failed: " << r.err << std::endl;
}

}  // namespace dockgate::sidecar

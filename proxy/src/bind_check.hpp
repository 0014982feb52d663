#pragma once
// Host-side checks of bind sources, before a create that binds them is forwarded and
// again before a container that binds its workspace starts.

#include <optional>
#include <string>
#include <string_view>

namespace dockgate::proxy {

struct bind_check_options {
  // The source must be a live FUSE file system mounted nosuid,nodev.
  bool require_fuse = false;
  // No component may be replaceable by anyone but root (common::walk_options): then no
  // one else can swap the path between this check and the daemon's mount.
  bool only_owner_replaceable = false;
};

// nullopt if `source` is safe to bind: every component from / down is a real directory
// (never a symlink: dockerd would follow one out of the allowed root), plus what the
// options ask. Otherwise the reason.
std::optional<std::string> check_bind_source(std::string_view source, bind_check_options options);

}  // namespace dockgate::proxy

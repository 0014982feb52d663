#pragma once
// Host-side checks of bind sources, before a create that binds them is forwarded.

#include <optional>
#include <string>
#include <string_view>

namespace dockgate::proxy {

// nullopt if `source` is safe to bind: every component from / down is a real directory
// (never a symlink: dockerd would follow one out of the allowed root), and, when
// `require_fuse`, the source is a live FUSE file system mounted nosuid,nodev. Otherwise
// the reason.
std::optional<std::string> check_bind_source(std::string_view source, bool require_fuse);

}  // namespace dockgate::proxy

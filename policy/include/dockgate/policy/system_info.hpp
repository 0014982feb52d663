#pragma once
// What of the daemon's `GET /info` answer a profile passes on.
//
// `/info` tells a client about the whole host: its name, kernel, every owner's container
// counts, registry mirrors and credentials helpers, swarm membership, the daemon's labels
// and proxy settings. A server that asks it only for the platform (opensandbox-server
// reads OSType and Architecture) needs none of that; a profile with "system_info":
// {"keep": [...]} gets the answer with only those top-level members, in the daemon's order.
//
// Invariant: a kept list is an allowlist; a member not named never reaches the client,
// and an answer that is not a JSON object is replaced by {} (nothing of it is known safe).

#include <string>
#include <string_view>
#include <vector>

namespace dockgate::policy {

std::string filter_system_info(std::string_view json, const std::vector<std::string>& keep);

}  // namespace dockgate::policy

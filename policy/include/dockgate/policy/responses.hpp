#pragma once
// What the gate adds to the daemon's answers so that a client is not surprised later.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dockgate/policy/decision.hpp"
#include "dockgate/policy/json_value.hpp"

namespace dockgate::policy {

// The warnings a ContainerCreate answer gains: one per field the client set that the
// profile forced or clamped, with the value the container got ("dockgate: HostConfig.Memory
// clamped to 2 GiB (profile docker-cli)"), from the reviewed body and its changes. A field
// the client left unset (change.from absent) that the profile fills in is silent, as is
// the gate's own bookkeeping (the owner label, the workspace bind): Docker warns only where
// what the client asked for could not be honoured.
std::vector<std::string> create_warnings(const profile& p, const json_object& body,
                                         const std::vector<body_change>& changes);

// The daemon's create answer ({"Id":..,"Warnings":[..]|null}) with `warnings` appended;
// nullopt if it is not such an answer (then it goes back unchanged).
// The Id of a create answer ({"Id":..}), for the audit line; nullopt if it has none.
std::optional<std::string> created_id(std::string_view answer);

std::optional<std::string> add_create_warnings(std::string_view answer,
                                               const std::vector<std::string>& warnings);

}  // namespace dockgate::policy

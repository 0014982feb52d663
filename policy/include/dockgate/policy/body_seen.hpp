#pragma once
// What a client set in a request body, for learning a profile from real clients
// (`dockgate-proxy learn`, docs/policy.md "Learning a profile"): the audit line's "seen".
//
// Invariant: bodies are never logged. The paths of the fields set are recorded; values
// only for fields a profile can rule on (enumerations, numeric limits, the image, the
// network mode, bind and mount sources and targets, capabilities); fields that may carry
// secrets (Env, Cmd, Entrypoint, Labels, Healthcheck, LogConfig, ...: change_redacted)
// only as set, never their values.

#include <string>
#include <string_view>

#include "dockgate/policy/route.hpp"

namespace dockgate::policy {

// For ContainerCreate and ContainerExec bodies: a JSON object
//   {"fields":[paths set],"values":{path: value},"widening":[paths off their safe value]}
// with paths named as in the canonical body ("HostConfig.Memory"; the deprecated top-level
// host config read as HostConfig). "widening" lists the widening fields
// (widening_fields.hpp) set to anything but their safe value: what the learner never
// learns. Empty for other operations and for bodies that do not decode.
std::string body_seen(operation op, std::string_view body);

}  // namespace dockgate::policy

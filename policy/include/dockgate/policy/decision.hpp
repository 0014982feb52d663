#pragma once
// Decisions are values: what the proxy does with a routed request.

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "dockgate/policy/policy_file.hpp"
#include "dockgate/policy/route.hpp"

namespace dockgate::policy {

struct allow {
  bool operator==(const allow&) const = default;
};

struct deny {
  unsigned status = 403;
  std::string rule;    // which rule decided, for the audit line
  std::string reason;  // the message the client sees in `{"message": ...}`
  bool operator==(const deny&) const = default;
};

// One field of a body the profile changed, once per field (the first action names it,
// `to` is what finally goes up). `from` is the client's value as JSON, absent when the
// client did not set it: absent, null or a zero value ("", 0, false, [] or {}), which is
// how Docker clients say "not set" (the docker CLI sends every HostConfig field) and how
// dockerd reads it. `to` is absent when the field is not sent. The audit line records
// these; bodies are never logged, so the values of fields that carry secrets (Env, Cmd,
// Labels, LogConfig...: change_redacted) are replaced by the JSON string "<redacted>",
// and a value longer than change_value_limit by "<omitted: N bytes>".
struct body_change {
  std::string field;   // "HostConfig.Memory"
  std::string action;  // "forced", "clamped", "owner stamped", "workspace bound", ...
  std::optional<std::string> from;
  std::optional<std::string> to;
  bool operator==(const body_change&) const = default;
};
inline constexpr std::size_t change_value_limit = 256;
// Whether `field` (or the field it is part of) may carry secrets.
bool change_redacted(std::string_view field);
// The profile rule that made a change to a body of `op`, as a policy file names it
// ("container_create.HostConfig.Memory", "ports", "workspace", "uploads", "owner",
// "networks.internal"): for `dockgate-proxy explain` and docs/policy.md's tables.
std::string change_rule(operation op, const body_change& change);

// The request may go on, with its body replaced by the proxy's serialisation; `changes`
// lists what the profile changed in it.
struct rewrite {
  std::string body;
  std::vector<body_change> changes;
  // Host paths the body binds: the proxy checks them on the host (no symlinks, FUSE
  // when the profile requires it) before forwarding.
  std::vector<std::string> bind_sources;
  // The workspace bind the profile wrote (<root>/<id>), checked by the proxy the same way.
  std::string workspace_source;
  // Keys of the client's body that name no field: the daemon ignores them, the gate
  // leaves them out (named in the audit line).
  std::vector<std::string> dropped;
  // Networks the body joins (ContainerCreate NetworkMode and EndpointsConfig): the proxy
  // forwards only if the daemon says each is the profile's.
  std::vector<std::string> networks;
  // Named volumes the body mounts (ContainerCreate) or creates (VolumeCreate): each must
  // be the profile's or not exist yet; a missing one a container mounts is created by the
  // proxy with the owner label first, so the daemon never makes an unowned one.
  std::vector<std::string> volumes;
  // NetworkConnect and NetworkDisconnect: the container named in the body; ContainerCreate:
  // the container whose network NetworkMode "container:<ref>" shares. It must be owned;
  // the proxy puts its full ID in the body (with_container).
  std::string container;
  // For the audit line: the name the body gives what it creates (NetworkCreate,
  // VolumeCreate) and the image reference a ContainerCreate body names, as checked.
  std::string name;
  std::string image;
  // ContainerCreate: what the client should hear in the answer's Warnings (responses.hpp).
  std::vector<std::string> warnings;
  bool operator==(const rewrite&) const = default;
};

using decision = std::variant<allow, deny, rewrite>;

// Deny by default: an operation is allowed only if the profile lists it. Its query is
// reviewed next (review_query in query.hpp), its body after that (body_review.hpp).
decision decide(const profile& p, const route& r);

}  // namespace dockgate::policy

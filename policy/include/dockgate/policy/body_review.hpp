#pragma once
// Reviews of request bodies a profile lets through: the decision for the body, and the
// proxy's own serialisation of what it checked.

#include <string_view>

#include "dockgate/policy/decision.hpp"
#include "dockgate/policy/route.hpp"

namespace dockgate::policy {

// The most a JSON request body of `op` may weigh; the proxy answers 413 above it.
std::size_t json_body_limit(operation op);

// ContainerCreate: decode as dockerd does, fold the deprecated top-level host config into
// HostConfig, apply the profile's rules, refuse what stays unsafe, check the image, stamp
// the owner label. Returns deny or rewrite (never allow: the client's bytes never go up).
// `version`: the API version the request is forwarded with. Older clients get other
// defaults from the daemon for fields they leave empty (IpcMode "shareable" below 1.40,
// CgroupnsMode "host" below 1.41 when the daemon's host uses cgroup v1, no AutoRemove
// below 1.25): the rules judge the container the daemon will create.
struct daemon_facts {
  api_version version = max_api_version;
  bool cgroup_v1 = true;  // unknown counts as v1: the stricter reading
};
decision review_container_create(const profile& p, std::string_view body, daemon_facts facts = {});

// ContainerExec (exec create): the same for an ExecConfig body.
decision review_container_exec(const profile& p, std::string_view body);

// ContainerUpdate: the create rules for HostConfig.<field> applied to the update's fields.
decision review_container_update(const profile& p, std::string_view body);

// NetworkCreate: a bridge network with the daemon's addresses and no host options, the
// owner label stamped.
decision review_network_create(const profile& p, std::string_view body);

// VolumeCreate: the local driver without options, the owner label stamped; the name goes
// to the proxy (rewrite.volumes), which refuses a volume of that name owned by another.
decision review_volume_create(const profile& p, std::string_view body);

// NetworkConnect / NetworkDisconnect: rewrite.container names the container for the
// proxy to resolve; with_container puts the full ID it resolved into the reviewed body
// (for a ContainerCreate under networks.join_owned_containers: NetworkMode
// "container:<ID>").
decision review_network_attachment(const profile& p, operation op, std::string_view body);
std::string with_container(std::string_view reviewed, operation op, std::string_view id);

// The review for whatever operation's JSON body the profile lets through: the three above,
// allow (unchanged) for bodies the policy does not interpret.
decision review_body(const profile& p, operation op, std::string_view body,
                     daemon_facts facts = {});

// ImageCreate and create bodies: the reference against the profile's image allowlist.
decision review_image_reference(const profile& p, std::string_view reference);

}  // namespace dockgate::policy

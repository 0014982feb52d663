#pragma once
// Ownership: a profile sees and acts on only the containers it created (stamped with its
// owner label), and the execs in them.
//
// Invariant: the daemon's word decides. A container reference (name, ID prefix) is
// resolved by inspect, its owner label compared, and the request forwarded by the full ID
// the daemon returned, so a rename between check and use changes nothing. Not found is
// denied. Lists and events carry an injected label filter and are filtered again on the
// way back.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dockgate/common/percent.hpp"
#include "dockgate/policy/operation.hpp"

namespace dockgate::policy {

// What a profile that sees only its own objects (rules.confine_to_owned) does with each
// operation, in one table (ownership.cpp): which object of the path is looked up and its
// owner label compared, whether the owner label joins the request's filters, and what of
// the daemon's answer goes back. The gate's request path (proxy/src/upstream_lookups.cpp,
// response_relay.cpp, held_streams.cpp) and `dockgate-proxy explain` read it; an operation
// the table does not name is forwarded as the profile's decision allowed it (images, the
// system's views), so every operation that names or lists a container, an exec, a network
// or a volume must have its row (tests/policy/owned_objects_test.cpp checks the table
// against the route table).

// The object the path parameter names: resolved by the daemon and forwarded by full ID
// only if it carries the profile's owner label (an exec: if its container does).
enum class path_object : std::uint8_t { none, container, exec, network, volume };
// The request's `filters` query: the owner label joins it (confine_query), and for events
// the type is set to container.
enum class owned_filters : std::uint8_t { none, by_owner, container_events_by_owner };
// What of the daemon's answer goes back: all of it, or only what the profile owns (a list
// filtered whole, events line by line; a network's containers filtered).
enum class owned_answer : std::uint8_t {
  as_is,
  container_list,
  events,
  networks,  // a list of networks or one network: the profile's and the daemon's own
  volume_list,
  data_usage,
  system_info  // `/info` with only the profile's kept members (system_info.hpp)
};
struct ownership_rule {
  path_object object = path_object::none;
  owned_filters filters = owned_filters::none;
  owned_answer answer = owned_answer::as_is;
  // The daemon's own networks (bridge, host, none: no owner label) may be read by anyone.
  bool predefined_networks_readable = false;
  bool operator==(const ownership_rule&) const = default;
};
ownership_rule operation_ownership(operation op);
inline path_object operation_object(operation op) {
  return operation_ownership(op).object;
}

struct inspected_container {
  std::string id;                         // full ID
  std::string owner;                      // value of the owner label, empty if none
  std::string workspace;                  // value of the dockgate.workspace label, empty if none
  std::vector<std::string> bind_sources;  // host paths of HostConfig.Binds and bind Mounts
};

// From `GET /containers/{id}/json`. nullopt if the body is not a container inspect.
std::optional<inspected_container> parse_container_inspect(std::string_view json);

// From `GET /exec/{id}/json`: the exec's full ID and its container's full ID.
struct inspected_exec {
  std::string id;
  std::string container_id;
};
std::optional<inspected_exec> parse_exec_inspect(std::string_view json);

// The `filters` query value (percent-decoded JSON, either map[string][]string or the
// legacy map[string]map[string]bool) with `label=<owner_label>=<owner>` added and, for
// events, `type` set to container. Returns the new JSON, nullopt if malformed.
std::optional<std::string> confine_filters(std::string_view filters_json, std::string_view owner,
                                           bool events);

// The raw query of a ContainerList or SystemEvents request with its `filters` confined as
// above (added when absent), the other parameters kept as written. nullopt if the query
// or the filters are malformed.
std::optional<std::string> confine_query(std::string_view raw_query, std::string_view owner,
                                         bool events);

// A ContainerList response with the entries not labelled for `owner` removed.
std::optional<std::string> filter_container_list(std::string_view json, std::string_view owner);

// Whether one event (a JSON line of SystemEvents) concerns a container owned by `owner`.
bool event_owned(std::string_view json_line, std::string_view owner);

// Query keys and values of a Docker request: decoded as dockerd reads them (`+` is a space)
// and encoded as the gate writes them (every byte but RFC 3986's unreserved as %XX). The
// one implementation is common/percent.hpp, shared with the sidecar's S3 client.
inline std::optional<std::string> query_unescape(std::string_view s) {
  return common::percent_decode_query(s);
}
inline std::string query_escape(std::string_view s) {
  return common::percent_encode(s);
}

// The version string dockerd reports in /version ("ApiVersion"), parsed.
std::optional<std::string> parse_version_api(std::string_view json);
// From `GET /info`: whether the daemon's host uses cgroup v1 (CgroupVersion "1", or unknown).
bool info_says_cgroup_v1(std::string_view json);

}  // namespace dockgate::policy

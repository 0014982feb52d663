#pragma once
// Networks and volumes a profile owns (stamped with its owner label when it created
// them, like its containers): what the daemon says about them, and the daemon's answers
// with what the profile does not own left out.
//
// Invariant: a profile confined to what it owns never learns a foreign container's name
// or address, nor a foreign network's or volume's name, from a list, an inspect or a
// disk-usage answer. The daemon's own networks (bridge, host, none) are visible to all.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dockgate::policy {

// The networks the daemon creates itself, which any container may use and any profile
// may inspect (their container lists filtered).
bool predefined_network(std::string_view name);

struct inspected_network {
  std::string id;  // full ID
  std::string name;
  std::string owner;  // value of the owner label, empty if none
};
// From `GET /networks/{id}`. nullopt if the body is not a network inspect.
std::optional<inspected_network> parse_network_inspect(std::string_view json);

struct inspected_volume {
  std::string name;
  std::string owner;
};
// From `GET /volumes/{name}` or the answer of `POST /volumes/create` (the same shape).
std::optional<inspected_volume> parse_volume_inspect(std::string_view json);

// A NetworkList answer (an array) or a NetworkInspect answer (one object) with only the
// networks owned by `owner` or predefined, and in each only the `Containers` whose full
// IDs are in `owned_containers`. nullopt if malformed.
std::optional<std::string> filter_networks(std::string_view json, std::string_view owner,
                                           const std::vector<std::string>& owned_containers);
// Whether any network of such an answer lists a container (only then must the proxy ask
// which containers are owned).
bool networks_list_containers(std::string_view json);

// A VolumeList answer ({"Volumes": [...], "Warnings": [...]}) with only owned volumes.
std::optional<std::string> filter_volume_list(std::string_view json, std::string_view owner);

// A SystemDataUsage answer with only owned containers and volumes (images and build cache
// are shared: kept).
std::optional<std::string> filter_data_usage(std::string_view json, std::string_view owner);

// The full IDs of a ContainerList answer.
std::vector<std::string> container_ids(std::string_view list_json);

}  // namespace dockgate::policy

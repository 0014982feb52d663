#pragma once
// Docker Engine API operations, named by their `operationId` in the specification.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace dockgate::policy {

enum class operation : std::uint8_t {
#define DOCKGATE_OPERATION(name, hijacks, body) name,
#include "dockgate/policy/routes.inc"
#undef DOCKGATE_OPERATION
};

inline constexpr std::size_t operation_count = 0
#define DOCKGATE_OPERATION(name, hijacks, body) +1
#include "dockgate/policy/routes.inc"
#undef DOCKGATE_OPERATION
    ;

std::string_view operation_name(operation op);
std::optional<operation> operation_from_name(std::string_view name);

// ContainerAttach and ExecStart: the daemon may switch protocols (101) or answer 200 with
// a raw stream, after which the connection carries stdin and output both ways.
bool operation_hijacks(operation op);

// What the operation reads as its request body, from the specification: nothing, a JSON
// document (read whole before it is forwarded), or a byte stream passed through.
enum class body_kind : std::uint8_t { none, json, stream };
body_kind operation_body(operation op);

// Whether the daemon mounts a container's binds again from their host paths for this call:
// at a start and a restart, and for each archive call (docker cp mounts the container's binds
// to read or write through them, running or not). The gate checks every bind source again
// before these (proxy/src/upstream_lookups.cpp; `dockgate-proxy explain` says so).
bool operation_mounts_binds(operation op);

}  // namespace dockgate::policy

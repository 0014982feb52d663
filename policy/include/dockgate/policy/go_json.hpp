#pragma once
// Reading JSON the way dockerd reads it (Go's encoding/json), and refusing what Go would
// read differently from a naive reader.
//
// Invariant: a body is accepted only if it has exactly one reading. Every object key is
// resolved to its Go struct field by the one function below (exact name, else Unicode
// simple case folding, escapes already decoded); two keys for one field, wrong types,
// `null` where Go would keep a previous value, duplicate map keys and anything after the
// first JSON value are refused. A key that names no field is ignored by Go: it is left
// out (and reported), never forwarded. What comes out is a tree keyed by the
// fields' canonical names, which the proxy serialises itself.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dockgate/policy/json_value.hpp"

namespace dockgate::policy {

enum class field_kind : std::uint8_t {
  boolean,
  int64,
  uint64,  // with field_spec::max
  string,
  string_list,       // []string
  strslice,          // a string or []string (Cmd, Entrypoint, Shell, CapAdd, CapDrop)
  string_map,        // map[string]string
  empty_object_map,  // map[string]struct{} (ExposedPorts, Volumes): values must be {} or null
  uint_pair,         // [2]uint (ConsoleSize): exactly two
  string_list_list,  // [][]string
  object,            // a struct (child)
  object_list,       // []struct
  object_map,        // map[string]struct / map[string]*struct
  object_list_map,   // map[string][]struct (PortBindings)
};

struct object_spec;

struct field_spec {
  std::string_view name;
  field_kind kind;
  const object_spec* child = nullptr;
  bool nullable = false;  // a Go pointer, slice or map: null means "absent"
  std::uint64_t max = UINT64_MAX;
};

struct object_spec {
  std::string_view name;  // for messages
  std::span<const field_spec> fields;
};

// The one function that resolves a JSON key to a Docker struct field, as Go does: an
// exact match first, else a match under Unicode simple case folding (which maps U+212A
// KELVIN SIGN to k and U+017F LONG S to s). nullopt if no field matches.
std::optional<std::size_t> resolve_key(std::string_view key, const object_spec& spec);

struct decode_result {
  std::optional<json_value> value;   // an object keyed by canonical field names
  std::string error;                 // set when value is empty
  std::vector<std::string> dropped;  // keys no field takes (as written, with their path)
};

// What to do with a key that names no field. Go ignores it, and so does a request body
// (dropped: the canonical body does not carry it; the audit line names it). A policy
// file's rule values are the operator's own words: there it is an error.
enum class unknown_keys : std::uint8_t { drop, refuse };

// Decodes a whole body against `spec` (a JSON object). Pure.
decode_result decode_body(std::string_view body, const object_spec& spec,
                          unknown_keys unknown = unknown_keys::drop);

// Puts the members of a decoded object (and of its nested structs) in the schema's order,
// so that the serialisation does not depend on where a member came from.
void canonical_order(json_object& obj, const object_spec& spec);

// Docker's request body types.
namespace schema {
extern const object_spec container_create;  // ContainerConfigWrapper (Config + HostConfig + ...)
extern const object_spec host_config;
extern const object_spec exec_config;
extern const object_spec container_update;
extern const object_spec network_create;          // network.CreateRequest
extern const object_spec network_connect;         // network.ConnectOptions
extern const object_spec network_disconnect;      // network.DisconnectOptions
extern const object_spec volume_create;           // volume.CreateOptions
extern const object_spec endpoint_settings_spec;  // network.EndpointSettings
}  // namespace schema

}  // namespace dockgate::policy

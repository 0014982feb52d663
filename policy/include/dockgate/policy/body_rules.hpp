#pragma once
// Profile rules for request bodies: what a container (and an exec) that reaches the
// daemon through a profile may be, whatever the client wrote.
//
// Invariant: deny by default, per field. A field that can widen what a container can do
// (the tables `create_widening_fields` and `exec_widening_fields` in
// policy/src/widening_fields.hpp) passes only at its safe value, unless the profile has a
// rule for it: force (set, whatever was sent), clamp (`max`: the smaller of request and
// cap; "unlimited" values become the cap), allow (a list of values; with a default, what
// an absent value becomes), or deny.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dockgate/common/workspace_id.hpp"
#include "dockgate/policy/json_value.hpp"

namespace dockgate::policy {

struct field_rule {
  enum class kind : std::uint8_t { force, clamp, allow, deny };
  kind type = kind::deny;
  json_value value;                  // force: the value; clamp on Ulimits: name -> max
  std::int64_t max = 0;              // clamp
  std::vector<std::string> allowed;  // allow
  // allow on a string field: what an absent or empty value becomes (one of `allowed`), so a
  // profile can let a client choose from a list and still decide what it gets by default
  // (HostConfig.Runtime: {"allow": ["runc", "runsc"], "default": "runsc"}).
  std::optional<std::string> default_value;
  std::string hint;  // told with a refusal of this rule (never on force)
};

struct field_rules {
  std::vector<std::pair<std::string, field_rule>> rules;  // "HostConfig.Memory" -> rule
  const field_rule* find(std::string_view path) const;
};

// Host paths a container may bind, and where.
struct bind_rule {
  std::vector<std::string> source_roots;  // absolute, no trailing slash
  // Host paths that may be bound themselves (not what lies under them): a root's own
  // directory, which source_roots never gives, without the siblings beside it.
  std::vector<std::string> sources;
  // Host paths whose binds are left out of the body (recorded, and told to the client as a
  // warning): a bind a client adds by habit that the profile must not give, such as the
  // engine socket the GitHub Actions runner adds to every job container.
  std::vector<std::string> drop;
  std::vector<std::string> targets;  // absolute container paths
  // The source must be a live FUSE mount with nosuid,nodev (checked by the proxy on the
  // host, with every path component a real directory, never a symlink).
  bool require_fuse = false;
};

// The workspace bind the gate writes itself. A client never names a host path: it names
// the workspace it wants with the label `dockgate.workspace=<id>`, and the container gets
// exactly one bind, <root>/<id> at the target, which the proxy checks on the host (no
// symlink, nothing replaceable by anyone but root, a live FUSE mount nosuid,nodev) at
// create and again at every start.
struct workspace_rule {
  std::string root;                   // absolute, clean: dockgate-mount's AIMEM_MOUNT_ROOT
  std::string target = "/workspace";  // absolute, clean
  bool require_fuse = true;
  bool required = false;  // every created container must name a workspace
  // A client's own bind of exactly <root>/<id> (Binds or a Mounts bind) becomes this
  // checked bind at the client's target, with the label stamped (OpenSandbox's
  // allowed_host_paths, a devcontainer's workspace folder): the client names a host path,
  // the gate still writes and checks the only one it may name.
  bool host_binds = false;
};

// Published ports (HostConfig.PortBindings), on the host's loopback unless the profile
// names other addresses: an unspecified HostIp ("", 0.0.0.0, ::) is rewritten to
// 127.0.0.1 / ::1, any other must be one of `addresses`; host ports the client names lie
// in [first_port, last_port] ("" and "0" let the daemon pick). PublishAllPorts stays refused.
struct port_rule {
  std::vector<std::string> addresses{"127.0.0.1", "::1"};  // canonical spellings
  std::uint16_t first_port = 1024;
  std::uint16_t last_port = 65535;
};

// Networks and volumes the profile creates carry its owner label (like containers); these
// say what its containers may do with them. Networks and volumes it does not own are
// never named: not joined, mounted, inspected (but the daemon's own bridge, host and
// none networks), connected, disconnected or removed.
struct network_rule {
  bool join_owned = false;  // NetworkMode and EndpointsConfig may name owned networks
  bool aliases = false;     // endpoints may carry DNS aliases (compose's service names)
  // NetworkMode "container:<name or ID>" may name an owned container: the new container
  // shares its network namespace (opensandbox-server's sandbox behind its egress sidecar).
  // The proxy asks the daemon whose that container is and forwards its full ID.
  bool join_owned_containers = false;
  // Every NetworkCreate gets Internal: true whatever the body says: the daemon gives such a
  // network no masquerading and drops what it would forward off it (sandbox-egress: the
  // sessions' only network, whose one open address is the egress proxy).
  bool internal = false;
  // Every NetworkCreate gets the bridge name <bridge_prefix><10 hex of its name's hash>
  // (the driver option com.docker.network.bridge.name), whatever the body says; "" for
  // the daemon's br-<id>. With it, the host's firewall can hold every network the profile
  // makes by one interface pattern, the moment it is made (sandbox-egress: "dgsbx", the
  // rules of scripts/egress-proxy.sh on dgsbx+). 1-5 of a-z 0-9.
  std::string bridge_prefix;
};
// The bridge name bridge_prefix gives the network `name` (FNV-1a of the name, 10 hex).
std::string network_bridge_name(std::string_view bridge_prefix, std::string_view name);
struct volume_rule {
  bool mount_owned = false;  // Binds "<name>:<target>", Mounts of type volume and anonymous volumes
};

// Upload by archive under a read-only root (docs/policy.md, "uploads"): each target gets an
// anonymous volume labelled with the owner at create (dockerd writes an archive into a
// read-only root only inside a mount), and PutContainerArchive writes only regular files
// and directories into those targets, as the gate's own tar (upload_archive.hpp).
struct upload_rule {
  std::vector<std::string> targets;  // absolute, clean, not "/", none inside another
  std::uint64_t max_bytes = std::uint64_t{256} << 20;  // the content of one upload
};

struct image_rule {
  std::vector<std::string> patterns;  // over normalised references; `*` matches any run
  bool require_digest = false;
};

struct body_rules {
  field_rules container_create;
  field_rules container_exec;
  std::optional<bind_rule> binds;
  std::optional<workspace_rule> workspace;
  std::optional<port_rule> ports;
  std::optional<upload_rule> uploads;
  network_rule networks;
  volume_rule volumes;
  image_rule images;
  std::string owner;  // value of the owner label stamped on created containers
  // The profile's own seccomp profile, as the SecurityOpt entry that carries it
  // ("seccomp=<compact JSON>", as the docker CLI sends a --security-opt seccomp=FILE):
  // every container the profile creates runs under it, whatever the client asked. Empty:
  // the daemon's default profile (a client's own `seccomp=` entry is refused, widening_fields).
  std::string seccomp;
  // Act only on owned containers and execs, and see only owned ones in lists and events.
  bool confine_to_owned = true;
};

// An absolute host or container path with no empty, "." or ".." segment and no trailing
// slash ("/" itself is one): the one test of bind roots, targets, sources and workspaces.
bool clean_absolute_path(std::string_view path);

// A network or volume name the gate passes on (and puts in a path to ask the daemon about
// it): 1-255 of A-Z a-z 0-9 _ . - starting with a letter or digit, as the local volume
// driver requires. Full IDs are such names too.
bool valid_object_name(std::string_view name);

// A port ("8080") or range ("8000-8010") of decimal digits, as dockerd's nat package reads
// host ports: {lo, hi} with lo <= hi <= 65535; nullopt for anything else.
std::optional<std::pair<std::uint16_t, std::uint16_t>> port_range(std::string_view text);

// The canonical text of one IPv4 or IPv6 address ("::1", "127.0.0.1"); "" if `text` is none.
std::string canonical_address(std::string_view text);

// The label that marks a container as created through a profile; clients cannot set
// labels under the reserved prefix.
inline constexpr std::string_view owner_label = "dockgate.owner";
inline constexpr std::string_view reserved_label_prefix = "dockgate.";
// The one reserved label a client may set, in a profile with a workspace rule.
inline constexpr std::string_view workspace_label = common::workspace_label;

// The body paths the rules may name (ContainerCreate: "User", "HostConfig.Memory", ...;
// ContainerExec: "Privileged", "User", ...), for validating policy files.
bool is_rule_path(std::string_view operation, std::string_view path);

}  // namespace dockgate::policy

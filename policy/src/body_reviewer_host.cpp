// What of the host a created container reaches besides its image: published ports and a
// client's own bind of its workspace. See body_reviewer.hpp and docs/design.md,
// "Container-create policy".
//
// Invariants:
// - A port is published only on an address the profile names: an unspecified HostIp
//   ("", 0.0.0.0, ::), on which dockerd would listen on every interface of the host, is
//   rewritten to loopback, so an unauthenticated daemon inside a container (OpenSandbox's
//   execd) is never reachable from the network. PublishAllPorts (every exposed port, on
//   every interface) is never passed.
// - A client's host bind passes only as the gate's own checked workspace bind: exactly
//   <root>/<one workspace id>, rewritten into the Mounts bind that is never created,
//   never propagates, is checked on the host at create and again at start (found there
//   by the dockgate.workspace label stamped here). Anything else under the root (the root
//   itself, a deeper path, an unclean one, a second workspace) is refused here; any other
//   host path is left to the rules that refuse it.
#include <algorithm>

#include "body_reviewer.hpp"
#include "dockgate/common/workspace_id.hpp"

namespace dockgate::policy {

namespace {

bool under(std::string_view path, std::string_view dir) {
  return path == dir ||
         (path.size() > dir.size() && path.starts_with(dir) && path[dir.size()] == '/');
}

// A container port key as dockerd's nat package reads it: "80", "80/tcp", "53/udp", "9/sctp".
bool valid_port_key(std::string_view key) {
  const auto slash = key.find('/');
  const std::string_view proto =
      slash == std::string_view::npos ? std::string_view("tcp") : key.substr(slash + 1);
  const auto port = port_range(key.substr(0, slash));
  return port && port->first == port->second && port->first != 0 &&
         (proto == "tcp" || proto == "udp" || proto == "sctp");
}

// Where a workspace may be bound in the container: an absolute clean path, not the root
// (the bind would replace the image) and not the kernel's filesystems.
bool workspace_target_ok(std::string_view target) {
  if (!clean_absolute_path(target) || target == "/") return false;
  return !under(target, "/proc") && !under(target, "/sys") && !under(target, "/dev");
}

std::string text_of(const json_object& o, std::string_view key) {
  const json_value* v = find(o, key);
  return v && v->as_string() ? *v->as_string() : std::string();
}

}  // namespace

// HostConfig.PortBindings under the ports rule: every container port key valid, every
// host address loopback or one the profile names, every host port the daemon's pick or
// inside the profile's range.
bool body_reviewer::check_ports(json_object& root) {
  const port_rule& rule = *p.rules.ports;
  constexpr std::string_view where = "HostConfig.PortBindings";
  if (const json_value* all = locate(root, "HostConfig.PublishAllPorts");
      all && all->as_bool() && *all->as_bool())
    return refuse("HostConfig.PublishAllPorts", "ports",
                  "is not allowed: it publishes every exposed port on every interface; name "
                  "the ports to publish (-p), the gate binds them to loopback");
  json_object* parent = nullptr;
  std::string_view key_in_parent;
  json_value* bindings = locate(root, where, false, &parent, &key_in_parent);
  if (!bindings || !bindings->as_object()) return true;
  const json_value before = *bindings;
  bool rewritten = false;
  std::string allowed;
  for (const auto& a : rule.addresses) allowed += (allowed.empty() ? "" : ", ") + a;
  for (auto& [key, list] : *bindings->as_object()) {
    if (!valid_port_key(key))
      return refuse(where, "ports", "key \"" + key + "\" is not a port (80, 80/tcp, 53/udp)");
    if (!list.as_array()) continue;  // null: exposed, not published
    for (auto& binding : *list.as_array()) {
      json_object& b = *binding.as_object();
      const std::string ip = text_of(b, "HostIp");
      const std::string port = text_of(b, "HostPort");
      // dockerd listens on every address of the host for "", 0.0.0.0 and ::.
      const std::string_view loopback = ip == "::" ? "::1" : "127.0.0.1";
      if (ip.empty() || ip == "0.0.0.0" || ip == "::") {
        set(b, "HostIp", json_value(std::string(loopback)));
        rewritten = true;
      } else if (std::find(rule.addresses.begin(), rule.addresses.end(), ip) ==
                 rule.addresses.end()) {
        return refuse(
            where, "ports",
            "address \"" + ip + "\" is not allowed (the profile publishes on " + allowed + ")");
      }
      if (port.empty() || port == "0") continue;  // the daemon picks a free port
      const auto range = port_range(port);
      if (!range || range->first < rule.first_port || range->second > rule.last_port)
        return refuse(where, "ports",
                      "host port \"" + port + "\" is not allowed (the profile publishes on " +
                          std::to_string(rule.first_port) + "-" + std::to_string(rule.last_port) +
                          ", or 0 for a port the daemon picks)");
    }
  }
  if (rewritten) changes.record(where, "bound to loopback", &before);
  return true;
}

namespace {

// One client bind under the workspace root: exactly <root>/<id> at an allowed target, the
// only one; remembered in `id` and the reviewer's workspace target.
bool take_one(body_reviewer& r, std::string_view where, const std::string& source,
              const std::string& target, bool read_only, std::string& id) {
  const std::string& root = r.p.rules.workspace->root;
  const std::string_view rest = source.size() > root.size()
                                    ? std::string_view(source).substr(root.size() + 1)
                                    : std::string_view();
  if (!id.empty())
    return r.refuse(where, "workspace",
                    "binds a second workspace \"" + source + "\" (one workspace per container)");
  if (!clean_absolute_path(source) || !common::valid_workspace_id(rest))
    return r.refuse(where, "workspace",
                    "source \"" + source + "\" is not one workspace (" + root + "/<id>)");
  if (!workspace_target_ok(target))
    return r.refuse(where, "workspace",
                    "target \"" + target +
                        "\" is not allowed (an absolute, clean path other than /, /proc, /sys, "
                        "/dev)");
  id = std::string(rest);
  r.workspace_target = target;
  r.workspace_read_only = read_only;
  return true;
}

// Binds entries "src:dst[:mode]" whose source lies under the workspace root.
bool take_from_binds(body_reviewer& r, json_object& root, std::string& id) {
  json_object* host = nullptr;
  std::string_view key;
  json_value* binds = locate(root, "HostConfig.Binds", false, &host, &key);
  if (!binds || !binds->as_array()) return true;
  const json_value before = *binds;
  auto& list = *binds->as_array();
  for (auto it = list.begin(); it != list.end();) {
    const std::string spec = it->as_string() ? *it->as_string() : std::string();
    const std::string source = spec.substr(0, spec.find(':'));
    if (!under(source, r.p.rules.workspace->root)) {
      ++it;
      continue;
    }
    // dockerd's Linux parser: src:dst[:mode], the mode a comma-separated list.
    std::vector<std::string> parts;
    for (std::size_t from = 0;;) {
      const auto colon = spec.find(':', from);
      parts.push_back(spec.substr(from, colon - from));
      if (colon == std::string::npos) break;
      from = colon + 1;
    }
    bool read_only = false;
    bool modes_ok = parts.size() == 2 || parts.size() == 3;
    for (std::string_view opts = parts.size() == 3 ? parts[2] : ""; modes_ok && !opts.empty();) {
      const auto comma = opts.find(',');
      const std::string_view o = opts.substr(0, comma);
      read_only = read_only || o == "ro";
      modes_ok = o == "ro" || o == "rw" || o == "private" || o == "rprivate";
      opts = comma == std::string_view::npos ? "" : opts.substr(comma + 1);
    }
    if (!modes_ok)
      return r.refuse("HostConfig.Binds", "workspace",
                      "entry \"" + spec + "\" is not allowed (src:dst[:ro|rw])");
    if (!take_one(r, "HostConfig.Binds", source, parts[1], read_only, id)) return false;
    it = list.erase(it);
    r.changes.record("HostConfig.Binds", "workspace bound", &before);
  }
  if (list.empty()) dockgate::policy::erase(*host, key);
  return true;
}

// Mounts binds whose source lies under the workspace root: only ReadOnly and a private
// propagation may come with them (the gate writes rprivate, never CreateMountpoint).
bool take_from_mounts(body_reviewer& r, json_object& root, std::string& id) {
  json_object* host = nullptr;
  std::string_view key;
  json_value* mounts = locate(root, "HostConfig.Mounts", false, &host, &key);
  if (!mounts || !mounts->as_array()) return true;
  auto& list = *mounts->as_array();
  for (auto it = list.begin(); it != list.end();) {
    const json_object& m = *it->as_object();
    const std::string source = text_of(m, "Source");
    if (text_of(m, "Type") != "bind" || !under(source, r.p.rules.workspace->root)) {
      ++it;
      continue;
    }
    const json_value* bind_options = find(m, "BindOptions");
    const std::string propagation =
        bind_options ? text_of(*bind_options->as_object(), "Propagation") : std::string();
    bool options_ok = propagation.empty() || propagation == "private" || propagation == "rprivate";
    if (bind_options)
      for (const auto& o : *bind_options->as_object())
        options_ok = options_ok && (o.key == "Propagation" || is_empty_value(&o.value));
    if (!options_ok || find(m, "VolumeOptions") || find(m, "TmpfsOptions") ||
        find(m, "ImageOptions"))
      return r.refuse("HostConfig.Mounts", "workspace",
                      "bind of \"" + source +
                          "\" is not allowed with these options (only ReadOnly and a private "
                          "propagation)");
    const json_value* ro = find(m, "ReadOnly");
    if (!take_one(r, "HostConfig.Mounts", source, text_of(m, "Target"),
                  ro && ro->as_bool() && *ro->as_bool(), id))
      return false;
    // A re-review of the gate's own output: the bind it wrote is written again unchanged.
    if (*it == r.workspace_mount(source)) r.workspace_unchanged = true;
    it = list.erase(it);
  }
  return true;
}

}  // namespace

// A client's bind of <root>/<id> (a Binds entry or a Mounts bind), taken out of the body
// and remembered as the workspace the gate binds itself at the client's target
// (bind_workspace); the label dockgate.workspace=<id> is stamped so that the start
// re-check finds it, or, set by the client, must name the same workspace.
bool body_reviewer::take_host_bind(json_object& root) {
  std::string id;
  if (!take_from_binds(*this, root, id) || !take_from_mounts(*this, root, id)) return false;
  if (id.empty()) return true;
  json_value* labels = find(root, "Labels");
  if (!labels || !labels->as_object()) {
    set(root, "Labels", json_object{});
    labels = find(root, "Labels");
  }
  json_object& l = *labels->as_object();
  if (const json_value* named = find(l, workspace_label)) {
    if (!named->as_string() || *named->as_string() != id)
      return refuse("Labels", "workspace",
                    "label \"" + std::string(workspace_label) +
                        "\" names another workspace than the bind of " + p.rules.workspace->root +
                        "/" + id);
    return true;
  }
  changes.record("Labels", "workspace stamped", labels);
  l.push_back({std::string(workspace_label), json_value(id)});
  std::sort(l.begin(), l.end(), [](const auto& a, const auto& b) { return a.key < b.key; });
  return true;
}

}  // namespace dockgate::policy

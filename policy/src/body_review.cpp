// The reviews of JSON request bodies: decode each as dockerd does, bring it to one
// canonical form, apply the profile's rules (body_reviewer), and serialise what was
// checked. See body_review.hpp and docs/design.md, "Container-create policy".
//
// Invariant: a body reviewed here reaches the daemon only as the gate's own serialisation
// of what was checked (a rewrite, never the client's bytes), so what was checked is what
// the daemon creates.
#include "dockgate/policy/body_review.hpp"

#include <string>
#include <vector>

#include "body_reviewer.hpp"
#include "dockgate/policy/go_json.hpp"
#include "dockgate/policy/responses.hpp"
#include "widening_fields.hpp"

namespace dockgate::policy {

std::string network_bridge_name(std::string_view bridge_prefix, std::string_view name) {
  std::uint64_t h = 14695981039346656037ull;  // FNV-1a, 64 bits
  for (unsigned char c : name) {
    h ^= c;
    h *= 1099511628211ull;
  }
  static constexpr char hex[] = "0123456789abcdef";
  std::string out(bridge_prefix);
  for (int i = 0; i < 10; ++i) out += hex[(h >> (60 - 4 * i)) & 0xf];
  return out;
}

namespace {

constexpr std::string_view bridge_name_option = "com.docker.network.bridge.name";

// The path every JSON body takes, kept in one place: decoded as dockerd decodes `spec` (a
// body it would not read is a 400 naming `operation`), judged by `judge(root, reviewer)`,
// which may reshape the tree and returns false once the reviewer holds its refusal; then
// put in canonical order, each change given the value that goes up, and serialised from
// the checked tree. The rewrite's body is the whole tree, or its member `body_member`
// (an update's fields are judged as HostConfig's); `complete(root, reviewer, out)` adds
// what the proxy needs beside the body.
struct no_extras {
  void operator()(const json_object&, body_reviewer&, rewrite&) const {}
};
template <typename Judge, typename Complete = no_extras>
decision review_json_body(const profile& p, std::string_view operation, std::string_view body,
                          const object_spec& spec, Judge judge, Complete complete = {},
                          std::string_view body_member = {}) {
  auto decoded = decode_body(body, spec);
  if (!decoded.value)
    return deny{400, "body",
                "dockgate: invalid " + std::string(operation) + " body: " + decoded.error};
  json_object root = std::move(*decoded.value->as_object());
  body_reviewer r{p};
  if (!judge(root, r)) return *r.refusal;
  json_object& checked = body_member.empty() ? root : *find(root, body_member)->as_object();
  canonical_order(checked, spec);
  r.changes.finish(root);
  rewrite out;
  complete(root, r, out);
  out.body = to_json(json_value(std::move(checked)));
  out.changes = r.changes.take();
  out.dropped = std::move(decoded.dropped);
  return out;
}

// Moves the deprecated top-level host-config fields where dockerd would take them from
// (ContainerConfigWrapper.getHostConfig), so that one HostConfig object says everything.
json_object canonical_create(json_object body) {
  json_object config, top_host;
  std::optional<json_object> inner;
  std::optional<json_value> networking;
  std::string cpuset;
  for (auto& m : body) {
    if (m.key == "HostConfig") {
      inner = std::move(*m.value.as_object());
    } else if (m.key == "NetworkingConfig") {
      networking = std::move(m.value);
    } else if (m.key == "Cpuset") {
      cpuset = *m.value.as_string();
    } else if (resolve_key(m.key, schema::host_config)) {
      top_host.push_back(std::move(m));
    } else {
      config.push_back(std::move(m));
    }
  }
  json_object host;
  if (!inner) {
    host = std::move(top_host);  // no HostConfig: the top level is the host config
  } else {
    host = std::move(*inner);
    // With both, dockerd still takes these four from the top level when the inner one is 0.
    for (std::string_view k : {"Memory", "MemorySwap", "CpuShares", "CpusetCpus"}) {
      const json_value* top = find(top_host, k);
      if (top && !is_empty_value(top) && is_empty_value(find(host, k))) set(host, k, *top);
    }
  }
  if (!cpuset.empty() && is_empty_value(find(host, "CpusetCpus"))) set(host, "CpusetCpus", cpuset);
  config.push_back({"HostConfig", std::move(host)});
  if (networking) config.push_back({"NetworkingConfig", std::move(*networking)});
  return config;
}

}  // namespace

decision review_container_create(const profile& p, std::string_view body, daemon_facts facts) {
  const api_version version = facts.version;
  std::string workspace;
  auto judge = [&](json_object& root, body_reviewer& r) {
    root = canonical_create(std::move(root));
    // What the daemon makes of empty fields for older clients (moby's postContainersCreate).
    auto old_default = [&](std::string_view path, json_value value) {
      json_object* parent = nullptr;
      std::string_view key;
      json_value* v = locate(root, path, true, &parent, &key);
      if (!v || is_empty_value(v)) {
        set(*parent, key, std::move(value));
        r.changes.daemon_default(path);
      }
    };
    if (version < api_version{1, 25}) {  // the daemon turns AutoRemove off: the client removes
      json_object* parent = nullptr;
      std::string_view key;
      if (json_value* v = locate(root, "HostConfig.AutoRemove", false, &parent, &key))
        *v = json_value(false);
    }
    if (version < api_version{1, 40}) old_default("HostConfig.IpcMode", json_value("shareable"));
    if (version < api_version{1, 41} && facts.cgroup_v1)
      old_default("HostConfig.CgroupnsMode", json_value("host"));
    const auto& rules = p.rules.container_create;
    bool ok = true;
    if (p.rules.workspace)
      ok = (!p.rules.workspace->host_binds || r.take_host_bind(root)) &&
           r.take_workspace(root, workspace);
    if (p.rules.ports) ok = ok && r.check_ports(root);
    if (p.rules.uploads) r.take_uploads(root);
    r.set_aside_seccomp(root);
    for (const auto& [path, rule] : rules.rules) ok = ok && r.apply(root, path, rule);
    const bool mounts = p.rules.binds || p.rules.volumes.mount_owned;
    const bool networks = p.rules.networks.join_owned;
    // networks.join_owned_containers: "container:<ref>" shares an owned container's network.
    const bool shares = p.rules.networks.join_owned_containers && r.shares_network(root);
    if (ok && p.rules.binds && !p.rules.binds->drop.empty()) r.drop_binds(root);
    if (mounts) ok = ok && r.check_mounts(root);
    if (shares) ok = ok && r.check_container_network(root);
    if (networks) ok = ok && r.check_networks(root, shares);
    std::vector<std::string_view> handled;
    if (mounts) handled.insert(handled.end(), {"HostConfig.Binds", "HostConfig.Mounts", "Volumes"});
    if (networks || shares) handled.push_back("HostConfig.NetworkMode");
    if (networks) handled.push_back("NetworkingConfig.EndpointsConfig");
    if (p.rules.ports)
      handled.insert(handled.end(), {"HostConfig.PortBindings", "HostConfig.PublishAllPorts"});
    ok = ok && r.default_deny(root, create_widening_fields, rules, handled);
    if (ok) r.force_seccomp(root);
    if (!workspace.empty() || !r.bind_sources.empty())
      ok = ok && r.check_restart_policy(root, workspace.empty() ? "binds" : "workspace");
    ok = ok && r.check_image(root) && r.stamp_owner(root);
    if (ok && !workspace.empty()) r.bind_workspace(root, workspace);
    if (ok && p.rules.uploads) r.mount_uploads(root);
    return ok;
  };
  auto complete = [&](const json_object& root, body_reviewer& r, rewrite& out) {
    out.warnings = create_warnings(p, root, r.changes.list());
    for (const auto& bind : r.dropped)
      out.warnings.push_back("dockgate: bind " + bind + " left out (profile " + p.name +
                             ", rule binds.drop)");
    out.bind_sources = std::move(r.bind_sources);
    out.workspace_source = workspace;
    out.networks = std::move(r.network_names);
    out.volumes = std::move(r.volume_names);
    out.container = std::move(r.network_container);
    if (const auto* image = find(root, "Image"); image && image->as_string())
      out.image = *image->as_string();
  };
  return review_json_body(p, "ContainerCreate", body, schema::container_create, judge, complete);
}

decision review_container_exec(const profile& p, std::string_view body) {
  return review_json_body(p, "ContainerExec", body, schema::exec_config,
                          [&](json_object& root, body_reviewer& r) {
                            const auto& rules = p.rules.container_exec;
                            bool ok = true;
                            for (const auto& [path, rule] : rules.rules)
                              ok = ok && r.apply(root, path, rule);
                            // nothing handled elsewhere
                            return ok && r.default_deny(root, exec_widening_fields, rules, {});
                          });
}

decision review_image_reference(const profile& p, std::string_view reference) {
  body_reviewer r{p};
  if (!r.check_image_reference(reference, false)) return *r.refusal;
  return allow{};
}

decision review_container_update(const profile& p, std::string_view body) {
  // The update's fields are HostConfig's (Resources, RestartPolicy): the create rules for
  // HostConfig.<field> apply to them, clamps included.
  auto judge = [&](json_object& root, body_reviewer& r) {
    json_object wrapped{{"HostConfig", std::move(root)}};
    root = std::move(wrapped);
    field_rules host_rules;
    for (const auto& [path, rule] : p.rules.container_create.rules)
      if (path.starts_with("HostConfig.") &&
          resolve_key(std::string_view(path).substr(11), schema::container_update))
        host_rules.rules.emplace_back(path, rule);
    bool ok = true;
    for (const auto& [path, rule] : host_rules.rules) {
      // Force and clamp rules of fields the client did not send stay out of an update: an
      // update changes only what it names (the container was created within the rules).
      if ((rule.type == field_rule::kind::force || rule.type == field_rule::kind::clamp) &&
          !locate(root, path))
        continue;
      ok = ok && r.apply(root, path, rule);
    }
    // The profile's containers may bind host paths: none may restart on the daemon's own.
    if (p.rules.workspace || p.rules.binds)
      ok = ok && r.check_restart_policy(root, p.rules.workspace ? "workspace" : "binds");
    std::vector<widening_field> update_widening;
    for (const auto& w : create_widening_fields)
      if (w.path.starts_with("HostConfig.") &&
          resolve_key(w.path.substr(11), schema::container_update))
        update_widening.push_back(w);
    return ok && r.default_deny(root, update_widening, host_rules, {});
  };
  return review_json_body(p, "ContainerUpdate", body, schema::container_update, judge, no_extras{},
                          "HostConfig");
}

decision review_network_create(const profile& p, std::string_view body) {
  std::string created;
  auto judge = [&](json_object& root, body_reviewer& r) {
    auto text = [&](const json_value* v) {
      return v && v->as_string() ? *v->as_string() : std::string();
    };
    // A bridge network on addresses the daemon picks: no host options (bridge name, host
    // binding address, MTU, masquerading), no chosen subnets (they route on the host), no
    // IPv6 or swarm-only kinds.
    const std::string name = text(find(root, "Name"));
    const std::string driver = text(find(root, "Driver"));
    // The one option a body may carry: exactly the bridge name networks.bridge_prefix
    // gives (the gate's own rewrite, reviewed again, passes unchanged).
    const std::string own_bridge = p.rules.networks.bridge_prefix.empty()
                                       ? std::string()
                                       : network_bridge_name(p.rules.networks.bridge_prefix, name);
    auto own_bridge_option = [&](const json_value* options) {
      if (own_bridge.empty() || !options || !options->as_object()) return false;
      const auto& o = *options->as_object();
      const json_value* b = find(o, bridge_name_option);
      return o.size() == 1 && b && b->as_string() && *b->as_string() == own_bridge;
    };
    const std::string scope = text(find(root, "Scope"));
    bool ok = true;
    if (!valid_object_name(name))
      ok = r.refuse("Name", "networks", "\"" + name + "\" is not allowed (letters, digits, _ . -)");
    else if (!(driver.empty() || driver == "bridge"))
      ok = r.refuse("Driver", "networks", "\"" + driver + "\" is not allowed (bridge only)");
    else if (!(scope.empty() || scope == "local"))
      ok = r.refuse("Scope", "networks", "\"" + scope + "\" is not allowed");
    else if (!is_empty_value(find(root, "Options")) && !own_bridge_option(find(root, "Options")))
      ok = r.refuse("Options", "networks", "are not allowed (host options)");
    else if (!is_empty_value(find(root, "EnableIPv6")))
      ok = r.refuse("EnableIPv6", "networks", "is not allowed");
    else if (!is_empty_value(find(root, "Ingress")))
      ok = r.refuse("Ingress", "networks", "is not allowed");
    else if (!is_empty_value(find(root, "ConfigOnly")))
      ok = r.refuse("ConfigOnly", "networks", "is not allowed");
    else if (const auto* from = find(root, "ConfigFrom");
             from && !is_empty_value(find(*from->as_object(), "Network")))
      ok = r.refuse("ConfigFrom", "networks", "is not allowed");
    else if (const auto* ipam = find(root, "IPAM"); ipam && ipam->as_object()) {
      const std::string ipam_driver = text(find(*ipam->as_object(), "Driver"));
      if (!(ipam_driver.empty() || ipam_driver == "default"))
        ok = r.refuse("IPAM.Driver", "networks", "\"" + ipam_driver + "\" is not allowed");
      else if (!is_empty_value(find(*ipam->as_object(), "Config")))
        ok = r.refuse("IPAM.Config", "networks", "is not allowed (the daemon picks the subnet)");
      else if (!is_empty_value(find(*ipam->as_object(), "Options")))
        ok = r.refuse("IPAM.Options", "networks", "are not allowed");
    }
    if (ok && p.rules.networks.internal) {
      // networks.internal: the profile's networks have no way off the host's bridge.
      json_object* parent = nullptr;
      std::string_view key;
      json_value* v = locate(root, "Internal", true, &parent, &key);
      const bool already = v && v->as_bool() && *v->as_bool();
      if (!already) {
        r.changes.record("Internal", "forced", v);
        set(*parent, key, json_value(true));
      }
    }
    if (ok && !p.rules.networks.bridge_prefix.empty()) {
      // networks.bridge_prefix: the bridge's name is the profile's, so that the host's
      // firewall holds the network by its interface pattern from its first packet.
      json_object* parent = nullptr;
      std::string_view key;
      json_value* v = locate(root, "Options", true, &parent, &key);
      if (!own_bridge_option(v)) {
        r.changes.record("Options", "forced", v);
        set(*parent, key,
            json_value(json_object{{std::string(bridge_name_option), json_value(own_bridge)}}));
      }
    }
    if (ok) created = name;
    return ok && r.stamp_owner(root, false);
  };
  auto complete = [&](const json_object&, body_reviewer&, rewrite& out) { out.name = created; };
  return review_json_body(p, "NetworkCreate", body, schema::network_create, judge, complete);
}

decision review_volume_create(const profile& p, std::string_view body) {
  std::string n;
  auto judge = [&](json_object& root, body_reviewer& r) {
    // The local driver without options: its options mount host devices and paths
    // (type=none,o=bind,device=/etc) and remote filesystems.
    const json_value* name = find(root, "Name");
    const json_value* driver = find(root, "Driver");
    n = name && name->as_string() ? *name->as_string() : std::string();
    const std::string d = driver && driver->as_string() ? *driver->as_string() : std::string();
    bool ok = true;
    if (!n.empty() && !valid_object_name(n))
      ok = r.refuse("Name", "volumes", "\"" + n + "\" is not allowed (letters, digits, _ . -)");
    else if (!(d.empty() || d == "local"))
      ok = r.refuse("Driver", "volumes", "\"" + d + "\" is not allowed (local only)");
    else if (!is_empty_value(find(root, "DriverOpts")))
      ok = r.refuse("DriverOpts", "volumes", "are not allowed (they mount host paths and devices)");
    else if (find(root, "ClusterVolumeSpec"))
      ok = r.refuse("ClusterVolumeSpec", "volumes", "is not allowed");
    return ok && r.stamp_owner(root, false);
  };
  auto complete = [&](const json_object&, body_reviewer&, rewrite& out) {
    if (!n.empty()) out.volumes.push_back(n);
    out.name = n;
  };
  return review_json_body(p, "VolumeCreate", body, schema::volume_create, judge, complete);
}

// NetworkConnect and NetworkDisconnect: the container (which the proxy resolves to an
// owned one) and, for a connect, the endpoint under the networks rule.
decision review_network_attachment(const profile& p, operation op, std::string_view body) {
  const bool connect = op == operation::NetworkConnect;
  const object_spec& spec = connect ? schema::network_connect : schema::network_disconnect;
  std::string c;
  auto judge = [&](json_object& root, body_reviewer& r) {
    const json_value* container = find(root, "Container");
    c = container && container->as_string() ? *container->as_string() : std::string();
    if (c.empty()) {
      r.refusal = deny{400, "body", "dockgate: " + std::string(spec.name) + " names no Container"};
      return false;
    }
    if (const auto* endpoint = find(root, "EndpointConfig"); endpoint && endpoint->as_object())
      return r.check_endpoint("EndpointConfig", *endpoint->as_object());
    return true;
  };
  auto complete = [&](const json_object&, body_reviewer&, rewrite& out) { out.container = c; };
  return review_json_body(p, spec.name, body, spec, judge, complete);
}

std::string with_container(std::string_view reviewed, operation op, std::string_view id) {
  const object_spec& spec = op == operation::NetworkConnect      ? schema::network_connect
                            : op == operation::NetworkDisconnect ? schema::network_disconnect
                                                                 : schema::container_create;
  auto decoded = decode_body(reviewed, spec);
  json_object root = std::move(*decoded.value->as_object());
  if (op == operation::ContainerCreate) {
    json_object* parent = nullptr;
    std::string_view key;
    locate(root, "HostConfig.NetworkMode", true, &parent, &key);
    set(*parent, key, json_value("container:" + std::string(id)));
  } else {
    set(root, "Container", json_value(std::string(id)));
  }
  canonical_order(root, spec);
  return to_json(json_value(std::move(root)));
}

std::size_t json_body_limit(operation op) {
  switch (op) {
    case operation::ContainerCreate:
      return 1024 * 1024;  // env, labels and commands can be long
    case operation::ContainerExec:
      return 256 * 1024;
    case operation::ContainerUpdate:
      return 64 * 1024;
    case operation::ExecStart:
      return 4 * 1024;  // {"Detach":..,"Tty":..,"ConsoleSize":..}
    default:
      return 1024 * 1024;
  }
}

decision review_body(const profile& p, operation op, std::string_view body, daemon_facts facts) {
  switch (op) {
    case operation::ContainerCreate:
      return review_container_create(p, body, facts);
    case operation::ContainerExec:
      return review_container_exec(p, body);
    case operation::ContainerUpdate:
      return review_container_update(p, body);
    case operation::NetworkCreate:
      return review_network_create(p, body);
    case operation::VolumeCreate:
      return review_volume_create(p, body);
    case operation::NetworkConnect:
    case operation::NetworkDisconnect:
      return review_network_attachment(p, op, body);
    default:
      return allow{};
  }
}

}  // namespace dockgate::policy

// The audit line's "seen": which fields a client set, and the values of those a profile
// rules on. See body_seen.hpp.
//
// Invariant: no value of a field that may carry secrets is recorded (the list is
// change_redacted, the same as for the audit line's changes), and no value longer than
// change_value_limit: recording what a client set does not log its body.
#include "dockgate/policy/body_seen.hpp"

#include <algorithm>
#include <array>
#include <span>

#include "dockgate/common/error_body.hpp"
#include "dockgate/policy/decision.hpp"
#include "dockgate/policy/go_json.hpp"
#include "widening_fields.hpp"

namespace dockgate::policy {

namespace {

// Fields whose values a learned rule is made of (allow lists, max clamps, images, binds,
// networks), or that a human needs to judge a refusal. Paths, no wildcards.
constexpr std::array<std::string_view, 43> create_value_fields{
    "Image",
    "User",
    "HostConfig.NetworkMode",
    "HostConfig.IpcMode",
    "HostConfig.PidMode",
    "HostConfig.UTSMode",
    "HostConfig.UsernsMode",
    "HostConfig.CgroupnsMode",
    "HostConfig.Cgroup",
    "HostConfig.Runtime",
    "HostConfig.Isolation",
    "HostConfig.CapAdd",
    "HostConfig.CapDrop",
    "HostConfig.SecurityOpt",
    "HostConfig.Privileged",
    "HostConfig.PublishAllPorts",
    "HostConfig.ReadonlyRootfs",
    "HostConfig.Init",
    "HostConfig.AutoRemove",
    "HostConfig.OomKillDisable",
    "HostConfig.OomScoreAdj",
    "HostConfig.Memory",
    "HostConfig.MemorySwap",
    "HostConfig.MemoryReservation",
    "HostConfig.NanoCpus",
    "HostConfig.CpuShares",
    "HostConfig.CpuQuota",
    "HostConfig.CpuPeriod",
    "HostConfig.PidsLimit",
    "HostConfig.ShmSize",
    "HostConfig.BlkioWeight",
    "HostConfig.Binds",
    "HostConfig.Mounts",
    "HostConfig.Tmpfs",
    "HostConfig.Devices",
    "HostConfig.PortBindings",
    "HostConfig.Sysctls",
    "HostConfig.GroupAdd",
    "HostConfig.VolumesFrom",
    "HostConfig.RestartPolicy",
    "HostConfig.StorageOpt",
    "Volumes",
    "NetworkingConfig.EndpointsConfig",
};
constexpr std::array<std::string_view, 4> exec_value_fields{"User", "Privileged", "Tty",
                                                            "AttachStdin"};

// Mounts: only what says where (Type, Source, Target, ReadOnly); driver and tmpfs options
// are recorded as set by their path. EndpointsConfig: each network with its Aliases.
json_value where_only(std::string_view path, const json_value& v) {
  if (path == "HostConfig.Mounts" && v.as_array()) {
    json_array out;
    for (const auto& m : *v.as_array()) {
      json_object kept;
      if (m.as_object())
        for (std::string_view k : {"Type", "Source", "Target", "ReadOnly"})
          if (const json_value* f = find(*m.as_object(), k)) kept.push_back({std::string(k), *f});
      out.emplace_back(std::move(kept));
    }
    return out;
  }
  if (path == "NetworkingConfig.EndpointsConfig" && v.as_object()) {
    json_object out;
    for (const auto& e : *v.as_object()) {
      json_object kept;
      if (e.value.as_object())
        if (const json_value* a = find(*e.value.as_object(), "Aliases"); a && !is_empty_value(a))
          kept.push_back({"Aliases", *a});
      out.push_back({e.key, json_value(std::move(kept))});
    }
    return out;
  }
  return v;
}

// Set: not a zero value, and for an object some member set (the docker CLI sends
// "LogConfig":{"Type":"","Config":{}} for no --log-driver).
bool client_set(const json_value* v) {
  if (is_empty_value(v)) return false;
  if (const auto* o = v->as_object())
    return std::any_of(o->begin(), o->end(), [](const auto& m) { return client_set(&m.value); });
  return true;
}

void collect_paths(const json_object& o, const std::string& prefix, std::vector<std::string>& out) {
  for (const auto& m : o) {
    if (!client_set(&m.value)) continue;
    std::string path = prefix.empty() ? m.key : prefix + "." + m.key;
    // One level into HostConfig and NetworkingConfig: their members are the rule paths.
    if ((path == "HostConfig" || path == "NetworkingConfig") && m.value.as_object())
      collect_paths(*m.value.as_object(), path, out);
    else
      out.push_back(std::move(path));
  }
}

const json_value* at_path(const json_object& root, std::string_view path) {
  const json_object* o = &root;
  for (;;) {
    const auto dot = path.find('.');
    const json_value* v = find(*o, path.substr(0, dot));
    if (dot == std::string_view::npos || !v) return v;
    if (!v->as_object()) return nullptr;
    o = v->as_object();
    path.remove_prefix(dot + 1);
  }
}

void append_string(std::string& out, std::string_view s) {
  out += '"';
  common::append_json_escaped(out, s);
  out += '"';
}

}  // namespace

std::string body_seen(operation op, std::string_view body) {
  const bool create = op == operation::ContainerCreate;
  if (!create && op != operation::ContainerExec) return {};
  auto decoded = decode_body(body, create ? schema::container_create : schema::exec_config);
  if (!decoded.value || !decoded.value->as_object()) return {};
  json_object root = std::move(*decoded.value->as_object());
  if (create && !find(root, "HostConfig")) {
    // The deprecated shape: without HostConfig the top level is the host config (as
    // canonical_create reads it).
    json_object config, host;
    for (auto& m : root)
      (resolve_key(m.key, schema::host_config) && m.key != "NetworkingConfig" ? host : config)
          .push_back(std::move(m));
    config.push_back({"HostConfig", json_value(std::move(host))});
    root = std::move(config);
  }
  std::vector<std::string> paths;
  collect_paths(root, "", paths);
  std::string out = "{\"fields\":[";
  for (const auto& p : paths) {
    if (&p != paths.data()) out += ',';
    append_string(out, p);
  }
  out += "],\"values\":{";
  bool first = true;
  auto value_fields = create ? std::span<const std::string_view>(create_value_fields)
                             : std::span<const std::string_view>(exec_value_fields);
  for (std::string_view path : value_fields) {
    const json_value* v = at_path(root, path);
    if (!client_set(v) || change_redacted(path)) continue;
    std::string text = to_json(where_only(path, *v));
    if (text.size() > change_value_limit)
      text = "\"<omitted: " + std::to_string(text.size()) + " bytes>\"";
    if (!first) out += ',';
    first = false;
    append_string(out, path);
    out += ':';
    out += text;
  }
  out += "},\"widening\":[";
  first = true;
  auto widening = create ? std::span<const widening_field>(create_widening_fields)
                         : std::span<const widening_field>(exec_widening_fields);
  for (const auto& w : widening) {
    if (is_safe(root, at_path(root, w.path), w.safe)) continue;
    if (!first) out += ',';
    first = false;
    append_string(out, w.path);
  }
  out += "]}";
  return out;
}

}  // namespace dockgate::policy

// Container-create and exec-create review: canonicalise, apply the profile's rules,
// validate, serialise. See body_rules.hpp and DESIGN.md "Container-create policy".
//
// Which fields widen what a container can do, and what their safe value is, is decided
// here, once (`widening_fields`). A field listed there passes only at its safe value
// unless the profile has a rule for it.
#include "dockgate/policy/body_rules.hpp"

#include "dockgate/common/workspace_id.hpp"

#include <algorithm>
#include <cctype>

#include "dockgate/policy/body_review.hpp"
#include "dockgate/policy/responses.hpp"
#include "dockgate/policy/go_json.hpp"
#include "dockgate/policy/image_ref.hpp"

namespace dockgate::policy {

namespace {

enum class safe_when : std::uint8_t {
  empty,          // absent, "", [] or {}
  absent,         // absent only (MaskedPaths: [] unmasks everything)
  is_false,       // absent or false
  is_zero,        // absent or 0
  not_negative,   // absent or >= 0
  private_ns,     // "" or "private" (PidMode, UTSMode, UsernsMode, Cgroup, CgroupnsMode)
  ipc,            // "", "private", "shareable", "none"
  network,        // "", "default", "bridge", "none"
  security_opt,   // only no-new-privileges (true)
  log_config,     // a local log driver
  isolation,      // "" or "default"
  endpoints,      // only the container's own network (NetworkMode), with empty settings
};

struct widening_field {
  std::string_view path;
  safe_when safe;
};

constexpr widening_field create_widening[] = {
    {"Volumes", safe_when::empty},
    {"HostConfig.Binds", safe_when::empty},
    {"HostConfig.ContainerIDFile", safe_when::empty},
    {"HostConfig.LogConfig", safe_when::log_config},
    {"HostConfig.NetworkMode", safe_when::network},
    {"HostConfig.PortBindings", safe_when::empty},
    {"HostConfig.VolumeDriver", safe_when::empty},
    {"HostConfig.VolumesFrom", safe_when::empty},
    {"HostConfig.Mounts", safe_when::empty},
    {"HostConfig.Annotations", safe_when::empty},
    {"HostConfig.CapAdd", safe_when::empty},
    {"HostConfig.CgroupnsMode", safe_when::private_ns},
    {"HostConfig.ExtraHosts", safe_when::empty},
    {"HostConfig.GroupAdd", safe_when::empty},
    {"HostConfig.IpcMode", safe_when::ipc},
    {"HostConfig.Cgroup", safe_when::private_ns},
    {"HostConfig.Links", safe_when::empty},
    {"HostConfig.OomScoreAdj", safe_when::not_negative},
    {"HostConfig.PidMode", safe_when::private_ns},
    {"HostConfig.Privileged", safe_when::is_false},
    {"HostConfig.PublishAllPorts", safe_when::is_false},
    {"HostConfig.SecurityOpt", safe_when::security_opt},
    {"HostConfig.StorageOpt", safe_when::empty},
    {"HostConfig.Tmpfs", safe_when::empty},
    {"HostConfig.UTSMode", safe_when::private_ns},
    {"HostConfig.UsernsMode", safe_when::private_ns},
    {"HostConfig.Sysctls", safe_when::empty},
    {"HostConfig.Runtime", safe_when::empty},
    {"HostConfig.Isolation", safe_when::isolation},
    {"HostConfig.MaskedPaths", safe_when::absent},
    {"HostConfig.ReadonlyPaths", safe_when::absent},
    {"HostConfig.CgroupParent", safe_when::empty},
    {"HostConfig.BlkioWeightDevice", safe_when::empty},
    {"HostConfig.BlkioDeviceReadBps", safe_when::empty},
    {"HostConfig.BlkioDeviceWriteBps", safe_when::empty},
    {"HostConfig.BlkioDeviceReadIOps", safe_when::empty},
    {"HostConfig.BlkioDeviceWriteIOps", safe_when::empty},
    {"HostConfig.CpuRealtimePeriod", safe_when::is_zero},
    {"HostConfig.CpuRealtimeRuntime", safe_when::is_zero},
    {"HostConfig.Devices", safe_when::empty},
    {"HostConfig.DeviceCgroupRules", safe_when::empty},
    {"HostConfig.DeviceRequests", safe_when::empty},
    {"HostConfig.OomKillDisable", safe_when::is_false},
    {"HostConfig.Ulimits", safe_when::empty},
    {"NetworkingConfig.EndpointsConfig", safe_when::endpoints},
};

constexpr widening_field exec_widening[] = {
    {"Privileged", safe_when::is_false},
};

std::string upper(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// dockerd accepts `CAP_SYS_ADMIN`, `sys_admin`, `Sys_Admin`: compare in one spelling.
std::string capability_name(std::string_view s) {
  std::string u = upper(s);
  if (u.starts_with("CAP_")) u.erase(0, 4);
  return u;
}

// `no-new-privileges`, `no-new-privileges:true`, `no-new-privileges=true` (any case of
// the value, as dockerd's strconv.ParseBool reads it).
bool is_no_new_privileges(std::string_view opt) {
  if (opt == "no-new-privileges") return true;
  if (!opt.starts_with("no-new-privileges")) return false;
  std::string_view rest = opt.substr(17);
  if (rest.empty() || (rest.front() != ':' && rest.front() != '=')) return false;
  rest.remove_prefix(1);
  return rest == "true" || rest == "1" || rest == "t" || rest == "T" || rest == "TRUE" || rest == "True";
}

bool is_empty_value(const json_value* v) {
  if (!v || v->is_null()) return true;
  if (auto* s = v->as_string()) return s->empty();
  if (auto* a = v->as_array()) return a->empty();
  if (auto* o = v->as_object()) return o->empty();
  if (auto* b = v->as_bool()) return !*b;
  if (auto i = v->as_int()) return *i == 0;
  return false;
}

// Newer docker CLIs (28) send an endpoint for the container's own network with every
// setting empty: that adds nothing. Any other network, or any setting, is a widening.
bool endpoints_safe(const json_object& root, const json_value* endpoints) {
  if (is_empty_value(endpoints)) return true;
  const json_value* host = find(root, "HostConfig");
  const json_value* mode = host && host->as_object() ? find(*host->as_object(), "NetworkMode") : nullptr;
  std::string own = mode && mode->as_string() ? *mode->as_string() : std::string();
  if (own.empty()) own = "default";
  for (const auto& e : *endpoints->as_object()) {
    if (e.key != own) return false;
    for (const auto& setting : *e.value.as_object())
      if (!is_empty_value(&setting.value)) return false;
  }
  return true;
}

// Whether the value of a widening field is its safe value. `root` is the whole body, for
// the fields whose safety depends on another (endpoints on NetworkMode).
bool is_safe(const json_object& root, const json_value* v, safe_when rule) {
  auto str = [&]() -> std::string { return v && v->as_string() ? *v->as_string() : std::string(); };
  switch (rule) {
    case safe_when::empty: return is_empty_value(v);
    case safe_when::absent: return !v || v->is_null();
    case safe_when::is_false: return !v || v->is_null() || (v->as_bool() && !*v->as_bool());
    case safe_when::is_zero: return !v || v->is_null() || (v->as_int() && *v->as_int() == 0);
    case safe_when::not_negative: return !v || v->is_null() || (v->as_int() && *v->as_int() >= 0);
    case safe_when::private_ns: {
      auto s = str();
      return s.empty() || s == "private";
    }
    case safe_when::ipc: {
      auto s = str();
      return s.empty() || s == "private" || s == "shareable" || s == "none";
    }
    case safe_when::network: {
      auto s = str();
      return s.empty() || s == "default" || s == "bridge" || s == "none";
    }
    case safe_when::security_opt: {
      if (!v || v->is_null()) return true;
      for (const auto& item : *v->as_array())
        if (!is_no_new_privileges(*item.as_string())) return false;
      return true;
    }
    case safe_when::log_config: {
      if (!v) return true;
      const auto* type = find(*v->as_object(), "Type");
      const std::string t = type ? *type->as_string() : std::string();
      return t.empty() || t == "json-file" || t == "local" || t == "none" || t == "journald";
    }
    case safe_when::isolation: {
      auto s = str();
      return s.empty() || s == "default";
    }
    case safe_when::endpoints:
      return endpoints_safe(root, v);
  }
  return false;
}


// The member `path` ("HostConfig.Memory") of the canonical body; creates the parent
// objects when `create` is set.
json_value* locate(json_object& root, std::string_view path, bool create, json_object** parent_out,
                   std::string_view* key_out) {
  json_object* parent = &root;
  while (true) {
    auto dot = path.find('.');
    std::string_view key = path.substr(0, dot);
    if (dot == std::string_view::npos) {
      *parent_out = parent;
      *key_out = key;
      return find(*parent, key);
    }
    json_value* next = find(*parent, key);
    if (!next) {
      if (!create) {
        *parent_out = nullptr;
        return nullptr;
      }
      set(*parent, key, json_object{});
      next = find(*parent, key);
    }
    parent = next->as_object();
    if (!parent) return nullptr;
    path.remove_prefix(dot + 1);
  }
}

const json_value* locate(const json_object& root, std::string_view path) {
  json_object* parent;
  std::string_view key;
  return locate(const_cast<json_object&>(root), path, false, &parent, &key);
}

struct reviewer {
  reviewer(const profile& prof, std::vector<std::string>& changed_fields) : p(prof), changes(changed_fields) {}
  const profile& p;
  std::vector<std::string>& changes;
  std::optional<deny> refusal;
  std::vector<std::string> bind_sources;
  std::vector<std::string> network_names;
  std::vector<std::string> volume_names;

  bool refuse(std::string_view path, std::string_view rule, std::string what) {
    if (!refusal) {
      std::string reason = "dockgate: ";
      reason += path;
      reason += ' ';
      reason += what;
      reason += " (profile ";
      reason += p.name;
      reason += ", rule ";
      reason += rule;
      reason += ')';
      refusal = deny{403, std::string(path) + ":" + std::string(rule), std::move(reason)};
    }
    return false;
  }

  void changed(std::string_view path, std::string_view how) {
    changes.push_back(std::string(path) + ":" + std::string(how));
  }

  bool apply(json_object& root, std::string_view path, const field_rule& rule) {
    json_object* parent = nullptr;
    std::string_view key;
    json_value* current = locate(root, path, rule.type == field_rule::kind::force ||
                                                 rule.type == field_rule::kind::clamp,
                                 &parent, &key);
    switch (rule.type) {
      case field_rule::kind::force:
        if (!current || !(*current == rule.value)) {
          set(*parent, key, rule.value);
          changed(path, "forced");
        }
        return true;
      case field_rule::kind::deny:
        if (!is_empty_value(current)) return refuse(path, "deny", "is not allowed");
        if (current) {
          erase(*parent, key);
        }
        return true;
      case field_rule::kind::clamp: {
        if (path == "HostConfig.Ulimits") return clamp_ulimits(current, rule);
        if (path == "HostConfig.Tmpfs") return clamp_tmpfs(current, rule);
        // A value <= 0 means "unlimited" (or "the daemon's default") for every clampable
        // field (Memory, MemorySwap, NanoCpus, PidsLimit, ShmSize, CpuShares...).
        const auto v = current ? current->as_int() : std::nullopt;
        if (!v || *v <= 0 || *v > rule.max) {
          set(*parent, key, json_value(rule.max));
          changed(path, "clamped");
        }
        return true;
      }
      case field_rule::kind::allow: {
        if (!current || current->is_null()) return true;
        auto allowed = [&](const std::string& value) {
          const bool caps = path.ends_with("CapAdd") || path.ends_with("CapDrop");
          for (const auto& a : rule.allowed)
            if (caps ? capability_name(a) == capability_name(value) : a == value) return true;
          return false;
        };
        if (auto* s = current->as_string()) {
          if (!s->empty() && !allowed(*s)) return refuse(path, "allow", "value \"" + *s + "\" is not allowed");
          return true;
        }
        if (auto* a = current->as_array()) {
          for (const auto& item : *a)
            if (auto* s = item.as_string(); !s || !allowed(*s))
              return refuse(path, "allow", "value \"" + (s ? *s : to_json(item)) + "\" is not allowed");
          return true;
        }
        return refuse(path, "allow", "is not a string or list of strings");
      }
    }
    return true;
  }

  // Tmpfs under `max`: the client may mount a tmpfs only at the profile's paths, and each
  // gets the profile's options (size, mode, nosuid...), whatever the client asked.
  bool clamp_tmpfs(json_value* current, const field_rule& rule) {
    if (!current || !current->as_object()) return true;
    const auto& allowed = *rule.value.as_object();
    for (auto& m : *current->as_object()) {
      const json_value* options = find(allowed, m.key);
      if (!options) return refuse("HostConfig.Tmpfs", "max", "path \"" + m.key + "\" is not allowed");
      if (!(m.value == *options)) {
        m.value = *options;
        changed("HostConfig.Tmpfs", "clamped");
      }
    }
    return true;
  }

  bool clamp_ulimits(json_value* current, const field_rule& rule) {
    const auto* caps = rule.value.as_object();
    if (!current || !current->as_array()) return true;
    for (auto& item : *current->as_array()) {
      auto& u = *item.as_object();
      const auto* name = find(u, "Name");
      const std::string n = name ? *name->as_string() : std::string();
      const json_value* cap = caps ? find(*caps, n) : nullptr;
      if (!cap) return refuse("HostConfig.Ulimits", "max", "\"" + n + "\" is not allowed");
      for (const char* limit : {"Soft", "Hard"}) {
        const auto* v = find(u, limit);
        const auto value = v ? v->as_int() : std::nullopt;
        if (!value || *value < 0 || *value > *cap->as_int()) {
          set(u, limit, *cap);
          changed("HostConfig.Ulimits", "clamped");
        }
      }
    }
    return true;
  }

  bool default_deny(json_object& root, std::span<const widening_field> fields, const field_rules& rules,
                    std::span<const std::string_view> handled_elsewhere) {
    for (const auto& w : fields) {
      if (rules.find(w.path)) continue;
      if (std::find(handled_elsewhere.begin(), handled_elsewhere.end(), w.path) != handled_elsewhere.end()) continue;
      const json_value* value = locate(root, w.path);
      if (!is_safe(root, value, w.safe)) return refuse(w.path, "default", "is not allowed: the profile has no rule that permits it");
    }
    return true;
  }

  // Binds ("src:dst[:opts]") and Mounts. A host path (absolute source) only from the
  // profile's bind roots, only to its targets, without propagation back to the host; a
  // named volume (any other source) only with the volumes rule, collected for the proxy
  // to check that the profile owns it; anonymous volumes with the same rule.
  bool check_mounts(json_object& root) {
    const bind_rule* rule = p.rules.binds ? &*p.rules.binds : nullptr;
    const bool volumes = p.rules.volumes.mount_owned;
    auto source_ok = [&](std::string_view src) {
      if (!rule || !clean_absolute_path(src) || src == "/") return false;
      for (const auto& r : rule->source_roots)
        if (src.size() > r.size() && src.starts_with(r) && src[r.size()] == '/') return true;
      return false;
    };
    auto target_ok = [&](std::string_view dst) {
      return rule && std::find(rule->targets.begin(), rule->targets.end(), dst) != rule->targets.end();
    };
    auto volume_ok = [&](std::string_view name, std::string_view dst) {
      return volumes && valid_object_name(name) && clean_absolute_path(dst) && dst != "/";
    };
    if (auto* binds = locate(root, "HostConfig.Binds"); binds && binds->as_array()) {
      for (const auto& b : *binds->as_array()) {
        const std::string& spec = *b.as_string();
        std::vector<std::string_view> parts;
        std::string_view rest = spec;
        while (true) {
          auto colon = rest.find(':');
          parts.push_back(rest.substr(0, colon));
          if (colon == std::string_view::npos) break;
          rest.remove_prefix(colon + 1);
        }
        // dockerd's Linux parser: an absolute source is a host path, anything else a volume name.
        const bool host_path = !parts[0].empty() && parts[0].front() == '/';
        if (parts.size() < 2 || parts.size() > 3 ||
            (host_path ? !source_ok(parts[0]) || !target_ok(parts[1]) : !volume_ok(parts[0], parts[1])))
          return refuse("HostConfig.Binds", host_path || !volumes ? "binds" : "volumes", "entry \"" + spec + "\" is not allowed");
        if (host_path) bind_sources.emplace_back(parts[0]);
        else add_unique(volume_names, parts[0]);
        if (parts.size() == 3) {
          std::string_view opts = parts[2];
          while (!opts.empty()) {
            auto comma = opts.find(',');
            std::string_view o = opts.substr(0, comma);
            const bool ok = o == "ro" || o == "rw" || (host_path ? o == "private" || o == "rprivate" : o == "nocopy");
            if (!ok) return refuse("HostConfig.Binds", host_path ? "binds" : "volumes", "option \"" + std::string(o) + "\" is not allowed");
            if (comma == std::string_view::npos) break;
            opts.remove_prefix(comma + 1);
          }
        }
      }
    }
    if (auto* mounts = locate(root, "HostConfig.Mounts"); mounts && mounts->as_array()) {
      for (const auto& m : *mounts->as_array()) {
        const auto& o = *m.as_object();
        auto str = [&](std::string_view k) {
          const auto* v = find(o, k);
          return v ? *v->as_string() : std::string();
        };
        if (str("Type") == "volume" && volumes) {
          if (!str("Source").empty() && !valid_object_name(str("Source")))
            return refuse("HostConfig.Mounts", "volumes", "volume name \"" + str("Source") + "\" is not allowed");
          if (!clean_absolute_path(str("Target")) || str("Target") == "/")
            return refuse("HostConfig.Mounts", "volumes", "target \"" + str("Target") + "\" is not allowed");
          if (find(o, "BindOptions") || find(o, "TmpfsOptions") || find(o, "ImageOptions"))
            return refuse("HostConfig.Mounts", "volumes", "options of another mount type are not allowed");
          if (const auto* vo = find(o, "VolumeOptions"))
            for (const auto& option : *vo->as_object())
              if (option.key != "NoCopy" && !is_empty_value(&option.value))
                return refuse("HostConfig.Mounts", "volumes", "VolumeOptions." + option.key + " is not allowed");
          if (!str("Source").empty()) add_unique(volume_names, str("Source"));
          continue;
        }
        if (str("Type") != "bind" || !rule)
          return refuse("HostConfig.Mounts", "binds", "of type \"" + str("Type") + "\" are not allowed");
        if (!source_ok(str("Source")) || !target_ok(str("Target")))
          return refuse("HostConfig.Mounts", "binds", "from \"" + str("Source") + "\" to \"" + str("Target") + "\" is not allowed");
        bind_sources.push_back(str("Source"));
        if (find(o, "VolumeOptions") || find(o, "TmpfsOptions") || find(o, "ImageOptions"))
          return refuse("HostConfig.Mounts", "binds", "options of another mount type are not allowed");
        if (const auto* bo = find(o, "BindOptions")) {
          const auto& opts = *bo->as_object();
          const auto* prop = find(opts, "Propagation");
          const std::string pr = prop ? *prop->as_string() : std::string();
          if (!(pr.empty() || pr == "private" || pr == "rprivate"))
            return refuse("HostConfig.Mounts", "binds", "propagation \"" + pr + "\" is not allowed");
          const auto* create = find(opts, "CreateMountpoint");
          if (create && create->as_bool() && *create->as_bool())
            return refuse("HostConfig.Mounts", "binds", "CreateMountpoint is not allowed");
        }
      }
    }
    if (const auto* anonymous = locate(root, "Volumes"); anonymous && anonymous->as_object()) {
      for (const auto& v : *anonymous->as_object())
        if (!volumes || !clean_absolute_path(v.key) || v.key == "/")
          return refuse("Volumes", volumes ? "volumes" : "default", "\"" + v.key + "\" is not allowed");
    }
    return true;
  }

  // One endpoint's settings (ContainerCreate's EndpointsConfig, NetworkConnect's
  // EndpointConfig) under the networks rule: aliases if the rule allows them, a static
  // address and MAC; links (another container's environment) and driver options never.
  bool check_endpoint(std::string_view where, const json_object& settings) {
    for (const auto& s : settings) {
      if (is_empty_value(&s.value)) continue;
      if (s.key == "Aliases" && p.rules.networks.aliases) continue;
      if (s.key == "IPAMConfig" || s.key == "MacAddress" || s.key == "GwPriority") continue;
      return refuse(std::string(where) + "." + s.key, "networks", "is not allowed");
    }
    return true;
  }

  // NetworkMode and EndpointsConfig under the networks rule: the daemon's own bridge and
  // none networks, or networks the proxy finds the profile owns (collected here).
  bool check_networks(json_object& root) {
    const json_value* mode_value = locate(root, "HostConfig.NetworkMode");
    std::string mode = mode_value && mode_value->as_string() ? *mode_value->as_string() : std::string();
    auto join = [&](std::string_view where, const std::string& name) {
      if (name.empty() || name == "default" || name == "bridge" || name == "none") return true;
      if (!valid_object_name(name) || name == "host")
        return refuse(where, "networks", "value \"" + name + "\" is not allowed");
      add_unique(network_names, name);
      return true;
    };
    if (!join("HostConfig.NetworkMode", mode)) return false;
    if (const auto* endpoints = locate(root, "NetworkingConfig.EndpointsConfig"); endpoints && endpoints->as_object()) {
      for (const auto& e : *endpoints->as_object()) {
        if (!join("NetworkingConfig.EndpointsConfig", e.key)) return false;
        if (!check_endpoint("NetworkingConfig.EndpointsConfig." + e.key, *e.value.as_object())) return false;
      }
    }
    return true;
  }

  static void add_unique(std::vector<std::string>& list, std::string_view name) {
    if (std::find(list.begin(), list.end(), name) == list.end()) list.emplace_back(name);
  }

  bool check_image(const json_object& root) {
    const auto* image = find(root, "Image");
    const std::string text = image ? *image->as_string() : std::string();
    return check_image_reference(text, true);
  }

  bool check_image_reference(std::string_view text, bool default_tag) {
    std::string why;
    auto ref = parse_image_reference(text, default_tag, &why);
    if (!ref) return refuse("Image", "images", "\"" + std::string(text) + "\" is not a valid image reference: " + why);
    if (ref->tag.empty() && ref->digest.empty())
      return refuse("Image", "images", "\"" + std::string(text) + "\" names no tag or digest");
    if (p.rules.images.require_digest && ref->digest.empty())
      return refuse("Image", "images", "\"" + std::string(text) + "\" is not pinned by digest");
    const std::string normalized = ref->normalized();
    for (const auto& pattern : p.rules.images.patterns)
      if (glob_match(pattern, normalized)) return true;
    return refuse("Image", "images", "\"" + normalized + "\" is not in the image allowlist");
  }

  bool workspace_unchanged = false;  // the body already held exactly the bind we write

  json_value workspace_mount(const std::string& source) const {
    return json_object{{"Type", "bind"},
                       {"Source", source},
                       {"Target", p.rules.workspace->target},
                       {"ReadOnly", false},
                       {"BindOptions", json_object{{"Propagation", "rprivate"}}}};
  }

  // The workspace a client names with the label dockgate.workspace=<id>: the source the
  // profile computes (<root>/<id>), or "" when none is named. A re-review of the proxy's
  // own output finds the bind it wrote and takes it out (it is written again below), so
  // the rewrite is idempotent; any other client bind meets the default deny.
  bool take_workspace(json_object& root, std::string& source) {
    const workspace_rule& rule = *p.rules.workspace;
    const json_value* labels = find(root, "Labels");
    const json_value* id = labels && labels->as_object() ? find(*labels->as_object(), workspace_label) : nullptr;
    if (!id) {
      if (rule.required)
        return refuse("Labels", "workspace", "must name the container's workspace with the label \"" +
                                                 std::string(workspace_label) + "\"");
      return true;
    }
    if (!id->as_string() || !common::valid_workspace_id(*id->as_string()))
      return refuse("Labels", "workspace", "label \"" + std::string(workspace_label) +
                                               "\" must be 1-128 of A-Z a-z 0-9 _ - . starting with a letter or digit");
    source = rule.root + "/" + *id->as_string();
    json_object* parent = nullptr;
    std::string_view key;
    if (json_value* mounts = locate(root, "HostConfig.Mounts", false, &parent, &key); mounts && mounts->as_array()) {
      auto& list = *mounts->as_array();
      std::erase_if(list, [&](const json_value& m) {
        const json_object* o = m.as_object();
        auto text = [&](std::string_view k) {
          const json_value* v = o ? find(*o, k) : nullptr;
          return v && v->as_string() ? *v->as_string() : std::string();
        };
        const bool ours = text("Type") == "bind" && text("Source") == source && text("Target") == rule.target;
        if (ours && m == workspace_mount(source)) workspace_unchanged = true;
        return ours;
      });
    }
    return true;
  }

  // Writes the workspace bind: the only mount at the target, a bind that is never created
  // by the daemon if missing (a Mounts bind, not a Binds entry) and never propagates back.
  void bind_workspace(json_object& root, const std::string& source) {
    const workspace_rule& rule = *p.rules.workspace;
    json_object* parent = nullptr;
    std::string_view key;
    json_value* mounts = locate(root, "HostConfig.Mounts", true, &parent, &key);
    if (!mounts || !mounts->as_array()) {
      set(*parent, "Mounts", json_array{});
      mounts = find(*parent, "Mounts");
    }
    mounts->as_array()->push_back(workspace_mount(source));
    if (!workspace_unchanged) changed("HostConfig.Mounts", "workspace bound");
    json_value* tmpfs = locate(root, "HostConfig.Tmpfs", false, &parent, &key);
    if (tmpfs && tmpfs->as_object() && find(*tmpfs->as_object(), rule.target)) {
      dockgate::policy::erase(*tmpfs->as_object(), rule.target);  // a tmpfs there would hide the workspace
      changed("HostConfig.Tmpfs", "workspace target removed");
    }
  }

  // Clients may not set labels under the reserved prefix; the owner label is stamped.
  bool stamp_owner(json_object& root, bool container = true) {
    json_value* labels = find(root, "Labels");
    if (!labels) {
      set(root, "Labels", json_object{});
      labels = find(root, "Labels");
    }
    for (const auto& m : *labels->as_object()) {
      if (!m.key.starts_with(reserved_label_prefix)) continue;
      // Re-reviewing the proxy's own output must give the same output (idempotence).
      if (m.key == owner_label && m.value == json_value(p.rules.owner)) continue;
      if (m.key == workspace_label && p.rules.workspace && container) continue;  // checked by take_workspace
      return refuse("Labels", "owner", "label \"" + m.key + "\" uses the reserved prefix \"dockgate.\"");
    }
    json_object& l = *labels->as_object();
    if (!find(l, owner_label)) {
      l.push_back({std::string(owner_label), json_value(p.rules.owner)});
      std::sort(l.begin(), l.end(), [](const auto& a, const auto& b) { return a.key < b.key; });
      changed("Labels", "owner stamped");
    }
    return true;
  }
};

rewrite reviewed(std::string body, std::vector<std::string> changes, std::vector<std::string> dropped) {
  rewrite out;
  out.body = std::move(body);
  out.changes = std::move(changes);
  out.dropped = std::move(dropped);
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

bool clean_absolute_path(std::string_view path) {
  if (path.empty() || path.front() != '/') return false;
  if (path == "/") return true;
  for (std::string_view rest = path.substr(1);;) {
    const auto slash = rest.find('/');
    const std::string_view seg = rest.substr(0, slash);
    if (seg.empty() || seg == "." || seg == "..") return false;
    if (slash == std::string_view::npos) return true;
    rest.remove_prefix(slash + 1);
  }
}

const field_rule* field_rules::find(std::string_view path) const {
  for (const auto& [p, r] : rules)
    if (p == path) return &r;
  return nullptr;
}

bool is_rule_path(std::string_view operation, std::string_view path) {
  const object_spec* spec = nullptr;
  std::string_view rest = path;
  if (operation == "ContainerExec") {
    spec = &schema::exec_config;
  } else if (path.starts_with("HostConfig.")) {
    spec = &schema::host_config;
    rest = path.substr(11);
  } else if (path == "NetworkingConfig.EndpointsConfig") {
    return true;
  } else {
    spec = &schema::container_create;
    // Config fields only: the deprecated top-level host-config fields are named under
    // HostConfig (that is where the canonical body has them).
    if (resolve_key(path, schema::host_config) || path == "Cpuset" || path == "HostConfig" ||
        path == "NetworkingConfig")
      return false;
  }
  for (const auto& f : spec->fields)
    if (f.name == rest) return true;
  return false;
}

decision review_container_create(const profile& p, std::string_view body, daemon_facts facts) {
  const api_version version = facts.version;
  auto decoded = decode_body(body, schema::container_create);
  if (!decoded.value) return deny{400, "body", "dockgate: invalid ContainerCreate body: " + decoded.error};
  json_object root = canonical_create(std::move(*decoded.value->as_object()));
  // What the daemon makes of empty fields for older clients (moby's postContainersCreate).
  auto old_default = [&](std::string_view path, json_value value) {
    json_object* parent = nullptr;
    std::string_view key;
    json_value* v = locate(root, path, true, &parent, &key);
    if (!v || is_empty_value(v)) set(*parent, key, std::move(value));
  };
  if (version < api_version{1, 25}) {  // the daemon turns AutoRemove off: the client removes
    json_object* parent = nullptr;
    std::string_view key;
    if (json_value* v = locate(root, "HostConfig.AutoRemove", false, &parent, &key)) *v = json_value(false);
  }
  if (version < api_version{1, 40}) old_default("HostConfig.IpcMode", json_value("shareable"));
  if (version < api_version{1, 41} && facts.cgroup_v1) old_default("HostConfig.CgroupnsMode", json_value("host"));
  std::vector<std::string> changes;
  reviewer r{p, changes};
  const auto& rules = p.rules.container_create;
  bool ok = true;
  std::string workspace;
  if (p.rules.workspace) ok = r.take_workspace(root, workspace);
  for (const auto& [path, rule] : rules.rules) ok = ok && r.apply(root, path, rule);
  const bool mounts = p.rules.binds || p.rules.volumes.mount_owned;
  const bool networks = p.rules.networks.join_owned;
  if (mounts) ok = ok && r.check_mounts(root);
  if (networks) ok = ok && r.check_networks(root);
  std::vector<std::string_view> handled;
  if (mounts) handled.insert(handled.end(), {"HostConfig.Binds", "HostConfig.Mounts", "Volumes"});
  if (networks) handled.insert(handled.end(), {"HostConfig.NetworkMode", "NetworkingConfig.EndpointsConfig"});
  ok = ok && r.default_deny(root, create_widening, rules, handled);
  ok = ok && r.check_image(root) && r.stamp_owner(root);
  if (!ok) return *r.refusal;
  if (!workspace.empty()) r.bind_workspace(root, workspace);
  canonical_order(root, schema::container_create);
  auto warnings = create_warnings(p, root, changes);
  rewrite out = reviewed(to_json(json_value(std::move(root))), std::move(changes), std::move(decoded.dropped));
  out.bind_sources = std::move(r.bind_sources);
  out.workspace_source = workspace;
  out.networks = std::move(r.network_names);
  out.volumes = std::move(r.volume_names);
  out.warnings = std::move(warnings);
  return out;
}

decision review_container_exec(const profile& p, std::string_view body) {
  auto decoded = decode_body(body, schema::exec_config);
  if (!decoded.value) return deny{400, "body", "dockgate: invalid ContainerExec body: " + decoded.error};
  json_object root = std::move(*decoded.value->as_object());
  std::vector<std::string> changes;
  reviewer r{p, changes};
  const auto& rules = p.rules.container_exec;
  bool ok = true;
  for (const auto& [path, rule] : rules.rules) ok = ok && r.apply(root, path, rule);
  ok = ok && r.default_deny(root, exec_widening, rules, {});  // nothing handled elsewhere
  if (!ok) return *r.refusal;
  canonical_order(root, schema::exec_config);
  return reviewed(to_json(json_value(std::move(root))), std::move(changes), std::move(decoded.dropped));
}

decision review_image_reference(const profile& p, std::string_view reference) {
  std::vector<std::string> changes;
  reviewer r{p, changes};
  if (!r.check_image_reference(reference, false)) return *r.refusal;
  return allow{};
}

}  // namespace dockgate::policy

namespace dockgate::policy {

decision review_container_update(const profile& p, std::string_view body) {
  auto decoded = decode_body(body, schema::container_update);
  if (!decoded.value) return deny{400, "body", "dockgate: invalid ContainerUpdate body: " + decoded.error};
  // The update's fields are HostConfig's (Resources, RestartPolicy): the create rules for
  // HostConfig.<field> apply to them, clamps included.
  json_object root{{"HostConfig", std::move(*decoded.value)}};
  std::vector<std::string> changes;
  reviewer r{p, changes};
  field_rules host_rules;
  for (const auto& [path, rule] : p.rules.container_create.rules)
    if (path.starts_with("HostConfig.") && resolve_key(std::string_view(path).substr(11), schema::container_update))
      host_rules.rules.emplace_back(path, rule);
  bool ok = true;
  for (const auto& [path, rule] : host_rules.rules) {
    // Force and clamp rules of fields the client did not send stay out of an update: an
    // update changes only what it names (the container was created within the rules).
    if ((rule.type == field_rule::kind::force || rule.type == field_rule::kind::clamp) && !locate(root, path))
      continue;
    ok = ok && r.apply(root, path, rule);
  }
  std::vector<widening_field> update_widening;
  for (const auto& w : create_widening)
    if (w.path.starts_with("HostConfig.") && resolve_key(w.path.substr(11), schema::container_update))
      update_widening.push_back(w);
  ok = ok && r.default_deny(root, update_widening, host_rules, {});
  if (!ok) return *r.refusal;
  canonical_order(*find(root, "HostConfig")->as_object(), schema::container_update);
  return reviewed(to_json(*find(root, "HostConfig")), std::move(changes), std::move(decoded.dropped));
}

decision review_network_create(const profile& p, std::string_view body) {
  auto decoded = decode_body(body, schema::network_create);
  if (!decoded.value) return deny{400, "body", "dockgate: invalid NetworkCreate body: " + decoded.error};
  json_object root = std::move(*decoded.value->as_object());
  std::vector<std::string> changes;
  reviewer r{p, changes};
  auto text = [&](const json_value* v) { return v && v->as_string() ? *v->as_string() : std::string(); };
  // A bridge network on addresses the daemon picks: no host options (bridge name, host
  // binding address, MTU, masquerading), no chosen subnets (they route on the host), no
  // IPv6 or swarm-only kinds.
  const std::string name = text(find(root, "Name"));
  const std::string driver = text(find(root, "Driver"));
  const std::string scope = text(find(root, "Scope"));
  bool ok = true;
  if (!valid_object_name(name)) ok = r.refuse("Name", "networks", "\"" + name + "\" is not allowed (letters, digits, _ . -)");
  else if (!(driver.empty() || driver == "bridge")) ok = r.refuse("Driver", "networks", "\"" + driver + "\" is not allowed (bridge only)");
  else if (!(scope.empty() || scope == "local")) ok = r.refuse("Scope", "networks", "\"" + scope + "\" is not allowed");
  else if (!is_empty_value(find(root, "Options"))) ok = r.refuse("Options", "networks", "are not allowed (host options)");
  else if (!is_empty_value(find(root, "EnableIPv6"))) ok = r.refuse("EnableIPv6", "networks", "is not allowed");
  else if (!is_empty_value(find(root, "Ingress"))) ok = r.refuse("Ingress", "networks", "is not allowed");
  else if (!is_empty_value(find(root, "ConfigOnly"))) ok = r.refuse("ConfigOnly", "networks", "is not allowed");
  else if (const auto* from = find(root, "ConfigFrom"); from && !is_empty_value(find(*from->as_object(), "Network")))
    ok = r.refuse("ConfigFrom", "networks", "is not allowed");
  else if (const auto* ipam = find(root, "IPAM"); ipam && ipam->as_object()) {
    const std::string ipam_driver = text(find(*ipam->as_object(), "Driver"));
    if (!(ipam_driver.empty() || ipam_driver == "default")) ok = r.refuse("IPAM.Driver", "networks", "\"" + ipam_driver + "\" is not allowed");
    else if (!is_empty_value(find(*ipam->as_object(), "Config"))) ok = r.refuse("IPAM.Config", "networks", "is not allowed (the daemon picks the subnet)");
    else if (!is_empty_value(find(*ipam->as_object(), "Options"))) ok = r.refuse("IPAM.Options", "networks", "are not allowed");
  }
  ok = ok && r.stamp_owner(root, false);
  if (!ok) return *r.refusal;
  canonical_order(root, schema::network_create);
  return reviewed(to_json(json_value(std::move(root))), std::move(changes), std::move(decoded.dropped));
}

decision review_volume_create(const profile& p, std::string_view body) {
  auto decoded = decode_body(body, schema::volume_create);
  if (!decoded.value) return deny{400, "body", "dockgate: invalid VolumeCreate body: " + decoded.error};
  json_object root = std::move(*decoded.value->as_object());
  std::vector<std::string> changes;
  reviewer r{p, changes};
  // The local driver without options: its options mount host devices and paths
  // (type=none,o=bind,device=/etc) and remote filesystems.
  const json_value* name = find(root, "Name");
  const json_value* driver = find(root, "Driver");
  const std::string n = name && name->as_string() ? *name->as_string() : std::string();
  const std::string d = driver && driver->as_string() ? *driver->as_string() : std::string();
  bool ok = true;
  if (!n.empty() && !valid_object_name(n)) ok = r.refuse("Name", "volumes", "\"" + n + "\" is not allowed (letters, digits, _ . -)");
  else if (!(d.empty() || d == "local")) ok = r.refuse("Driver", "volumes", "\"" + d + "\" is not allowed (local only)");
  else if (!is_empty_value(find(root, "DriverOpts"))) ok = r.refuse("DriverOpts", "volumes", "are not allowed (they mount host paths and devices)");
  else if (find(root, "ClusterVolumeSpec")) ok = r.refuse("ClusterVolumeSpec", "volumes", "is not allowed");
  ok = ok && r.stamp_owner(root, false);
  if (!ok) return *r.refusal;
  canonical_order(root, schema::volume_create);
  rewrite out = reviewed(to_json(json_value(std::move(root))), std::move(changes), std::move(decoded.dropped));
  if (!n.empty()) out.volumes.push_back(n);
  return out;
}

// NetworkConnect and NetworkDisconnect: the container (which the proxy resolves to an
// owned one) and, for a connect, the endpoint under the networks rule.
decision review_network_attachment(const profile& p, operation op, std::string_view body) {
  const bool connect = op == operation::NetworkConnect;
  const object_spec& spec = connect ? schema::network_connect : schema::network_disconnect;
  auto decoded = decode_body(body, spec);
  if (!decoded.value) return deny{400, "body", "dockgate: invalid " + std::string(spec.name) + " body: " + decoded.error};
  json_object root = std::move(*decoded.value->as_object());
  std::vector<std::string> changes;
  reviewer r{p, changes};
  const json_value* container = find(root, "Container");
  const std::string c = container && container->as_string() ? *container->as_string() : std::string();
  if (c.empty()) return deny{400, "body", "dockgate: " + std::string(spec.name) + " names no Container"};
  if (const auto* endpoint = find(root, "EndpointConfig"); endpoint && endpoint->as_object())
    if (!r.check_endpoint("EndpointConfig", *endpoint->as_object())) return *r.refusal;
  canonical_order(root, spec);
  rewrite out = reviewed(to_json(json_value(std::move(root))), std::move(changes), std::move(decoded.dropped));
  out.container = c;
  return out;
}

std::string with_container(std::string_view reviewed, operation op, std::string_view id) {
  const object_spec& spec = op == operation::NetworkConnect ? schema::network_connect : schema::network_disconnect;
  auto decoded = decode_body(reviewed, spec);
  json_object root = std::move(*decoded.value->as_object());
  set(root, "Container", json_value(std::string(id)));
  canonical_order(root, spec);
  return to_json(json_value(std::move(root)));
}

bool valid_object_name(std::string_view name) {
  if (name.empty() || name.size() > 255 || !std::isalnum(static_cast<unsigned char>(name.front()))) return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') return false;
  return true;
}

std::size_t json_body_limit(operation op) {
  switch (op) {
    case operation::ContainerCreate: return 1024 * 1024;  // env, labels and commands can be long
    case operation::ContainerExec: return 256 * 1024;
    case operation::ContainerUpdate: return 64 * 1024;
    case operation::ExecStart: return 4 * 1024;  // {"Detach":..,"Tty":..,"ConsoleSize":..}
    default: return 1024 * 1024;
  }
}

decision review_body(const profile& p, operation op, std::string_view body, daemon_facts facts) {
  switch (op) {
    case operation::ContainerCreate: return review_container_create(p, body, facts);
    case operation::ContainerExec: return review_container_exec(p, body);
    case operation::ContainerUpdate: return review_container_update(p, body);
    case operation::NetworkCreate: return review_network_create(p, body);
    case operation::VolumeCreate: return review_volume_create(p, body);
    case operation::NetworkConnect:
    case operation::NetworkDisconnect: return review_network_attachment(p, op, body);
    default: return allow{};
  }
}

}  // namespace dockgate::policy

// Applies a profile's rules to one canonical body. See body_reviewer.hpp.
#include "body_reviewer.hpp"

#include <algorithm>
#include <cctype>

#include "dockgate/common/workspace_id.hpp"
#include "dockgate/policy/image_ref.hpp"
#include "widening_fields.hpp"

namespace dockgate::policy {

namespace {

// dockerd accepts `CAP_SYS_ADMIN`, `sys_admin`, `Sys_Admin`: compare in one spelling.
std::string capability_name(std::string_view s) {
  std::string u(s);
  for (auto& c : u) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (u.starts_with("CAP_")) u.erase(0, 4);
  return u;
}

// "the profile allows a, b" (or "none"): told with an allow rule's refusal.
std::string allowed_values(const std::vector<std::string>& allowed) {
  if (allowed.empty()) return "the profile allows none";
  std::string out = "the profile allows ";
  for (std::size_t i = 0; i < allowed.size(); ++i) {
    if (i) out += ", ";
    out += allowed[i].empty() ? std::string("\"\"") : allowed[i];
  }
  return out;
}

}  // namespace

bool body_reviewer::refuse(std::string_view path, std::string_view rule, std::string what,
                           std::string_view hint) {
  if (!refusal) {
    std::string reason = "dockgate: ";
    reason += path;
    reason += ' ';
    reason += what;
    if (!hint.empty()) {
      reason += ": ";
      reason += hint;
    }
    reason += " (profile ";
    reason += p.name;
    reason += ", rule ";
    reason += rule;
    reason += ')';
    refusal = deny{403, std::string(path) + ":" + std::string(rule), std::move(reason)};
  }
  return false;
}

bool body_reviewer::apply(json_object& root, std::string_view path, const field_rule& rule) {
  json_object* parent = nullptr;
  std::string_view key;
  const bool create = rule.type == field_rule::kind::force ||
                      rule.type == field_rule::kind::clamp || rule.default_value.has_value();
  json_value* current = locate(root, path, create, &parent, &key);
  switch (rule.type) {
    case field_rule::kind::force:
      if (!current || !(*current == rule.value)) {
        changes.record(path, "forced", current);
        set(*parent, key, rule.value);
      }
      return true;
    case field_rule::kind::deny:
      if (!is_empty_value(current)) return refuse(path, "deny", "is not allowed", rule.hint);
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
        changes.record(path, "clamped", current);
        set(*parent, key, json_value(rule.max));
      }
      return true;
    }
    case field_rule::kind::allow: {
      if (rule.default_value && (!current || current->is_null() ||
                                 (current->as_string() && current->as_string()->empty()))) {
        changes.record(path, "defaulted", current);
        set(*parent, key, json_value(*rule.default_value));
        return true;
      }
      if (!current || current->is_null()) return true;
      auto allowed = [&](const std::string& value) {
        const bool caps = path.ends_with("CapAdd") || path.ends_with("CapDrop");
        for (const auto& a : rule.allowed)
          if (caps ? capability_name(a) == capability_name(value) : a == value) return true;
        return false;
      };
      // Without a hint of the profile's own, a refusal names the values the profile allows.
      const std::string hint = rule.hint.empty() ? allowed_values(rule.allowed) : rule.hint;
      if (auto* s = current->as_string()) {
        if (!s->empty() && !allowed(*s))
          return refuse(path, "allow", "value \"" + *s + "\" is not allowed", hint);
        return true;
      }
      if (auto* a = current->as_array()) {
        for (const auto& item : *a)
          if (auto* s = item.as_string(); !s || !allowed(*s))
            return refuse(path, "allow",
                          "value \"" + (s ? *s : to_json(item)) + "\" is not allowed", hint);
        return true;
      }
      return refuse(path, "allow", "is not a string or list of strings", hint);
    }
  }
  return true;
}

// Tmpfs under `max`: the client may mount a tmpfs only at the profile's paths, and each
// gets the profile's options (size, mode, nosuid...), whatever the client asked.
bool body_reviewer::clamp_tmpfs(json_value* current, const field_rule& rule) {
  if (!current || !current->as_object()) return true;
  const json_value before = *current;
  const auto& allowed = *rule.value.as_object();
  for (auto& m : *current->as_object()) {
    const json_value* options = find(allowed, m.key);
    if (!options)
      return refuse("HostConfig.Tmpfs", "max", "path \"" + m.key + "\" is not allowed", rule.hint);
    if (!(m.value == *options)) {
      changes.record("HostConfig.Tmpfs", "clamped", &before);
      m.value = *options;
    }
  }
  return true;
}

bool body_reviewer::clamp_ulimits(json_value* current, const field_rule& rule) {
  const auto* caps = rule.value.as_object();
  if (!current || !current->as_array()) return true;
  const json_value before = *current;
  for (auto& item : *current->as_array()) {
    auto& u = *item.as_object();
    const auto* name = find(u, "Name");
    const std::string n = name ? *name->as_string() : std::string();
    const json_value* cap = caps ? find(*caps, n) : nullptr;
    if (!cap) return refuse("HostConfig.Ulimits", "max", "\"" + n + "\" is not allowed", rule.hint);
    for (const char* limit : {"Soft", "Hard"}) {
      const auto* v = find(u, limit);
      const auto value = v ? v->as_int() : std::nullopt;
      if (!value || *value < 0 || *value > *cap->as_int()) {
        changes.record("HostConfig.Ulimits", "clamped", &before);
        set(u, limit, *cap);
      }
    }
  }
  return true;
}

bool body_reviewer::default_deny(json_object& root, std::span<const widening_field> fields,
                                 const field_rules& rules,
                                 std::span<const std::string_view> handled_elsewhere) {
  for (const auto& w : fields) {
    if (rules.find(w.path)) continue;
    if (std::find(handled_elsewhere.begin(), handled_elsewhere.end(), w.path) !=
        handled_elsewhere.end())
      continue;
    const json_value* value = locate(root, w.path);
    if (!is_safe(root, value, w.safe))
      return refuse(w.path, "default", "is not allowed: the profile has no rule that permits it");
  }
  return true;
}

// A bind of a binds.drop source is left out, not refused: the client (the GitHub Actions
// runner, which adds the engine socket to every job container and has no setting against
// it) gets its container without it and a warning saying so.
void body_reviewer::drop_binds(json_object& root) {
  const auto& drop = p.rules.binds->drop;
  auto dropped_source = [&](std::string_view source) {
    return std::find(drop.begin(), drop.end(), source) != drop.end();
  };
  json_object* parent = nullptr;
  std::string_view key;
  if (auto* binds = locate(root, "HostConfig.Binds", false, &parent, &key);
      binds && binds->as_array()) {
    const json_value before = *binds;
    auto& list = *binds->as_array();
    std::erase_if(list, [&](const json_value& b) {
      const auto* spec = b.as_string();
      if (!spec || !dropped_source(std::string_view(*spec).substr(0, spec->find(':'))))
        return false;
      dropped.push_back(*spec);
      return true;
    });
    if (list.size() != before.as_array()->size())
      changes.record("HostConfig.Binds", "dropped", &before);
  }
  if (auto* mounts = locate(root, "HostConfig.Mounts", false, &parent, &key);
      mounts && mounts->as_array()) {
    const json_value before = *mounts;
    auto& list = *mounts->as_array();
    std::erase_if(list, [&](const json_value& m) {
      const auto* o = m.as_object();
      const auto* type = o ? find(*o, "Type") : nullptr;
      const auto* source = o ? find(*o, "Source") : nullptr;
      if (!type || !source || !type->as_string() || *type->as_string() != "bind" ||
          !source->as_string() || !dropped_source(*source->as_string()))
        return false;
      dropped.push_back(*source->as_string());
      return true;
    });
    if (list.size() != before.as_array()->size())
      changes.record("HostConfig.Mounts", "dropped", &before);
  }
}

// Binds ("src:dst[:opts]") and Mounts. A host path (absolute source) only from the
// profile's bind roots, only to its targets, without propagation back to the host; a
// named volume (any other source) only with the volumes rule, collected for the proxy
// to check that the profile owns it; anonymous volumes with the same rule.
bool body_reviewer::check_mounts(json_object& root) {
  const bind_rule* rule = p.rules.binds ? &*p.rules.binds : nullptr;
  const bool volumes = p.rules.volumes.mount_owned;
  auto source_ok = [&](std::string_view src) {
    if (!rule || !clean_absolute_path(src) || src == "/") return false;
    for (const auto& r : rule->source_roots)
      if (src.size() > r.size() && src.starts_with(r) && src[r.size()] == '/') return true;
    return std::find(rule->sources.begin(), rule->sources.end(), src) != rule->sources.end();
  };
  auto target_ok = [&](std::string_view dst) {
    return rule &&
           std::find(rule->targets.begin(), rule->targets.end(), dst) != rule->targets.end();
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
          (host_path ? !source_ok(parts[0]) || !target_ok(parts[1])
                     : !volume_ok(parts[0], parts[1])))
        return refuse("HostConfig.Binds", host_path || !volumes ? "binds" : "volumes",
                      "entry \"" + spec + "\" is not allowed");
      if (host_path)
        bind_sources.emplace_back(parts[0]);
      else
        add_unique(volume_names, parts[0]);
      if (parts.size() == 3) {
        std::string_view opts = parts[2];
        while (!opts.empty()) {
          auto comma = opts.find(',');
          std::string_view o = opts.substr(0, comma);
          const bool ok = o == "ro" || o == "rw" ||
                          (host_path ? o == "private" || o == "rprivate" : o == "nocopy");
          if (!ok)
            return refuse("HostConfig.Binds", host_path ? "binds" : "volumes",
                          "option \"" + std::string(o) + "\" is not allowed");
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
          return refuse("HostConfig.Mounts", "volumes",
                        "volume name \"" + str("Source") + "\" is not allowed");
        if (!clean_absolute_path(str("Target")) || str("Target") == "/")
          return refuse("HostConfig.Mounts", "volumes",
                        "target \"" + str("Target") + "\" is not allowed");
        if (find(o, "BindOptions") || find(o, "TmpfsOptions") || find(o, "ImageOptions"))
          return refuse("HostConfig.Mounts", "volumes",
                        "options of another mount type are not allowed");
        if (const auto* vo = find(o, "VolumeOptions"))
          for (const auto& option : *vo->as_object())
            if (option.key != "NoCopy" && !is_empty_value(&option.value))
              return refuse("HostConfig.Mounts", "volumes",
                            "VolumeOptions." + option.key + " is not allowed");
        if (!str("Source").empty()) add_unique(volume_names, str("Source"));
        continue;
      }
      if (str("Type") != "bind" || !rule)
        return refuse("HostConfig.Mounts", "binds",
                      "of type \"" + str("Type") + "\" are not allowed");
      if (!source_ok(str("Source")) || !target_ok(str("Target")))
        return refuse("HostConfig.Mounts", "binds",
                      "from \"" + str("Source") + "\" to \"" + str("Target") + "\" is not allowed");
      bind_sources.push_back(str("Source"));
      if (find(o, "VolumeOptions") || find(o, "TmpfsOptions") || find(o, "ImageOptions"))
        return refuse("HostConfig.Mounts", "binds",
                      "options of another mount type are not allowed");
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
        return refuse("Volumes", volumes ? "volumes" : "default",
                      "\"" + v.key + "\" is not allowed");
  }
  return true;
}

// One endpoint's settings (ContainerCreate's EndpointsConfig, NetworkConnect's
// EndpointConfig) under the networks rule: aliases if the rule allows them, a static
// address and MAC; links (another container's environment) and driver options never.
bool body_reviewer::check_endpoint(std::string_view where, const json_object& settings) {
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
bool body_reviewer::shares_network(const json_object& root) const {
  const json_value* mode = locate(root, "HostConfig.NetworkMode");
  return mode && mode->as_string() && mode->as_string()->starts_with("container:");
}

bool body_reviewer::check_container_network(const json_object& root) {
  const json_value* mode = locate(root, "HostConfig.NetworkMode");
  std::string_view ref = *mode->as_string();
  ref.remove_prefix(10);
  if (!valid_object_name(ref))
    return refuse("HostConfig.NetworkMode", "networks",
                  "value \"" + *mode->as_string() + "\" names no container");
  network_container = std::string(ref);
  return true;
}

bool body_reviewer::check_networks(json_object& root, bool mode_checked) {
  const json_value* mode_value = locate(root, "HostConfig.NetworkMode");
  std::string mode =
      mode_value && mode_value->as_string() ? *mode_value->as_string() : std::string();
  if (mode_checked) mode.clear();
  auto join = [&](std::string_view where, const std::string& name) {
    // networks.internal: the daemon's bridge is no internal network; a container joins
    // an owned one (all internal) or none.
    if (p.rules.networks.internal && (name.empty() || name == "default" || name == "bridge"))
      return refuse(where, "networks",
                    "value \"" + (name.empty() ? std::string("default") : name) +
                        "\" is not allowed (the profile's networks are internal: an owned "
                        "network or none)");
    if (name.empty() || name == "default" || name == "bridge" || name == "none") return true;
    if (!valid_object_name(name) || name == "host")
      return refuse(where, "networks", "value \"" + name + "\" is not allowed");
    add_unique(network_names, name);
    return true;
  };
  if (!join("HostConfig.NetworkMode", mode)) return false;
  if (const auto* endpoints = locate(root, "NetworkingConfig.EndpointsConfig");
      endpoints && endpoints->as_object()) {
    for (const auto& e : *endpoints->as_object()) {
      if (!join("NetworkingConfig.EndpointsConfig", e.key)) return false;
      if (!check_endpoint("NetworkingConfig.EndpointsConfig." + e.key, *e.value.as_object()))
        return false;
    }
  }
  return true;
}

void body_reviewer::add_unique(std::vector<std::string>& list, std::string_view name) {
  if (std::find(list.begin(), list.end(), name) == list.end()) list.emplace_back(name);
}

bool body_reviewer::check_image(const json_object& root) {
  const auto* image = find(root, "Image");
  const std::string text = image ? *image->as_string() : std::string();
  return check_image_reference(text, true);
}

bool body_reviewer::check_image_reference(std::string_view text, bool default_tag) {
  std::string why;
  auto ref = parse_image_reference(text, default_tag, &why);
  if (!ref)
    return refuse("Image", "images",
                  "\"" + std::string(text) + "\" is not a valid image reference: " + why);
  if (ref->tag.empty() && ref->digest.empty())
    return refuse("Image", "images", "\"" + std::string(text) + "\" names no tag or digest");
  if (p.rules.images.require_digest && ref->digest.empty())
    return refuse("Image", "images", "\"" + std::string(text) + "\" is not pinned by digest");
  const std::string normalized = ref->normalized();
  for (const auto& pattern : p.rules.images.patterns)
    if (glob_match(pattern, normalized)) return true;
  return refuse("Image", "images", "\"" + normalized + "\" is not in the image allowlist");
}

json_value body_reviewer::workspace_mount(const std::string& source) const {
  return json_object{
      {"Type", "bind"},
      {"Source", source},
      {"Target", workspace_target.empty() ? p.rules.workspace->target : workspace_target},
      {"ReadOnly", workspace_read_only},
      {"BindOptions", json_object{{"Propagation", "rprivate"}}}};
}

// The workspace a client names with the label dockgate.workspace=<id>: the source the
// profile computes (<root>/<id>), or "" when none is named. A re-review of the proxy's
// own output finds the bind it wrote and takes it out (it is written again below), so
// the rewrite is idempotent; any other client bind meets the default deny.
bool body_reviewer::take_workspace(json_object& root, std::string& source) {
  const workspace_rule& rule = *p.rules.workspace;
  const json_value* labels = find(root, "Labels");
  const json_value* id =
      labels && labels->as_object() ? find(*labels->as_object(), workspace_label) : nullptr;
  if (!id) {
    if (rule.required)
      return refuse("Labels", "workspace",
                    "must name the container's workspace with the label \"" +
                        std::string(workspace_label) + "\"");
    return true;
  }
  if (!id->as_string() || !common::valid_workspace_id(*id->as_string()))
    return refuse("Labels", "workspace",
                  "label \"" + std::string(workspace_label) +
                      "\" must be 1-128 of A-Z a-z 0-9 _ - . starting with a letter or digit");
  source = rule.root + "/" + *id->as_string();
  json_object* parent = nullptr;
  std::string_view key;
  if (json_value* mounts = locate(root, "HostConfig.Mounts", false, &parent, &key);
      mounts && mounts->as_array()) {
    auto& list = *mounts->as_array();
    std::erase_if(list, [&](const json_value& m) {
      const json_object* o = m.as_object();
      auto text = [&](std::string_view k) {
        const json_value* v = o ? find(*o, k) : nullptr;
        return v && v->as_string() ? *v->as_string() : std::string();
      };
      const bool ours =
          text("Type") == "bind" && text("Source") == source && text("Target") == rule.target;
      if (ours && m == workspace_mount(source)) workspace_unchanged = true;
      return ours;
    });
  }
  return true;
}

// Writes the workspace bind: the only mount at the target, a bind that is never created
// by the daemon if missing (a Mounts bind, not a Binds entry) and never propagates back.
json_value* body_reviewer::mounts_list(json_object& root) {
  json_object* parent = nullptr;
  std::string_view key;
  json_value* mounts = locate(root, "HostConfig.Mounts", true, &parent, &key);
  if (!mounts || !mounts->as_array()) {
    set(*parent, "Mounts", json_array{});
    mounts = find(*parent, "Mounts");
  }
  return mounts;
}

void body_reviewer::bind_workspace(json_object& root, const std::string& source) {
  const workspace_rule& rule = *p.rules.workspace;
  json_value* mounts = mounts_list(root);
  if (!workspace_unchanged) changes.record("HostConfig.Mounts", "workspace bound", mounts);
  mounts->as_array()->push_back(workspace_mount(source));
  const std::string& target = workspace_target.empty() ? rule.target : workspace_target;
  json_object* parent = nullptr;
  std::string_view key;
  json_value* tmpfs = locate(root, "HostConfig.Tmpfs", false, &parent, &key);
  if (tmpfs && tmpfs->as_object() && find(*tmpfs->as_object(), target)) {
    changes.record("HostConfig.Tmpfs", "workspace target removed", tmpfs);
    dockgate::policy::erase(*tmpfs->as_object(),
                            target);  // a tmpfs there would hide the workspace
  }
}

// Clients may not set labels under the reserved prefix; the owner label is stamped.
bool body_reviewer::stamp_owner(json_object& root, bool container) {
  json_value* labels = find(root, "Labels");
  if (!labels) {
    set(root, "Labels", json_object{});
    labels = find(root, "Labels");
  }
  for (const auto& m : *labels->as_object()) {
    if (!m.key.starts_with(reserved_label_prefix)) continue;
    // Re-reviewing the proxy's own output must give the same output (idempotence).
    if (m.key == owner_label && m.value == json_value(p.rules.owner)) continue;
    if (m.key == workspace_label && p.rules.workspace && container)
      continue;  // checked by take_workspace
    return refuse("Labels", "owner",
                  "label \"" + m.key + "\" uses the reserved prefix \"dockgate.\"");
  }
  json_object& l = *labels->as_object();
  if (!find(l, owner_label)) {
    changes.record("Labels", "owner stamped", labels);
    l.push_back({std::string(owner_label), json_value(p.rules.owner)});
    std::sort(l.begin(), l.end(), [](const auto& a, const auto& b) { return a.key < b.key; });
  }
  return true;
}

}  // namespace dockgate::policy

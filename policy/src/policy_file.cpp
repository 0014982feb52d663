#include "dockgate/policy/policy_file.hpp"

#include <arpa/inet.h>
#include <simdjson.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <tuple>

#include "dockgate/policy/go_json.hpp"
#include "dockgate/policy/upload_archive.hpp"

namespace dockgate::policy {

namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

class loader {
 public:
  std::vector<std::string> errors;

  void error(std::string where, std::string_view what) {
    errors.push_back(std::move(where) + ": " + std::string(what));
  }

  // Visits each key of `obj` once; a repeated key is an error (which one would win is a
  // question a security policy must not leave open).
  template <class F>
  void each_key(object obj, const std::string& where, F&& on_key) {
    std::set<std::string_view> seen;
    for (auto field : obj) {
      if (!seen.insert(field.key).second) {
        error(where, "duplicate key \"" + std::string(field.key) + "\"");
        continue;
      }
      on_key(field.key, field.value);
    }
  }

  std::optional<std::string> string_of(element e, const std::string& where) {
    std::string_view s;
    if (e.get_string().get(s) != simdjson::SUCCESS) {
      error(where, "must be a string");
      return std::nullopt;
    }
    return std::string(s);
  }

  std::optional<std::vector<std::string>> strings_of(element e, const std::string& where) {
    simdjson::dom::array arr;
    if (e.get_array().get(arr) != simdjson::SUCCESS) {
      error(where, "must be an array of strings");
      return std::nullopt;
    }
    std::vector<std::string> out;
    for (element item : arr) {
      std::string_view s;
      if (item.get_string().get(s) != simdjson::SUCCESS) {
        error(where, "must be an array of strings");
        return std::nullopt;
      }
      out.emplace_back(s);
    }
    return out;
  }

  // A forced value must be one the daemon would accept for that field: it is decoded with
  // the same schema as a request body, and stored in its canonical form.
  std::optional<json_value> forced_value(std::string_view operation, std::string_view path,
                                         element value, const std::string& where) {
    const std::string text = simdjson::minify(value);
    std::string wrapped;
    std::string_view leaf = path;
    if (operation == "ContainerCreate" && path.starts_with("HostConfig.")) {
      leaf = path.substr(11);
      wrapped = "{\"HostConfig\":{\"" + std::string(leaf) + "\":" + text + "}}";
    } else if (operation == "ContainerCreate" && path == "NetworkingConfig.EndpointsConfig") {
      wrapped = "{\"NetworkingConfig\":{\"EndpointsConfig\":" + text + "}}";
    } else {
      wrapped = "{\"" + std::string(path) + "\":" + text + "}";
    }
    const auto& spec =
        operation == "ContainerCreate" ? schema::container_create : schema::exec_config;
    auto decoded = decode_body(wrapped, spec, unknown_keys::refuse);
    if (!decoded.value) {
      error(where, "not a valid value for " + std::string(path) + ": " + decoded.error);
      return std::nullopt;
    }
    const json_value* v = &*decoded.value;
    std::string_view rest = path;
    while (v) {
      auto dot = rest.find('.');
      v = find(*v->as_object(), rest.substr(0, dot));
      if (dot == std::string_view::npos) break;
      rest.remove_prefix(dot + 1);
    }
    if (!v) {
      error(where, "null cannot be forced; use deny");
      return std::nullopt;
    }
    return *v;
  }

  // A rule's hint goes into the refusal's message (Docker's error body, the audit line):
  // one line of text, no control characters, bounded.
  bool load_hint(element v, const std::string& where, std::string& out) {
    std::string_view hint;
    const bool text = v.get_string().get(hint) == simdjson::SUCCESS && !hint.empty() &&
                      hint.size() <= 500 && std::none_of(hint.begin(), hint.end(), [](char c) {
                        return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
                      });
    if (!text) {
      error(where, "must be one line of text (1-500 bytes, no control characters)");
      return false;
    }
    out = std::string(hint);
    return true;
  }

  void load_field_rules(std::string_view operation, element e, const std::string& where,
                        field_rules& out) {
    object obj;
    if (e.get_object().get(obj) != simdjson::SUCCESS) {
      error(where, "must be an object of field path -> rule");
      return;
    }
    each_key(obj, where, [&](std::string_view path, element rule_value) {
      const std::string rule_where = where + "." + std::string(path);
      if (!is_rule_path(operation, path)) {
        error(rule_where, "no such field in the " + std::string(operation) +
                              " body (use names like User, HostConfig.Memory)");
        return;
      }
      object rule_obj;
      // "comment" (any value) is for people and for `learn`'s notes: read past, ignored.
      // "hint" (a string) is told to the client with a refusal of this rule.
      auto has = [&](const char* key) { return rule_obj.at_key(key).error() == simdjson::SUCCESS; };
      if (rule_value.get_object().get(rule_obj) != simdjson::SUCCESS ||
          rule_obj.size() != 1 + (has("comment") ? 1u : 0u) + (has("hint") ? 1u : 0u) +
                                 (has("default") ? 1u : 0u)) {
        error(rule_where,
              "a rule is an object with exactly one of force, max, allow, deny (and an allow "
              "rule's default)");
        return;
      }
      field_rule rule;
      bool ok = true;
      for (auto [kind, v] : rule_obj) {
        if (kind == "comment") continue;
        if (kind == "hint") {
          ok = load_hint(v, rule_where + ".hint", rule.hint) && ok;
          continue;
        }
        if (kind == "force") {
          rule.type = field_rule::kind::force;
          auto value = forced_value(operation, path, v, rule_where + ".force");
          ok = value.has_value();
          if (ok) rule.value = std::move(*value);
        } else if (kind == "max") {
          rule.type = field_rule::kind::clamp;
          std::int64_t n = 0;
          simdjson::dom::object per_name;
          if (path == "HostConfig.Tmpfs") {
            // path -> the options every tmpfs at that path gets
            json_object mounts;
            if (v.get_object().get(per_name) != simdjson::SUCCESS) {
              error(rule_where + ".max", "Tmpfs caps are an object path -> options");
              ok = false;
            } else {
              for (auto [mount, options] : per_name) {
                std::string_view o;
                if (options.get_string().get(o) != simdjson::SUCCESS || mount.empty() ||
                    mount.front() != '/') {
                  error(rule_where + ".max", "Tmpfs caps are absolute paths -> option strings");
                  ok = false;
                  continue;
                }
                mounts.push_back({std::string(mount), json_value(std::string(o))});
              }
            }
            rule.value = std::move(mounts);
            n = 1;
          } else if (path == "HostConfig.Ulimits" &&
                     v.get_object().get(per_name) == simdjson::SUCCESS) {
            json_object caps;
            for (auto [name, cap] : per_name) {
              if (cap.get_int64().get(n) != simdjson::SUCCESS || n < 0) {
                error(rule_where + ".max", "ulimit caps must be non-negative integers");
                ok = false;
              }
              caps.push_back({std::string(name), json_value(n)});
            }
            rule.value = std::move(caps);
          } else if (v.get_int64().get(n) != simdjson::SUCCESS || n <= 0) {
            error(rule_where + ".max", "must be a positive integer");
            ok = false;
          }
          rule.max = n;
        } else if (kind == "allow") {
          rule.type = field_rule::kind::allow;
          auto list = strings_of(v, rule_where + ".allow");
          ok = list.has_value();
          if (ok) rule.allowed = std::move(*list);
        } else if (kind == "default") {
          std::string_view d;
          if (v.get_string().get(d) != simdjson::SUCCESS || d.empty()) {
            error(rule_where + ".default", "must be a non-empty string");
            ok = false;
          } else {
            rule.default_value = std::string(d);
          }
        } else if (kind == "deny") {
          rule.type = field_rule::kind::deny;
          bool b = false;
          if (v.get_bool().get(b) != simdjson::SUCCESS || !b) {
            error(rule_where + ".deny", "must be true");
            ok = false;
          }
        } else {
          error(rule_where,
                "unknown rule \"" + std::string(kind) + "\" (force, max, allow, default, deny)");
          ok = false;
        }
      }
      // A default is what an allow rule gives an absent value: one of the values it allows.
      if (ok && rule.default_value &&
          (rule.type != field_rule::kind::allow ||
           std::find(rule.allowed.begin(), rule.allowed.end(), *rule.default_value) ==
               rule.allowed.end())) {
        error(rule_where + ".default", "belongs on an allow rule and must be one of its values");
        ok = false;
      }
      // A force never refuses: a hint on it would never be seen.
      if (ok && !rule.hint.empty() && rule.type == field_rule::kind::force) {
        error(rule_where + ".hint", "a force never refuses: a hint belongs on max, allow or deny");
        ok = false;
      }
      if (ok) out.rules.emplace_back(std::string(path), std::move(rule));
    });
  }

  // "seccomp": a seccomp profile in the engine's format (docker's --security-opt
  // seccomp=FILE), held as the SecurityOpt entry that carries it. Deny by default: its
  // defaultAction must refuse (errno, kill or trap), so a syscall the profile does not name
  // never runs; each entry names syscalls and an action.
  std::string load_seccomp(element value, const std::string& where) {
    object o;
    std::string_view action;
    if (value.get_object().get(o) != simdjson::SUCCESS ||
        o["defaultAction"].get_string().get(action) != simdjson::SUCCESS) {
      error(where, "must be a seccomp profile object with a defaultAction");
      return {};
    }
    static constexpr std::string_view refusing[] = {"SCMP_ACT_ERRNO", "SCMP_ACT_KILL",
                                                    "SCMP_ACT_KILL_PROCESS", "SCMP_ACT_KILL_THREAD",
                                                    "SCMP_ACT_TRAP"};
    if (std::find(std::begin(refusing), std::end(refusing), action) == std::end(refusing))
      error(where + ".defaultAction",
            "must refuse (SCMP_ACT_ERRNO, SCMP_ACT_KILL*, SCMP_ACT_TRAP): a seccomp profile "
            "the gate forces allows only the syscalls it names");
    simdjson::dom::array syscalls;
    if (o["syscalls"].get_array().get(syscalls) != simdjson::SUCCESS || syscalls.size() == 0) {
      error(where + ".syscalls", "must list the syscalls the profile allows");
      return {};
    }
    for (element entry : syscalls) {
      simdjson::dom::array names;
      std::string_view act;
      if (entry["names"].get_array().get(names) != simdjson::SUCCESS ||
          entry["action"].get_string().get(act) != simdjson::SUCCESS ||
          !act.starts_with("SCMP_ACT_")) {
        error(where + ".syscalls", "each entry has names (a list) and an action (SCMP_ACT_...)");
        return {};
      }
      for (element n : names)
        if (std::string_view name; n.get_string().get(name) != simdjson::SUCCESS || name.empty()) {
          error(where + ".syscalls", "syscall names are non-empty strings");
          return {};
        }
    }
    return "seccomp=" + without_comments(value);
  }

  // Minified JSON without the "comment" members (the profile's notes for people stay in
  // the policy file; the daemon stores and every inspect shows what the gate sends).
  static std::string without_comments(element e) {
    object o;
    simdjson::dom::array a;
    if (e.get_object().get(o) == simdjson::SUCCESS) {
      std::string out = "{";
      for (auto [k, v] : o) {
        if (k == "comment") continue;
        if (out.size() > 1) out += ',';
        out += to_json(json_value(std::string(k)));
        out += ':';
        out += without_comments(v);
      }
      return out + "}";
    }
    if (e.get_array().get(a) == simdjson::SUCCESS) {
      std::string out = "[";
      for (element v : a) {
        if (out.size() > 1) out += ',';
        out += without_comments(v);
      }
      return out + "]";
    }
    return simdjson::minify(e);
  }

  // "uploads": {"targets": [...], "max_bytes": N} (body_rules.hpp, upload_rule).
  void load_uploads(element value, const std::string& where, body_rules& rules) {
    object o;
    if (value.get_object().get(o) != simdjson::SUCCESS) {
      error(where, "must be an object {targets, max_bytes}");
      return;
    }
    upload_rule rule;
    bool have_targets = false;
    each_key(o, where, [&](std::string_view k, element v) {
      if (k == "targets") {
        auto list = strings_of(v, where + ".targets");
        if (!list) return;
        have_targets = true;
        for (const auto& t : *list) {
          if (!clean_absolute_path(t) || t == "/")
            error(where + ".targets", "\"" + t + "\" must be an absolute, clean path other than /");
          for (const auto& other : rule.targets)
            if (path_within(t, other) || path_within(other, t))
              error(where + ".targets", "\"" + t + "\" and \"" + other + "\" overlap");
          rule.targets.push_back(t);
        }
      } else if (k == "max_bytes") {
        std::uint64_t n = 0;
        if (v.get_uint64().get(n) != simdjson::SUCCESS || n == 0)
          error(where + ".max_bytes", "must be a positive integer");
        rule.max_bytes = n;
      } else {
        error(where, "unknown key \"" + std::string(k) + "\"");
      }
    });
    if (!have_targets || rule.targets.empty())
      error(where + ".targets", "is required (at least one path)");
    rules.uploads = std::move(rule);
  }
  // "ports": {"addresses": [...], "host_ports": "lo-hi"}. Addresses are written as the
  // gate compares them (the canonical text of one address, not one dockerd reads as every
  // interface: 0.0.0.0 and :: the gate rewrites to loopback anyway).
  port_rule load_ports(element value, const std::string& where) {
    port_rule rule;
    object o;
    if (value.get_object().get(o) != simdjson::SUCCESS) {
      error(where, "must be an object {addresses, host_ports}");
      return rule;
    }
    each_key(o, where, [&](std::string_view k, element v) {
      if (k == "addresses") {
        auto list = strings_of(v, where + ".addresses");
        if (!list) return;
        // dockerd reads HostIp with Go's net.ParseIP, which takes an IPv4-mapped address
        // as the IPv4 one: ::ffff:0.0.0.0 is 0.0.0.0 to it.
        for (const auto& a : *list)
          if (canonical_address(a) != a || a == "0.0.0.0" || a == "::" || a == "::ffff:0.0.0.0")
            error(where + ".addresses",
                  "\"" + a +
                      "\" must be one IPv4 or IPv6 address in its canonical form, not one "
                      "dockerd reads as every interface (0.0.0.0, ::, ::ffff:0.0.0.0)");
        rule.addresses = std::move(*list);
      } else if (k == "host_ports") {
        auto text = string_of(v, where + ".host_ports");
        if (!text) return;
        auto range = port_range(*text);
        if (!range || range->first == 0)
          error(where + ".host_ports",
                "\"" + *text + "\" must be a port or a range lo-hi of 1-65535");
        else
          std::tie(rule.first_port, rule.last_port) = *range;
      } else {
        error(where, "unknown key \"" + std::string(k) + "\"");
      }
    });
    return rule;
  }

  std::optional<profile> load_profile(std::string_view name, element e) {
    const std::string where = "profiles." + std::string(name);
    object obj;
    if (e.get_object().get(obj) != simdjson::SUCCESS) {
      error(where, "must be an object");
      return std::nullopt;
    }
    profile p;
    p.name = std::string(name);
    bool have_allow = false;
    each_key(obj, where, [&](std::string_view key, element value) {
      if (key == "description") {
        if (auto s = string_of(value, where + ".description")) p.description = *s;
      } else if (key == "comment") {
        // For people and for `learn`'s notes (where each rule came from): ignored.
      } else if (key == "record") {
        auto r = string_of(value, where + ".record");
        if (r && *r == "fields")
          p.record_fields = true;
        else if (r && *r != "none")
          error(where + ".record", "must be \"fields\" or \"none\"");
      } else if (key == "mode") {
        auto m = string_of(value, where + ".mode");
        if (m && *m == "audit")
          p.mode = profile::mode_kind::audit;
        else if (m && *m != "enforce")
          error(where + ".mode", "must be \"enforce\" or \"audit\"");
      } else if (key == "confine_to_owned") {
        if (value.get_bool().get(p.rules.confine_to_owned) != simdjson::SUCCESS)
          error(where + ".confine_to_owned", "must be true or false");
      } else if (key == "owner") {
        if (auto s = string_of(value, where + ".owner")) p.rules.owner = *s;
      } else if (key == "container_create") {
        load_field_rules("ContainerCreate", value, where + ".container_create",
                         p.rules.container_create);
      } else if (key == "container_exec") {
        load_field_rules("ContainerExec", value, where + ".container_exec", p.rules.container_exec);
      } else if (key == "images") {
        object images;
        if (value.get_object().get(images) != simdjson::SUCCESS) {
          error(where + ".images", "must be an object {allow, require_digest}");
          return;
        }
        each_key(images, where + ".images", [&](std::string_view k, element v) {
          if (k == "comment") return;
          if (k == "allow") {
            if (auto list = strings_of(v, where + ".images.allow"))
              p.rules.images.patterns = std::move(*list);
          } else if (k == "require_digest") {
            if (v.get_bool().get(p.rules.images.require_digest) != simdjson::SUCCESS)
              error(where + ".images.require_digest", "must be true or false");
          } else {
            error(where + ".images", "unknown key \"" + std::string(k) + "\"");
          }
        });
      } else if (key == "binds") {
        object binds;
        if (value.get_object().get(binds) != simdjson::SUCCESS) {
          error(where + ".binds", "must be an object {source_roots, sources, targets, drop}");
          return;
        }
        bind_rule rule;
        each_key(binds, where + ".binds", [&](std::string_view k, element v) {
          if (k == "require_fuse") {
            if (v.get_bool().get(rule.require_fuse) != simdjson::SUCCESS)
              error(where + ".binds.require_fuse", "must be true or false");
            return;
          }
          auto list = strings_of(v, where + ".binds." + std::string(k));
          if (!list) return;
          for (const auto& path : *list)
            if (!clean_absolute_path(path))
              error(where + ".binds." + std::string(k),
                    "\"" + path + "\" must be an absolute, clean path");
          if (k == "source_roots")
            rule.source_roots = std::move(*list);
          else if (k == "sources")
            rule.sources = std::move(*list);
          else if (k == "drop")
            rule.drop = std::move(*list);
          else if (k == "targets")
            rule.targets = std::move(*list);
          else
            error(where + ".binds", "unknown key \"" + std::string(k) + "\"");
        });
        p.rules.binds = std::move(rule);
      } else if (key == "workspace") {
        object ws;
        if (value.get_object().get(ws) != simdjson::SUCCESS) {
          error(where + ".workspace",
                "must be an object {root, target, require_fuse, required, host_binds}");
          return;
        }
        workspace_rule rule;
        bool have_root = false;
        each_key(ws, where + ".workspace", [&](std::string_view k, element v) {
          if (k == "require_fuse" || k == "required" || k == "host_binds") {
            bool& flag = k == "required"     ? rule.required
                         : k == "host_binds" ? rule.host_binds
                                             : rule.require_fuse;
            if (v.get_bool().get(flag) != simdjson::SUCCESS)
              error(where + ".workspace." + std::string(k), "must be true or false");
          } else if (k == "root" || k == "target") {
            auto path = string_of(v, where + ".workspace." + std::string(k));
            if (!path) return;
            if (!clean_absolute_path(*path) || *path == "/")
              error(where + ".workspace." + std::string(k),
                    "\"" + *path + "\" must be an absolute, clean path other than /");
            (k == "root" ? rule.root : rule.target) = *path;
            have_root = have_root || k == "root";
          } else {
            error(where + ".workspace", "unknown key \"" + std::string(k) + "\"");
          }
        });
        if (!have_root) error(where + ".workspace.root", "is required");
        p.rules.workspace = std::move(rule);
      } else if (key == "seccomp") {
        p.rules.seccomp = load_seccomp(value, where + ".seccomp");
      } else if (key == "ports") {
        p.rules.ports = load_ports(value, where + ".ports");
      } else if (key == "uploads") {
        load_uploads(value, where + ".uploads", p.rules);
      } else if (key == "networks" || key == "volumes") {
        // {"join_owned": true, "aliases": true} / {"mount_owned": true}
        object o;
        const std::string w = where + "." + std::string(key);
        if (value.get_object().get(o) != simdjson::SUCCESS) {
          error(w, key == "networks"
                       ? "must be an object {join_owned, aliases, internal, bridge_prefix}"
                       : "must be an object {mount_owned}");
          return;
        }
        each_key(o, w, [&](std::string_view k, element v) {
          if (key == "networks" && k == "bridge_prefix") {
            auto prefix = string_of(v, w + ".bridge_prefix");
            if (!prefix) return;
            if (prefix->empty() || prefix->size() > 5 ||
                !std::all_of(prefix->begin(), prefix->end(), [](char c) {
                  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
                }))
              error(w + ".bridge_prefix", "must be 1-5 of a-z 0-9");
            else
              p.rules.networks.bridge_prefix = *prefix;
            return;
          }
          bool* flag =
              key == "networks"
                  ? (k == "join_owned"              ? &p.rules.networks.join_owned
                     : k == "aliases"               ? &p.rules.networks.aliases
                     : k == "internal"              ? &p.rules.networks.internal
                     : k == "join_owned_containers" ? &p.rules.networks.join_owned_containers
                                                    : nullptr)
                  : (k == "mount_owned" ? &p.rules.volumes.mount_owned : nullptr);
          if (!flag)
            error(w, "unknown key \"" + std::string(k) + "\"");
          else if (v.get_bool().get(*flag) != simdjson::SUCCESS)
            error(w + "." + std::string(k), "must be true or false");
        });
      } else if (key == "system_info") {
        object o;
        if (value.get_object().get(o) != simdjson::SUCCESS) {
          error(where + ".system_info", "must be an object {keep}");
          return;
        }
        each_key(o, where + ".system_info", [&](std::string_view k, element v) {
          if (k != "keep") {
            error(where + ".system_info", "unknown key \"" + std::string(k) + "\"");
          } else if (auto list = strings_of(v, where + ".system_info.keep")) {
            p.system_info_keep = std::move(*list);
          }
        });
        if (!p.system_info_keep) error(where + ".system_info.keep", "is required");
      } else if (key == "allow") {
        have_allow = true;
        simdjson::dom::array arr;
        if (value.get_array().get(arr) != simdjson::SUCCESS) {
          error(where + ".allow", "must be an array of operation names");
          return;
        }
        std::size_t i = 0;
        for (element item : arr) {
          const std::string item_where = where + ".allow[" + std::to_string(i++) + "]";
          auto op_name = string_of(item, item_where);
          if (!op_name) continue;
          auto op = operation_from_name(*op_name);
          if (!op) {
            error(item_where,
                  "unknown operation \"" + *op_name + "\" (use Engine API operationId names)");
            continue;
          }
          if (p.allows(*op)) error(item_where, "operation \"" + *op_name + "\" listed twice");
          p.allowed.set(static_cast<std::size_t>(*op));
        }
      } else {
        error(where, "unknown key \"" + std::string(key) + "\"");
      }
    });
    if (!have_allow) error(where, "missing \"allow\" (an empty list allows nothing)");
    if (p.rules.owner.empty()) p.rules.owner = p.name;
    // The proxy proves a shared container owned only where the profile is confined to its
    // own: without that, "container:<any>" would join any container's network namespace.
    if (p.rules.networks.join_owned_containers && !p.rules.confine_to_owned)
      error(where + ".networks.join_owned_containers",
            "needs confine_to_owned (only then does the proxy prove the container owned)");
    if ((p.allows(operation::ContainerCreate) || p.allows(operation::ImageCreate)) &&
        p.rules.images.patterns.empty())
      error(where, "allows ContainerCreate or ImageCreate but lists no images (images.allow)");
    return p;
  }
};

}  // namespace

bool address_matches(std::string_view block, std::string_view address) {
  auto parse = [](std::string_view text, unsigned char* out, int& family) {
    const std::string s(text);
    if (::inet_pton(AF_INET, s.c_str(), out) == 1) {
      family = AF_INET;
      return true;
    }
    if (::inet_pton(AF_INET6, s.c_str(), out) == 1) {
      family = AF_INET6;
      return true;
    }
    return false;
  };
  const auto slash = block.find('/');
  unsigned char net[16] = {}, addr[16] = {};
  int net_family = 0, addr_family = 0;
  if (!parse(block.substr(0, slash), net, net_family) || !parse(address, addr, addr_family))
    return false;
  if (net_family != addr_family) return false;
  const int bits_total = net_family == AF_INET ? 32 : 128;
  int bits = bits_total;
  if (slash != std::string_view::npos) {
    const std::string b(block.substr(slash + 1));
    if (b.empty() || b.size() > 3 || b.find_first_not_of("0123456789") != std::string::npos)
      return false;
    bits = std::stoi(b);
    if (bits > bits_total) return false;
  }
  for (int i = 0; i < bits; ++i) {
    const int byte = i / 8, bit = 7 - i % 8;
    if (((net[byte] >> bit) & 1) != ((addr[byte] >> bit) & 1)) return false;
  }
  return true;
}

const profile* policy::select(const client_identity& client) const {
  for (const auto& rule : clients) {
    if (rule.uid && client.uid != rule.uid) continue;
    if (rule.gid && client.gid != rule.gid) continue;
    if (!rule.address.empty() &&
        (client.address.empty() || !address_matches(rule.address, client.address)))
      continue;
    if (!rule.tls_subject.empty() && client.tls_subject != rule.tls_subject) continue;
    return &profiles[rule.profile];
  }
  return default_profile ? &profiles[*default_profile] : nullptr;
}

const profile* policy::find(std::string_view name) const {
  for (const auto& p : profiles)
    if (p.name == name) return &p;
  return nullptr;
}

policy_load_result parse_policy(std::string_view json) {
  policy_load_result result;
  loader l;
  simdjson::dom::parser parser;
  simdjson::padded_string padded(json);
  element doc;
  if (auto err = parser.parse(padded).get(doc); err != simdjson::SUCCESS) {
    result.errors.push_back(std::string("policy is not valid JSON: ") +
                            simdjson::error_message(err));
    return result;
  }
  object root;
  if (doc.get_object().get(root) != simdjson::SUCCESS) {
    result.errors.push_back("policy: must be a JSON object");
    return result;
  }
  policy pol;
  std::optional<std::string> default_name;
  std::optional<element> clients_value;
  bool have_profiles = false;
  l.each_key(root, "policy", [&](std::string_view key, element value) {
    if (key == "comment") {
      // ignored: for people
    } else if (key == "default_profile") {
      default_name = l.string_of(value, "default_profile");
    } else if (key == "clients") {
      clients_value = value;
    } else if (key == "profiles") {
      have_profiles = true;
      object profiles;
      if (value.get_object().get(profiles) != simdjson::SUCCESS) {
        l.error("profiles", "must be an object of name -> profile");
        return;
      }
      l.each_key(profiles, "profiles", [&](std::string_view name, element p) {
        if (name.empty()) {
          l.error("profiles", "profile name must not be empty");
          return;
        }
        if (auto prof = l.load_profile(name, p)) pol.profiles.push_back(std::move(*prof));
      });
    } else {
      l.error("policy", "unknown key \"" + std::string(key) + "\"");
    }
  });
  if (!have_profiles)
    l.error("policy", "missing \"profiles\"");
  else if (pol.profiles.empty() && l.errors.empty())
    l.error("profiles", "no profile defined");
  if (!default_name) {
    // With client rules and no default_profile, clients no rule matches are refused.
    if (pol.profiles.size() == 1 && !clients_value) {
      pol.default_profile = 0;
    } else if (pol.profiles.size() > 1 && !clients_value) {
      l.error("policy",
              "missing \"default_profile\" (required when there is more than one profile and no "
              "clients)");
    }
  } else {
    for (std::size_t i = 0; i < pol.profiles.size(); ++i)
      if (pol.profiles[i].name == *default_name) pol.default_profile = i;
    if (!pol.default_profile)
      l.error("default_profile", "no profile named \"" + *default_name + "\"");
  }
  if (clients_value) {
    simdjson::dom::array arr;
    if (clients_value->get_array().get(arr) != simdjson::SUCCESS) {
      l.error("clients", "must be an array of {uid, gid, address, tls_subject, profile}");
    } else {
      std::size_t i = 0;
      for (element item : arr) {
        const std::string where = "clients[" + std::to_string(i++) + "]";
        object obj;
        if (item.get_object().get(obj) != simdjson::SUCCESS) {
          l.error(where, "must be an object");
          continue;
        }
        client_rule rule;
        bool have_profile = false, have_criterion = false;
        l.each_key(obj, where, [&](std::string_view k, element v) {
          std::uint64_t n = 0;
          if (k == "uid" || k == "gid") {
            have_criterion = true;
            if (v.get_uint64().get(n) != simdjson::SUCCESS || n > UINT32_MAX) {
              l.error(where + "." + std::string(k), "must be a numeric id");
              return;
            }
            (k == "uid" ? rule.uid : rule.gid) = static_cast<std::uint32_t>(n);
          } else if (k == "address") {
            have_criterion = true;
            if (auto a = l.string_of(v, where + ".address")) {
              rule.address = *a;
              if (!address_matches(rule.address, rule.address.substr(0, rule.address.find('/'))))
                l.error(where + ".address",
                        "\"" + rule.address + "\" is not an IP address or CIDR block");
            }
          } else if (k == "tls_subject") {
            have_criterion = true;
            if (auto t = l.string_of(v, where + ".tls_subject")) rule.tls_subject = *t;
          } else if (k == "profile") {
            have_profile = true;
            auto name = l.string_of(v, where + ".profile");
            bool found = false;
            for (std::size_t j = 0; name && j < pol.profiles.size(); ++j)
              if (pol.profiles[j].name == *name) {
                rule.profile = j;
                found = true;
              }
            if (name && !found) l.error(where + ".profile", "no profile named \"" + *name + "\"");
          } else {
            l.error(where, "unknown key \"" + std::string(k) + "\"");
          }
        });
        if (!have_profile) l.error(where, "missing \"profile\"");
        if (!have_criterion) l.error(where, "needs at least one of uid, gid, address, tls_subject");
        pol.clients.push_back(std::move(rule));
      }
    }
  }
  result.errors = std::move(l.errors);
  if (result.errors.empty()) result.value = std::move(pol);
  return result;
}

}  // namespace dockgate::policy

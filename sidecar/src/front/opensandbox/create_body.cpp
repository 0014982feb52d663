// POST /sandboxes's body (OpenSandbox's CreateSandboxRequest) read into the core's create
// request (docs/opensandbox-api.md, "Create"). Every field is checked; what this sidecar
// cannot honour as asked is refused with a 400 naming the field and the reason, never
// dropped (issue 1315 upstream: a networkPolicy silently ignored left a sandbox open).
//
// Invariants it keeps:
// - Only an image of the operator's list runs (SANDBOX_IMAGE, SANDBOX_IMAGES); none is pulled.
// - Memory and CPU never exceed the operator's caps (a larger ask gets the cap).
// - A host volume is only the FUSE workspace of a valid archive key under
//   SANDBOX_HOST_VOLUME_ROOT, bound at /workspace by the gate: no other host path reaches a
//   container, whatever the request says.
#include <simdjson.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>

#include "egress/egress_policy.hpp"
#include "front/opensandbox/sandbox_json.hpp"
#include "front/opensandbox/sandbox_routes.hpp"
#include "util/ids.hpp"
#include "util/util.hpp"

namespace dockgate::sidecar::opensandbox {

namespace {

using simdjson::dom::element;
using simdjson::dom::object;

// The string `v`, or nullopt.
std::optional<std::string_view> text_of(element v) {
  std::string_view s;
  if (v.get_string().get(s) != simdjson::SUCCESS) return std::nullopt;
  return s;
}

bool valid_env_name(std::string_view n) {
  if (n.empty() || std::isdigit(static_cast<unsigned char>(n[0]))) return false;
  for (char ch : n)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_')) return false;
  return true;
}

// A decimal number of digits and at most one '.' (no sign, exponent, hex or "inf", which
// strtod would take), positive and below `limit`; nullopt otherwise.
std::optional<double> decimal(const std::string& t, double limit) {
  if (t.empty() || !std::isdigit(static_cast<unsigned char>(t[0])) ||
      std::count(t.begin(), t.end(), '.') > 1 ||
      !std::all_of(t.begin(), t.end(), [](char ch) { return std::isdigit(ch) || ch == '.'; }))
    return std::nullopt;
  const double v = std::strtod(t.c_str(), nullptr);
  if (!(v > 0) || v >= limit) return std::nullopt;
  return v;
}

// A Kubernetes CPU quantity ("500m", "1", "0.5") in nano-CPUs, or nullopt.
std::optional<std::int64_t> parse_cpu(std::string_view text) {
  std::string t(text);
  double scale = 1e9;
  if (!t.empty() && t.back() == 'm') scale = 1e6, t.pop_back();
  const auto v = decimal(t, 1e18 / scale);
  if (!v) return std::nullopt;
  return static_cast<std::int64_t>(*v * scale);
}

// A Kubernetes memory quantity ("512Mi", "2Gi", "1G", "1000000" bytes) in bytes, or nullopt.
std::optional<std::int64_t> parse_memory(std::string_view text) {
  static const std::pair<std::string_view, double> units[] = {
      {"Ki", 1024.0}, {"Mi", 1048576.0}, {"Gi", 1073741824.0}, {"Ti", 1099511627776.0},
      {"k", 1e3},     {"K", 1e3},        {"M", 1e6},           {"G", 1e9},
      {"T", 1e12}};
  std::string t(text);
  double scale = 1;
  for (const auto& [suffix, factor] : units)
    if (t.size() > suffix.size() && t.ends_with(suffix)) {
      scale = factor;
      t.resize(t.size() - suffix.size());
      break;
    }
  const auto v = decimal(t, 9e18 / scale);
  if (!v) return std::nullopt;
  return static_cast<std::int64_t>(*v * scale);
}

// The keys this slice reads; any other is refused (nothing is dropped).
bool known_field(std::string_view k) {
  for (std::string_view known :
       {"image", "entrypoint", "env", "metadata", "resourceLimits", "timeout", "volumes",
        "networkPolicy", "platform", "secureAccess", "snapshotId", "extensions"})
    if (k == known) return true;
  return false;
}

using problem = std::optional<std::string>;

std::string join(const std::vector<std::string>& items, std::string_view between) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : std::string(between)) + item;
  return out;
}

std::string lower_case(std::string s) {
  for (auto& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

problem read_image(object body, const config& c, create_request& out) {
  element v;
  object image;
  if (body["image"].get(v) != simdjson::SUCCESS || v.is_null())
    return "image: required (snapshots are not offered)";
  if (v.get_object().get(image) != simdjson::SUCCESS) return "image: must be an object {uri}";
  std::optional<std::string_view> uri;
  for (auto [k, field] : image) {
    if (k == "uri")
      uri = text_of(field);
    else if (k == "auth") {
      if (!field.is_null()) return "image.auth: this sidecar pulls no image (the operator's list)";
    } else {
      return "image." + std::string(k) + ": unknown field";
    }
  }
  if (!uri || uri->empty()) return "image.uri: required, a string";
  const bool listed =
      *uri == c.image || std::find(c.images.begin(), c.images.end(), *uri) != c.images.end();
  if (!listed)
    return "image.uri: " + std::string(*uri) +
           " is not one of the operator's images (SANDBOX_IMAGE, SANDBOX_IMAGES)";
  if (*uri != c.image) out.image = std::string(*uri);
  return std::nullopt;
}

problem read_entrypoint(object body, create_request& out) {
  element v;
  simdjson::dom::array words;
  if (body["entrypoint"].get(v) != simdjson::SUCCESS || v.is_null() ||
      v.get_array().get(words) != simdjson::SUCCESS || words.size() == 0)
    return std::string("entrypoint: required, a non-empty array of strings");
  std::vector<std::string> asked;
  for (element w : words) {
    auto s = text_of(w);
    if (!s) return std::string("entrypoint: required, a non-empty array of strings");
    asked.emplace_back(*s);
  }
  // Kept as the JSON array it was (the Sandbox object shows it back); a keep-alive form
  // (the SDK's default) is the container's own keep-alive already: nothing is started.
  std::string kept = "[";
  for (const auto& word : asked) {
    if (kept.size() > 1) kept += ',';
    client::append_json_string(kept, word);
  }
  out.metadata[std::string(entrypoint_key)] = kept + "]";
  for (const auto& form : keep_alive_entrypoints())
    if (asked == form) return std::nullopt;
  out.entrypoint = std::move(asked);
  return std::nullopt;
}

problem read_env(object body, create_request& out) {
  element v;
  object env;
  if (body["env"].get(v) != simdjson::SUCCESS || v.is_null()) return std::nullopt;
  if (v.get_object().get(env) != simdjson::SUCCESS) return "env: must be an object of strings";
  for (auto [k, value] : env) {
    if (!valid_env_name(k))
      return "env: \"" + valid_utf8(k) + "\" is not a variable name ([A-Za-z_][A-Za-z0-9_]*)";
    if (value.is_null()) continue;  // as OpenSandbox's server: a null value is no variable
    auto s = text_of(value);
    if (!s) return "env." + std::string(k) + ": must be a string";
    if (s->find('\0') != std::string_view::npos)
      return "env." + std::string(k) + ": must not hold a NUL character";
    out.env.push_back(std::string(k) + "=" + std::string(*s));
  }
  return std::nullopt;
}

problem read_metadata(object body, create_request& out) {
  element v;
  object metadata;
  if (body["metadata"].get(v) != simdjson::SUCCESS || v.is_null()) return std::nullopt;
  if (v.get_object().get(metadata) != simdjson::SUCCESS)
    return "metadata: must be an object of strings";
  for (auto [k, value] : metadata) {
    auto s = text_of(value);
    if (!s) return "metadata." + valid_utf8(k) + ": must be a string";
    if (auto why = metadata_problem(k, *s)) return "metadata: " + *why;
    out.metadata[std::string(k)] = std::string(*s);
  }
  return std::nullopt;
}
// cpu and memory, clamped to the operator's caps: below a cap the value asked, at or above
// it none (0: the cap itself, which lets the warm pool serve the sandbox).
problem read_resource_limits(object body, const config& c, create_request& out) {
  element v;
  object limits;
  if (body["resourceLimits"].get(v) != simdjson::SUCCESS || v.is_null()) return std::nullopt;
  if (v.get_object().get(limits) != simdjson::SUCCESS)
    return "resourceLimits: must be an object of strings";
  for (auto [k, value] : limits) {
    auto s = text_of(value);
    if (k == "gpu") return "resourceLimits.gpu: this sidecar offers no GPU";
    if (k != "cpu" && k != "memory")
      return "resourceLimits." + valid_utf8(k) + ": unknown resource (cpu and memory are offered)";
    if (!s) return "resourceLimits." + std::string(k) + ": must be a string";
    if (k == "cpu") {
      auto nano = parse_cpu(*s);
      if (!nano) return "resourceLimits.cpu: not a CPU quantity: \"" + valid_utf8(*s) + "\"";
      out.nano_cpus = *nano < c.nano_cpus ? *nano : 0;
    } else {
      auto bytes = parse_memory(*s);
      if (!bytes) return "resourceLimits.memory: not a memory quantity: \"" + valid_utf8(*s) + "\"";
      out.memory_bytes = *bytes < c.memory_bytes ? *bytes : 0;
    }
  }
  return std::nullopt;
}

problem read_timeout(object body, const config& c, create_request& out) {
  element v;
  if (body["timeout"].get(v) != simdjson::SUCCESS || v.is_null()) return std::nullopt;
  std::int64_t seconds = 0;
  if (v.get_int64().get(seconds) != simdjson::SUCCESS)
    return std::string("timeout: must be an integer number of seconds, or null (no expiry)");
  if (seconds < 60) return std::string("timeout: at least 60 seconds");
  if (seconds > c.max_sandbox_timeout_seconds)
    return "timeout: at most " + std::to_string(c.max_sandbox_timeout_seconds) +
           " seconds (SANDBOX_MAX_SANDBOX_TIMEOUT_SECONDS)";
  out.expires_at = std::chrono::system_clock::now() + std::chrono::seconds(seconds);
  return std::nullopt;
}

// A DNS label (RFC 1123): 1-63 of a-z, 0-9, '-', not starting or ending with '-'.
bool dns_label(std::string_view n) {
  return !n.empty() && n.size() <= 63 && n.front() != '-' && n.back() != '-' &&
         std::all_of(n.begin(), n.end(), [](char ch) {
           return (ch >= 'a' && ch <= 'z') || std::isdigit(ch) || ch == '-';
         });
}

// The archive key of a host volume's path "<SANDBOX_HOST_VOLUME_ROOT>/<key>", or the reason.
problem host_volume_key(std::string_view path, const config& c, std::string& key) {
  for (auto segment : path_segments(path))
    if (segment == "..") return std::string("must not contain '..'");
  std::string root = c.host_volume_root;
  while (root.size() > 1 && root.ends_with('/')) root.pop_back();
  if (!path.starts_with(root + "/"))
    return "must be " + root + "/<name> (SANDBOX_HOST_VOLUME_ROOT)";
  key = std::string(path.substr(root.size() + 1));
  if (!valid_archive_key(key))
    return "must be " + root +
           "/<name>, the name 1-128 of letters, digits, '_' and '-' (a workspace's key)";
  // The name is a bucket prefix, mounted afresh at <root>/<session id>: nothing at
  // <root>/<name> is used. Something there that is not a plain directory (a symlink an
  // operator or another tenant left) is refused all the same, as OpenSandbox refuses a
  // symlinked host path: the client asked for a path, and it is not what it looks like.
  struct stat st {};
  if (::lstat((root + "/" + key).c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
    return std::string("must not be a symlink or a file on the host");
  return std::nullopt;
}

problem read_volume(element v, std::size_t i, const config& c, create_request& out) {
  const std::string at = "volumes[" + std::to_string(i) + "]";
  object volume;
  if (v.get_object().get(volume) != simdjson::SUCCESS) return at + ": must be an object";
  element field;
  if (volume["pvc"].get(field) == simdjson::SUCCESS && !field.is_null())
    return at + ": pvc volumes are not offered (a host volume under SANDBOX_HOST_VOLUME_ROOT is)";
  if (volume["ossfs"].get(field) == simdjson::SUCCESS && !field.is_null())
    return at + ": ossfs volumes are not offered (a host volume under SANDBOX_HOST_VOLUME_ROOT is)";
  for (auto [k, unused] : volume)
    if (k != "name" && k != "host" && k != "mountPath" && k != "readOnly" && k != "subPath" &&
        k != "pvc" && k != "ossfs")
      return at + "." + valid_utf8(k) + ": unknown field";
  std::optional<std::string_view> name, path, mount;
  if (volume["name"].get(field) == simdjson::SUCCESS) name = text_of(field);
  if (!name || !dns_label(*name)) return at + ".name: required, a DNS label (1-63 of a-z0-9-)";
  if (volume["host"].get(field) != simdjson::SUCCESS || field.is_null())
    return at + ": a host volume is required (host: {path})";
  if (field["path"].get(field) == simdjson::SUCCESS) path = text_of(field);
  if (!path) return at + ".host.path: required, a string";
  if (c.workspace_mode != "fuse")
    return at + ": host volumes need SANDBOX_WORKSPACE_MODE=fuse (each is a FUSE workspace)";
  std::string key;
  if (auto why = host_volume_key(*path, c, key)) return at + ".host.path: " + *why;
  if (volume["mountPath"].get(field) == simdjson::SUCCESS) mount = text_of(field);
  if (!mount || *mount != "/workspace")
    return at + ".mountPath: must be /workspace (the only path a workspace is bound at)";
  if (volume["subPath"].get(field) == simdjson::SUCCESS && !field.is_null())
    return at + ".subPath: not offered (the workspace is the key's whole prefix)";
  bool read_only = false;
  if (volume["readOnly"].get(field) == simdjson::SUCCESS && !field.is_null() &&
      (field.get_bool().get(read_only) != simdjson::SUCCESS || read_only))
    return at + ".readOnly: only false is offered (the workspace is writable)";
  if (out.archive_key) return at + ": only one volume is offered (/workspace)";
  out.archive_key = std::move(key);
  return std::nullopt;
}

problem read_volumes(object body, const config& c, create_request& out) {
  element v;
  simdjson::dom::array volumes;
  if (body["volumes"].get(v) != simdjson::SUCCESS || v.is_null()) return std::nullopt;
  if (v.get_array().get(volumes) != simdjson::SUCCESS)
    return std::string("volumes: must be an array");
  std::size_t i = 0;
  for (element volume : volumes)
    if (auto why = read_volume(volume, i++, c, out)) return why;
  return std::nullopt;
}

// networkPolicy, platform, secureAccess, snapshotId: refused unless they ask for what this
// sidecar does anyway.
// One of networkPolicy.egress (OpenSandbox's NetworkRule: {action, target}, both required,
// nothing else), lower-cased as OpenSandbox's egress sidecar reads it.
problem read_network_rule(element v, std::size_t i, egress_rules& out) {
  const std::string at = "networkPolicy.egress[" + std::to_string(i) + "]";
  object rule;
  if (v.get_object().get(rule) != simdjson::SUCCESS) return at + ": must be an object";
  std::optional<std::string_view> action, target;
  for (auto [k, value] : rule) {
    if (k == "action")
      action = text_of(value);
    else if (k == "target")
      target = text_of(value);
    else
      return at + "." + valid_utf8(k) + ": unknown field";
    if (!(k == "action" ? action : target)) return at + "." + std::string(k) + ": must be a string";
  }
  if (!action || (*action != "allow" && *action != "deny")) return at + ".action: allow or deny";
  if (!target) return at + ".target: required";
  std::string name = lower_case(std::string(*target));
  if (name.ends_with('.')) name.pop_back();
  if (!valid_egress_target(name))
    return at +
           ".target: a host name or *.<host name> (never an address, a CIDR, a port or a "
           "scheme): " +
           valid_utf8(*target);
  out.push_back({*action == "allow", std::move(name)});
  return std::nullopt;
}

// networkPolicy ({defaultAction, egress}): under SANDBOX_NETWORK=allowlist the sandbox's own
// list, enforced by the egress proxy (egress_policy.hpp); refused when egress is off (the
// sandbox has no network at all), when it asks for a name beyond the operator's list, and
// for defaultAction allow (every name: more than any operator's list). Absent or null
// under allowlist: no name at all ({} too: OpenSandbox's egress sidecar reads it as deny).
problem read_network_policy(object body, const config& c, create_request& out) {
  element v;
  const bool given = body["networkPolicy"].get(v) == simdjson::SUCCESS && !v.is_null();
  if (c.network != "allowlist") {
    if (!given) return std::nullopt;
    return std::string(
        "networkPolicy: egress is off on this sidecar (SANDBOX_NETWORK=none): a sandbox has no "
        "network, so no policy can be honoured");
  }
  out.egress_policy = egress_rules{};
  if (!given) return std::nullopt;
  object policy;
  if (v.get_object().get(policy) != simdjson::SUCCESS)
    return std::string("networkPolicy: must be an object");
  for (auto [k, value] : policy) {
    if (k == "defaultAction") {
      auto action = text_of(value);
      if (!value.is_null() && (!action || (*action != "deny" && *action != "allow")))
        return std::string("networkPolicy.defaultAction: allow or deny");
      if (action && *action == "allow")
        return "networkPolicy.defaultAction allow: a sandbox reaches at most the operator's "
               "names (" +
               join(c.egress_allow, ",") + "); list those it needs as allow rules";
    } else if (k == "egress") {
      simdjson::dom::array rules;
      if (value.is_null()) continue;
      if (value.get_array().get(rules) != simdjson::SUCCESS)
        return std::string("networkPolicy.egress: must be an array");
      if (rules.size() > 256) return std::string("networkPolicy.egress: at most 256 rules");
      std::size_t i = 0;
      for (element rule : rules)
        if (auto why = read_network_rule(rule, i++, *out.egress_policy)) return why;
    } else {
      return "networkPolicy." + valid_utf8(k) + ": unknown field";
    }
  }
  if (auto wider = beyond_operator(c, *out.egress_policy); !wider.empty())
    return "networkPolicy.egress: beyond the operator's list (SANDBOX_EGRESS_ALLOW=" +
           join(c.egress_allow, ",") + "): " + join(wider, ", ");
  return std::nullopt;
}

problem read_refused(object body) {
  element v;
  if (body["snapshotId"].get(v) == simdjson::SUCCESS && !v.is_null())
    return std::string("snapshotId: snapshots are not offered");
  if (body["secureAccess"].get(v) == simdjson::SUCCESS && !v.is_null()) {
    bool secure = false;
    if (v.get_bool().get(secure) != simdjson::SUCCESS)
      return std::string("secureAccess: must be a boolean");
    if (secure)
      return std::string(
          "secureAccess: not offered (every endpoint already needs the sandbox's access token)");
  }
  if (body["platform"].get(v) == simdjson::SUCCESS && !v.is_null()) {
    object platform;
    if (v.get_object().get(platform) != simdjson::SUCCESS)
      return std::string("platform: must be an object");
    for (auto [k, value] : platform) {
      auto s = text_of(value);
      const bool ok = (k == "os" && s && *s == "linux") || (k == "arch" && s && *s == "amd64");
      if (!ok) return std::string("platform: only linux/amd64 is offered");
    }
  }
  return std::nullopt;
}

// extensions.secureRuntime: the sandbox's Docker runtime by name (OpenSandbox chooses its
// secure runtime only server-wide, [secure_runtime] docker_runtime, and has no field for it
// in a create: this key is dockgate's), one of SANDBOX_RUNTIMES.
problem read_extensions(object body, const config& c, create_request& out) {
  element v;
  object extensions;
  if (body["extensions"].get(v) != simdjson::SUCCESS || v.is_null()) return std::nullopt;
  if (v.get_object().get(extensions) != simdjson::SUCCESS)
    return std::string("extensions: must be an object of strings");
  for (auto [k, value] : extensions) {
    auto s = text_of(value);
    if (!s) return "extensions." + valid_utf8(k) + ": must be a string";
    if (k == "secureRuntime") {
      if (auto why = runtime_refusal(c, *s)) return "extensions.secureRuntime: " + *why;
      out.runtime = std::string(*s);
      continue;
    }
    if (k != "access.renew.extend.seconds") continue;  // opaque: accepted, not used
    char* end = nullptr;
    const std::string t(*s);
    const long n = std::strtol(t.c_str(), &end, 10);
    if (t.empty() || *end || n < 300 || n > 86400)
      return std::string("extensions.access.renew.extend.seconds: an integer from 300 to 86400");
  }
  return std::nullopt;
}

}  // namespace

parsed<create_request> parse_create_body(const std::string& body, const config& c) {
  simdjson::dom::parser parser;
  element doc;
  object fields;
  if (parser.parse(body).get(doc) != simdjson::SUCCESS ||
      doc.get_object().get(fields) != simdjson::SUCCESS)
    return invalid_parameter("the body must be a JSON object (CreateSandboxRequest)");
  std::set<std::string_view> seen;
  for (auto [k, unused] : fields) {
    if (!known_field(k)) return invalid_parameter(valid_utf8(k) + ": unknown field");
    if (!seen.insert(k).second) return invalid_parameter(std::string(k) + ": given twice");
  }
  create_request out;
  out.idle_reaped = false;  // a sandbox's life is its expiry or a delete
  for (auto why :
       {read_image(fields, c, out), read_entrypoint(fields, out), read_env(fields, out),
        read_metadata(fields, out), read_resource_limits(fields, c, out),
        read_timeout(fields, c, out), read_volumes(fields, c, out),
        read_network_policy(fields, c, out), read_refused(fields), read_extensions(fields, c, out)})
    if (why) return invalid_parameter(*why);
  return out;
}

}  // namespace dockgate::sidecar::opensandbox

// The learner: audit lines in, the narrowest policy file that allows what they show out.
// See learn.hpp and docs/policy.md, "Learning a profile".
//
// Invariant: a rule is made only from requests the gate let through at their safe value,
// or from widening fields a rule bounds narrowly (bind sources and targets seen, networks
// and volumes the profile owns). Everything else a client did beyond that is reported,
// never learned, so running a hostile client in learning mode cannot teach the gate to
// let it out.
#include "dockgate/policy/learn.hpp"

#include <simdjson.h>

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <set>

#include "dockgate/common/error_body.hpp"
#include "dockgate/policy/image_ref.hpp"

namespace dockgate::policy {

namespace {

using simdjson::dom::element;

// Where a rule came from: how often, and the first request that showed it.
struct origin {
  std::size_t count = 0;
  std::string first_time, first_request;
  void note(std::string_view time, std::string_view id) {
    if (count++ == 0) {
      first_time = time;
      first_request = id;
    }
  }
  std::string text() const {
    return "seen " + std::to_string(count) + (count == 1 ? " time" : " times") + ", first " +
           first_time + " request_id " + first_request;
  }
};

struct field_seen {
  origin from;
  std::set<std::string> values;  // allow lists
  std::int64_t max = 0;          // max clamps
};

// String fields whose seen values become an allow list.
constexpr std::array<std::string_view, 9> allow_fields{
    "User",
    "HostConfig.NetworkMode",
    "HostConfig.IpcMode",
    "HostConfig.PidMode",
    "HostConfig.UTSMode",
    "HostConfig.UsernsMode",
    "HostConfig.CgroupnsMode",
    "HostConfig.CapDrop",
    "HostConfig.SecurityOpt",
};
// Numeric limits whose seen maximum becomes a max clamp.
constexpr std::array<std::string_view, 9> max_fields{
    "HostConfig.Memory",    "HostConfig.MemorySwap", "HostConfig.MemoryReservation",
    "HostConfig.NanoCpus",  "HostConfig.CpuShares",  "HostConfig.CpuQuota",
    "HostConfig.PidsLimit", "HostConfig.ShmSize",    "HostConfig.BlkioWeight",
};
// Widening fields a rule can bound to what was seen: binds under the sources seen, and
// networks and volumes the profile owns. Any other widening field off its safe value
// makes the request "seen and refused".
constexpr std::array<std::string_view, 5> boundable_widening{
    "HostConfig.Binds", "HostConfig.Mounts", "Volumes", "HostConfig.NetworkMode",
    "NetworkingConfig.EndpointsConfig"};

bool contains(std::span<const std::string_view> list, std::string_view s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

bool predefined_network(std::string_view n) {
  return n.empty() || n == "default" || n == "bridge" || n == "none";
}

std::string_view text_at(element e, std::string_view key) {
  std::string_view s;
  if (e.at_key(key).get_string().get(s) != simdjson::SUCCESS) return {};
  return s;
}

void append_string(std::string& out, std::string_view s) {
  out += '"';
  common::append_json_escaped(out, s);
  out += '"';
}

struct learner {
  const learn_options& options;
  learn_result result;
  std::map<std::string, origin> operations;
  std::map<std::string, origin> images;  // repository patterns
  std::map<std::string, field_seen> create, exec;
  std::map<std::string, origin> bind_sources, bind_targets;
  origin join_owned, aliases, mount_owned;
  std::map<std::string, origin> refused;  // "<operation>: <why>"
  std::string first_time, last_time;

  void note_image(std::string_view reference, std::string_view time, std::string_view id) {
    auto ref = parse_image_reference(reference, true);
    if (!ref) return;  // an image ID: no repository to allow
    images[ref->domain + "/" + ref->path + (ref->digest.empty() || !ref->tag.empty() ? ":*" : "@*")]
        .note(time, id);
  }

  // A bind "source:target[:options]" or a named volume "name:target".
  void note_bind(std::string_view bind, std::string_view time, std::string_view id) {
    const auto colon = bind.find(':');
    if (colon == std::string_view::npos) return;
    std::string_view source = bind.substr(0, colon), target = bind.substr(colon + 1);
    target = target.substr(0, target.find(':'));
    if (!source.starts_with('/')) {
      mount_owned.note(time, id);
      return;
    }
    bind_sources[std::string(source)].note(time, id);
    bind_targets[std::string(target)].note(time, id);
  }

  // Why a line teaches nothing, or empty when it may be learned.
  std::string refusal(element line, std::string_view verdict, element seen, bool has_seen) {
    if (verdict == "deny") {
      std::string why(text_at(line, "reason"));
      return why.empty() ? "refused (" + std::string(text_at(line, "rule")) + ")" : why;
    }
    // Audit mode: a refusal is recorded as its reason, which starts with "dockgate:".
    if (auto would = text_at(line, "would"); would.find("dockgate:") != std::string_view::npos)
      return "audit mode would refuse: " + std::string(would);
    if (!has_seen) return {};
    std::string unsafe;
    simdjson::dom::array widening;
    if (seen.at_key("widening").get_array().get(widening) == simdjson::SUCCESS)
      for (element w : widening) {
        std::string_view path;
        if (w.get_string().get(path) != simdjson::SUCCESS) continue;
        bool bounded = contains(boundable_widening, path);
        if (path == "HostConfig.NetworkMode") {
          // host and container:<id> share a namespace: no ownership rule bounds them.
          std::string_view mode;
          if (seen.at_pointer("/values/HostConfig.NetworkMode").get_string().get(mode) ==
                  simdjson::SUCCESS &&
              (mode == "host" || mode.starts_with("container:")))
            bounded = false;
        }
        if (!bounded) unsafe += (unsafe.empty() ? "" : ", ") + std::string(path);
      }
    if (!unsafe.empty()) return "never learned (security invariants): " + unsafe;
    return {};
  }

  void learn_create(element values, std::string_view time, std::string_view id) {
    simdjson::dom::object o;
    if (values.get_object().get(o) != simdjson::SUCCESS) return;
    for (auto [key, v] : o) {
      std::string path(key);
      if (path == "Image") {
        std::string_view ref;
        if (v.get_string().get(ref) == simdjson::SUCCESS) note_image(ref, time, id);
      } else if (contains(allow_fields, path)) {
        auto& f = create[path];
        f.from.note(time, id);
        std::string_view s;
        if (v.get_string().get(s) == simdjson::SUCCESS) f.values.emplace(s);
        simdjson::dom::array a;
        if (v.get_array().get(a) == simdjson::SUCCESS)
          for (element item : a)
            if (item.get_string().get(s) == simdjson::SUCCESS) f.values.emplace(s);
        if (path == "HostConfig.NetworkMode" && !predefined_network(std::string_view(s)))
          join_owned.note(time, id);
      } else if (contains(max_fields, path)) {
        std::int64_t n = 0;
        if (v.get_int64().get(n) != simdjson::SUCCESS || n <= 0) continue;
        auto& f = create[path];
        f.from.note(time, id);
        f.max = std::max(f.max, n);
      } else if (path == "HostConfig.Binds") {
        simdjson::dom::array a;
        std::string_view s;
        if (v.get_array().get(a) == simdjson::SUCCESS)
          for (element item : a)
            if (item.get_string().get(s) == simdjson::SUCCESS) note_bind(s, time, id);
      } else if (path == "HostConfig.Mounts") {
        simdjson::dom::array a;
        if (v.get_array().get(a) != simdjson::SUCCESS) continue;
        for (element m : a) {
          const std::string_view type = text_at(m, "Type");
          if (type == "volume") mount_owned.note(time, id);
          if (type != "bind") continue;
          bind_sources[std::string(text_at(m, "Source"))].note(time, id);
          bind_targets[std::string(text_at(m, "Target"))].note(time, id);
        }
      } else if (path == "Volumes") {
        mount_owned.note(time, id);
      } else if (path == "NetworkingConfig.EndpointsConfig") {
        simdjson::dom::object endpoints;
        if (v.get_object().get(endpoints) != simdjson::SUCCESS) continue;
        for (auto [network, endpoint] : endpoints) {
          if (!predefined_network(network)) join_owned.note(time, id);
          if (endpoint.at_key("Aliases").error() == simdjson::SUCCESS) aliases.note(time, id);
        }
      }
    }
  }

  void learn_exec(element values, std::string_view time, std::string_view id) {
    std::string_view user;
    if (values.at_key("User").get_string().get(user) != simdjson::SUCCESS) return;
    auto& f = exec["User"];
    f.from.note(time, id);
    f.values.emplace(user);
  }

  void read_line(std::string_view text, std::size_t number, simdjson::dom::parser& parser) {
    if (text.find_first_not_of(" \t\r") == std::string_view::npos) return;
    element line;
    if (parser.parse(text.data(), text.size()).get(line) != simdjson::SUCCESS ||
        !line.is_object()) {
      result.errors.push_back("line " + std::to_string(number) + ": not a JSON audit line");
      return;
    }
    const std::string_view profile = text_at(line, "profile");
    if (!options.from_profile.empty() && profile != options.from_profile) return;
    const std::string_view op = text_at(line, "operation");
    if (op.empty()) return;  // routing failed: no operation to allow
    // --audit-mode blocking writes a decision line (status 0) before forwarding and the
    // answer's line after: the answer's is the one to learn from, each request once.
    std::int64_t status = -1;
    if (line.at_key("status").get(status) == simdjson::SUCCESS && status == 0) return;
    ++result.lines_read;
    const std::string_view time = text_at(line, "time"), id = text_at(line, "request_id");
    if (first_time.empty() || time < first_time) first_time = time;
    if (time > last_time) last_time = time;
    element seen;
    const bool has_seen = line.at_key("seen").get(seen) == simdjson::SUCCESS && seen.is_object();
    if (auto why = refusal(line, text_at(line, "verdict"), seen, has_seen); !why.empty()) {
      refused[std::string(op) + ": " + why].note(time, id);
      return;
    }
    ++result.lines_learned;
    operations[std::string(op)].note(time, id);
    if (op == "ImageCreate")
      if (auto name = line.at_pointer("/object/name"); name.is_string())
        note_image(name.get_string().value_unsafe(), time, id);
    if (op == "NetworkCreate") join_owned.note(time, id);
    if (op == "VolumeCreate") mount_owned.note(time, id);
    if (!has_seen) return;
    element values;
    if (seen.at_key("values").get(values) != simdjson::SUCCESS) return;
    if (op == "ContainerCreate") learn_create(values, time, id);
    if (op == "ContainerExec") learn_exec(values, time, id);
  }

  // The container_create / container_exec rules, one a line.
  static void write_rules(std::string& out, const std::map<std::string, field_seen>& fields,
                          bool skip_network_mode) {
    bool first = true;
    for (const auto& [path, f] : fields) {
      if (skip_network_mode && path == "HostConfig.NetworkMode") continue;
      if (f.max == 0 && f.values.empty()) continue;
      out += first ? "\n        " : ",\n        ";
      first = false;
      append_string(out, path);
      if (f.max > 0) {
        out += ": {\"max\": " + std::to_string(f.max) + ", \"comment\": ";
        append_string(out, "largest seen; " + f.from.text() +
                               "; a request that leaves it unset gets this value too");
      } else {
        out += ": {\"allow\": [";
        for (const auto& v : f.values) {
          if (&v != &*f.values.begin()) out += ", ";
          append_string(out, v);
        }
        out += "], \"comment\": ";
        append_string(out, f.from.text());
      }
      out += '}';
    }
    out += first ? "}" : "\n      }";
  }

  static void write_list(std::string& out, const std::map<std::string, origin>& items) {
    out += '[';
    for (const auto& [name, from] : items) {
      if (&name != &items.begin()->first) out += ", ";
      append_string(out, name);
    }
    out += ']';
  }

  static void write_origins(std::string& out, const std::map<std::string, origin>& items,
                            std::string_view indent) {
    out += '{';
    bool first = true;
    for (const auto& [name, from] : items) {
      out += first ? "\n" : ",\n";
      first = false;
      out += indent;
      append_string(out, name);
      out += ": ";
      append_string(out, from.text());
    }
    out += "}";
  }

  std::string write() {
    const bool creates = operations.contains("ContainerCreate");
    const bool networks = join_owned.count > 0;
    std::string out = "{\n  \"comment\": ";
    std::string about = "learned by dockgate-proxy learn from " +
                        std::to_string(result.lines_read) + " audit lines";
    if (!options.from_profile.empty()) about += " of profile " + options.from_profile;
    for (const auto& s : options.sources) about += (&s == options.sources.data() ? " (" : ", ") + s;
    if (!options.sources.empty()) about += ")";
    if (!first_time.empty()) about += ", " + first_time + " to " + last_time;
    about += "; review before use";
    append_string(out, about);
    out += ",\n  \"default_profile\": ";
    append_string(out, options.name);
    out += ",\n  \"profiles\": {\n    ";
    append_string(out, options.name);
    out += ": {\n      \"description\": ";
    append_string(out, about);
    out += ",\n      \"comment\": {\n        \"operations\": ";
    write_origins(out, operations, "          ");
    if (networks || mount_owned.count || !bind_sources.empty()) {
      out += ",\n        \"objects\": {";
      std::string sep = "\n          ";
      if (networks) {
        out += sep + "\"networks.join_owned\": ";
        append_string(out, join_owned.text());
        sep = ",\n          ";
      }
      if (aliases.count) {
        out += sep + "\"networks.aliases\": ";
        append_string(out, aliases.text());
      }
      if (mount_owned.count) {
        out += sep + "\"volumes.mount_owned\": ";
        append_string(out, mount_owned.text());
        sep = ",\n          ";
      }
      for (const auto& [source, from] : bind_sources) {
        out += sep;
        append_string(out, "binds.source_roots " + source);
        out += ": ";
        append_string(out, from.text());
        sep = ",\n          ";
      }
      out += "}";
    }
    out += ",\n        \"refused_seen\": [";
    for (const auto& [what, from] : refused) {
      out += &what == &refused.begin()->first ? "\n          " : ",\n          ";
      std::string line = what + " (" + from.text() + ")";
      append_string(out, line);
      result.refused_seen.push_back(std::move(line));
    }
    out += refused.empty() ? "]" : "\n        ]";
    out += "\n      },\n      \"allow\": ";
    write_list(out, operations);
    if (creates || operations.contains("ImageCreate")) {
      out += ",\n      \"images\": {\"allow\": ";
      write_list(out, images);
      out += ", \"comment\": ";
      write_origins(out, images, "        ");
      out += '}';
    }
    if (creates) {
      out += ",\n      \"container_create\": {";
      write_rules(out, create, networks);
    }
    if (operations.contains("ContainerExec")) {
      out += ",\n      \"container_exec\": {";
      write_rules(out, exec, false);
    }
    if (!bind_sources.empty()) {
      out += ",\n      \"binds\": {\"source_roots\": ";
      write_list(out, bind_sources);
      out += ", \"targets\": ";
      write_list(out, bind_targets);
      out += ", \"require_fuse\": false}";
    }
    if (networks)
      out += std::string(",\n      \"networks\": {\"join_owned\": true, \"aliases\": ") +
             (aliases.count ? "true" : "false") + "}";
    if (mount_owned.count) out += ",\n      \"volumes\": {\"mount_owned\": true}";
    out += "\n    }\n  }\n}\n";
    return out;
  }
};

}  // namespace

learn_result learn_profile(std::span<const std::string_view> audit_texts, const learn_options& o) {
  learner l{o, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}};
  simdjson::dom::parser parser;
  for (std::string_view text : audit_texts) {
    std::size_t number = 0;
    while (!text.empty()) {
      const auto nl = text.find('\n');
      l.read_line(text.substr(0, nl), ++number, parser);
      if (nl == std::string_view::npos) break;
      text.remove_prefix(nl + 1);
    }
  }
  l.result.policy = l.write();
  return std::move(l.result);
}

}  // namespace dockgate::policy

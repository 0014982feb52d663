// The learner: audit lines in, the narrowest policy file that allows what they show out.
// See learn.hpp and docs/policy.md, "Learning a profile".
//
// Invariant: a rule is made only from requests the gate let through at their safe value,
// or from widening fields a rule bounds narrowly (bind sources and targets seen, networks
// and volumes the profile owns). Everything else a client did beyond that is reported,
// never learned, so running a hostile client in learning mode cannot teach the gate to
// let it out.
//
// Invariant: the line is not trusted to say what it widens, nor to be a record at all (an
// audit log is a file anyone with write access can edit). Every line must match
// docs/audit.schema.json; its profile must be one of the recording policy's and allow its
// operation; its "seen" values are decoded as the gate decodes a body (go_json), the
// widening set recomputed from them with the gate's table (widening_fields.hpp) and
// compared with the line's own list; an allowed line's values must pass its profile's
// review again; and what is learned is read from that decoded body, the same tree that
// was checked. As a last wall, write_rules drops from an allow list any value the table
// calls a host namespace or a SecurityOpt weakener (learnable_create_value).
#include "dockgate/policy/learn.hpp"

#include <simdjson.h>

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <set>
#include <variant>

#include "dockgate/common/error_body.hpp"
#include "dockgate/policy/audit_line.hpp"
#include "dockgate/policy/body_review.hpp"
#include "dockgate/policy/go_json.hpp"
#include "dockgate/policy/image_ref.hpp"
#include "dockgate/policy/policy_file.hpp"
#include "widening_fields.hpp"

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
// Widening fields a rule can bound to what was seen: binds under the sources seen,
// networks and volumes the profile owns, and published ports (on loopback: the "ports"
// rule, never the addresses the client named). Any other widening field off its safe
// value makes the request "seen and refused".
constexpr std::array<std::string_view, 6> boundable_widening{"HostConfig.Binds",
                                                             "HostConfig.Mounts",
                                                             "Volumes",
                                                             "HostConfig.NetworkMode",
                                                             "NetworkingConfig.EndpointsConfig",
                                                             "HostConfig.PortBindings"};

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

// A line's "seen", decoded: the body its values describe, read as the gate reads a body.
struct seen_body {
  json_object root;                     // canonical field names (go_json)
  std::set<std::string> unknown;        // paths whose value was too long to record
  std::vector<std::string> widening;    // the line's own list
  std::vector<std::string> recomputed;  // the widening table on `root` and `fields`
};

bool is_omitted(element v) {
  std::string_view s;
  return v.get_string().get(s) == simdjson::SUCCESS && s.starts_with("<omitted: ") &&
         s.ends_with(" bytes>");
}

// The body `values` describe: each path "A.B" as member B of object A, each value as
// written, put together and decoded as the gate decodes a ContainerCreate (ExecConfig)
// body, keys that name no field refused. Err: why the values are no such body.
std::variant<seen_body, std::string> decode_seen(element seen, bool create) {
  seen_body out;
  std::map<std::string, std::string, std::less<>> top;  // key: raw JSON
  std::map<std::string, std::map<std::string, std::string>, std::less<>> nested;
  // The schema (audit_line.cpp) made each of these what it says; read into values here:
  // a range-for over value_unsafe() of a temporary result would iterate a dangling
  // reference (the result dies at the end of the range's initializer).
  simdjson::dom::object values;
  simdjson::dom::array fields_seen, widening_seen;
  if (seen.at_key("values").get(values) != simdjson::SUCCESS ||
      seen.at_key("fields").get(fields_seen) != simdjson::SUCCESS ||
      seen.at_key("widening").get(widening_seen) != simdjson::SUCCESS)
    return std::string("seen has no values, fields and widening");
  for (auto [key, value] : values) {
    if (is_omitted(value)) {
      out.unknown.emplace(key);
      continue;
    }
    std::string raw = simdjson::minify(value);
    const auto dot = key.find('.');
    std::string_view head = key.substr(0, dot);
    if (dot == std::string_view::npos) {
      if (!top.emplace(std::string(key), std::move(raw)).second)
        return "seen.values names " + std::string(key) + " twice";
      continue;
    }
    std::string_view rest = key.substr(dot + 1);
    if (rest.empty() || rest.find('.') != std::string_view::npos)
      return "seen.values names " + std::string(key) + ", no field path of a request body";
    if (!nested[std::string(head)].emplace(std::string(rest), std::move(raw)).second)
      return "seen.values names " + std::string(key) + " twice";
  }
  std::string body = "{";
  auto member = [&](std::string_view key, const std::string& raw) {
    if (body.size() > 1) body += ',';
    append_string(body, key);
    body += ':';
    body += raw;
  };
  for (const auto& [key, raw] : top) {
    if (nested.contains(key)) return "seen.values names " + key + " and fields inside it";
    member(key, raw);
  }
  for (const auto& [head, members] : nested) {
    std::string inner = "{";
    for (const auto& [key, raw] : members) {
      if (inner.size() > 1) inner += ',';
      append_string(inner, key);
      inner += ':' + raw;
    }
    member(head, inner + "}");
  }
  body += '}';
  auto decoded = decode_body(body, create ? schema::container_create : schema::exec_config,
                             unknown_keys::refuse);
  if (!decoded.value || !decoded.value->as_object())
    return "seen.values are not a " + std::string(create ? "ContainerCreate" : "ContainerExec") +
           " body the gate would read: " + decoded.error;
  out.root = std::move(*decoded.value->as_object());

  std::set<std::string_view> fields;
  for (element f : fields_seen) fields.insert(f.get_string().value_unsafe());
  for (element w : widening_seen) out.widening.emplace_back(w.get_string().value_unsafe());
  auto table = create ? std::span<const widening_field>(create_widening_fields)
                      : std::span<const widening_field>(exec_widening_fields);
  for (const auto& w : table) {
    const json_value* v = locate(out.root, w.path);
    bool widens = false;
    if (out.unknown.contains(std::string(w.path)))
      widens = true;  // set to a value too long to record: not known to be safe
    else if (v)
      widens = !is_safe(out.root, v, w.safe);
    else if (fields.contains(w.path))
      // Set (not a zero value), its value never recorded: off its safe value, except a
      // log driver, which may be a local one (the line's own list says which).
      widens = w.safe != safe_when::log_config;
    if (widens) out.recomputed.emplace_back(w.path);
  }
  return out;
}

struct learner {
  const learn_options& options;
  learn_result result;
  std::map<std::string, origin> operations;
  std::map<std::string, origin> images;  // repository patterns
  std::map<std::string, field_seen> create, exec;
  std::map<std::string, origin> bind_sources, bind_targets;
  origin join_owned, aliases, mount_owned, ports;
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

  // Why a line teaches nothing, or empty when it may be learned. The widening fields are
  // the line's list with the recomputed set (equal, once read_line has compared them).
  std::string refusal(element line, std::string_view verdict, const seen_body* body) {
    if (verdict == "deny") {
      std::string why(text_at(line, "reason"));
      return why.empty() ? "refused (" + std::string(text_at(line, "rule")) + ")" : why;
    }
    // Audit mode: a refusal is recorded as its reason, which starts with "dockgate:".
    if (auto would = text_at(line, "would"); would.find("dockgate:") != std::string_view::npos)
      return "audit mode would refuse: " + std::string(would);
    if (!body) return {};
    std::set<std::string> widening(body->widening.begin(), body->widening.end());
    widening.insert(body->recomputed.begin(), body->recomputed.end());
    std::string unsafe;
    for (const auto& path : widening) {
      bool bounded = contains(boundable_widening, path);
      if (path == "HostConfig.NetworkMode") {
        // host and container:<id> share a namespace: no ownership rule bounds them.
        const json_value* mode = locate(body->root, path);
        if (!mode || !mode->as_string() || !learnable_create_value(path, *mode->as_string()))
          bounded = false;
      }
      if (!bounded) unsafe += (unsafe.empty() ? "" : ", ") + path;
    }
    if (!unsafe.empty()) return "never learned (security invariants): " + unsafe;
    return {};
  }

  static void note_strings(field_seen& f, const json_value& v) {
    if (const auto* s = v.as_string()) f.values.emplace(*s);
    if (const auto* a = v.as_array())
      for (const auto& item : *a)
        if (const auto* s = item.as_string()) f.values.emplace(*s);
  }

  void learn_create(const seen_body& body, std::string_view time, std::string_view id) {
    const json_object& root = body.root;
    if (const json_value* image = locate(root, "Image"); image && image->as_string())
      note_image(*image->as_string(), time, id);
    for (std::string_view path : allow_fields) {
      const json_value* v = locate(root, path);
      if (is_empty_value(v)) continue;
      auto& f = create[std::string(path)];
      f.from.note(time, id);
      note_strings(f, *v);
      if (path == "HostConfig.NetworkMode" && v->as_string() &&
          !predefined_network(*v->as_string()))
        join_owned.note(time, id);
    }
    for (std::string_view path : max_fields) {
      const json_value* v = locate(root, path);
      const auto n = v ? v->as_int() : std::nullopt;
      if (!n || *n <= 0) continue;
      auto& f = create[std::string(path)];
      f.from.note(time, id);
      f.max = std::max(f.max, *n);
    }
    if (const json_value* binds = locate(root, "HostConfig.Binds"); binds && binds->as_array())
      for (const auto& item : *binds->as_array())
        if (const auto* s = item.as_string()) note_bind(*s, time, id);
    if (const json_value* mounts = locate(root, "HostConfig.Mounts"); mounts && mounts->as_array())
      for (const auto& m : *mounts->as_array()) {
        if (!m.as_object()) continue;
        auto str = [&](std::string_view k) {
          const json_value* f = find(*m.as_object(), k);
          return f && f->as_string() ? *f->as_string() : std::string();
        };
        const std::string type = str("Type");
        if (type == "volume") mount_owned.note(time, id);
        if (type != "bind") continue;
        bind_sources[str("Source")].note(time, id);
        bind_targets[str("Target")].note(time, id);
      }
    if (!is_empty_value(locate(root, "Volumes"))) mount_owned.note(time, id);
    if (!is_empty_value(locate(root, "HostConfig.PortBindings"))) ports.note(time, id);
    if (const json_value* endpoints = locate(root, "NetworkingConfig.EndpointsConfig");
        endpoints && endpoints->as_object())
      for (const auto& [network, endpoint] : *endpoints->as_object()) {
        if (!predefined_network(network)) join_owned.note(time, id);
        if (endpoint.as_object() && !is_empty_value(find(*endpoint.as_object(), "Aliases")))
          aliases.note(time, id);
      }
  }

  void learn_exec(const seen_body& body, std::string_view time, std::string_view id) {
    const json_value* user = locate(body.root, "User");
    if (!user || !user->as_string() || user->as_string()->empty()) return;
    auto& f = exec["User"];
    f.from.note(time, id);
    f.values.emplace(*user->as_string());
  }

  // Whether the line's profile, by the recording policy, could have let it through; why
  // not otherwise. Only lines the gate let through are judged: a refusal is a fact the
  // gate may well have written for any operation.
  std::string impossible(element line, const profile& p, operation op, const seen_body* body,
                         bool has_seen) {
    const std::string_view verdict = text_at(line, "verdict");
    const bool audit_would_refuse =
        p.mode == profile::mode_kind::audit &&
        text_at(line, "would").find("dockgate:") != std::string_view::npos;
    if (has_seen && !p.record_fields)
      return "has \"seen\" but profile " + p.name + " does not record fields";
    const bool body_op = op == operation::ContainerCreate || op == operation::ContainerExec;
    if (has_seen && !body_op)
      return "has \"seen\" on " + std::string(operation_name(op)) +
             ", which has no create or exec body";
    if (verdict != "allow" || audit_would_refuse) return {};
    if (!p.allows(op))
      return "operation " + std::string(operation_name(op)) + " is not one profile " + p.name +
             " allows: no line the gate let through";
    if (body_op && p.record_fields && !has_seen)
      return "profile " + p.name + " records fields, but this " + std::string(operation_name(op)) +
             " line has no \"seen\"";
    if (p.mode == profile::mode_kind::audit) return {};
    if (op == operation::ImageCreate)
      if (auto name = line.at_pointer("/object/name"); name.is_string()) {
        const decision d = review_image_reference(p, name.get_string().value_unsafe());
        if (const auto* x = std::get_if<deny>(&d))
          return "says allow, but profile " + p.name + " refuses the image: " + x->reason;
      }
    if (!body) return {};
    // The values once more through the profile's own review: a line that says allow for
    // values its profile refuses was not written by the gate. (A workspace profile's
    // review needs the workspace label, whose value is never recorded: not judged here.)
    if (op == operation::ContainerCreate && p.rules.workspace) return {};
    const std::string text = to_json(json_value(body->root));
    const decision d = op == operation::ContainerCreate ? review_container_create(p, text)
                                                        : review_container_exec(p, text);
    if (const auto* x = std::get_if<deny>(&d))
      return "says allow, but profile " + p.name + " refuses its values: " + x->reason;
    return {};
  }

  void read_line(std::string_view text, std::string_view where, simdjson::dom::parser& parser) {
    if (text.find_first_not_of(" \t\r") == std::string_view::npos) return;
    auto reject = [&](const std::string& why) {
      result.errors.push_back(std::string(where) + ": " + why + ", not learned");
    };
    if (auto problem = audit_line_problem(text); !problem.empty())
      return reject("not an audit line (docs/audit.schema.json): " + problem);
    element line;
    if (parser.parse(text.data(), text.size()).get(line) != simdjson::SUCCESS)
      return reject("not an audit line: not JSON");
    const std::string_view profile_name = text_at(line, "profile");
    if (!options.from_profile.empty() && profile_name != options.from_profile) return;
    const std::string_view op = text_at(line, "operation");
    if (op.empty()) return;  // routing failed: no operation to allow
    // --audit-mode blocking writes a decision line (status 0) before forwarding and the
    // answer's line after: the answer's is the one to learn from, each request once.
    std::int64_t status = -1;
    if (line.at_key("status").get(status) == simdjson::SUCCESS && status == 0) return;
    ++result.lines_read;
    const auto known_op = operation_from_name(op);
    if (!known_op) return reject("operation " + std::string(op) + " is no Engine API operation");
    const profile* p = options.recorded ? options.recorded->find(profile_name) : nullptr;
    if (!p)
      return reject("profile " + std::string(profile_name) +
                    " is not one of the recording policy's (--policy)");
    if (!p->record_fields &&
        std::find(result.unrecorded_profiles.begin(), result.unrecorded_profiles.end(), p->name) ==
            result.unrecorded_profiles.end())
      result.unrecorded_profiles.push_back(p->name);
    element seen;
    const bool has_seen = line.at_key("seen").get(seen) == simdjson::SUCCESS;
    std::optional<seen_body> body;
    if (has_seen &&
        (*known_op == operation::ContainerCreate || *known_op == operation::ContainerExec)) {
      auto decoded = decode_seen(seen, *known_op == operation::ContainerCreate);
      if (auto* why = std::get_if<std::string>(&decoded)) return reject(*why);
      body = std::move(std::get<seen_body>(decoded));
      // The line's own list must name every field its values widen: one that leaves any
      // out was edited (or forged), and says nothing learn can trust.
      std::string left_out;
      for (const auto& path : body->recomputed)
        if (std::find(body->widening.begin(), body->widening.end(), path) == body->widening.end())
          left_out += (left_out.empty() ? "" : ", ") + path;
      if (!left_out.empty())
        return reject("seen.widening leaves out " + left_out +
                      ", which the line's own values set off the safe value: an edited line");
    }
    if (auto why = impossible(line, *p, *known_op, body ? &*body : nullptr, has_seen); !why.empty())
      return reject(why);
    const std::string_view time = text_at(line, "time"), id = text_at(line, "request_id");
    if (first_time.empty() || time < first_time) first_time = time;
    if (time > last_time) last_time = time;
    if (auto why = refusal(line, text_at(line, "verdict"), body ? &*body : nullptr); !why.empty()) {
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
    if (*known_op == operation::ContainerCreate || *known_op == operation::ContainerExec) {
      if (!body) {
        ++result.unrecorded_bodies;
        return;
      }
      if (*known_op == operation::ContainerCreate) learn_create(*body, time, id);
      if (*known_op == operation::ContainerExec) learn_exec(*body, time, id);
    }
  }

  // The container_create / container_exec rules, one a line.
  // For container_create, an allow list keeps only learnable values (the last wall: no
  // host namespace, no SecurityOpt weakener, whatever the lines said).
  static void write_rules(std::string& out, std::map<std::string, field_seen> fields,
                          bool skip_network_mode, bool create_rules) {
    bool first = true;
    for (auto& [path, f] : fields) {
      if (skip_network_mode && path == "HostConfig.NetworkMode") continue;
      if (create_rules)
        std::erase_if(f.values,
                      [&](const std::string& v) { return !learnable_create_value(path, v); });
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
    if (networks || mount_owned.count || ports.count || !bind_sources.empty()) {
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
      if (ports.count) {
        out += sep + "\"ports\": ";
        append_string(out, ports.text());
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
      write_rules(out, create, networks, true);
    }
    if (operations.contains("ContainerExec")) {
      out += ",\n      \"container_exec\": {";
      write_rules(out, exec, false, false);
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
    // Published ports: on loopback, whatever address the client named (docs/policy.md).
    if (ports.count) out += ",\n      \"ports\": {}";
    out += "\n    }\n  }\n}\n";
    return out;
  }
};

}  // namespace

bool learnable_create_value(std::string_view path, std::string_view value) {
  if (path == "HostConfig.NetworkMode" &&
      (value == "host" || value.find(':') != std::string_view::npos))
    return false;  // the host's network, or container:<id>'s
  for (const auto& w : create_widening_fields) {
    if (w.path != path) continue;
    if (w.safe == safe_when::network) return true;  // an owned network: join_owned bounds it
    const json_value v = w.safe == safe_when::security_opt
                             ? json_value(json_array{json_value(std::string(value))})
                             : json_value(std::string(value));
    return is_safe(json_object{}, &v, w.safe);
  }
  return true;
}

learn_result learn_profile(std::span<const std::string_view> audit_texts, const learn_options& o) {
  learner l{o, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}};
  simdjson::dom::parser parser;
  for (std::size_t i = 0; i < audit_texts.size(); ++i) {
    std::string_view text = audit_texts[i];
    const std::string file =
        i < o.sources.size() ? o.sources[i] : "audit text " + std::to_string(i + 1);
    std::size_t number = 0;
    while (!text.empty()) {
      const auto nl = text.find('\n');
      l.read_line(text.substr(0, nl), file + ":" + std::to_string(++number), parser);
      if (nl == std::string_view::npos) break;
      text.remove_prefix(nl + 1);
    }
  }
  l.result.policy = l.write();
  return std::move(l.result);
}

}  // namespace dockgate::policy

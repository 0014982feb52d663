// docs/audit.schema.json as code. See audit_line.hpp.
//
// Invariant: every keyword the schema puts on a member is checked here (type, required,
// additionalProperties false, enum, const, pattern, minLength, minimum, maximum,
// minProperties, the client's transport conditions, changes' oneOf, seen.values'
// propertyNames), so a line learn reads is one the gate could have written. Beyond the
// schema, a member given twice is refused: JSON readers differ on which one counts. The patterns
// are written out as code (no regex engine on input an attacker may have forged); each
// one's schema text is in `patterns` below and the drift test holds them equal.
#include "dockgate/policy/audit_line.hpp"

#include <simdjson.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

namespace dockgate::policy {

namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

constexpr std::array<std::string_view, 20> line_properties{
    "time",   "request_id", "client",   "profile",   "method",      "path",    "operation",
    "object", "verdict",    "rule",     "reason",    "changes",     "dropped", "would",
    "seen",   "status",     "bytes_in", "bytes_out", "duration_ms", "hijacked"};
constexpr std::array<std::string_view, 12> line_required{
    "time",      "request_id", "client", "profile",  "method",    "path",
    "operation", "verdict",    "status", "bytes_in", "bytes_out", "duration_ms"};
constexpr std::array<std::string_view, 8> client_properties{
    "transport", "uid", "gid", "pid", "process", "address", "port", "subject"};
constexpr std::array<std::string_view, 1> client_required{"transport"};
constexpr std::array<std::string_view, 6> object_properties{"type",  "name",   "id",
                                                            "image", "digest", "exec_id"};
constexpr std::array<std::string_view, 1> object_required{"type"};
constexpr std::array<std::string_view, 3> seen_properties{"fields", "values", "widening"};
constexpr std::array<std::string_view, 3> seen_required{"fields", "values", "widening"};
constexpr std::array<std::string_view, 4> change_properties{"field", "action", "from", "to"};
constexpr std::array<std::string_view, 2> change_required{"field", "action"};

constexpr std::array<std::string_view, 2> verdicts{"allow", "deny"};
constexpr std::array<std::string_view, 4> transports{"unix", "tcp", "tls", "unknown"};
constexpr std::array<std::string_view, 11> object_types{"container", "exec",   "image",  "network",
                                                        "volume",    "plugin", "secret", "config",
                                                        "service",   "node",   "task"};

constexpr std::array<audit_schema_object, 5> objects{{
    {"", line_properties, line_required},
    {"client", client_properties, client_required},
    {"object", object_properties, object_required},
    {"seen", seen_properties, seen_required},
    {"changes[]", change_properties, change_required},
}};
constexpr std::array<audit_schema_enum, 3> enums{{
    {"verdict", verdicts},
    {"client.transport", transports},
    {"object.type", object_types},
}};
constexpr std::array<audit_schema_pattern, 6> patterns{{
    {"time",
     R"(^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)\.[0-9]{6}Z$)"},
    {"request_id", R"(^[0-9a-f]{8}-[0-9a-f]{12,16}$)"},
    {"operation", R"(^([A-Z][A-Za-z]*)?$)"},
    {"object.digest", R"(^[a-z0-9]+([.+_-][a-z0-9]+)*:[a-zA-Z0-9=_-]{32,}$)"},
    {"object.exec_id", R"(^[0-9a-f]{64}$)"},
    {"seen.values (propertyNames, not)",
     R"(^(Env|Cmd|Entrypoint|Shell|Labels|Healthcheck|HostConfig\.LogConfig)(\.|$))"},
}};
constexpr std::array<audit_schema_type, 31> types{{
    {"", "object"},
    {"time", "string"},
    {"request_id", "string"},
    {"client", "object"},
    {"client.uid", "integer"},
    {"client.gid", "integer"},
    {"client.pid", "integer"},
    {"client.process", "string"},
    {"client.address", "string"},
    {"client.port", "integer"},
    {"client.subject", "string"},
    {"profile", "string"},
    {"method", "string"},
    {"path", "string"},
    {"operation", "string"},
    {"object", "object"},
    {"object.name", "string"},
    {"object.id", "string"},
    {"object.image", "string"},
    {"object.digest", "string"},
    {"object.exec_id", "string"},
    {"rule", "string"},
    {"reason", "string"},
    {"dropped", "string"},
    {"would", "string"},
    {"seen", "object"},
    {"status", "integer"},
    {"bytes_in", "integer"},
    {"bytes_out", "integer"},
    {"duration_ms", "number"},
    {"seen.values", "object"},
}};

bool in(std::span<const std::string_view> list, std::string_view s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

bool digits(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}
bool lower_hex(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}
bool lower_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}
bool alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

// Two digits from `lo` to `hi`.
bool two_digits(std::string_view s, int lo, int hi) {
  if (s.size() != 2 || !digits(s)) return false;
  const int n = (s[0] - '0') * 10 + (s[1] - '0');
  return n >= lo && n <= hi;
}

bool time_pattern(std::string_view s) {
  // 2026-12-01T21:00:00.123456Z
  if (s.size() != 27 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' ||
      s[16] != ':' || s[19] != '.' || s[26] != 'Z')
    return false;
  return digits(s.substr(0, 4)) && two_digits(s.substr(5, 2), 1, 12) &&
         two_digits(s.substr(8, 2), 1, 31) && two_digits(s.substr(11, 2), 0, 23) &&
         two_digits(s.substr(14, 2), 0, 59) && two_digits(s.substr(17, 2), 0, 60) &&
         digits(s.substr(20, 6));
}

bool request_id_pattern(std::string_view s) {
  if (s.size() < 21 || s.size() > 25 || s[8] != '-') return false;
  return lower_hex(s.substr(0, 8)) && lower_hex(s.substr(9));
}

bool operation_pattern(std::string_view s) {
  if (s.empty()) return true;
  return s[0] >= 'A' && s[0] <= 'Z' && std::all_of(s.begin(), s.end(), alpha);
}

bool digest_pattern(std::string_view s) {
  const auto colon = s.find(':');
  if (colon == std::string_view::npos) return false;
  // [a-z0-9]+([.+_-][a-z0-9]+)*: separators only between alphanumeric runs.
  const std::string_view algorithm = s.substr(0, colon), hex = s.substr(colon + 1);
  if (algorithm.empty() || !lower_alnum(algorithm.front()) || !lower_alnum(algorithm.back()))
    return false;
  for (std::size_t i = 0; i < algorithm.size(); ++i) {
    const char c = algorithm[i];
    if (lower_alnum(c)) continue;
    if (c != '.' && c != '+' && c != '_' && c != '-') return false;
    if (!lower_alnum(algorithm[i + 1])) return false;  // i + 1 < size: the back is alnum
  }
  return hex.size() >= 32 && std::all_of(hex.begin(), hex.end(), [](char c) {
           return alpha(c) || (c >= '0' && c <= '9') || c == '=' || c == '_' || c == '-';
         });
}

bool exec_id_pattern(std::string_view s) {
  return s.size() == 64 && lower_hex(s);
}

bool secret_value_name(std::string_view s) {
  for (std::string_view p :
       {"Env", "Cmd", "Entrypoint", "Shell", "Labels", "Healthcheck", "HostConfig.LogConfig"})
    if (s.starts_with(p) && (s.size() == p.size() || s[p.size()] == '.')) return true;
  return false;
}

// JSON Schema's "integer": a number with no fractional part (1.0 is one).
bool is_integer(element e) {
  if (e.type() == element_type::INT64 || e.type() == element_type::UINT64) return true;
  double d = 0;
  return e.get_double().get(d) == simdjson::SUCCESS && std::isfinite(d) && std::floor(d) == d;
}
bool is_number(element e) {
  const auto t = e.type();
  return t == element_type::INT64 || t == element_type::UINT64 || t == element_type::DOUBLE;
}
double number_of(element e) {
  double d = 0;
  if (e.type() == element_type::INT64) return static_cast<double>(e.get_int64().value_unsafe());
  if (e.type() == element_type::UINT64) return static_cast<double>(e.get_uint64().value_unsafe());
  if (e.get_double().get(d) != simdjson::SUCCESS) return 0;
  return d;
}

struct checker {
  std::string problem;

  bool fail(std::string_view where, std::string_view why) {
    problem = std::string(where.empty() ? "(line)" : where) + ": " + std::string(why);
    return false;
  }

  // additionalProperties: false and required.
  bool members(element o, std::string_view where, std::span<const std::string_view> known,
               std::span<const std::string_view> required) {
    simdjson::dom::object obj;
    if (o.get_object().get(obj) != simdjson::SUCCESS) return fail(where, "is not an object");
    std::vector<std::string_view> keys;
    for (auto [key, value] : obj) {
      if (!in(known, key)) return fail(where, "has an unknown member \"" + std::string(key) + "\"");
      // The gate never writes a member twice; readers differ on which one counts.
      if (in(keys, key)) return fail(where, "has \"" + std::string(key) + "\" twice");
      keys.push_back(key);
    }
    for (std::string_view r : required)
      if (o.at_key(r).error() != simdjson::SUCCESS)
        return fail(where, "has no \"" + std::string(r) + "\"");
    return true;
  }

  bool string(element e, std::string_view where, bool non_empty, bool (*pattern)(std::string_view),
              std::span<const std::string_view> allowed = {}) {
    std::string_view s;
    if (e.get_string().get(s) != simdjson::SUCCESS) return fail(where, "is not a string");
    if (non_empty && s.empty()) return fail(where, "is empty");
    if (pattern && !pattern(s)) return fail(where, "does not match the schema's pattern");
    if (!allowed.empty() && !in(allowed, s))
      return fail(where, "\"" + std::string(s) + "\" is not one of the schema's values");
    return true;
  }

  bool integer(element e, std::string_view where, double min, double max) {
    if (!is_integer(e)) return fail(where, "is not an integer");
    const double n = number_of(e);
    if (n < min || n > max) return fail(where, "is out of range");
    return true;
  }

  bool client(element c) {
    if (!members(c, "client", client_properties, client_required)) return false;
    std::string_view transport;
    if (!string(c.at_key("transport").value_unsafe(), "client.transport", false, nullptr,
                transports))
      return false;
    transport = c.at_key("transport").get_string().value_unsafe();
    for (std::string_view k : {"uid", "gid", "pid"})
      if (auto v = c.at_key(k); v.error() == simdjson::SUCCESS &&
                                !integer(v.value_unsafe(), "client." + std::string(k), 0, 1e300))
        return false;
    if (auto v = c.at_key("port");
        v.error() == simdjson::SUCCESS && !integer(v.value_unsafe(), "client.port", 0, 65535))
      return false;
    for (std::string_view k : {"process", "address", "subject"})
      if (auto v = c.at_key(k);
          v.error() == simdjson::SUCCESS &&
          !string(v.value_unsafe(), "client." + std::string(k), true, nullptr))
        return false;
    // The member a transport cannot carry.
    std::span<const std::string_view> absent;
    static constexpr std::array<std::string_view, 3> unix_absent{"address", "port", "subject"};
    static constexpr std::array<std::string_view, 5> tcp_absent{"uid", "gid", "pid", "process",
                                                                "subject"};
    static constexpr std::array<std::string_view, 4> tls_absent{"uid", "gid", "pid", "process"};
    if (transport == "unix") absent = unix_absent;
    if (transport == "tcp") absent = tcp_absent;
    if (transport == "tls") absent = tls_absent;
    for (std::string_view k : absent)
      if (c.at_key(k).error() == simdjson::SUCCESS)
        return fail("client." + std::string(k),
                    "is not carried by transport " + std::string(transport));
    return true;
  }

  bool object(element o) {
    if (!members(o, "object", object_properties, object_required)) return false;
    simdjson::dom::object obj = o.get_object().value_unsafe();
    if (obj.size() < 2) return fail("object", "has fewer than 2 members");
    if (!string(o.at_key("type").value_unsafe(), "object.type", false, nullptr, object_types))
      return false;
    for (std::string_view k : {"name", "id", "image"})
      if (auto v = o.at_key(k);
          v.error() == simdjson::SUCCESS &&
          !string(v.value_unsafe(), "object." + std::string(k), true, nullptr))
        return false;
    if (auto v = o.at_key("digest");
        v.error() == simdjson::SUCCESS &&
        !string(v.value_unsafe(), "object.digest", false, digest_pattern))
      return false;
    if (auto v = o.at_key("exec_id");
        v.error() == simdjson::SUCCESS &&
        !string(v.value_unsafe(), "object.exec_id", false, exec_id_pattern))
      return false;
    return true;
  }

  bool string_list(element e, std::string_view where) {
    simdjson::dom::array a;
    if (e.get_array().get(a) != simdjson::SUCCESS) return fail(where, "is not an array");
    for (element item : a)
      if (!string(item, std::string(where) + "[]", true, nullptr)) return false;
    return true;
  }

  bool seen(element s) {
    if (!members(s, "seen", seen_properties, seen_required)) return false;
    if (!string_list(s.at_key("fields").value_unsafe(), "seen.fields")) return false;
    if (!string_list(s.at_key("widening").value_unsafe(), "seen.widening")) return false;
    simdjson::dom::object values;
    if (s.at_key("values").get_object().get(values) != simdjson::SUCCESS)
      return fail("seen.values", "is not an object");
    for (auto [key, value] : values)
      if (secret_value_name(key))
        return fail("seen.values", "records the value of \"" + std::string(key) +
                                       "\", a field that may carry secrets");
    return true;
  }

  bool changes(element c) {
    std::string_view s;
    if (c.get_string().get(s) == simdjson::SUCCESS)
      return s.empty() ? fail("changes", "is empty") : true;
    simdjson::dom::array a;
    if (c.get_array().get(a) != simdjson::SUCCESS)
      return fail("changes", "is neither a string nor an array");
    for (element item : a) {
      if (!members(item, "changes[]", change_properties, change_required)) return false;
      if (!string(item.at_key("field").value_unsafe(), "changes[].field", true, nullptr) ||
          !string(item.at_key("action").value_unsafe(), "changes[].action", true, nullptr))
        return false;
    }
    return true;
  }

  bool line(element l) {
    if (!members(l, "", line_properties, line_required)) return false;
    auto at = [&](std::string_view k) { return l.at_key(k).value_unsafe(); };
    auto has = [&](std::string_view k) { return l.at_key(k).error() == simdjson::SUCCESS; };
    if (!string(at("time"), "time", false, time_pattern)) return false;
    if (!string(at("request_id"), "request_id", false, request_id_pattern)) return false;
    if (!client(at("client"))) return false;
    if (!string(at("profile"), "profile", true, nullptr)) return false;
    if (!string(at("method"), "method", false, nullptr)) return false;
    if (!string(at("path"), "path", false, nullptr)) return false;
    if (!string(at("operation"), "operation", false, operation_pattern)) return false;
    if (has("object") && !object(at("object"))) return false;
    if (!string(at("verdict"), "verdict", false, nullptr, verdicts)) return false;
    for (std::string_view k : {"rule", "reason", "dropped", "would"})
      if (has(k) && !string(at(k), k, true, nullptr)) return false;
    if (has("changes") && !changes(at("changes"))) return false;
    if (has("seen") && !seen(at("seen"))) return false;
    if (!integer(at("status"), "status", 0, 599)) return false;
    if (const double status = number_of(at("status")); status > 0 && status < 100)
      return fail("status", "is between 0 and 100");
    if (!integer(at("bytes_in"), "bytes_in", 0, 1e300)) return false;
    if (!integer(at("bytes_out"), "bytes_out", 0, 1e300)) return false;
    if (!is_number(at("duration_ms"))) return fail("duration_ms", "is not a number");
    if (number_of(at("duration_ms")) < 0) return fail("duration_ms", "is negative");
    bool hijacked = false;
    if (has("hijacked") &&
        (at("hijacked").get_bool().get(hijacked) != simdjson::SUCCESS || !hijacked))
      return fail("hijacked", "is not true");
    return true;
  }
};

}  // namespace

std::string audit_line_problem(std::string_view text) {
  simdjson::dom::parser parser;
  element line;
  if (parser.parse(text.data(), text.size()).get(line) != simdjson::SUCCESS) return "not JSON";
  checker c;
  if (!c.line(line)) return c.problem;
  return {};
}

std::span<const audit_schema_object> audit_schema_objects() {
  return objects;
}
std::span<const audit_schema_enum> audit_schema_enums() {
  return enums;
}
std::span<const audit_schema_pattern> audit_schema_patterns() {
  return patterns;
}
std::span<const audit_schema_type> audit_schema_types() {
  return types;
}

}  // namespace dockgate::policy

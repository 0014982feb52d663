#pragma once
// A small JSON tree: what the proxy decoded from a request body, after key resolution,
// and what it writes back out (its own canonical serialisation).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace dockgate::policy {

struct json_value;
struct json_member;
using json_array = std::vector<json_value>;
using json_object = std::vector<json_member>;  // ordered; keys unique

struct json_value {
  std::variant<std::nullptr_t, bool, std::int64_t, std::uint64_t, std::string, json_array,
               json_object>
      v;

  // Constructors are defined below json_member: clang instantiates the variant's
  // members (and so the vectors' element destructors) where a constructor is defined.
  json_value();
  json_value(std::nullptr_t);
  json_value(bool b);
  json_value(std::int64_t i);
  json_value(std::uint64_t u);
  json_value(std::string s);
  json_value(const char* s);
  json_value(json_array a);
  json_value(json_object o);

  bool is_null() const { return std::holds_alternative<std::nullptr_t>(v); }
  const bool* as_bool() const { return std::get_if<bool>(&v); }
  const std::string* as_string() const { return std::get_if<std::string>(&v); }
  const json_array* as_array() const { return std::get_if<json_array>(&v); }
  json_array* as_array() { return std::get_if<json_array>(&v); }
  const json_object* as_object() const { return std::get_if<json_object>(&v); }
  json_object* as_object() { return std::get_if<json_object>(&v); }
  // Integer value of an int64 or uint64 (saturated), if it is one.
  std::optional<std::int64_t> as_int() const;

  bool operator==(const json_value&) const;
};

struct json_member {
  std::string key;
  json_value value;
  bool operator==(const json_member&) const = default;
};

inline json_value::json_value() : v(nullptr) {}
inline json_value::json_value(std::nullptr_t) : v(nullptr) {}
inline json_value::json_value(bool b) : v(b) {}
inline json_value::json_value(std::int64_t i) : v(i) {}
inline json_value::json_value(std::uint64_t u) : v(u) {}
inline json_value::json_value(std::string s) : v(std::move(s)) {}
inline json_value::json_value(const char* s) : v(std::string(s)) {}
inline json_value::json_value(json_array a) : v(std::move(a)) {}
inline json_value::json_value(json_object o) : v(std::move(o)) {}

// Member lookup by exact key; nullptr if absent.
const json_value* find(const json_object& o, std::string_view key);
json_value* find(json_object& o, std::string_view key);
// Sets (replacing or appending) a member.
void set(json_object& o, std::string_view key, json_value value);
void erase(json_object& o, std::string_view key);
// The member at a dotted path ("HostConfig.Memory"), nullptr if absent; with `create`,
// the parent objects are made. `parent_out` and `key_out` say where the member is or goes.
json_value* locate(json_object& root, std::string_view path, bool create, json_object** parent_out,
                   std::string_view* key_out);
const json_value* locate(const json_object& root, std::string_view path);

// Compact JSON, members in stored order.
void write_json(std::string& out, const json_value& v);
std::string to_json(const json_value& v);

}  // namespace dockgate::policy

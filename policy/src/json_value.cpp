#include "dockgate/policy/json_value.hpp"

#include <algorithm>
#include <limits>

#include "dockgate/common/error_body.hpp"

namespace dockgate::policy {

std::optional<std::int64_t> json_value::as_int() const {
  if (auto* i = std::get_if<std::int64_t>(&v)) return *i;
  if (auto* u = std::get_if<std::uint64_t>(&v))
    return *u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())
               ? std::numeric_limits<std::int64_t>::max()
               : static_cast<std::int64_t>(*u);
  return std::nullopt;
}

bool json_value::operator==(const json_value& other) const {
  // Integers compare by value whichever alternative holds them.
  auto a = as_int();
  auto b = other.as_int();
  if (a && b) return *a == *b;
  return v == other.v;
}

const json_value* find(const json_object& o, std::string_view key) {
  for (const auto& m : o)
    if (m.key == key) return &m.value;
  return nullptr;
}

json_value* find(json_object& o, std::string_view key) {
  for (auto& m : o)
    if (m.key == key) return &m.value;
  return nullptr;
}

void set(json_object& o, std::string_view key, json_value value) {
  if (auto* existing = find(o, key)) {
    *existing = std::move(value);
    return;
  }
  o.push_back({std::string(key), std::move(value)});
}

void erase(json_object& o, std::string_view key) {
  o.erase(std::remove_if(o.begin(), o.end(), [&](const json_member& m) { return m.key == key; }),
          o.end());
}

void write_json(std::string& out, const json_value& value) {
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::nullptr_t>) {
          out += "null";
        } else if constexpr (std::is_same_v<T, bool>) {
          out += x ? "true" : "false";
        } else if constexpr (std::is_same_v<T, std::int64_t> || std::is_same_v<T, std::uint64_t>) {
          out += std::to_string(x);
        } else if constexpr (std::is_same_v<T, std::string>) {
          out += '"';
          common::append_json_escaped(out, x);
          out += '"';
        } else if constexpr (std::is_same_v<T, json_array>) {
          out += '[';
          for (std::size_t i = 0; i < x.size(); ++i) {
            if (i) out += ',';
            write_json(out, x[i]);
          }
          out += ']';
        } else {
          out += '{';
          for (std::size_t i = 0; i < x.size(); ++i) {
            if (i) out += ',';
            out += '"';
            common::append_json_escaped(out, x[i].key);
            out += "\":";
            write_json(out, x[i].value);
          }
          out += '}';
        }
      },
      value.v);
}

std::string to_json(const json_value& v) {
  std::string out;
  write_json(out, v);
  return out;
}

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

}  // namespace dockgate::policy

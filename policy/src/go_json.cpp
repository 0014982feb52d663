// Go-compatible decoding of request bodies. See go_json.hpp for the invariant.
#include "dockgate/policy/go_json.hpp"

#include <simdjson.h>

#include <algorithm>
#include <limits>
#include <vector>

namespace dockgate::policy {

namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

constexpr char ascii_lower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c;
}

// Folds `key` the way Go's encoding/json does for field matching, restricted to what can
// match an ASCII field name: ASCII case, U+212A KELVIN SIGN (k) and U+017F LATIN SMALL
// LETTER LONG S (s). Any other non-ASCII rune cannot match: nullopt.
std::optional<std::string> fold_for_ascii_fields(std::string_view key) {
  std::string out;
  out.reserve(key.size());
  for (std::size_t i = 0; i < key.size();) {
    const auto c = static_cast<unsigned char>(key[i]);
    if (c < 0x80) {
      out += ascii_lower(static_cast<char>(c));
      ++i;
    } else if (key.substr(i, 3) == "\xE2\x84\xAA") {  // U+212A
      out += 'k';
      i += 3;
    } else if (key.substr(i, 2) == "\xC5\xBF") {  // U+017F
      out += 's';
      i += 2;
    } else {
      return std::nullopt;
    }
  }
  return out;
}

bool equals_folded(std::string_view field_name, std::string_view folded) {
  return field_name.size() == folded.size() &&
         std::equal(field_name.begin(), field_name.end(), folded.begin(),
                    [](char a, char b) { return ascii_lower(a) == b; });
}

class decoder {
 public:
  std::string error;
  bool drop_unknown = true;
  std::vector<std::string> dropped;

  bool fail(const std::string& path, std::string_view what) {
    if (error.empty()) error = path + ": " + std::string(what);
    return false;
  }

  // Decodes `e` into `out` as field `f`. Sets `present` false for a null that means
  // "absent" (Go leaves a nil pointer, slice or map).
  bool field(element e, const field_spec& f, const std::string& path, json_value& out,
             bool& present) {
    present = true;
    if (e.is_null()) {
      present = false;
      if (!f.nullable)
        return fail(path, "null is not allowed here (dockerd would keep its previous value)");
      return true;
    }
    switch (f.kind) {
      case field_kind::boolean: {
        bool b;
        if (e.get_bool().get(b) != simdjson::SUCCESS) return fail(path, "must be true or false");
        out = b;
        return true;
      }
      case field_kind::int64: {
        if (e.type() != element_type::INT64) {
          if (e.type() == element_type::UINT64) return fail(path, "integer out of range");
          return fail(path, "must be an integer");
        }
        out = std::int64_t(e.get_int64().value_unsafe());
        return true;
      }
      case field_kind::uint64: {
        std::uint64_t u;
        if (e.type() == element_type::INT64) {
          const std::int64_t i = e.get_int64().value_unsafe();
          if (i < 0) return fail(path, "must not be negative");
          u = static_cast<std::uint64_t>(i);
        } else if (e.type() == element_type::UINT64) {
          u = e.get_uint64().value_unsafe();
        } else {
          return fail(path, "must be an integer");
        }
        if (u > f.max) return fail(path, "integer out of range");
        out = u;
        return true;
      }
      case field_kind::string: {
        std::string_view s;
        if (e.get_string().get(s) != simdjson::SUCCESS) return fail(path, "must be a string");
        out = std::string(s);
        return true;
      }
      case field_kind::strslice: {
        std::string_view s;
        if (e.get_string().get(s) == simdjson::SUCCESS) {
          out = json_array{json_value(std::string(s))};  // Docker's StrSlice: one string = [string]
          return true;
        }
        return string_list(e, path, out);
      }
      case field_kind::string_list:
        return string_list(e, path, out);
      case field_kind::string_list_list:
        return array(e, path, "must be an array of arrays of strings", out,
                     [&](element item, const std::string& item_path, json_value& v) {
                       return string_list(item, item_path, v);
                     });
      case field_kind::uint_pair: {
        // Go decodes [2]uint by position: more or fewer elements would read differently.
        simdjson::dom::array arr;
        if (e.get_array().get(arr) != simdjson::SUCCESS || arr.size() != 2)
          return fail(path, "must be an array of exactly two unsigned integers");
        static constexpr field_spec part{"", field_kind::uint64};
        return array(e, path, "", out,
                     [&](element item, const std::string& item_path, json_value& v) {
                       bool item_present;
                       return field(item, part, item_path, v, item_present);
                     });
      }
      case field_kind::string_map:
      case field_kind::empty_object_map:
      case field_kind::object_map:
      case field_kind::object_list_map:
        return map(e, f, path, out);
      case field_kind::object: {
        json_object obj;
        if (!object(e, *f.child, path, obj)) return false;
        out = std::move(obj);
        return true;
      }
      case field_kind::object_list:
        return array(e, path, "must be an array of objects", out,
                     [&](element item, const std::string& item_path, json_value& v) {
                       json_object obj;
                       if (!object(item, *f.child, item_path, obj)) return false;
                       v = std::move(obj);
                       return true;
                     });
    }
    return fail(path, "unsupported field");
  }

  // An array whose items each decode with `item` (at "path[i]").
  template <class F>
  bool array(element e, const std::string& path, std::string_view what, json_value& out, F&& item) {
    simdjson::dom::array arr;
    if (e.get_array().get(arr) != simdjson::SUCCESS) return fail(path, what);
    json_array items;
    std::size_t i = 0;
    for (element x : arr) {
      json_value v;
      if (!item(x, path + "[" + std::to_string(i++) + "]", v)) return false;
      items.push_back(std::move(v));
    }
    out = std::move(items);
    return true;
  }

  bool string_list(element e, const std::string& path, json_value& out) {
    return array(e, path, "must be an array of strings", out,
                 [&](element item, const std::string&, json_value& v) {
                   std::string_view str;
                   if (item.get_string().get(str) != simdjson::SUCCESS)
                     return fail(path, "must be an array of strings");
                   v = std::string(str);
                   return true;
                 });
  }

  // Map-typed fields keep their keys as written (no folding); a repeated key is refused
  // (Go keeps the last, a reader that keeps the first disagrees). Keys are sorted so that
  // the proxy's output does not depend on the client's order.
  bool map(element e, const field_spec& f, const std::string& path, json_value& out) {
    simdjson::dom::object obj;
    if (e.get_object().get(obj) != simdjson::SUCCESS) return fail(path, "must be an object");
    json_object members;
    for (auto m : obj) {
      const std::string key(m.key);
      const std::string item_path = path + "[\"" + key + "\"]";
      if (find(members, key)) return fail(item_path, "duplicate key");
      json_value v;
      switch (f.kind) {
        case field_kind::string_map: {
          std::string_view s;
          if (m.value.get_string().get(s) != simdjson::SUCCESS)
            return fail(item_path, "must be a string");
          v = std::string(s);
          break;
        }
        case field_kind::empty_object_map: {
          simdjson::dom::object inner;
          if (!m.value.is_null() &&
              (m.value.get_object().get(inner) != simdjson::SUCCESS || inner.size() != 0))
            return fail(item_path, "must be {}");
          v = json_object{};
          break;
        }
        case field_kind::object_map: {
          json_object inner;
          if (!object(m.value, *f.child, item_path, inner)) return false;
          v = std::move(inner);
          break;
        }
        default: {  // object_list_map
          if (m.value.is_null()) {
            v = json_array{};
            break;
          }
          const field_spec list{f.name, field_kind::object_list, f.child};
          bool p;
          if (!field(m.value, list, item_path, v, p)) return false;
          break;
        }
      }
      members.push_back({key, std::move(v)});
    }
    std::sort(members.begin(), members.end(),
              [](const auto& a, const auto& b) { return a.key < b.key; });
    out = std::move(members);
    return true;
  }

  bool object(element e, const object_spec& spec, const std::string& path, json_object& out) {
    simdjson::dom::object obj;
    if (e.get_object().get(obj) != simdjson::SUCCESS) return fail(path, "must be an object");
    std::vector<std::string_view> seen(spec.fields.size());
    std::vector<std::pair<std::size_t, json_member>> members;
    for (auto m : obj) {
      const auto index = resolve_key(m.key, spec);
      const std::string key_path =
          path.empty() ? std::string(m.key) : path + "." + std::string(m.key);
      if (!index) {
        if (!drop_unknown) return fail(key_path, "unknown field of " + std::string(spec.name));
        dropped.push_back(key_path);
        continue;
      }
      const auto& f = spec.fields[*index];
      const std::string field_path =
          path.empty() ? std::string(f.name) : path + "." + std::string(f.name);
      if (!seen[*index].empty())
        return fail(field_path, "given twice (as \"" + std::string(seen[*index]) + "\" and \"" +
                                    std::string(m.key) + "\")");
      seen[*index] = m.key;
      json_value v;
      bool present;
      if (!field(m.value, f, field_path, v, present)) return false;
      if (present) members.push_back({*index, {std::string(f.name), std::move(v)}});
    }
    std::sort(members.begin(), members.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    out.clear();
    for (auto& [i, m] : members) out.push_back(std::move(m));
    return true;
  }
};

}  // namespace

std::optional<std::size_t> resolve_key(std::string_view key, const object_spec& spec) {
  for (std::size_t i = 0; i < spec.fields.size(); ++i)
    if (spec.fields[i].name == key) return i;
  auto folded = fold_for_ascii_fields(key);
  if (!folded) return std::nullopt;
  for (std::size_t i = 0; i < spec.fields.size(); ++i)
    if (equals_folded(spec.fields[i].name, *folded)) return i;
  return std::nullopt;
}

void canonical_order(json_object& obj, const object_spec& spec) {
  // Resolve each member once, then sort by field index.
  std::vector<std::pair<std::size_t, json_member>> indexed;
  indexed.reserve(obj.size());
  for (auto& m : obj)
    indexed.emplace_back(resolve_key(m.key, spec).value_or(spec.fields.size()), std::move(m));
  std::stable_sort(indexed.begin(), indexed.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  obj.clear();
  std::vector<std::size_t> indices;
  indices.reserve(indexed.size());
  for (auto& [i, m] : indexed) {
    indices.push_back(i);
    obj.push_back(std::move(m));
  }
  for (std::size_t n = 0; n < obj.size(); ++n) {
    auto& m = obj[n];
    if (indices[n] >= spec.fields.size()) continue;
    const field_spec& f = spec.fields[indices[n]];
    if (!f.child) continue;
    auto order_struct = [&](json_value& v) {
      if (auto* o = v.as_object()) canonical_order(*o, *f.child);
    };
    auto order_list = [&](json_value& v) {
      if (auto* a = v.as_array())
        for (auto& item : *a) order_struct(item);
    };
    switch (f.kind) {
      case field_kind::object:
        order_struct(m.value);
        break;
      case field_kind::object_list:
        order_list(m.value);
        break;
      case field_kind::object_map:
        if (auto* o = m.value.as_object())
          for (auto& e : *o) order_struct(e.value);
        break;
      case field_kind::object_list_map:
        if (auto* o = m.value.as_object())
          for (auto& e : *o) order_list(e.value);
        break;
      default:
        break;
    }
  }
}

decode_result decode_body(std::string_view body, const object_spec& spec, unknown_keys unknown) {
  decode_result result;
  thread_local simdjson::dom::parser parser;
  simdjson::padded_string padded(body);
  element doc;
  if (auto err = parser.parse(padded).get(doc); err != simdjson::SUCCESS) {
    result.error = std::string("body is not one valid JSON value: ") + simdjson::error_message(err);
    return result;
  }
  decoder d;
  d.drop_unknown = unknown == unknown_keys::drop;
  json_object obj;
  if (!d.object(doc, spec, "", obj)) {
    result.error = d.error.empty() ? "invalid body" : d.error;
    if (result.error.starts_with(": ")) result.error = "body" + result.error;
    return result;
  }
  result.value = json_value(std::move(obj));
  result.dropped = std::move(d.dropped);
  return result;
}

}  // namespace dockgate::policy

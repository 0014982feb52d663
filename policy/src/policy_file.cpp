#include "dockgate/policy/policy_file.hpp"

#include <set>
#include <simdjson.h>

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
            error(item_where, "unknown operation \"" + *op_name + "\" (use Engine API operationId names)");
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
    return p;
  }
};

}  // namespace

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
    result.errors.push_back(std::string("policy is not valid JSON: ") + simdjson::error_message(err));
    return result;
  }
  object root;
  if (doc.get_object().get(root) != simdjson::SUCCESS) {
    result.errors.push_back("policy: must be a JSON object");
    return result;
  }
  policy pol;
  std::optional<std::string> default_name;
  bool have_profiles = false;
  l.each_key(root, "policy", [&](std::string_view key, element value) {
    if (key == "default_profile") {
      default_name = l.string_of(value, "default_profile");
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
  if (!have_profiles) l.error("policy", "missing \"profiles\"");
  else if (pol.profiles.empty() && l.errors.empty()) l.error("profiles", "no profile defined");
  if (!default_name) {
    if (pol.profiles.size() == 1) {
      pol.default_profile = 0;
    } else if (pol.profiles.size() > 1) {
      l.error("policy", "missing \"default_profile\" (required when there is more than one profile)");
    }
  } else {
    bool found = false;
    for (std::size_t i = 0; i < pol.profiles.size(); ++i)
      if (pol.profiles[i].name == *default_name) {
        pol.default_profile = i;
        found = true;
      }
    if (!found) l.error("default_profile", "no profile named \"" + *default_name + "\"");
  }
  result.errors = std::move(l.errors);
  if (result.errors.empty()) result.value = std::move(pol);
  return result;
}

}  // namespace dockgate::policy

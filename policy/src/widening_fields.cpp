// The safe value of each widening field. See widening_fields.hpp.
#include "widening_fields.hpp"

#include <string>

namespace dockgate::policy {

namespace {

// `no-new-privileges`, `no-new-privileges:true`, `no-new-privileges=true` (any case of
// the value, as dockerd's strconv.ParseBool reads it).
bool is_no_new_privileges(std::string_view opt) {
  if (opt == "no-new-privileges") return true;
  if (!opt.starts_with("no-new-privileges")) return false;
  std::string_view rest = opt.substr(17);
  if (rest.empty() || (rest.front() != ':' && rest.front() != '=')) return false;
  rest.remove_prefix(1);
  return rest == "true" || rest == "1" || rest == "t" || rest == "T" || rest == "TRUE" ||
         rest == "True";
}

// Newer docker CLIs (28) send an endpoint for the container's own network with every
// setting empty: that adds nothing. Any other network, or any setting, is a widening.
bool endpoints_safe(const json_object& root, const json_value* endpoints) {
  if (is_empty_value(endpoints)) return true;
  const json_value* host = find(root, "HostConfig");
  const json_value* mode =
      host && host->as_object() ? find(*host->as_object(), "NetworkMode") : nullptr;
  std::string own = mode && mode->as_string() ? *mode->as_string() : std::string();
  if (own.empty()) own = "default";
  for (const auto& e : *endpoints->as_object()) {
    if (e.key != own) return false;
    for (const auto& setting : *e.value.as_object())
      if (!is_empty_value(&setting.value)) return false;
  }
  return true;
}

}  // namespace

bool is_empty_value(const json_value* v) {
  if (!v || v->is_null()) return true;
  if (auto* s = v->as_string()) return s->empty();
  if (auto* a = v->as_array()) return a->empty();
  if (auto* o = v->as_object()) return o->empty();
  if (auto* b = v->as_bool()) return !*b;
  if (auto i = v->as_int()) return *i == 0;
  return false;
}

bool is_safe(const json_object& root, const json_value* v, safe_when rule) {
  auto str = [&]() -> std::string { return v && v->as_string() ? *v->as_string() : std::string(); };
  switch (rule) {
    case safe_when::empty:
      return is_empty_value(v);
    case safe_when::absent:
      return !v || v->is_null();
    case safe_when::is_false:
      return !v || v->is_null() || (v->as_bool() && !*v->as_bool());
    case safe_when::is_zero:
      return !v || v->is_null() || (v->as_int() && *v->as_int() == 0);
    case safe_when::not_negative:
      return !v || v->is_null() || (v->as_int() && *v->as_int() >= 0);
    case safe_when::private_ns: {
      auto s = str();
      return s.empty() || s == "private";
    }
    case safe_when::ipc: {
      auto s = str();
      return s.empty() || s == "private" || s == "shareable" || s == "none";
    }
    case safe_when::network: {
      auto s = str();
      return s.empty() || s == "default" || s == "bridge" || s == "none";
    }
    case safe_when::security_opt: {
      if (!v || v->is_null()) return true;
      for (const auto& item : *v->as_array())
        if (!is_no_new_privileges(*item.as_string())) return false;
      return true;
    }
    case safe_when::log_config: {
      if (!v) return true;
      const auto* type = find(*v->as_object(), "Type");
      const std::string t = type ? *type->as_string() : std::string();
      return t.empty() || t == "json-file" || t == "local" || t == "none" || t == "journald";
    }
    case safe_when::isolation: {
      auto s = str();
      return s.empty() || s == "default";
    }
    case safe_when::endpoints:
      return endpoints_safe(root, v);
  }
  return false;
}

}  // namespace dockgate::policy

// The profile's seccomp profile, forced into every container it creates. See
// body_reviewer.hpp and body_rules.hpp (body_rules::seccomp).
#include <algorithm>

#include "body_reviewer.hpp"

namespace dockgate::policy {

namespace {

// dockerd reads `seccomp=<profile>` and the older `seccomp:<profile>` alike.
bool is_seccomp_entry(const json_value& item) {
  const auto* s = item.as_string();
  return s && (s->starts_with("seccomp=") || s->starts_with("seccomp:"));
}

json_array* security_opt(json_object& root, bool make) {
  json_object* parent = nullptr;
  std::string_view key;
  json_value* v = locate(root, "HostConfig.SecurityOpt", make, &parent, &key);
  if (make && (!v || !v->as_array())) {
    set(*parent, key, json_array{});
    v = find(*parent, key);
  }
  return v ? v->as_array() : nullptr;
}

}  // namespace

void body_reviewer::set_aside_seccomp(json_object& root) const {
  if (p.rules.seccomp.empty()) return;
  json_array* opts = security_opt(root, false);
  if (!opts) return;
  const json_value own(p.rules.seccomp);
  std::erase_if(*opts, [&](const json_value& item) { return item == own; });
}

void body_reviewer::force_seccomp(json_object& root) {
  if (p.rules.seccomp.empty()) return;
  json_array* opts = security_opt(root, true);
  const json_value before(*opts);
  std::erase_if(*opts, is_seccomp_entry);
  opts->push_back(json_value(p.rules.seccomp));
  // A client that named a seccomp profile of its own (a rule let the entry through) is told
  // it was replaced; one that named none asked nothing (create_warnings).
  if (std::any_of(before.as_array()->begin(), before.as_array()->end(), is_seccomp_entry))
    changes.record("HostConfig.SecurityOpt", "seccomp forced", &before);
}

}  // namespace dockgate::policy

// The pieces of body_rules.hpp that are not a review: rule lookup, the paths a policy
// file's rules may name, and the path and name tests every review shares.
#include "dockgate/policy/body_rules.hpp"

#include <cctype>

#include "dockgate/policy/go_json.hpp"

namespace dockgate::policy {

bool clean_absolute_path(std::string_view path) {
  if (path.empty() || path.front() != '/') return false;
  if (path == "/") return true;
  for (std::string_view rest = path.substr(1);;) {
    const auto slash = rest.find('/');
    const std::string_view seg = rest.substr(0, slash);
    if (seg.empty() || seg == "." || seg == "..") return false;
    if (slash == std::string_view::npos) return true;
    rest.remove_prefix(slash + 1);
  }
}

const field_rule* field_rules::find(std::string_view path) const {
  for (const auto& [p, r] : rules)
    if (p == path) return &r;
  return nullptr;
}

bool is_rule_path(std::string_view operation, std::string_view path) {
  const object_spec* spec = nullptr;
  std::string_view rest = path;
  if (operation == "ContainerExec") {
    spec = &schema::exec_config;
  } else if (path.starts_with("HostConfig.")) {
    spec = &schema::host_config;
    rest = path.substr(11);
  } else if (path == "NetworkingConfig.EndpointsConfig") {
    return true;
  } else {
    spec = &schema::container_create;
    // Config fields only: the deprecated top-level host-config fields are named under
    // HostConfig (that is where the canonical body has them).
    if (resolve_key(path, schema::host_config) || path == "Cpuset" || path == "HostConfig" ||
        path == "NetworkingConfig")
      return false;
  }
  for (const auto& f : spec->fields)
    if (f.name == rest) return true;
  return false;
}

bool valid_object_name(std::string_view name) {
  if (name.empty() || name.size() > 255 || !std::isalnum(static_cast<unsigned char>(name.front())))
    return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-')
      return false;
  return true;
}

}  // namespace dockgate::policy

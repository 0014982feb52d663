// The pieces of body_rules.hpp that are not a review: rule lookup, the paths a policy
// file's rules may name, and the path and name tests every review shares.
#include "dockgate/policy/body_rules.hpp"

#include <arpa/inet.h>

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

std::optional<std::pair<std::uint16_t, std::uint16_t>> port_range(std::string_view text) {
  auto number = [](std::string_view digits) -> std::optional<std::uint16_t> {
    if (digits.empty() || digits.size() > 5) return std::nullopt;
    std::uint32_t n = 0;
    for (char c : digits) {
      if (c < '0' || c > '9') return std::nullopt;
      n = n * 10 + static_cast<std::uint32_t>(c - '0');
    }
    if (n > 65535) return std::nullopt;
    return static_cast<std::uint16_t>(n);
  };
  const auto dash = text.find('-');
  auto lo = number(text.substr(0, dash));
  auto hi = dash == std::string_view::npos ? lo : number(text.substr(dash + 1));
  if (!lo || !hi || *lo > *hi) return std::nullopt;
  return std::pair{*lo, *hi};
}

std::string canonical_address(std::string_view text) {
  if (text.size() > 64) return {};
  const std::string s(text);
  unsigned char bytes[16];
  char out[INET6_ADDRSTRLEN];
  for (int family : {AF_INET, AF_INET6})
    if (::inet_pton(family, s.c_str(), bytes) == 1 &&
        ::inet_ntop(family, bytes, out, sizeof out) != nullptr)
      return out;
  return {};
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

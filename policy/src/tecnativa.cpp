#include "dockgate/policy/tecnativa.hpp"

#include <algorithm>

#include "dockgate/policy/route.hpp"

namespace dockgate::policy {

namespace {

constexpr tecnativa_variable variables[] = {
    {"EVENTS", true, "events"},
    {"PING", true, "_ping"},
    {"VERSION", true, "version"},
    {"AUTH", false, "auth"},
    {"BUILD", false, "build"},
    {"COMMIT", false, "commit"},
    {"CONFIGS", false, "configs"},
    {"CONTAINERS", false, "containers"},
    {"DISTRIBUTION", false, "distribution"},
    {"EXEC", false, "exec"},
    {"GRPC", false, "grpc"},
    {"IMAGES", false, "images"},
    {"INFO", false, "info"},
    {"NETWORKS", false, "networks"},
    {"NODES", false, "nodes"},
    {"PLUGINS", false, "plugins"},
    {"SECRETS", false, "secrets"},
    {"SERVICES", false, "services"},
    {"SESSION", false, "session"},
    {"SWARM", false, "swarm"},
    {"SYSTEM", false, "system"},
    {"TASKS", false, "tasks"},
    {"VOLUMES", false, "volumes"},
    {"POST", false, ""},
    {"ALLOW_START", false, ""},
    {"ALLOW_STOP", false, ""},
    {"ALLOW_RESTARTS", false, ""},
};

std::optional<bool> flag(std::string_view v) {
  std::string t(v);
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  if (t == "1" || t == "true" || t == "yes" || t == "on") return true;
  if (t == "0" || t == "false" || t == "no" || t == "off" || t.empty()) return false;
  return std::nullopt;
}

}  // namespace

std::span<const tecnativa_variable> tecnativa_variables() {
  return variables;
}

policy_load_result tecnativa_policy(const std::map<std::string, std::string>& env) {
  policy_load_result result;
  std::map<std::string_view, bool> on;
  for (const auto& v : variables) {
    on[v.name] = v.default_on;
    auto it = env.find(std::string(v.name));
    if (it == env.end()) continue;
    auto value = flag(it->second);
    if (!value)
      result.errors.push_back(std::string(v.name) + "=" + it->second + ": use 1 or 0");
    else
      on[v.name] = *value;
  }
  if (!result.errors.empty()) return result;

  profile p;
  p.name = "tecnativa";
  p.description = "Tecnativa docker-socket-proxy variables:";
  for (const auto& v : variables)
    p.description += std::string(" ") + std::string(v.name) + "=" + (on[v.name] ? "1" : "0");
  p.rules.confine_to_owned = false;
  p.rules.owner = "tecnativa";
  p.rules.images.patterns = {"*"};
  for (const auto& route : route_templates()) {
    const bool reads = route.method == http::method::get || route.method == http::method::head;
    if (!reads && !on["POST"]) continue;  // haproxy: deny unless METH_GET || POST
    std::string_view path = route.path_template.substr(1);
    const std::string_view first = path.substr(0, path.find('/'));
    bool allowed = false;
    for (const auto& v : variables)
      if (!v.prefix.empty() && v.prefix == first && on[v.name]) allowed = true;
    if (!allowed && first == "containers") {
      const bool start = route.op == operation::ContainerStart,
                 stop = route.op == operation::ContainerStop;
      const bool restarts =
          stop || route.op == operation::ContainerRestart || route.op == operation::ContainerKill;
      allowed = (start && on["ALLOW_START"]) || (stop && on["ALLOW_STOP"]) ||
                (restarts && on["ALLOW_RESTARTS"]);
    }
    if (allowed) p.allowed.set(static_cast<std::size_t>(route.op));
  }
  policy pol;
  pol.profiles.push_back(std::move(p));
  pol.default_profile = 0;
  result.value = std::move(pol);
  return result;
}

}  // namespace dockgate::policy

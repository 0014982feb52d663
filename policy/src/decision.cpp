#include "dockgate/policy/decision.hpp"

namespace dockgate::policy {

std::string change_rule(operation op, const body_change& c) {
  const std::string_view a = c.action;
  if (a == "owner stamped") return "owner";
  if (a.starts_with("workspace")) return "workspace";
  if (a == "bound to loopback") return "ports";
  if (a.starts_with("upload")) return "uploads";
  if (a == "dropped") return "binds.drop";
  if (a == "seccomp forced") return "seccomp";
  if (op == operation::NetworkCreate)
    return c.field == "Internal" ? "networks.internal" : "networks.bridge_prefix";
  if (op == operation::ContainerExec) return "container_exec." + c.field;
  return "container_create." + c.field;  // forced, clamped (an update's too)
}

decision decide(const profile& p, const route& r) {
  if (p.allows(r.op)) return allow{};
  std::string reason = "dockgate: ";
  reason += operation_name(r.op);
  reason += " is not allowed by profile ";
  reason += p.name;
  return deny{403, "operation", std::move(reason)};
}

}  // namespace dockgate::policy

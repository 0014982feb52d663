#include "dockgate/policy/decision.hpp"

namespace dockgate::policy {

decision decide(const profile& p, const route& r) {
  if (p.allows(r.op)) return allow{};
  std::string reason = "dockgate: ";
  reason += operation_name(r.op);
  reason += " is not allowed by profile ";
  reason += p.name;
  return deny{403, "operation", std::move(reason)};
}

}  // namespace dockgate::policy

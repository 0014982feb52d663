#pragma once
// Decisions are values: what the proxy does with a routed request.

#include <string>
#include <variant>

#include "dockgate/policy/policy_file.hpp"
#include "dockgate/policy/route.hpp"

namespace dockgate::policy {

struct allow {
  bool operator==(const allow&) const = default;
};

struct deny {
  unsigned status = 403;
  std::string rule;    // which rule decided, for the audit line
  std::string reason;  // the message the client sees in `{"message": ...}`
  bool operator==(const deny&) const = default;
};

using decision = std::variant<allow, deny>;

// Deny by default: an operation is allowed only if the profile lists it.
decision decide(const profile& p, const route& r);

}  // namespace dockgate::policy

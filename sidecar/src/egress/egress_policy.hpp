#pragma once
// A session's own egress allowlist under SANDBOX_NETWORK=allowlist (docs/sidecar.md,
// "Egress"; an OpenSandbox sandbox's networkPolicy): the rules, whether they stay within the
// operator's list, and the file the egress proxy reads them from.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dockgate/sidecar/config.hpp"

namespace dockgate::sidecar {

// One rule, OpenSandbox's NetworkRule: `target` a host name ("a.example": that name only),
// "*.<name>" (every name under it, not the name itself) or, in the operator's list only,
// ".<name>" (the name and every name under it). Lower-case, no trailing dot.
struct egress_rule {
  bool allow = false;
  std::string target;
  bool operator==(const egress_rule&) const = default;
};
using egress_rules = std::vector<egress_rule>;

// Whether `target` is a host name or "*." and a host name (never an address, a port, a
// scheme or ".<name>").
bool valid_egress_target(std::string_view target);

// The operator's list (SANDBOX_EGRESS_ALLOW) as rules: what an Aivory session and a warm
// pool container reach.
egress_rules operator_rules(const config& c);

// The targets of `rules`' allow rules that the operator's list does not cover, in order
// (empty: the rules are never wider than SANDBOX_EGRESS_ALLOW).
std::vector<std::string> beyond_operator(const config& c, const egress_rules& rules);

// The rules as the egress proxy's helper reads them (scripts/egress-policy-helper.sh), and
// as a container's label keeps them: one "allow TARGET" or "deny TARGET" a line, in order;
// the first rule that matches a name decides, and a name none matches is refused.
std::string egress_policy_text(const egress_rules& rules);
// That text read back; nullopt if it is not one.
std::optional<egress_rules> parse_egress_policy_text(std::string_view text);

// The policy file of the session network whose gateway is `gateway` (an IPv4 address):
// <SANDBOX_EGRESS_POLICY_DIR>/<gateway>, written whole (a temporary file renamed over it:
// the proxy reads the old rules or the new, never half). The error, or nullopt. On an
// error no file is left for that gateway (the proxy then refuses every name).
std::optional<std::string> write_egress_policy(const config& c, const std::string& gateway,
                                               const egress_rules& rules);
void remove_egress_policy(const config& c, const std::string& gateway);

}  // namespace dockgate::sidecar

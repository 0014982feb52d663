#pragma once
// Policy files: named profiles, each an allowlist of Engine API operations.
//
// Invariant: a policy is loaded whole or not at all. Unknown keys, unknown operation
// names, duplicate keys and wrong types are errors, and every error is reported at once.

#include <bitset>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dockgate/policy/body_rules.hpp"
#include "dockgate/policy/operation.hpp"

namespace dockgate::policy {

struct profile {
  std::string name;
  std::string description;
  std::bitset<operation_count> allowed;
  body_rules rules;

  bool allows(operation op) const { return allowed.test(static_cast<std::size_t>(op)); }
};

struct policy {
  std::vector<profile> profiles;
  std::size_t default_profile = 0;  // index into profiles

  const profile* find(std::string_view name) const;
  const profile& default_() const { return profiles[default_profile]; }
};

struct policy_load_result {
  std::optional<policy> value;  // set only when errors is empty
  std::vector<std::string> errors;
};

// Parses a policy document (JSON). Pure: the caller reads the file.
policy_load_result parse_policy(std::string_view json);

}  // namespace dockgate::policy

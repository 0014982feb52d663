#pragma once
// Policy files: named profiles, each an allowlist of Engine API operations.
//
// Invariant: a policy is loaded whole or not at all. Unknown keys, unknown operation
// names, duplicate keys and wrong types are errors, and every error is reported at once.

#include <bitset>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dockgate/policy/body_rules.hpp"
#include "dockgate/policy/operation.hpp"

namespace dockgate::policy {

struct profile {
  enum class mode_kind : std::uint8_t { enforce, audit };
  std::string name;
  std::string description;
  // audit: everything the profile would refuse or change is allowed unchanged and
  // logged as "would", so a team can learn what its client needs. Framing and routing
  // errors are refused in both modes: they are ambiguity, not policy.
  mode_kind mode = mode_kind::enforce;
  // "record": "fields": each ContainerCreate and ContainerExec audit line carries "seen"
  // (body_seen.hpp): what the client set, for `dockgate-proxy learn`.
  bool record_fields = false;
  std::bitset<operation_count> allowed;
  body_rules rules;
  // "system_info": {"keep": [...]}: `/info` answers carry only these top-level members
  // (system_info.hpp); unset, the daemon's answer goes back whole.
  std::optional<std::vector<std::string>> system_info_keep;

  bool allows(operation op) const { return allowed.test(static_cast<std::size_t>(op)); }
};

// Who a client is, as the listener learned it.
struct client_identity {
  std::optional<std::uint32_t> uid;  // unix socket peer credentials
  std::optional<std::uint32_t> gid;
  std::string address;      // TCP peer address (numeric)
  std::string tls_subject;  // verified TLS client certificate subject
};

// A client rule: every criterion it has must match; the first matching rule wins.
struct client_rule {
  std::optional<std::uint32_t> uid;
  std::optional<std::uint32_t> gid;
  std::string address;  // an address or CIDR block ("10.0.0.0/8", "::1")
  std::string tls_subject;
  std::size_t profile = 0;
};

struct policy {
  std::vector<profile> profiles;
  std::vector<client_rule> clients;
  std::optional<std::size_t> default_profile;  // for clients no rule matches

  const profile* find(std::string_view name) const;
  // The profile of a client: the first matching client rule, else the default; nullptr
  // when neither (that client is refused).
  const profile* select(const client_identity& client) const;
  const profile& default_() const { return profiles[default_profile.value()]; }
};

// Whether `address` (numeric IPv4 or IPv6) lies in `block` (an address or CIDR).
bool address_matches(std::string_view block, std::string_view address);

struct policy_load_result {
  std::optional<policy> value;  // set only when errors is empty
  std::vector<std::string> errors;
};

// Parses a policy document (JSON). Pure: the caller reads the file.
policy_load_result parse_policy(std::string_view json);

}  // namespace dockgate::policy

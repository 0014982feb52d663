#pragma once
// `dockgate-proxy learn`: the narrowest profile that allows exactly what a client did, from
// the gate's audit lines (docs/policy.md, "Learning a profile"). Pure: the caller reads
// the files and writes the result.
//
// Invariant: what the security invariants forbid is never learned. A request the gate
// refused, one audit mode says it would have refused, and one that set a widening field
// (widening_fields.hpp) off its safe value that no profile rule can bound (privileged,
// host namespaces, added capabilities, devices, ...) adds nothing to the profile; it is
// listed in "refused_seen" for a human to decide.

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dockgate::policy {

struct learn_options {
  std::string from_profile;          // read only lines of this profile; empty: every line
  std::string name = "learned";      // the learned profile's name
  std::vector<std::string> sources;  // the files read, named in the top-level comment
};

struct learn_result {
  std::string policy;                     // a policy file (JSON), what `--policy` reads
  std::vector<std::string> refused_seen;  // "<operation>: <why> (seen N times, first <time> <id>)"
  std::size_t lines_read = 0;             // audit lines of the profile that were read
  std::size_t lines_learned = 0;          // those that added to the profile
  std::vector<std::string> errors;        // lines that are not audit lines (by number)
};

// `audit_texts`: whole audit logs, one JSON line per request.
learn_result learn_profile(std::span<const std::string_view> audit_texts, const learn_options& o);

}  // namespace dockgate::policy

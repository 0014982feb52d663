#pragma once
// Query parameters, per operation, against the Engine API specification.
//
// Invariant: a parameter is forwarded only if the operation takes it (from the
// specification), it appears once, its value fits the parameter's type, and the policy
// does not refuse it outright (side effects on allowed operations, ImageCreate's import
// form). ImageCreate's effective reference, computed as the daemon computes it from
// fromImage and tag, must be in the profile's image allowlist.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dockgate/policy/decision.hpp"

namespace dockgate::policy {

struct query_param {
  std::string key;        // decoded
  std::string value;      // decoded
  std::string_view raw;   // the pair as written ("key=value"), a view into the query
};

// The one splitter of a raw query into decoded pairs, in order (form-urlencoded: `+` is
// a space). nullopt if an escape is malformed. Repeated keys are kept: callers decide.
std::optional<std::vector<query_param>> parse_query(std::string_view raw);

std::optional<deny> check_query(const profile& p, const route& r);

// fromImage + tag as the daemon combines them (a digest in `tag` replaces tag and digest;
// a tag replaces the tag). nullopt with `error` set if malformed.
std::optional<std::string> effective_pull_reference(std::string_view from_image, std::string_view tag,
                                                    std::string* error);

}  // namespace dockgate::policy

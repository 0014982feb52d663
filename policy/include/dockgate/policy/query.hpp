#pragma once
// Query parameters, per operation, against the Engine API specification — transparent by
// construction: the gate forwards its own query, so what the daemon would ignore is left
// out instead of refused.
//
// Invariants: a parameter is forwarded only if the operation takes it (from the
// specification; others are dropped and named in the audit line), it appears once (a
// second one would be a second reading: refused), and the policy does not refuse the
// value it carries — a value the gate decides on is read as dockerd's handler reads it
// (booleans as httputils.BoolValue: anything but "", 0, no, false, none is true), so
// `link=false` passes and `link=yes` does not. Values the gate does not decide on pass
// unchanged: the daemon answers for them. ImageCreate is allowed only as a pull; its
// effective reference, combined as the daemon combines fromImage and tag, must be in the
// profile's image allowlist; the import-only parameters the daemon ignores on a pull are
// dropped.

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "dockgate/policy/decision.hpp"

namespace dockgate::policy {

struct query_param {
  std::string key;       // decoded
  std::string value;     // decoded
  std::string_view raw;  // the pair as written ("key=value"), a view into the query
};

// The one splitter of a raw query into decoded pairs, in order (form-urlencoded: `+` is
// a space). nullopt if an escape is malformed. Repeated keys are kept: callers decide.
std::optional<std::vector<query_param>> parse_query(std::string_view raw);

// What goes upstream: the parameters kept (as the client wrote them, in order), and the
// names of those left out.
// `changes`: parameters the profile set (a ContainerDelete under an upload rule gets
// v=1, so the anonymous upload volumes go with the container), for the audit line.
struct query_review {
  std::string query;
  std::vector<std::string> dropped;
  std::vector<body_change> changes;
};
std::variant<deny, query_review> review_query(const profile& p, const route& r);

// dockerd's httputils.BoolValue: true unless "", "0", "no", "false" or "none" (any case,
// trimmed).
bool go_form_bool(std::string_view value);

// fromImage + tag as the daemon combines them (a digest in `tag` replaces tag and digest;
// a tag replaces the tag). nullopt with `error` set if malformed.
std::optional<std::string> effective_pull_reference(std::string_view from_image,
                                                    std::string_view tag, std::string* error);

}  // namespace dockgate::policy

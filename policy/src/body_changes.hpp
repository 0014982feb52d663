#pragma once
// What one review changed in one body, for the audit line's `changes` and a create
// answer's Warnings: each field once, the client's value if it set one, and the value
// that goes up. See docs/design.md, "Container-create policy".
//
// Invariant: a recorded value never carries a body's secrets or bulk (change_redacted,
// change_value_limit in decision.hpp: Env, Cmd, Labels, LogConfig... are "<redacted>"),
// so recording rewrites does not log bodies; a value the daemon's defaults for an old API
// version put in is not the client's and is never recorded as what the client sent.

#include <string>
#include <string_view>
#include <vector>

#include "dockgate/policy/decision.hpp"
#include "dockgate/policy/json_value.hpp"

namespace dockgate::policy {

class body_changes {
 public:
  // The field at `path` was filled in by the daemon's defaults before the review.
  void daemon_default(std::string_view path);
  // A change of the field at `path`, recorded once per field (the first action names it);
  // `before` is its value before this change (nullptr: none).
  void record(std::string_view path, std::string_view how, const json_value* before);
  // Fills each change's `to` from the body as it goes up.
  void finish(const json_object& root);

  const std::vector<body_change>& list() const { return changes_; }
  std::vector<body_change> take() { return std::move(changes_); }

 private:
  std::vector<body_change> changes_;
  std::vector<std::string> daemon_defaults_;
};

}  // namespace dockgate::policy

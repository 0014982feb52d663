#pragma once
// docs/audit.schema.json as code: whether a line of text is an audit line the gate could
// have written, for `dockgate-proxy learn` (docs/policy.md, "Learning a profile").
//
// Invariant: learn reads only audit records. A line that is not one (no time, request_id
// or client; an unknown member; a verdict, transport or object type outside the schema's
// enumerations; a "seen" without its three lists) is refused with the first reason the
// schema gives, never read in part. The schema file stays the one definition: the tables
// below are the schema's own lists, and tests/policy/learn_test.cpp ("audit lines: the
// validator is docs/audit.schema.json's") fails when they and the file disagree.

#include <span>
#include <string>
#include <string_view>

namespace dockgate::policy {

// Why `line` (one JSON text) is not an audit line by docs/audit.schema.json; empty when
// it is one. The reason names the member ("client.transport: ...").
std::string audit_line_problem(std::string_view line);

// The schema's lists, as the validator enforces them (for the drift test).
struct audit_schema_object {
  std::string_view where;                        // "" (the line), "client", "object", "seen"
  std::span<const std::string_view> properties;  // additionalProperties: false
  std::span<const std::string_view> required;
};
struct audit_schema_enum {
  std::string_view where;  // "verdict", "client.transport", "object.type"
  std::span<const std::string_view> values;
};
struct audit_schema_pattern {
  std::string_view where;    // "time", "request_id", "operation", "object.digest", ...
  std::string_view pattern;  // the schema's text, which the validator's code implements
};
struct audit_schema_type {
  std::string_view where;  // "time", "client.uid", "seen.fields", ...
  std::string_view type;   // the schema's "type" ("string", "integer", ...)
};
std::span<const audit_schema_object> audit_schema_objects();
std::span<const audit_schema_enum> audit_schema_enums();
std::span<const audit_schema_pattern> audit_schema_patterns();
std::span<const audit_schema_type> audit_schema_types();

}  // namespace dockgate::policy

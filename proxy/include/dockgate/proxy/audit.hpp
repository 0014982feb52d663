#pragma once
// One structured audit line per request. Bodies and X-Registry-Auth are never logged.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "dockgate/policy/decision.hpp"

namespace dockgate::proxy {

struct audit_record {
  std::string_view client;     // peer identity
  std::string_view profile;
  std::string_view method;
  std::string_view path;       // target path without the query
  std::string_view operation;  // operationId, empty when routing failed
  std::string_view verdict;    // "allow" or "deny"
  std::string_view rule;       // which rule decided ("operation", "framing", "route", ...)
  std::string_view reason;
  std::span<const policy::body_change> changes;  // what the profile changed: a JSON array
  std::string_view would;      // audit mode: what enforce mode would have refused or changed
  std::string_view dropped;    // what the daemon ignores and the gate left out ("query:x,body")
  unsigned status = 0;
  std::uint64_t bytes_in = 0;   // request body bytes (and client->daemon bytes of a hijack)
  std::uint64_t bytes_out = 0;  // response body bytes (and daemon->client bytes of a hijack)
  double duration_ms = 0;
  bool hijacked = false;
};

// Formats the record as one JSON object (no newline).
std::string format_audit(const audit_record& r);
// The same, appended to `out`.
void append_audit(std::string& out, const audit_record& r);

}  // namespace dockgate::proxy

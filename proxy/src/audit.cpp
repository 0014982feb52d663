#include "dockgate/proxy/audit.hpp"

#include <cstdio>

#include "dockgate/common/error_body.hpp"

namespace dockgate::proxy {

std::string format_audit(const audit_record& r) {
  std::string out;
  append_audit(out, r);
  return out;
}

void append_audit(std::string& out, const audit_record& r) {
  bool first = true;
  auto field = [&](std::string_view key, std::string_view value) {
    out += first ? "{\"" : ",\"";
    first = false;
    out += key;
    out += "\":\"";
    common::append_json_escaped(out, value);
    out += '"';
  };
  auto number = [&](std::string_view key, std::uint64_t value) {
    out += ",\"";
    out += key;
    out += "\":";
    char digits[24];
    out.append(digits, static_cast<std::size_t>(std::snprintf(digits, sizeof digits, "%llu", static_cast<unsigned long long>(value))));
  };
  field("client", r.client);
  field("profile", r.profile);
  field("method", r.method);
  field("path", r.path);
  field("operation", r.operation);
  field("verdict", r.verdict);
  if (!r.rule.empty()) field("rule", r.rule);
  if (!r.reason.empty()) field("reason", r.reason);
  if (!r.changes.empty()) {
    // [{"field":..,"action":..,"from":..,"to":..}]: from and to are JSON values the policy
    // wrote (redacted where they may carry secrets), copied as they are.
    out += ",\"changes\":[";
    for (const auto& c : r.changes) {
      out += &c == r.changes.data() ? "{\"field\":\"" : ",{\"field\":\"";
      common::append_json_escaped(out, c.field);
      out += "\",\"action\":\"";
      common::append_json_escaped(out, c.action);
      out += '"';
      if (c.from) out += ",\"from\":" + *c.from;
      if (c.to) out += ",\"to\":" + *c.to;
      out += '}';
    }
    out += ']';
  }
  if (!r.dropped.empty()) field("dropped", r.dropped);
  if (!r.would.empty()) field("would", r.would);
  number("status", r.status);
  number("bytes_in", r.bytes_in);
  number("bytes_out", r.bytes_out);
  char ms[32];
  std::snprintf(ms, sizeof ms, "%.3f", r.duration_ms);
  out += ",\"duration_ms\":";
  out += ms;
  if (r.hijacked) out += ",\"hijacked\":true";
  out += '}';
}

}  // namespace dockgate::proxy

#include "dockgate/proxy/audit.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>

#include "dockgate/common/error_body.hpp"

namespace dockgate::proxy {

namespace {

// Integers with to_chars: the line is made once per request, and printf's machinery was a
// few per cent of the gate's CPU per ping.
void append_number(std::string& out, std::uint64_t value) {
  char digits[24];
  out.append(digits, static_cast<std::size_t>(
                         std::to_chars(digits, digits + sizeof digits, value).ptr - digits));
}

// Milliseconds with three decimals ("%.3f"), from whole microseconds (rounded).
void append_milliseconds(std::string& out, double ms) {
  const auto us = static_cast<std::uint64_t>(std::llround(std::max(ms, 0.0) * 1000.0));
  append_number(out, us / 1000);
  const unsigned frac = static_cast<unsigned>(us % 1000);
  const char digits[4] = {'.', static_cast<char>('0' + frac / 100),
                          static_cast<char>('0' + frac / 10 % 10),
                          static_cast<char>('0' + frac % 10)};
  out.append(digits, 4);
}

void append_string(std::string& out, std::string_view value) {
  out += '"';
  common::append_json_escaped(out, value);
  out += '"';
}

// Fixed-width decimal digits, for the time.
void append_digits(std::string& out, unsigned value, int width) {
  char digits[8];
  for (int i = width - 1; i >= 0; --i) {
    digits[i] = static_cast<char>('0' + value % 10);
    value /= 10;
  }
  out.append(digits, static_cast<std::size_t>(width));
}

}  // namespace

std::string format_audit_client(const audit_client& c) {
  std::string out = "{\"transport\":";
  append_string(out, c.transport);
  if (c.uid) {
    out += ",\"uid\":";
    append_number(out, *c.uid);
  }
  if (c.gid) {
    out += ",\"gid\":";
    append_number(out, *c.gid);
  }
  if (c.pid) {
    out += ",\"pid\":";
    append_number(out, static_cast<std::uint64_t>(*c.pid < 0 ? 0 : *c.pid));
  }
  if (!c.process.empty()) {
    out += ",\"process\":";
    append_string(out, c.process);
  }
  if (!c.address.empty()) {
    out += ",\"address\":";
    append_string(out, c.address);
  }
  if (c.port) {
    out += ",\"port\":";
    append_number(out, *c.port);
  }
  if (!c.subject.empty()) {
    out += ",\"subject\":";
    append_string(out, c.subject);
  }
  out += '}';
  return out;
}

void append_rfc3339(std::string& out, std::chrono::system_clock::time_point t) {
  using namespace std::chrono;
  const auto us = floor<microseconds>(t);
  const auto second = floor<seconds>(us);
  // "YYYY-MM-DDTHH:MM:SS", made once per second per thread: the lines of one second share it.
  thread_local seconds cached_second = seconds::min();  // none yet
  thread_local std::array<char, 19> cached;
  if (second.time_since_epoch() != cached_second) {
    const auto day = floor<days>(second);
    const year_month_day ymd{day};
    const hh_mm_ss hms{second - day};
    auto put = [&](std::size_t at, unsigned value, int width) {
      for (int i = width - 1; i >= 0; --i) {
        cached[at + static_cast<std::size_t>(i)] = static_cast<char>('0' + value % 10);
        value /= 10;
      }
    };
    put(0, static_cast<unsigned>(static_cast<int>(ymd.year())), 4);
    cached[4] = '-';
    put(5, static_cast<unsigned>(ymd.month()), 2);
    cached[7] = '-';
    put(8, static_cast<unsigned>(ymd.day()), 2);
    cached[10] = 'T';
    put(11, static_cast<unsigned>(hms.hours().count()), 2);
    cached[13] = ':';
    put(14, static_cast<unsigned>(hms.minutes().count()), 2);
    cached[16] = ':';
    put(17, static_cast<unsigned>(hms.seconds().count()), 2);
    cached_second = second.time_since_epoch();
  }
  out.append(cached.data(), cached.size());
  out += '.';
  append_digits(out, static_cast<unsigned>((us - second).count()), 6);
  out += 'Z';
}

std::string_view audit_image_digest(std::string_view reference) {
  const auto at = reference.rfind('@');
  if (at == std::string_view::npos) return {};
  const std::string_view digest = reference.substr(at + 1);
  const auto colon = digest.find(':');
  // algorithm:encoded, as the OCI digest grammar has it; anything else is no digest.
  if (colon == 0 || colon == std::string_view::npos || digest.size() - colon - 1 < 32) return {};
  auto in = [](char c, std::string_view extra) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || extra.find(c) != extra.npos;
  };
  for (const char c : digest.substr(0, colon))
    if (!in(c, ".+_-")) return {};
  for (const char c : digest.substr(colon + 1))
    if (!in(c, "=_-ABCDEFGHIJKLMNOPQRSTUVWXYZ")) return {};
  return digest;
}

std::string_view audit_object_type(std::string_view operation) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 14> kinds{{
      {"PutContainerArchive", "container"},
      {"Container", "container"},
      {"Exec", "exec"},
      {"Image", "image"},
      {"DistributionInspect", "image"},
      {"Network", "network"},
      {"Volume", "volume"},
      {"Plugin", "plugin"},
      {"GetPluginPrivileges", "plugin"},
      {"Secret", "secret"},
      {"Config", "config"},
      {"Service", "service"},
      {"Node", "node"},
      {"Task", "task"},
  }};
  if (operation.ends_with("List") || operation.ends_with("Prune")) return {};
  for (const auto& [prefix, kind] : kinds)
    if (operation.starts_with(prefix)) return kind;
  return {};
}

std::string format_audit(const audit_record& r) {
  std::string out;
  append_audit(out, r);
  return out;
}

void append_audit(std::string& out, const audit_record& r) {
  auto field = [&](std::string_view key, std::string_view value) {
    out += ",\"";
    out += key;
    out += "\":";
    append_string(out, value);
  };
  auto number = [&](std::string_view key, std::uint64_t value) {
    out += ",\"";
    out += key;
    out += "\":";
    append_number(out, value);
  };
  out += "{\"time\":\"";
  append_rfc3339(out, r.time);
  out += '"';
  field("request_id", r.request_id);
  out += ",\"client\":";
  out += r.client.empty() ? std::string_view("{\"transport\":\"unknown\"}") : r.client;
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
  if (!r.seen.empty()) out += ",\"seen\":" + std::string(r.seen);
  number("status", r.status);
  number("bytes_in", r.bytes_in);
  number("bytes_out", r.bytes_out);
  out += ",\"duration_ms\":";
  append_milliseconds(out, r.duration_ms);
  if (r.hijacked) out += ",\"hijacked\":true";
  // Last: lines read by position up to here keep their shape ("operation", then "verdict").
  if (!r.object_type.empty()) {
    out += ",\"object\":{\"type\":";
    append_string(out, r.object_type);
    if (!r.object_name.empty()) {
      out += ",\"name\":";
      append_string(out, r.object_name);
    }
    if (!r.object_id.empty()) {
      out += ",\"id\":";
      append_string(out, r.object_id);
    }
    if (!r.object_image.empty()) {
      out += ",\"image\":";
      append_string(out, r.object_image);
    }
    if (!r.object_digest.empty()) {
      out += ",\"digest\":";
      append_string(out, r.object_digest);
    }
    if (!r.exec_id.empty()) {
      out += ",\"exec_id\":";
      append_string(out, r.exec_id);
    }
    out += '}';
  }
  out += '}';
}

}  // namespace dockgate::proxy

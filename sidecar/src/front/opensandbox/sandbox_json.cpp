// The Sandbox object and RFC 3339 times of the OpenSandbox front (sandbox_json.hpp).
#include "front/opensandbox/sandbox_json.hpp"

#include <simdjson.h>

#include <ctime>

#include "dockgate/client/engine.hpp"
#include "sessions/isolation/isolation.hpp"

namespace dockgate::sidecar::opensandbox {

const std::vector<std::vector<std::string>>& keep_alive_entrypoints() {
  static const std::vector<std::vector<std::string>> forms = {{"tail", "-f", "/dev/null"},
                                                              {"sleep", "infinity"}};
  return forms;
}

std::string rfc3339(std::chrono::system_clock::time_point t) {
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  const std::time_t seconds = static_cast<std::time_t>(ms / 1000 - (ms % 1000 < 0 ? 1 : 0));
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char out[80];
  std::snprintf(out, sizeof out, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(((ms % 1000) + 1000) % 1000));
  return out;
}

namespace {

// `n` decimal digits of `text` at `at` as a number, or -1.
int digits(std::string_view text, std::size_t at, std::size_t n) {
  if (at + n > text.size()) return -1;
  int v = 0;
  for (std::size_t i = at; i < at + n; ++i) {
    if (text[i] < '0' || text[i] > '9') return -1;
    v = v * 10 + (text[i] - '0');
  }
  return v;
}

// The offset of the zone at `at` (Z, or ±hh:mm ending the text), in seconds, or nullopt.
std::optional<long> zone_offset(std::string_view text, std::size_t at) {
  if (at + 1 == text.size() && (text[at] == 'Z' || text[at] == 'z')) return 0;
  if (at + 6 != text.size() || (text[at] != '+' && text[at] != '-') || text[at + 3] != ':')
    return std::nullopt;
  const int h = digits(text, at + 1, 2), m = digits(text, at + 4, 2);
  if (h < 0 || m < 0 || h > 23 || m > 59) return std::nullopt;
  return (text[at] == '-' ? -1L : 1L) * (h * 3600L + m * 60L);
}

}  // namespace

std::optional<std::chrono::system_clock::time_point> parse_rfc3339(std::string_view text) {
  // YYYY-MM-DDTHH:MM:SS[.fraction](Z|±hh:mm)
  if (text.size() < 20 || text[4] != '-' || text[7] != '-' ||
      (text[10] != 'T' && text[10] != 't' && text[10] != ' ') || text[13] != ':' || text[16] != ':')
    return std::nullopt;
  std::tm tm{};
  tm.tm_year = digits(text, 0, 4) - 1900;
  tm.tm_mon = digits(text, 5, 2) - 1;
  tm.tm_mday = digits(text, 8, 2);
  tm.tm_hour = digits(text, 11, 2);
  tm.tm_min = digits(text, 14, 2);
  tm.tm_sec = digits(text, 17, 2);
  // Years 1900-2261: a system_clock time point (nanoseconds since 1970) holds no later one.
  if (tm.tm_year < 0 || tm.tm_year > 361 || tm.tm_mon < 0 || tm.tm_mon > 11 || tm.tm_mday < 1 ||
      tm.tm_mday > 31 || tm.tm_hour < 0 || tm.tm_hour > 23 || tm.tm_min < 0 || tm.tm_min > 59 ||
      tm.tm_sec < 0 || tm.tm_sec > 60)
    return std::nullopt;
  std::size_t at = 19;
  long nanos = 0;
  if (text[at] == '.') {
    long scale = 100000000;
    std::size_t first = ++at;
    for (; at < text.size() && text[at] >= '0' && text[at] <= '9'; ++at, scale /= 10)
      nanos += (text[at] - '0') * scale;
    if (at == first) return std::nullopt;
  }
  const auto zone = zone_offset(text, at);
  if (!zone) return std::nullopt;
  const std::tm asked = tm;
  const std::time_t seconds = timegm(&tm);
  if (tm.tm_mday != asked.tm_mday) return std::nullopt;  // 31 February
  return std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::seconds(seconds - *zone) + std::chrono::nanoseconds(nanos)));
}

std::string_view state_of(const session& s) {
  return s.paused ? "Paused" : "Running";
}

namespace {

void append_entrypoint(std::string& out, const std::map<std::string, std::string>& metadata) {
  // A session this front did not create (an Aivory one) is kept alive by the container's
  // own `sleep infinity`.
  // Its value is the JSON array the create asked for (create_body.cpp), written again
  // word by word: a label that is not one (written by someone else) shows the keep-alive.
  const auto it = metadata.find(std::string(entrypoint_key));
  simdjson::dom::parser parser;
  simdjson::dom::array words;
  if (it == metadata.end() ||
      parser.parse(it->second).get_array().get(words) != simdjson::SUCCESS) {
    out += R"(["sleep","infinity"])";
    return;
  }
  out += '[';
  bool first = true;
  for (auto word : words) {
    std::string_view text;
    if (word.get_string().get(text) != simdjson::SUCCESS) continue;
    if (!first) out += ',';
    first = false;
    client::append_json_string(out, text);
  }
  out += ']';
}

void append_metadata(std::string& out, const std::map<std::string, std::string>& metadata) {
  out += '{';
  bool first = true;
  for (const auto& [k, v] : metadata) {
    if (k.starts_with(reserved_prefix)) continue;
    if (!first) out += ',';
    first = false;
    client::append_json_string(out, k);
    out += ':';
    client::append_json_string(out, v);
  }
  out += '}';
}

}  // namespace

std::string sandbox_json(const session& s, const config& c, bool with_image) {
  std::map<std::string, std::string> metadata;
  std::optional<std::chrono::system_clock::time_point> expires;
  {
    std::lock_guard g(s.facts_mutex);
    metadata = s.metadata;
    expires = s.expires_at;
  }
  std::string out = "{\"id\":";
  client::append_json_string(out, s.id);
  if (with_image) {
    out += ",\"image\":{\"uri\":";
    client::append_json_string(out, s.image.empty() ? c.image : s.image);
    out += '}';
  }
  out += ",\"status\":{\"state\":\"" + std::string(state_of(s)) + "\"},\"metadata\":";
  append_metadata(out, metadata);
  out += ",\"entrypoint\":";
  append_entrypoint(out, metadata);
  if (expires) out += ",\"expiresAt\":\"" + rfc3339(*expires) + "\"";
  if (s.egress_policy) out += ",\"networkPolicy\":" + network_policy_json(*s.egress_policy);
  // The isolation report (sessions/isolation/isolation.hpp) in OpenSandbox's own place for a
  // provider's data: `extensions`, a map of strings, so the report is its JSON text.
  out += ",\"extensions\":{";
  client::append_json_string(out, isolation_extension_key);
  out += ':';
  client::append_json_string(out, isolation_json(s, c));
  return out + "},\"createdAt\":\"" + rfc3339(s.created_at) + "\"}";
}

std::string network_policy_json(const egress_rules& rules) {
  std::string out = R"({"defaultAction":"deny","egress":[)";
  for (std::size_t i = 0; i < rules.size(); ++i) {
    out += i ? "," : "";
    out += rules[i].allow ? R"({"action":"allow","target":)" : R"({"action":"deny","target":)";
    client::append_json_string(out, rules[i].target);
    out += '}';
  }
  return out + "]}";
}

}  // namespace dockgate::sidecar::opensandbox

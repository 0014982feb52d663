// Records what a review changed in a body. See body_changes.hpp.
#include "body_changes.hpp"

#include <algorithm>

#include "widening_fields.hpp"  // is_empty_value

namespace dockgate::policy {

namespace {

// A value as the audit line may hold it (see body_change).
std::string change_value(std::string_view field, const json_value& v) {
  if (change_redacted(field)) return "\"<redacted>\"";
  std::string text = to_json(v);
  if (text.size() > change_value_limit)
    text = "\"<omitted: " + std::to_string(text.size()) + " bytes>\"";
  return text;
}

// Whether the client set `v`: not absent, null or a zero value, and for an object, some
// member set (the docker CLI sends "LogConfig":{"Type":"","Config":{}} for no --log-driver).
bool client_set(const json_value* v) {
  if (is_empty_value(v)) return false;
  if (const auto* o = v->as_object())
    return std::any_of(o->begin(), o->end(), [](const auto& m) { return client_set(&m.value); });
  return true;
}

}  // namespace

// Env, Cmd, Entrypoint, Shell and Healthcheck carry tokens and passwords; label values
// carry them too (Traefik's basic-auth labels); log options carry the log service's
// credentials (splunk-token, awslogs keys).
bool change_redacted(std::string_view field) {
  static constexpr std::string_view secret[] = {
      "Env", "Cmd", "Entrypoint", "Shell", "Labels", "Healthcheck", "HostConfig.LogConfig"};
  for (auto s : secret)
    if (field == s || (field.starts_with(s) && field[s.size()] == '.')) return true;
  return false;
}

void body_changes::daemon_default(std::string_view path) {
  daemon_defaults_.emplace_back(path);
}

void body_changes::record(std::string_view path, std::string_view how, const json_value* before) {
  for (const auto& c : changes_)
    if (c.field == path) return;
  body_change c{std::string(path), std::string(how), std::nullopt, std::nullopt};
  const bool daemon_default =
      std::find(daemon_defaults_.begin(), daemon_defaults_.end(), path) != daemon_defaults_.end();
  if (client_set(before) && !daemon_default) c.from = change_value(path, *before);
  changes_.push_back(std::move(c));
}

void body_changes::finish(const json_object& root) {
  for (auto& c : changes_)
    if (const json_value* v = locate(root, c.field)) c.to = change_value(c.field, *v);
}

}  // namespace dockgate::policy

// Pause, resume, renew and metadata of a session (session_controls.hpp).
#include "sessions/session_controls.hpp"

#include <iostream>

#include "sessions/session.hpp"
#include "sessions/session_registry.hpp"

namespace dockgate::sidecar {

std::optional<refusal> session_controls::freeze(const std::string& id, bool pause) {
  held_session held;
  if (auto refused = registry_.acquire(id, held, true)) return refused;
  session& s = *held.s;
  // A dormant session is paused (and has no container to freeze); its resume is its wake.
  if (s.dormant && !pause) return registry_.wake_held(s);
  if (s.paused.load() == pause)
    return refuse(refusal_kind::conflict,
                  pause ? "sandbox is paused already" : "sandbox is not paused");
  const auto timeout = std::chrono::seconds(config_.docker_call_timeout_s);
  const auto answer =
      pause ? engine_.pause(s.container, timeout) : engine_.unpause(s.container, timeout);
  if (answer.status / 100 != 2)
    return refuse(refusal_kind::engine_failed,
                  std::string(pause ? "pause" : "resume") + ": the engine answered " +
                      std::to_string(answer.status) + " " + answer.body);
  s.paused = pause;
  s.last_used = std::chrono::steady_clock::now();
  return std::nullopt;
}

std::optional<refusal> session_controls::pause(const std::string& id) {
  return freeze(id, true);
}

std::optional<refusal> session_controls::resume(const std::string& id) {
  return freeze(id, false);
}

outcome<std::chrono::system_clock::time_point> session_controls::renew(
    const std::string& id, std::chrono::system_clock::time_point until) {
  auto s = registry_.find(id);
  if (!s || s->terminating) return refuse(refusal_kind::not_found, "sandbox " + id + " not found");
  if (until <= std::chrono::system_clock::now())
    return refuse(refusal_kind::invalid, "expiresAt must be in the future");
  std::unique_lock g(s->facts_mutex);
  if (!s->expires_at)
    return refuse(refusal_kind::conflict, "sandbox " + id + " has no expiry to renew");
  s->expires_at = until;
  if (s->dormant) {
    g.unlock();
    rewrite_record(*s);
  }
  return until;
}

outcome<std::map<std::string, std::string>> session_controls::patch_metadata(
    const std::string& id, const metadata_patch& patch) {
  auto s = registry_.find(id);
  if (!s || s->terminating) return refuse(refusal_kind::not_found, "sandbox " + id + " not found");
  std::unique_lock g(s->facts_mutex);
  for (const auto& [name, value] : patch) {
    if (value)
      s->metadata[name] = *value;
    else
      s->metadata.erase(name);
  }
  auto labels = s->metadata;
  g.unlock();
  if (s->dormant) rewrite_record(*s);
  return labels;
}

void session_controls::rewrite_record(const session& s) const {
  std::string error;
  if (!records_.write(s, error))
    std::cerr << "dockgate-sidecar: session " << s.id
              << ": its dormant record was not rewritten (a restart brings back the one before): "
              << error << std::endl;
}

}  // namespace dockgate::sidecar

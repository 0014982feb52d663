#pragma once
// What a client may change of a session beside its code: freeze and thaw it (the engine's
// cgroup freezer), move its expiry, merge its labels (metadata). Each call names the
// session; none of them waits for its command. Internal to the sidecar library.
//
// Invariants it keeps:
// - A pause or a resume is the engine's word: the session is paused only once the engine
//   said its container is, and a command on a paused session is refused (conflict), never
//   left hanging on a frozen process.
// - An expiry only moves forward in time from now; a session without one keeps none.
// - A dormant session (session_dormancy.cpp) is paused already; its resume brings it back;
//   a change of its expiry or labels is written to its record as well (a restart keeps it).

#include <chrono>
#include <map>
#include <optional>
#include <string>

#include "dockgate/sidecar/config.hpp"
#include "engine/container_engine.hpp"
#include "sessions/workspace/dormant_records.hpp"
#include "util/refusal.hpp"

namespace dockgate::sidecar {

class session_registry;
struct session;

// A metadata merge: a value sets the label, nullopt removes it.
using metadata_patch = std::map<std::string, std::optional<std::string>>;

class session_controls {
 public:
  session_controls(const config& c, const container_engine& engine, session_registry& registry)
      : config_(c), engine_(engine), registry_(registry), records_(c) {}

  // Refused: not_found, conflict (paused already / not paused), busy (a command holds it
  // past SANDBOX_QUEUE_TIMEOUT_SECONDS), engine_failed.
  std::optional<refusal> pause(const std::string& id);
  std::optional<refusal> resume(const std::string& id);
  // The new expiry. Refused: not_found, conflict (the session has no expiry), invalid
  // (`until` is not in the future).
  outcome<std::chrono::system_clock::time_point> renew(const std::string& id,
                                                       std::chrono::system_clock::time_point until);
  // The labels after the merge. Refused: not_found.
  outcome<std::map<std::string, std::string>> patch_metadata(const std::string& id,
                                                             const metadata_patch& patch);

 private:
  std::optional<refusal> freeze(const std::string& id, bool pause);
  // A dormant session's record rewritten after a change of its facts (logged if it fails).
  void rewrite_record(const session& s) const;
  const config& config_;
  const container_engine& engine_;
  session_registry& registry_;
  dormant_records records_;
};

}  // namespace dockgate::sidecar

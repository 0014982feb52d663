#pragma once
// The session registry: the table of this sidecar's sessions, finding and locking one for
// a request, and the idle reaper's thread. Internal to the sidecar library.
//
// Invariants it keeps:
// - One request at a time per session: acquire() hands a session out only under its
//   lock, within SANDBOX_QUEUE_TIMEOUT_SECONDS, and only while its container runs; a
//   terminating session is not found (a racing request gets a fast 404).
// - The reaper ends a session only when it is idle past its TTL both before and after it
//   takes the session's lock without waiting (a busy session is left for the next sweep).

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dockgate/sidecar/config.hpp"
#include "sessions/session.hpp"
#include "util/refusal.hpp"

namespace dockgate::sidecar {

class session_containers;

class session_registry {
 public:
  session_registry(const config& c, const session_containers& containers)
      : config_(c), containers_(containers) {}
  ~session_registry();
  session_registry(const session_registry&) = delete;
  session_registry& operator=(const session_registry&) = delete;

  std::shared_ptr<session> find(const std::string& id);
  void add(std::shared_ptr<session> s);
  void forget(const std::string& id);
  std::size_t size();
  std::vector<std::shared_ptr<session>> all();

  // The session, locked (per-session serialisation) and checked to be running; or the
  // refusal: invalid (a malformed id), not_found (unknown, terminating, or its container
  // not running), busy (held by another request past SANDBOX_QUEUE_TIMEOUT_SECONDS),
  // conflict (paused, unless `paused_too`: nothing runs in a frozen container).
  std::optional<refusal> acquire(const std::string& id, held_session& out, bool paused_too = false);

  // The idle reaper: every SANDBOX_IDLE_REAPER_SWEEP_INTERVAL seconds, each session idle
  // past its TTL (one whose idle time ends it, session::idle_reaped) or past its expiry
  // is passed, locked, to `reap` (which ends it, or keeps it for the next sweep). Stopped
  // by stop_reaper() (and the destructor).
  void start_reaper(std::function<void(session&)> reap);
  void stop_reaper();
  // One sweep of the reaper, now, on this thread.
  void reap_idle(const std::function<void(session&)>& reap);

 private:
  const config& config_;
  const session_containers& containers_;
  std::mutex table_mutex_;
  std::map<std::string, std::shared_ptr<session>> sessions_;
  std::function<void(session&)> reap_;
  std::thread reaper_;
  std::mutex reaper_mutex_;
  std::condition_variable reaper_wake_;
  bool stopping_ = false;
};

}  // namespace dockgate::sidecar

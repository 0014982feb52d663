#pragma once
// The session registry: the table of this sidecar's sessions, finding and locking one for
// a request, and the idle reaper's thread. Internal to the sidecar library.
//
// Invariants it keeps:
// - One request at a time per session: acquire() hands a session out only under its
//   lock, within SANDBOX_QUEUE_TIMEOUT_SECONDS, and only while its container runs; a
//   terminating session is not found (a racing request gets a fast 404).
// - The reaper ends a session only when it is idle past its TTL both before and after it
//   takes the session's lock without waiting (a busy session is left for the next sweep);
//   it puts one to sleep (dormant) on the same terms, past SANDBOX_DORMANT_AFTER_SECONDS.
// - A dormant session is brought back (the waker) under its lock before any call that
//   needs its container is served; the call waits for it, never meets an empty container.

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

// What the reaper does with a session at a sweep (idle_decision).
enum class idle_action { keep, reap, sleep };

// The reaper's decision for `s` at `now` (`wall`: the same instant on the system clock):
// reap when its expiry has come, or when it is idle past its TTL and its idle time ends
// it; sleep (go dormant) when SANDBOX_DORMANT_AFTER_SECONDS is on, it is not dormant yet,
// it is paused (or running, with SANDBOX_DORMANT_IDLE) and unused that long; else keep.
idle_action idle_decision(const session& s, const config& c,
                          std::chrono::steady_clock::time_point now,
                          std::chrono::system_clock::time_point wall);

// Brings a dormant session back, under its lock (session_lifecycle::wake).
using session_waker = std::function<std::optional<refusal>(session&)>;

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
  // A dormant session is brought back first (the waker), unless `paused_too` (the pause
  // and resume controls decide for a dormant one themselves).
  std::optional<refusal> acquire(const std::string& id, held_session& out, bool paused_too = false);
  // The waker of dormant sessions (the core sets session_lifecycle::wake).
  void set_waker(session_waker waker) { waker_ = std::move(waker); }
  // Session `id` brought back if it is dormant (locked within SANDBOX_QUEUE_TIMEOUT_SECONDS);
  // nullopt when it is awake now or unknown (the caller's own lookup answers that).
  std::optional<refusal> wake(const std::string& id);
  // `s`, held under its lock by the caller, brought back if it is dormant.
  std::optional<refusal> wake_held(session& s);

  // The idle reaper: every SANDBOX_IDLE_REAPER_SWEEP_INTERVAL seconds, each session idle
  // past its TTL (one whose idle time ends it, session::idle_reaped) or past its expiry
  // is passed, locked, to `reap` (which ends it, or keeps it for the next sweep). Stopped
  // by stop_reaper() (and the destructor).
  // `sleep` (none: never) puts a session to sleep (idle_decision).
  void start_reaper(std::function<void(session&)> reap, std::function<void(session&)> sleep = {});
  void stop_reaper();
  // One sweep of the reaper, now, on this thread.
  void reap_idle(const std::function<void(session&)>& reap,
                 const std::function<void(session&)>& sleep = {});

 private:
  const config& config_;
  const session_containers& containers_;
  std::mutex table_mutex_;
  std::map<std::string, std::shared_ptr<session>> sessions_;
  std::function<void(session&)> reap_;
  std::function<void(session&)> sleep_;
  session_waker waker_;
  std::thread reaper_;
  std::mutex reaper_mutex_;
  std::condition_variable reaper_wake_;
  bool stopping_ = false;
};

}  // namespace dockgate::sidecar

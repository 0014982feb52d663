#pragma once
// The warm pool (SANDBOX_WARM_POOL): session containers created and started ahead of the
// requests that will use them, by one background thread. Internal to the sidecar library.
//
// Invariants it keeps:
// - A container leaves the pool exactly once: claim() pops it under the pool's mutex, so
//   two concurrent creates never get the same one, and nothing ever puts it back (a
//   session's container is removed when the session ends, never returned). The check
//   holds one container at a time out of the pool while it asks `ready`, under the same
//   mutex, so a claim never meets it half-checked.
// - A container is handed out only when it can run a cell now: claim() asks the `ready`
//   hook (a round trip through the container's runner, bounded to tens of ms) of the one
//   it took, outside the lock; one that fails is removed on the pool's thread and the next
//   is tried. A paused (frozen), stopped or runner-less container is never handed out.
// - Nothing else here blocks a request: claim() takes the mutex and makes that one bounded
//   check; creating, checking and removing containers happen on the pool's thread, one at
//   a time (bounded concurrency: one Engine API call in flight), with exponential
//   back-off after errors.
// - Only containers of the image the configuration names at the time are handed out: an
//   image re-tagged since a container was made retires that container.
// - stop() removes every container still in the pool, after running the jobs posted to it.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>

namespace dockgate::sidecar {

class cell_runner;
struct isolation_report;

// A container inspect's body says it can run a process now: State.Running, and neither
// State.Paused nor State.Restarting (pool_sessions.cpp).
bool inspect_runs_now(std::string_view body);

struct pooled_container {
  std::string sid;       // the session ID it will serve (in its name and session label)
  std::string id;        // the container's ID
  std::string image_id;  // the image it was created from
  // Its cell runner, started while it waited (none if SANDBOX_CELL_RUNNER=0 or the start
  // failed: the session's first cell starts one then). Goes to the session that claims it.
  std::shared_ptr<cell_runner> runner;
  // The isolation in force, read and judged when it was made (isolation/isolation.hpp): a
  // container that failed it never joined the pool, and a claim adds no round trip for it.
  std::shared_ptr<const isolation_report> isolation;
};

class warm_pool {
 public:
  struct hooks {
    // Creates and starts one hardened container; nullopt with `full` set when
    // SANDBOX_MAX_SESSIONS leaves no room, else with `error` set.
    std::function<std::optional<pooled_container>(std::string& error, bool& full)> create;
    std::function<void(const std::string& id)> remove;
    // The configured image's ID now ("" if it cannot be inspected).
    std::function<std::string()> image_id;
    // The IDs of this instance's pool containers that run, not paused (nullopt if the
    // engine cannot say).
    std::function<std::optional<std::set<std::string>>()> running;
    // Whether the container can run a cell now, decided within a bound (none: every
    // container can): a short one when `claiming` (a request waits for it), a longer one
    // for the pool's own check (nobody waits, and a loaded host is not to be taken for a
    // frozen container: a good one would be removed). Called outside the pool's lock with
    // a container no one else holds.
    std::function<bool(pooled_container&, bool claiming)> ready;
    // At every check, on the pool's thread: removes what a sidecar killed mid-call left
    // on the engine after the start's clean-up (its creates still in flight through the
    // gate landed later): a pool container this pool did not make (`made`: those it made
    // that may still exist) and no session holds, a claim record whose container is gone.
    // Returns which of `made` still exist (nullopt: the engine could not say).
    std::function<std::optional<std::set<std::string>>(const std::set<std::string>& made)> sweep;
  };
  struct timing {
    std::chrono::milliseconds check_interval{15'000};  // image and liveness check of the pool
    std::chrono::milliseconds first_backoff{1'000};
    std::chrono::milliseconds max_backoff{60'000};
  };

  warm_pool(std::size_t target, hooks h, timing t);
  warm_pool(std::size_t target, hooks h) : warm_pool(target, std::move(h), timing{}) {}
  ~warm_pool();
  warm_pool(const warm_pool&) = delete;
  warm_pool& operator=(const warm_pool&) = delete;

  void start();
  // A ready container (hooks::ready said so), gone from the pool; nullopt when it is empty
  // (after waiting up to `wait` for the container being made when the claim began, if one
  // is). A container that is not ready is removed and the next one tried.
  std::optional<pooled_container> claim(std::chrono::milliseconds wait = {});
  // Runs `job` on the pool's thread, before any further fill (or in stop()).
  void post(std::function<void()> job);
  // A session ended: SANDBOX_MAX_SESSIONS may have room again.
  void wake();
  // Stops the thread, runs the jobs still queued and removes the containers still in the
  // pool. Returns how many were removed. Idempotent.
  std::size_t stop();
  std::size_t size();

 private:
  void run();
  void check();
  // One container off the front of the pool, of the current image (see claim()).
  std::optional<pooled_container> take(std::chrono::steady_clock::time_point deadline);
  void discard(const std::string& id);
  std::chrono::milliseconds backoff() const;

  const std::size_t target_;
  hooks hooks_;
  timing timing_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<pooled_container> ready_;
  std::set<std::string> made_;  // containers this pool created that may still exist
  std::deque<std::function<void()>> jobs_;
  std::string image_id_;  // the image's ID at the last check or fill
  bool stopping_ = false;
  bool filling_ = false;     // a create is in flight
  bool checking_ = false;    // check() holds a container out of ready_ while it asks `ready`
  std::uint64_t fills_ = 0;  // creates finished (made or not)
  bool full_ = false;        // SANDBOX_MAX_SESSIONS reached: no fill until wake() or the next check
  unsigned failures_ = 0;
  std::chrono::steady_clock::time_point retry_at_{}, next_check_{};
  std::thread thread_;
};

}  // namespace dockgate::sidecar

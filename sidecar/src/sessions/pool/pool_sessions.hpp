#pragma once
// The session side of the warm pool (SANDBOX_WARM_POOL): how a pool container is made
// (through the same create as a session's), claimed for a session, and its claim
// recorded. The pool itself (its thread, its containers, its invariants) is pool.hpp.
// Internal to the sidecar library; the invariants are at the top of pool_sessions.cpp.

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "dockgate/sidecar/config.hpp"
#include "engine/container_engine.hpp"
#include "sessions/executor_hooks.hpp"
#include "sessions/pool/pool.hpp"

namespace dockgate::sidecar {

class session_containers;
class session_registry;
struct session;
struct session_limit;

class session_pool {
 public:
  // `executors`: whether a warm container's runner answers (executor_hooks::runner_ready).
  session_pool(const config& c, const container_engine& engine, const executor_hooks& executors,
               const session_containers& containers, session_registry& registry,
               session_limit& limit)
      : config_(c),
        engine_(engine),
        executors_(executors),
        containers_(containers),
        registry_(registry),
        limit_(limit) {}

  // Start after the sessions are adopted (reconcile); stop before they end (its
  // unclaimed containers are removed; returns how many). Without SANDBOX_WARM_POOL, or in
  // the FUSE workspace mode, there is no pool and nothing is claimed.
  void start();
  std::size_t stop();
  // A warm container for a request, checked to run a cell now (the pool's `ready` hook);
  // nullopt when the pool has none within `wait` (it waits only while a container is
  // being made or checked).
  std::optional<pooled_container> claim(std::chrono::milliseconds wait);
  // A session ended: SANDBOX_MAX_SESSIONS may have room again.
  void wake();
  // The containers ready to be claimed now (0 without a pool).
  std::size_t size() const;
  // The claim record of a session on a warm container, written before its answer; "" or
  // why not.
  std::string write_claim_record(const session& s);

 private:
  std::optional<pooled_container> create(std::string& error, bool& full);
  // A new pool container's isolation read and judged (its create `body`, the probe's
  // answer): "" when it holds, else why (the container is then removed).
  std::string prove_pool_container(pooled_container& c, const std::string& body,
                                   const std::string& probe) const;

  const config& config_;
  const container_engine& engine_;
  const executor_hooks& executors_;
  const session_containers& containers_;
  session_registry& registry_;
  session_limit& limit_;
  std::shared_ptr<warm_pool> pool_;
};

}  // namespace dockgate::sidecar

#pragma once
// A session's life on the engine: created (a warm container claimed, or one created and
// started; its workspace made and restored), deleted (archived or discarded, its
// containers removed), adopted at start-up (reconcile), reaped when idle, ended at
// shutdown. Internal to the sidecar library.

#include <cstddef>
#include <semaphore>
#include <string>
#include <string_view>

#include "dockgate/client/engine.hpp"
#include "dockgate/sidecar/config.hpp"
#include "dockgate/sidecar/http_server.hpp"

namespace dockgate::sidecar {

class archive_store;
class session_containers;
class session_pool;
class session_registry;
class workspace_mounts;
struct session;
struct session_limit;

class session_lifecycle {
 public:
  session_lifecycle(const config& c, const client::engine& docker, session_containers& containers,
                    session_registry& registry, archive_store& archives,
                    const workspace_mounts& mounts, session_pool& pool, session_limit& limit);

  http_reply create_session(const http_request& r);
  http_reply delete_session(std::string_view id, const std::string& body);
  // Start-up: adopt running session containers left by a previous run, remove the rest.
  void reconcile();
  // The idle reaper's end of a session (held under its lock, idle past its TTL):
  // archived where it has storage, then its containers removed; kept for the next sweep
  // when the storage cannot be written now.
  void reap(session& s);
  // Shutdown: every session of this instance archived (where it has storage) and its
  // container removed, as a DELETE would; one whose archive cannot be written now keeps
  // its container for the next start to adopt. Returns how many were kept.
  std::size_t end_all_sessions();
  // A session's end on the engine: its container removed (a warm one is never returned to
  // the pool), its FUSE mount cleaned, the session forgotten, then its claim record removed.
  void remove_session_containers(const session& s);
  // A kernel session's kernel driver started in its container (kernel.hpp); "" when it
  // runs, else the error to answer.
  std::string start_kernel(session& s);

 private:
  const config& config_;
  const client::engine& docker_;
  session_containers& containers_;
  session_registry& registry_;
  archive_store& archives_;
  const workspace_mounts& mounts_;
  session_pool& pool_;
  session_limit& limit_;
  std::counting_semaphore<1 << 20> create_slots_;
};

}  // namespace dockgate::sidecar

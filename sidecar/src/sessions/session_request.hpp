#pragma once
// A session's create and delete as the session core takes them: typed, every field
// already read and checked by the front that parsed the request (front/aivory/
// session_routes.cpp for the Aivory API), and what the core answers. No HTTP here.
// Internal to the sidecar library.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dockgate/sidecar/config.hpp"
#include "egress/egress_policy.hpp"
#include "sessions/workspace/archive_store.hpp"
#include "storage/storage.hpp"

namespace dockgate::sidecar {

// POST /sessions.
struct create_request {
  // The idle TTL asked for, in seconds (clamped to SANDBOX_IDLE_TTL_CAP_SECONDS; none or
  // <= 0: SANDBOX_IDLE_TTL_SECONDS).
  std::optional<std::int64_t> idle_ttl_sec;
  // The workspace's archive key, only when it is a valid one (util/ids.hpp); none: the
  // session ID is its key.
  std::optional<std::string> archive_key;
  // A known kernel's name (executor_hooks::kernel_name); "": a plain session.
  std::string kernel;
  // Where its workspace is archived (the request's storage block, chosen and checked);
  // none: not kept.
  std::optional<storage_spec> storage;
  // The image to run, one of SANDBOX_IMAGES (none: SANDBOX_IMAGE, the one the warm pool
  // holds: only such a session, with no environment and the caps' limits, takes a warm
  // container).
  std::optional<std::string> image;
  // The container's environment (NAME=value), inherited by every exec.
  std::vector<std::string> env;
  // Memory and CPU asked for, already within the operator's caps (0: the caps).
  std::int64_t memory_bytes = 0;
  std::int64_t nano_cpus = 0;
  // The client's labels, and when the session ends whatever its use (none: never by the
  // clock); `idle_reaped` false: its idle time never ends it.
  std::map<std::string, std::string> metadata;
  std::optional<std::chrono::system_clock::time_point> expires_at;
  bool idle_reaped = true;
  // Its own egress list (session.hpp egress_policy), already within the operator's; none:
  // the operator's. A session with one never takes a warm container (made with the
  // operator's).
  std::optional<egress_rules> egress_policy;
  // A program started once the session is made, as the session user, in its own session
  // and process group, detached: the sandbox's main process as a client sees it (the
  // container's own keep-alive stays PID 1's child). Empty: none.
  std::vector<std::string> entrypoint;
  // The OCI runtime asked for, one of SANDBOX_RUNTIMES (runtime_refusal checked it); none:
  // the default, SANDBOX_RUNTIMES' first (or, with none listed, the engine's). Only a
  // session of the default runtime takes a warm container (the pool holds no other).
  std::optional<std::string> runtime;
};

// Why a session cannot run on `runtime` (asked by name): a name not in SANDBOX_RUNTIMES
// (the list is said), or a gVisor runtime where its sandbox cannot be served: with
// SANDBOX_NETWORK=allowlist (runsc runs here with --network=none, so the sandbox has its
// loopback only and never reaches the egress proxy). None: it can. Asked before any
// engine call, by each front in its own error format.
inline std::optional<std::string> runtime_refusal(const config& c, std::string_view runtime) {
  std::string listed;
  for (const auto& r : c.runtimes) listed += (listed.empty() ? "" : ", ") + r;
  if (std::find(c.runtimes.begin(), c.runtimes.end(), runtime) == c.runtimes.end())
    return "runtime " + std::string(runtime) + " is not offered (" +
           (listed.empty() ? std::string("this sidecar offers none: SANDBOX_RUNTIMES is empty")
                           : "offered: " + listed) +
           ")";
  if (gvisor_runtime(runtime) && c.network == "allowlist")
    return "runtime " + std::string(runtime) +
           " (gVisor) cannot serve SANDBOX_NETWORK=allowlist: its sandbox has no network of "
           "its own (runsc --network=none), so the egress proxy is out of its reach";
  return std::nullopt;
}

struct created_session {
  std::string session_id;
  restore_report restore;  // what the restore of its workspace did
};

// DELETE /sessions/{id}.
struct delete_request {
  std::string session_id;  // a valid session ID
  bool discard = false;    // its archives discarded instead of its workspace archived
  // The archive key named, only when it is a valid one.
  std::optional<std::string> archive_key;
  // A storage block was given (not null), and what it chose (none: it names no storage).
  bool storage_given = false;
  std::optional<storage_spec> storage;
};

// What became of the workspace (none: nothing was archived or discarded).
struct deleted_session {
  std::optional<archive_outcome> archive;
};

}  // namespace dockgate::sidecar

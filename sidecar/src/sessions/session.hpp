#pragma once
// One session's state, shared by the objects that serve it (the registry holds it; cells,
// files, the archive store and the lifecycle work on it under its lock). Internal to the
// sidecar library.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "egress/egress_policy.hpp"
#include "storage/storage.hpp"

namespace dockgate::sidecar {

class cell_runner;        // runner.hpp
struct code_contexts;     // core/code_interpreter.hpp
struct isolation_report;  // isolation/isolation.hpp
struct isolation_asked;   // isolation/isolation.hpp

struct session {
  std::string id;
  std::string container;  // name
  std::timed_mutex lock;
  std::atomic<std::chrono::steady_clock::time_point> last_used{};
  std::int64_t ttl_seconds = 0;
  std::string archive_key;
  std::optional<storage_spec> storage;  // where its workspace is archived; none: not kept
  std::string restore_status = "none";
  // The archive's generation when the workspace was restored ("" if there was none);
  // nullopt when unknown. The archive is replaced only if it is still that generation.
  std::optional<std::string> restored_generation;
  std::atomic<bool> terminating{false};
  bool fuse = false;  // /workspace is its own FUSE mount (dockgate-mount), bound by the gate
  // The generation of its FUSE workspace it mounted (fleet_store.hpp): "" the key's own
  // prefix, g.<hex> one a takeover made.
  std::string generation;
  // Its record is in the fleet's store (fleet_store.hpp), naming this instance: removed
  // when the session ends, kept when it is handed over (a fleet member's stop).
  bool recorded = false;
  // The in-container cell runner (cells.cpp, runner.hpp), started with the session's
  // container (make_workspace), else by a cell; one that faults is dropped and the next
  // cell starts another; one that cannot start is never tried again (runner_refused).
  // sweep_before_runner: a process of the session user may be alive in the container
  // (an adopted session, a dropped runner): a plain sweep goes before the next runner.
  // All under `lock`.
  std::shared_ptr<cell_runner> runner;
  bool runner_refused = false;
  bool sweep_before_runner = false;
  bool pooled = false;  // its container came from the warm pool: a claim record goes with it
  // A kernel session (kernel.hpp, kernel_cells.cpp): the kernel's name ("" for a plain
  // session, which never has a driver); its driver, which holds the kernel, under `lock`.
  // A driver that faults is dropped and the next cell starts another (after a sweep judged
  // from the host, sweep_before_runner); kernel_replaced: the next answer says the kernel
  // was restarted (its state is gone). A kernel session has no cell runner.
  std::string kernel;
  std::shared_ptr<cell_runner> kernel_driver;
  bool kernel_replaced = false;

  // What a client may say of a session beside its code (OpenSandbox's sandbox; an Aivory
  // session sets none of it), fixed at create: the image it runs ("": SANDBOX_IMAGE), its
  // container's environment (NAME=value, every exec inherits it), its memory and CPU
  // (0: the operator's caps), and whether its idle time ends it (false: only its expiry
  // or a delete does).
  std::string image;
  std::vector<std::string> env;
  // Its own main program, run as the session user; started again when it comes back (a
  // dormant session's wake, a fleet member's takeover).
  std::vector<std::string> entrypoint;
  std::int64_t memory_bytes = 0;
  std::int64_t nano_cpus = 0;
  bool idle_reaped = true;
  // The OCI runtime it asked for, one of SANDBOX_RUNTIMES ("": the default, SANDBOX_RUNTIMES'
  // first, or the engine's when none is listed): in its create body, its labels and its
  // dormant record, so that it comes back on the same runtime.
  std::string runtime;
  // Under SANDBOX_NETWORK=allowlist, its own list (an OpenSandbox sandbox's networkPolicy,
  // never wider than the operator's; empty: no name at all); none: the operator's list.
  std::optional<egress_rules> egress_policy;
  std::chrono::system_clock::time_point created_at = std::chrono::system_clock::now();
  // The client's labels (metadata) and when the session ends whatever its use (none:
  // never by the clock): changed by their own calls while a command may hold `lock`, so
  // under `facts_mutex`, never `lock`.
  mutable std::mutex facts_mutex;
  std::map<std::string, std::string> metadata;
  std::optional<std::chrono::system_clock::time_point> expires_at;
  // Its OpenSandbox code contexts (core/code_interpreter.hpp), made at the first /code call,
  // under `facts_mutex` (never `lock`: a cell of a context runs beside the commands). They
  // end with the session: the container's removal ends their drivers.
  std::shared_ptr<code_contexts> code;
  // The isolation in force (isolation/isolation.hpp), read back from its container when it
  // was made (or claimed warm, adopted, woken): a report the GET answers from, never read
  // again per request. Under `facts_mutex`; none while dormant or when not read.
  std::shared_ptr<const isolation_report> isolation;
  // What its container's create asked of the engine (the body sent), kept for the judging of
  // its isolation once the container runs (session_lifecycle create_and_start).
  std::shared_ptr<const isolation_asked> asked_of_engine;
  // Frozen (the engine paused its container): set under `lock`.
  std::atomic<bool> paused{false};
  // Dormant (session_dormancy.cpp): its workspace archived, its container removed, its
  // record kept (dormant_records.hpp); `container` is empty and `paused` true until a
  // resume or its next call brings it back. Set under `lock`.
  std::atomic<bool> dormant{false};
  // Its workspace has an archive of the sidecar's own (dormant_records::own_storage; a
  // session without storage that went dormant): discarded when the session ends.
  bool own_archive = false;

  // Whether its expiry has come at `now`.
  bool expired(std::chrono::system_clock::time_point now) const {
    std::lock_guard g(facts_mutex);
    return expires_at && now >= *expires_at;
  }
};

// A session found and locked for one request (session_registry::acquire).
struct held_session {
  std::shared_ptr<session> s;
  std::unique_lock<std::timed_mutex> lock;
};

}  // namespace dockgate::sidecar

#pragma once
// The sandbox service: the Aivory sidecar's HTTP API (sessions, exec, files) on top of
// the Engine API, reached only through DOCKER_HOST (the gate's sandbox profile).

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <semaphore>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "dockgate/client/engine.hpp"
#include "dockgate/sidecar/config.hpp"
#include "dockgate/sidecar/http_server.hpp"
#include "dockgate/sidecar/archive.hpp"
#include "dockgate/sidecar/storage.hpp"

namespace dockgate::sidecar {

class cell_runner;  // runner.hpp
class cell_events;  // runner.hpp

// Labels of session containers (the gate adds its own owner label). What a restarted
// sidecar needs to archive an adopted session where it belongs is kept here, never a
// secret: the storage's place (not its credentials), the TTL, the restore's outcome.
inline constexpr std::string_view session_label = "sandbox.session_id";
inline constexpr std::string_view created_label = "sandbox.created_at";
inline constexpr std::string_view archive_label = "sandbox.archive_key";
inline constexpr std::string_view instance_label = "sandbox.instance";
inline constexpr std::string_view storage_label = "sandbox.storage";
inline constexpr std::string_view ttl_label = "sandbox.idle_ttl";
inline constexpr std::string_view restore_label = "sandbox.restore";
inline constexpr std::string_view generation_label = "sandbox.archive_generation";
inline constexpr std::string_view container_prefix = "dockgate-sbx-";
// Who runs what in a session container. Cells, the cell runner and every command of the
// sidecar run as the session user (every exec names it; the gate's sandbox profile forces
// it). The container's own processes, its init and the `sleep` that keeps it alive, the
// only ones that outlive every cell, run as a uid of their own that no exec can take: the
// kernel lets no process of the session user trace them, open their memory or
// descriptors, or signal them, from their first instruction on (docs/security.md, "What a
// cell can do to its own container").
inline constexpr std::string_view session_user = "1000:1000";
inline constexpr std::string_view keepalive_user = "65534:65534";
// The warm pool (SANDBOX_WARM_POOL). A pool container is made before its request, so its
// labels carry no request's data: the session ID it will serve, the instance and
// `sandbox.pool`. Labels cannot change after create, so a claim is recorded in a claim
// record: a container that is created and never started, named `<pool container>-claim`,
// with the session's labels and `sandbox.claim` (the pool container's ID). A restarted
// sidecar adopts a pool container with a record and removes one without.
inline constexpr std::string_view pool_label = "sandbox.pool";
inline constexpr std::string_view claim_label = "sandbox.claim";
inline constexpr std::string_view claim_suffix = "-claim";

class warm_pool;
struct pooled_container;

// What a session's restore did (answered by POST /sessions as "restore").
struct restore_report {
  std::string status = "none";  // restored | partial | none | failed
  std::string key;              // the archive's object key, when storage is used
  std::vector<skipped_member> skipped;
  std::vector<std::string> conflicts;  // archives kept beside it by sessions that lost a race
  std::string error;                   // failed: why
  std::string to_json() const;
};

// What became of a workspace when its session ended (answered by DELETE as "archive").
struct archive_outcome {
  std::string status;  // written | conflict | not_written | discarded
  std::string key;     // where it went
  std::string reason;  // conflict, not_written: why
  bool retry = false;  // a storage error: a reaped session is kept for the next sweep
  std::string to_json() const;
};

class service {
 public:
  service(config c, client::engine docker);
  ~service();

  http_reply handle(const http_request& r);
  // Start-up: adopt running session containers left by a previous run, remove the rest.
  void reconcile();
  // Starts the idle reaper thread.
  void start_reaper();
  // Shutdown: every session of this instance archived (where it has storage) and its
  // container removed, as a DELETE would; one whose archive cannot be written now keeps
  // its container for the next start to adopt. Returns how many were kept.
  std::size_t end_all_sessions();
  // The warm pool (SANDBOX_WARM_POOL): start after reconcile(); stop before
  // end_all_sessions() (its unclaimed containers are removed; returns how many).
  void start_pool();
  std::size_t stop_pool();
  std::size_t max_body(std::string_view path) const;

 private:
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
  };

  // An archive fetched and filtered before its session's container exists.
  struct prepared_restore {
    restore_report report;
    restore_plan plan;
    std::optional<std::string> generation;
  };

  http_reply healthz();
  http_reply create_session(const http_request& r);
  http_reply delete_session(std::string_view id, const std::string& body);
  http_reply exec(const http_request& r);
  http_reply run_cell(const http_request& r, cell_events& events);
  http_reply put_file(const http_request& r);
  http_reply get_file(const http_request& r);
  http_reply list_files(const http_request& r);
  http_reply reset_inputs(const http_request& r);

  struct held_session {
    std::shared_ptr<session> s;
    std::unique_lock<std::timed_mutex> lock;
  };
  std::optional<http_reply> acquire(const std::string& id, held_session& out);
  std::optional<http_reply> session_request(const http_request& r, held_session& out);
  std::shared_ptr<session> find(const std::string& id);
  void forget(const std::string& id);
  bool running(const std::string& container);
  void remove_container(const std::string& container);
  client::exec_result run_in(const std::string& container, std::vector<std::string> cmd,
                             std::chrono::milliseconds timeout, std::string stdin_data = {}, bool attach_stdin = false,
                             std::vector<std::string> env = {}, std::size_t max_out = 64 * 1024 * 1024);
  // The workspace a new session starts with (uploads, outputs, skills), made in a
  // The plain kill sweep (cells.cpp): every process of the session user in `container`
  // killed but the container's init and its `sleep`, then the outcome judged from the
  // host (only_own_processes). A plain sweep is an exec of the session user: a process a
  // cell left can stop or trace it, so its own word is never taken.
  enum class sweep_outcome { clean, tainted, unknown };
  sweep_outcome sweep_cell_processes(const std::string& container);
  // The engine's process table of `container` (ContainerTop, read on the host): clean when
  // every process is the container's own (the keep-alive's uid) or a zombie with no live
  // thread; tainted when
  // a process of the session user lives; unknown when the engine could not say.
  sweep_outcome only_own_processes(const std::string& container);
  // started container as the session user; the error ("" when made). With `runner` (and
  // SANDBOX_CELL_RUNNER on) the container's cell runner is started now and makes them:
  // no exec of their own; it is left in *runner. Otherwise (or if the runner does not come
  // up) one exec makes them.
  std::string make_workspace(const std::string& container, std::shared_ptr<cell_runner>* runner = nullptr);
  // The body of a session's container create. `pool`: a warm pool container's (no
  // request's labels); `claim_of`: the claim record of that pool container for `s`.
  enum class body_kind { session, pool, claim };
  std::string create_body(const std::string& sid, const session& s, body_kind kind = body_kind::session,
                          const std::string& claim_of = {}) const;
  // A session's containers removed (its own, and its claim record if it came from the pool).
  void remove_session_containers(const session& s);
  std::optional<pooled_container> pool_create(std::string& error, bool& full);
  std::optional<pooled_container> claim_warm(std::chrono::milliseconds wait);
  // The claim record of a session on a warm container, written before its answer; "" or
  // why not.
  std::string write_claim_record(const session& s);
  std::string image_id();
  // The session containers of this instance (running only, or all); nullopt if the
  // engine could not be asked.
  struct session_container {
    std::string id;
    std::string state;
    std::map<std::string, std::string> labels;
  };
  std::optional<std::vector<session_container>> own_containers(bool all);
  void reap_once();
  // The storage block of a request body (its "storage" member), chosen and validated.
  storage_choice request_storage(const std::string& body) const;
  prepared_restore prepare_restore(const storage_spec& storage, const std::string& stem);
  void unpack_restore(const std::string& container, prepared_restore& r);
  archive_outcome archive_workspace(session& s);
  archive_outcome discard_archives(const storage_spec& storage, const std::string& stem);
  std::shared_ptr<std::mutex> key_lock(const std::string& where);
  // dockgate-mount for a session's FUSE workspace: the error, if the mount is not live.
  std::optional<std::string> mount_workspace(const std::string& sid, const std::string& key);
  void unmount_workspace(const std::string& sid);

  http_reply storage_put(const http_request& r);
  http_reply storage_delete(const http_request& r);
  http_reply storage_gc(const http_request& r);

  config config_;
  client::engine docker_;
  std::mutex table_mutex_;
  std::map<std::string, std::shared_ptr<session>> sessions_;
  std::mutex create_mutex_;
  std::counting_semaphore<1 << 20> exec_slots_;
  std::counting_semaphore<1 << 20> create_slots_;
  std::once_flag image_checked_;
  std::atomic<bool> image_ready_{false};
  std::thread reaper_;
  std::mutex reaper_mutex_;
  std::condition_variable reaper_wake_;
  bool stopping_ = false;
  std::mutex key_locks_mutex_;
  std::map<std::string, std::weak_ptr<std::mutex>> key_locks_;
  // Pool containers being created, not yet running: counted against SANDBOX_MAX_SESSIONS.
  std::atomic<std::int64_t> pool_reserved_{0};
  // Last: stopped (its containers removed through docker_) before the rest goes.
  std::shared_ptr<warm_pool> pool_;
};

// Helpers with a contract of their own (unit-tested).
std::string base64_encode(std::string_view data);
std::optional<std::string> base64_decode_strict(std::string_view text);
// os.path.normpath-style confinement: the absolute, normalised path under /workspace, or
// nullopt.
std::optional<std::string> workspace_path(std::string_view path);
std::string shell_quote(std::string_view s);
std::string valid_utf8(std::string_view bytes);  // invalid sequences become U+FFFD
std::string mime_type_for(std::string_view name);

// A program run to its end (no shell), its output captured, killed at the deadline.
struct command_output {
  int exit_code = -1;  // -1: did not exit by itself (killed at the deadline, or not started)
  std::string out, err;
};
command_output run_command(const std::vector<std::string>& argv, std::chrono::milliseconds timeout);

}  // namespace dockgate::sidecar

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

#include "dockgate/client/engine.hpp"
#include "dockgate/sidecar/config.hpp"
#include "dockgate/sidecar/http_server.hpp"
#include "dockgate/sidecar/s3.hpp"

namespace dockgate::sidecar {

// Labels of session containers (the gate adds its own owner label).
inline constexpr std::string_view session_label = "sandbox.session_id";
inline constexpr std::string_view created_label = "sandbox.created_at";
inline constexpr std::string_view archive_label = "sandbox.archive_key";
inline constexpr std::string_view container_prefix = "dockgate-sbx-";

class service {
 public:
  service(config c, client::engine docker);
  ~service();

  http_reply handle(const http_request& r);
  // Start-up: adopt running session containers left by a previous run, remove the rest.
  void reconcile();
  // Starts the idle reaper thread.
  void start_reaper();
  std::size_t max_body(std::string_view path) const;

 private:
  struct session {
    std::string id;
    std::string container;  // name
    std::timed_mutex lock;
    std::atomic<std::chrono::steady_clock::time_point> last_used{};
    std::int64_t ttl_seconds = 0;
    std::string archive_key;
    std::string storage_prefix = "workspaces/";
    bool archive = false;           // storage effective for this session
    std::optional<s3_config> s3;    // archives in S3 (else the local directory)
    std::atomic<bool> terminating{false};
  };

  http_reply healthz();
  http_reply create_session(const http_request& r);
  http_reply delete_session(std::string_view id, const std::string& body);
  http_reply exec(const http_request& r);
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
  std::string create_body(const std::string& sid, const std::string& archive_key) const;
  void reap_once();
  // Storage the request names (or none): whether archives apply, and their prefix.
  bool storage_effective(const std::string& body_storage_provider) const;
  // The storage block of a request ({provider, prefix, s3_*}) applied to a session.
  void apply_storage(const std::string& body, session& s) const;
  void archive_workspace(const session& s);
  void discard_archive(const session& s);
  void restore_workspace(const session& s);

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

}  // namespace dockgate::sidecar

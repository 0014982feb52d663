#pragma once
// The Docker Engine API calls a dockgate program makes (the sidecar, through the gate),
// including exec with its multiplexed stdout/stderr stream demultiplexed under caps and
// a deadline.

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "dockgate/client/http_client.hpp"

namespace dockgate::client {

struct engine_config {
  transport where;
  std::string api_version = "1.41";
};

// DOCKER_HOST, DOCKER_TLS_VERIFY and DOCKER_CERT_PATH as the docker CLI reads them
// (default unix:///var/run/docker.sock; with DOCKER_TLS_VERIFY set, TLS with
// $DOCKER_CERT_PATH/{ca,cert,key}.pem, default ~/.docker). nullopt with `error` set.
std::optional<engine_config> engine_config_from_env(std::string* error);

struct exec_options {
  std::vector<std::string> cmd;
  std::vector<std::string> env;
  std::string user;  // the exec's "User" ("uid:gid"); empty: the container's own
  std::string stdin_data;
  bool attach_stdin = false;
  std::size_t max_stdout = 64 * 1024 * 1024;
  std::size_t max_stderr = 64 * 1024 * 1024;
  std::chrono::milliseconds timeout{30000};
  // Called with what is kept of each piece of output as it arrives (1: stdout, 2: stderr).
  std::function<void(int stream, std::string_view data)> on_output;
  // Called after each `idle_every` with no output (0: never), while the exec runs: a
  // caller's heartbeat (a stream's keep-alive, the check that its client still reads).
  std::chrono::milliseconds idle_every{0};
  std::function<void()> on_idle;
};

struct exec_result {
  bool started = false;  // the exec ran (false: error says why)
  std::string error;
  std::string stdout_data;
  std::string stderr_data;
  std::uint64_t stdout_dropped = 0;  // bytes past the caps
  std::uint64_t stderr_dropped = 0;
  bool timed_out = false;
  std::int64_t exit_code = -1;
};

// A started exec whose stdin and output stay open: the caller writes to the process's
// stdin and reads its output frame by frame (Tty false: Docker's 8-byte multiplexing
// header before each frame). Closing it (or destroying it) ends the stream; the process
// sees EOF on its stdin.
class exec_stream {
 public:
  enum class read_error { none, eof, deadline, malformed, oversized };
  struct frame {
    int stream = 0;  // 1 stdout, 2 stderr
    std::string data;
  };
  exec_stream(connection c, std::string buffer, std::string id)
      : connection_(std::move(c)), buffer_(std::move(buffer)), id_(std::move(id)) {}

  bool write(std::string_view data, clock_type::time_point deadline) {
    return connection_.write_all(data, deadline);
  }
  // The next frame; nullopt with `error` set at EOF, at the deadline, or for a header
  // that is not Docker's (stream other than 0-2, non-zero padding) or a payload over
  // `max_payload`. The stream is not usable after an error.
  std::optional<frame> read(clock_type::time_point deadline, std::size_t max_payload,
                            read_error& error);
  void shutdown_write() { connection_.shutdown_write(); }
  // Nothing came from the other side since the last read, and it has not closed: no byte
  // buffered or readable, no EOF (asked without waiting). False whenever unsure: under TLS
  // a readable record may hold no data, so a TLS stream is never said to be quiet.
  bool quiet() const;
  const std::string& id() const { return id_; }

 private:
  friend class engine;
  connection connection_;
  std::string buffer_;
  std::string id_;
};

class engine {
 public:
  explicit engine(engine_config config) : config_(std::move(config)) {}

  // `path` without the version prefix ("/containers/json?all=1").
  http_response call(std::string_view method, std::string_view path, std::string_view body = {},
                     std::chrono::milliseconds timeout = std::chrono::seconds(30)) const;

  exec_result exec(std::string_view container, const exec_options& options) const;

  // Creates and starts an exec of `cmd` (as `user`, "uid:gid"; empty: the container's
  // own) with stdin, stdout and stderr attached and returns its open stream (nullopt
  // with `error` set).
  std::optional<exec_stream> exec_attach(std::string_view container,
                                         const std::vector<std::string>& cmd, std::string_view user,
                                         clock_type::time_point deadline, std::string* error) const;

  const engine_config& config() const { return config_; }

 private:
  // POST /containers/{id}/exec with `create_body`, then /exec/{id}/start upgraded to a
  // raw stream: the stream, or nullopt with `error` ("exec create: ...", "exec start: ...").
  std::optional<exec_stream> start_exec(std::string_view container, const std::string& create_body,
                                        clock_type::time_point deadline, std::string* error) const;
  engine_config config_;
};

// Appends `s` as a JSON string literal (with quotes).
void append_json_string(std::string& out, std::string_view s);
std::string json_string_array(const std::vector<std::string>& items);

}  // namespace dockgate::client

#pragma once
// The Docker Engine API calls a dockgate program makes (the sidecar, through the gate),
// including exec with its multiplexed stdout/stderr stream demultiplexed under caps and
// a deadline.

#include <chrono>
#include <cstdint>
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
  std::string stdin_data;
  bool attach_stdin = false;
  std::size_t max_stdout = 64 * 1024 * 1024;
  std::size_t max_stderr = 64 * 1024 * 1024;
  std::chrono::milliseconds timeout{30000};
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

class engine {
 public:
  explicit engine(engine_config config) : config_(std::move(config)) {}

  // `path` without the version prefix ("/containers/json?all=1").
  http_response call(std::string_view method, std::string_view path, std::string_view body = {},
                     std::chrono::milliseconds timeout = std::chrono::seconds(30)) const;

  exec_result exec(std::string_view container, const exec_options& options) const;

  const engine_config& config() const { return config_; }

 private:
  engine_config config_;
};

// Appends `s` as a JSON string literal (with quotes).
void append_json_string(std::string& out, std::string_view s);
std::string json_string_array(const std::vector<std::string>& items);

}  // namespace dockgate::client

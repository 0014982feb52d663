#include "dockgate/client/engine.hpp"

#include <poll.h>
#include <simdjson.h>

#include <cstdlib>

#include "dockgate/common/error_body.hpp"

namespace dockgate::client {

void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  common::append_json_escaped(out, s);
  out += '"';
}

std::string json_string_array(const std::vector<std::string>& items) {
  std::string out = "[";
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out += ',';
    append_json_string(out, items[i]);
  }
  return out + "]";
}

std::optional<engine_config> engine_config_from_env(std::string* error) {
  const char* host = std::getenv("DOCKER_HOST");
  const char* verify = std::getenv("DOCKER_TLS_VERIFY");
  auto ep = common::parse_endpoint(host && *host ? host : "unix:///var/run/docker.sock", error);
  if (!ep) return std::nullopt;
  if (ep->scheme == common::endpoint::kind::tls) {
    if (error)
      *error = "DOCKER_HOST: tls:// is a listener scheme; use tcp:// with DOCKER_TLS_VERIFY";
    return std::nullopt;
  }
  engine_config config{transport{*ep, nullptr}};
  if (verify && *verify) {
    if (ep->scheme != common::endpoint::kind::tcp) {
      if (error) *error = "DOCKER_TLS_VERIFY needs a tcp:// DOCKER_HOST";
      return std::nullopt;
    }
    const char* path = std::getenv("DOCKER_CERT_PATH");
    const char* home = std::getenv("HOME");
    const std::string dir = path && *path ? path : std::string(home ? home : "") + "/.docker";
    config.where.tls =
        tls_context::create(dir + "/ca.pem", dir + "/cert.pem", dir + "/key.pem", error);
    if (!config.where.tls) return std::nullopt;
  }
  return config;
}

http_response engine::call(std::string_view method, std::string_view path, std::string_view body,
                           std::chrono::milliseconds timeout) const {
  std::string target = "/v" + config_.api_version;
  target += path;
  return http_request(config_.where, method, target, body, timeout);
}

std::optional<exec_stream> engine::start_exec(std::string_view container,
                                              const std::string& create_body,
                                              clock_type::time_point deadline,
                                              std::string* error) const {
  auto created = call("POST", "/containers/" + std::string(container) + "/exec", create_body,
                      std::chrono::seconds(20));
  if (created.status != 201) {
    *error = "exec create: " +
             (created.status ? std::to_string(created.status) + " " + created.body : created.error);
    return std::nullopt;
  }
  std::string exec_id;
  {
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    std::string_view id;
    if (parser.parse(created.body).get(doc) != simdjson::SUCCESS ||
        doc["Id"].get_string().get(id) != simdjson::SUCCESS) {
      *error = "exec create: no Id in the answer";
      return std::nullopt;
    }
    exec_id = std::string(id);
  }

  auto c = connection::open(config_.where, deadline, error);
  if (!c) return std::nullopt;
  const std::string start_body = R"({"Detach":false,"Tty":false})";
  std::string request = "POST /v" + config_.api_version + "/exec/" + exec_id +
                        "/start HTTP/1.1\r\nHost: docker\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n"
                        "Content-Type: application/json\r\nContent-Length: " +
                        std::to_string(start_body.size()) + "\r\n\r\n" + start_body;
  if (!c->write_all(request, deadline)) {
    *error = "exec start: write failed";
    return std::nullopt;
  }
  std::string buffer;
  auto head = read_response_head(*c, buffer, deadline);
  if (!head || (head->status != 101 && head->status != 200)) {
    *error = "exec start: " + (head ? std::to_string(head->status) : std::string("no answer"));
    return std::nullopt;
  }
  return exec_stream(std::move(*c), std::move(buffer), std::move(exec_id));
}

std::optional<exec_stream> engine::exec_attach(std::string_view container,
                                               const std::vector<std::string>& cmd,
                                               std::string_view user,
                                               clock_type::time_point deadline,
                                               std::string* error) const {
  std::string create =
      "{\"AttachStdin\":true,\"AttachStdout\":true,\"AttachStderr\":true,\"Tty\":false,\"Cmd\":";
  create += json_string_array(cmd);
  if (!user.empty()) {
    create += ",\"User\":";
    append_json_string(create, user);
  }
  create += '}';
  return start_exec(container, create, deadline, error);
}

std::optional<exec_stream::frame> exec_stream::read(clock_type::time_point deadline,
                                                    std::size_t max_payload, read_error& error) {
  error = read_error::none;
  for (;;) {
    if (buffer_.size() >= 8) {
      const auto* h = reinterpret_cast<const unsigned char*>(buffer_.data());
      // Docker's header: stream (0 stdin, 1 stdout, 2 stderr), three zero bytes, size.
      if (h[0] > 2 || h[1] || h[2] || h[3]) {
        error = read_error::malformed;
        return std::nullopt;
      }
      const std::size_t size =
          (std::size_t(h[4]) << 24) | (std::size_t(h[5]) << 16) | (std::size_t(h[6]) << 8) | h[7];
      if (size > max_payload) {
        error = read_error::oversized;
        return std::nullopt;
      }
      if (buffer_.size() >= 8 + size) {
        frame f{h[0] == 2 ? 2 : 1, buffer_.substr(8, size)};
        buffer_.erase(0, 8 + size);
        return f;
      }
    }
    char chunk[65536];
    const long n = connection_.read_some(chunk, sizeof chunk, deadline);
    if (n <= 0) {
      error = n == 0 ? read_error::eof : read_error::deadline;
      return std::nullopt;
    }
    buffer_.append(chunk, static_cast<std::size_t>(n));
  }
}

bool exec_stream::quiet() const {
  if (!buffer_.empty() || connection_.tls() || connection_.fd() < 0) return false;
  pollfd p{connection_.fd(), POLLIN | POLLRDHUP, 0};
  return ::poll(&p, 1, 0) == 0;
}

exec_result engine::exec(std::string_view container, const exec_options& options) const {
  exec_result result;
  const auto deadline = clock_type::now() + options.timeout;
  std::string create = "{\"AttachStdin\":";
  create += options.attach_stdin ? "true" : "false";
  create += ",\"AttachStdout\":true,\"AttachStderr\":true,\"Tty\":false,\"Cmd\":";
  create += json_string_array(options.cmd);
  if (!options.env.empty()) create += ",\"Env\":" + json_string_array(options.env);
  if (!options.user.empty()) {
    create += ",\"User\":";
    append_json_string(create, options.user);
  }
  create += '}';
  auto started = start_exec(container, create, deadline, &result.error);
  if (!started) return result;
  auto* c = &started->connection_;
  std::string& buffer = started->buffer_;
  const std::string& exec_id = started->id_;
  result.started = true;
  if (options.attach_stdin) {
    if (!options.stdin_data.empty() && !c->write_all(options.stdin_data, deadline))
      result.timed_out = true;
    c->shutdown_write();  // stdin EOF; output keeps coming
  } else {
    c->shutdown_write();
  }
  // Demultiplex: [stream(1) 0 0 0 size(4, big endian)] payload ...
  char chunk[65536];
  bool eof = false;
  while (!eof && !result.timed_out) {
    while (buffer.size() >= 8) {
      const auto* h = reinterpret_cast<const unsigned char*>(buffer.data());
      const std::size_t size =
          (std::size_t(h[4]) << 24) | (std::size_t(h[5]) << 16) | (std::size_t(h[6]) << 8) | h[7];
      if (buffer.size() < 8 + size) break;
      const bool is_err = h[0] == 2;
      std::string& out = is_err ? result.stderr_data : result.stdout_data;
      const std::size_t cap = is_err ? options.max_stderr : options.max_stdout;
      const std::size_t room = out.size() < cap ? cap - out.size() : 0;
      const std::size_t keep = std::min(room, size);
      out.append(buffer, 8, keep);
      if (keep && options.on_output)
        options.on_output(is_err ? 2 : 1, std::string_view(buffer).substr(8, keep));
      (is_err ? result.stderr_dropped : result.stdout_dropped) += size - keep;
      buffer.erase(0, 8 + size);
    }
    if (buffer.size() > 16 * 1024 * 1024)
      buffer.clear();  // a frame over 16 MiB: drop, keep reading
    const bool ticking = options.idle_every.count() > 0 && options.on_idle;
    const auto tick =
        ticking ? std::min(deadline, clock_type::now() + options.idle_every) : deadline;
    const long n = c->read_some(chunk, sizeof chunk, tick);
    if (n < 0 && tick < deadline && clock_type::now() >= tick) {
      options.on_idle();  // quiet for idle_every: the caller's heartbeat, then read on
      continue;
    }
    if (n < 0) result.timed_out = clock_type::now() >= deadline;
    if (n <= 0)
      eof = true;
    else
      buffer.append(chunk, static_cast<std::size_t>(n));
  }
  if (result.timed_out) return result;
  auto inspected = call("GET", "/exec/" + exec_id + "/json", {}, std::chrono::seconds(10));
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  int64_t code = -1;
  // get() leaves `code` alone on error; naming the outcome keeps -1 for an ExitCode that is
  // not an integer (null while the exec runs) and satisfies warn_unused_result, which GCC
  // does not let a (void) cast silence.
  if (inspected.status == 200 && parser.parse(inspected.body).get(doc) == simdjson::SUCCESS &&
      doc["ExitCode"].get_int64().get(code) != simdjson::SUCCESS)
    code = -1;
  result.exit_code = code;
  return result;
}

}  // namespace dockgate::client

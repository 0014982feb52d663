// The service: routing and auth, health, and what every handler shares (finding and
// locking a session, running a command in its container). Seed: shared/research/seed_systems.md §1.2–1.3.
#include "dockgate/sidecar/service.hpp"

#include <simdjson.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "dockgate/sidecar/archive.hpp"
#include "request.hpp"

namespace dockgate::sidecar {

using namespace std::chrono_literals;

service::service(config c, client::engine docker)
    : config_(std::move(c)),
      docker_(std::move(docker)),
      exec_slots_(config_.max_concurrent_execs > 0 ? config_.max_concurrent_execs : (1 << 20)),
      create_slots_(config_.max_concurrent_creates > 0 ? config_.max_concurrent_creates : (1 << 20)) {}

service::~service() {
  {
    std::lock_guard g(reaper_mutex_);
    stopping_ = true;
  }
  reaper_wake_.notify_all();
  if (reaper_.joinable()) reaper_.join();
}

std::size_t service::max_body(std::string_view path) const {
  return static_cast<std::size_t>(path == "/storage/put" ? config_.max_storage_body_bytes : config_.max_body_bytes);
}

http_reply service::handle(const http_request& r) {
  if (r.path == "/healthz") {
    if (r.method != "GET") return detail(405, "Method Not Allowed");
    return healthz();
  }
  if (!config_.allow_no_auth) {
    // Constant-time comparison of the whole header with "Bearer <key>".
    const std::string expected = "Bearer " + config_.api_key;
    unsigned char diff = r.authorization.size() == expected.size() ? 0 : 1;
    for (std::size_t i = 0; i < expected.size(); ++i)
      diff |= static_cast<unsigned char>(expected[i] ^ (i < r.authorization.size() ? r.authorization[i] : 0));
    if (diff != 0) return {401, R"({"error":"unauthorized"})"};
  }
  auto post = [&](auto fn) { return r.method == "POST" ? (this->*fn)(r) : detail(405, "Method Not Allowed"); };
  if (r.path == "/sessions") return post(&service::create_session);
  if (r.path.starts_with("/sessions/") && r.path.find('/', 10) == std::string::npos) {
    if (r.method != "DELETE") return detail(405, "Method Not Allowed");
    return delete_session(std::string_view(r.path).substr(10), r.body);
  }
  if (r.path == "/exec") return post(&service::exec);
  if (r.path == "/files") return post(&service::put_file);
  if (r.path == "/files/get") return post(&service::get_file);
  if (r.path == "/files/list") return post(&service::list_files);
  if (r.path == "/files/reset-inputs") return post(&service::reset_inputs);
  if (r.path == "/storage/put") return post(&service::storage_put);
  if (r.path == "/storage/delete") return post(&service::storage_delete);
  if (r.path == "/storage/gc") return post(&service::storage_gc);
  return detail(404, "Not Found");
}

http_reply service::healthz() {
  auto version = docker_.call("GET", "/version", {}, 10s);
  std::string docker_version;
  if (version.status == 200) {
    simdjson::dom::parser p;
    simdjson::dom::element doc;
    std::string_view v;
    if (p.parse(version.body).get(doc) == simdjson::SUCCESS && doc["Version"].get_string().get(v) == simdjson::SUCCESS)
      docker_version = std::string(v);
  }
  std::string body = "{\"ok\":";
  if (docker_version.empty()) {
    body += "false,\"docker\":\"\",\"image\":";
    client::append_json_string(body, config_.image);
    return {503, body + "}"};
  }
  const bool ready = docker_.call("GET", "/images/" + config_.image + "/json", {}, 10s).status == 200;
  if (ready) image_ready_ = true;
  body += ready ? "true" : "false";
  body += ",\"docker\":";
  client::append_json_string(body, docker_version);
  body += ",\"image\":";
  client::append_json_string(body, config_.image);
  body += ",\"image_ready\":";
  body += ready ? "true" : "false";
  return {ready ? 200u : 503u, body + "}"};
}

// The session, locked (per-session serialisation) and checked to be running; or the
// answer: 400 malformed id, 404 unknown or terminating, 429 busy past the queue timeout.
std::optional<http_reply> service::acquire(const std::string& id, held_session& out) {
  if (!valid_session_id(id)) return detail(400, "invalid session_id");
  out.s = find(id);
  if (!out.s || out.s->terminating) return detail(404, "session not found or not running");
  out.lock = std::unique_lock(out.s->lock, std::defer_lock);
  if (!out.lock.try_lock_for(std::chrono::seconds(config_.queue_timeout_seconds))) return detail(429, "session is busy");
  if (!running(out.s->container)) return detail(404, "session not found or not running");
  return std::nullopt;
}

// For routes whose body names only a session: parse it and acquire the session.
std::optional<http_reply> service::session_request(const http_request& r, held_session& out) {
  body_fields f(r.body);
  if (f.error) return f.error;
  std::optional<http_reply> err;
  auto sid = f.string("session_id", true, err);
  if (err) return err;
  return acquire(*sid, out);
}

std::shared_ptr<service::session> service::find(const std::string& id) {
  std::lock_guard g(table_mutex_);
  auto it = sessions_.find(id);
  return it == sessions_.end() ? nullptr : it->second;
}

void service::forget(const std::string& id) {
  std::lock_guard g(table_mutex_);
  sessions_.erase(id);
}

bool service::running(const std::string& container) {
  auto r = docker_.call("GET", "/containers/" + container + "/json", {}, 20s);
  if (r.status != 200) return false;
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  bool running = false;
  return p.parse(r.body).get(doc) == simdjson::SUCCESS && doc["State"]["Running"].get_bool().get(running) == simdjson::SUCCESS &&
         running;
}

void service::remove_container(const std::string& container) {
  docker_.call("DELETE", "/containers/" + container + "?force=1", {}, 30s);
}

client::exec_result service::run_in(const std::string& container, std::vector<std::string> cmd,
                                    std::chrono::milliseconds timeout, std::string stdin_data, bool attach_stdin,
                                    std::vector<std::string> env, std::size_t max_out) {
  client::exec_options o;
  o.cmd = std::move(cmd);
  o.env = std::move(env);
  o.user = session_user;
  o.stdin_data = std::move(stdin_data);
  o.attach_stdin = attach_stdin;
  o.timeout = timeout;
  o.max_stdout = max_out;
  o.max_stderr = 64 * 1024;
  return docker_.exec(container, o);
}

}  // namespace dockgate::sidecar

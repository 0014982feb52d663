// Sessions, exec and files: the Aivory sidecar's behaviour (shared/research/seed_systems.md
// §1.2–1.7), over the Engine API through the gate.
#include "dockgate/sidecar/service.hpp"

#include <simdjson.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "dockgate/sidecar/archive.hpp"

#include <algorithm>
#include <cstdio>
#include <random>

namespace dockgate::sidecar {

namespace {

using namespace std::chrono_literals;

http_reply detail(unsigned status, std::string_view message) {
  std::string body = "{\"detail\":";
  client::append_json_string(body, message);
  return {status, body + "}"};
}

// FastAPI's shape for a validation error.
http_reply invalid(std::string_view field, std::string_view msg, std::string_view type) {
  std::string body = R"({"detail":[{"loc":["body",)";
  client::append_json_string(body, field);
  body += "],\"msg\":";
  client::append_json_string(body, msg);
  body += ",\"type\":";
  client::append_json_string(body, type);
  return {422, body + "}]}"};
}

std::string random_hex(std::size_t bytes) {
  static thread_local std::random_device rd;
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < bytes; ++i) {
    const auto b = static_cast<unsigned char>(rd());
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

bool valid_session_id(std::string_view id) {
  return id.size() == 32 && std::all_of(id.begin(), id.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool valid_archive_key(std::string_view k) {
  return !k.empty() && k.size() <= 128 &&
         std::all_of(k.begin(), k.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; });
}

// A parsed JSON request body (object), or the 422 to answer.
struct body_fields {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  std::optional<http_reply> error;

  explicit body_fields(const std::string& body, bool allow_empty = false) {
    if (body.empty() && allow_empty) {
      if (parser.parse("{}", 2).get(doc) != simdjson::SUCCESS) error = invalid("body", "internal", "internal");
      return;
    }
    if (parser.parse(body).get(doc) != simdjson::SUCCESS || !doc.is_object())
      error = invalid("body", "value is not a valid JSON object", "value_error.jsondecode");
  }
  std::optional<std::string> string(const char* key, bool required, std::optional<http_reply>& err) {
    simdjson::dom::element v;
    if (doc.at_key(key).get(v) != simdjson::SUCCESS || v.is_null()) {
      if (required && !err) err = invalid(key, "field required", "value_error.missing");
      return std::nullopt;
    }
    std::string_view s;
    if (v.get_string().get(s) != simdjson::SUCCESS) {
      if (!err) err = invalid(key, "str type expected", "type_error.str");
      return std::nullopt;
    }
    return std::string(s);
  }
  std::optional<std::int64_t> integer(const char* key, std::optional<http_reply>& err) {
    simdjson::dom::element v;
    if (doc.at_key(key).get(v) != simdjson::SUCCESS || v.is_null()) return std::nullopt;
    std::int64_t n = 0;
    if (v.get_int64().get(n) != simdjson::SUCCESS) {
      if (!err) err = invalid(key, "value is not a valid integer", "type_error.integer");
      return std::nullopt;
    }
    return n;
  }
  bool boolean(const char* key) {
    bool b = false;
    return doc.at_key(key).get_bool().get(b) == simdjson::SUCCESS && b;
  }
};

// Inputs (uploads, skills) are staged afresh for every run: emptied on create and on
// /files/reset-inputs, never archived.
constexpr std::string_view reset_inputs_script =
    "rm -rf -- /workspace/uploads /workspace/skills && mkdir -p -- /workspace/uploads /workspace/skills";

std::size_t utf8_chars(std::string_view s) {
  return static_cast<std::size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

}  // namespace

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
  o.stdin_data = std::move(stdin_data);
  o.attach_stdin = attach_stdin;
  o.timeout = timeout;
  o.max_stdout = max_out;
  o.max_stderr = 64 * 1024;
  return docker_.exec(container, o);
}

std::string service::create_body(const std::string& sid, const std::string& archive_key) const {
  // The hardened host config of the seed (§1.10). The gate's sandbox profile forces all
  // of it anyway; asking for it too keeps the sidecar honest against a looser profile.
  std::string b = "{\"Image\":";
  client::append_json_string(b, config_.image);
  b += R"(,"Cmd":["sleep","infinity"],"User":"1000:1000","WorkingDir":"/workspace","Labels":{)";
  client::append_json_string(b, archive_label);
  b += ':';
  client::append_json_string(b, archive_key);
  b += ',';
  client::append_json_string(b, created_label);
  b += ':';
  client::append_json_string(b, std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                                                   std::chrono::system_clock::now().time_since_epoch())
                                                   .count()));
  b += ',';
  client::append_json_string(b, session_label);
  b += ':';
  client::append_json_string(b, sid);
  b += "},\"HostConfig\":{\"NetworkMode\":\"none\",\"Memory\":" + std::to_string(config_.memory_bytes) +
       ",\"MemorySwap\":" + std::to_string(config_.memory_bytes) + ",\"NanoCpus\":" + std::to_string(config_.nano_cpus) +
       ",\"PidsLimit\":" + std::to_string(config_.pids_limit) + ",\"Ulimits\":[{\"Name\":\"nofile\",\"Soft\":" +
       std::to_string(config_.nofile_soft) + ",\"Hard\":" + std::to_string(config_.nofile_hard) +
       "}],\"Init\":true,\"SecurityOpt\":[\"no-new-privileges\"],\"CapDrop\":[\"ALL\"]";
  if (config_.read_only_rootfs) {
    b += ",\"ReadonlyRootfs\":true,\"Tmpfs\":{\"/tmp\":\"rw,nosuid,nodev,size=" + config_.tmpfs_size +
         "\",\"/home/sandbox\":\"rw,nosuid,nodev,size=" + config_.tmpfs_size +
         "\",\"/workspace\":\"rw,nosuid,nodev,size=" + config_.workspace_size + ",mode=1777\"}";
  }
  if (!config_.disk_size.empty()) b += ",\"StorageOpt\":{\"size\":\"" + config_.disk_size + "\"}";
  return b + "}}";
}

http_reply service::create_session(const http_request& r) {
  body_fields f(r.body, true);
  if (f.error) return *f.error;
  std::optional<http_reply> err;
  auto ttl = f.integer("idle_ttl_sec", err);
  auto key = f.string("archive_key", false, err);
  if (err) return *err;

  if (!create_slots_.try_acquire_for(std::chrono::seconds(config_.queue_timeout_seconds)))
    return detail(429, "session create queue is full");
  struct release {
    std::counting_semaphore<1 << 20>& s;
    ~release() { s.release(); }
  } slot{create_slots_};

  if (!image_ready_) {
    if (docker_.call("GET", "/images/" + config_.image + "/json", {}, 10s).status != 200)
      return detail(503, "sandbox image not available yet: " + config_.image);
    image_ready_ = true;
  }
  const std::string sid = random_hex(16);
  const std::string name = std::string(container_prefix) + sid;
  const std::string archive_key = key && valid_archive_key(*key) ? *key : sid;
  std::string container_id = name;  // replaced by the full ID once created
  {
    std::lock_guard g(create_mutex_);
    if (config_.max_sessions > 0) {
      // Running labelled containers on the daemon (the gate confines the list to ours).
      auto list = docker_.call("GET", "/containers/json?filters=%7B%22label%22%3A%5B%22" + std::string(session_label) + "%22%5D%7D", {}, 20s);
      std::int64_t live = 0;
      simdjson::dom::parser p;
      simdjson::dom::element doc;
      simdjson::dom::array arr;
      if (list.status == 200 && p.parse(list.body).get(doc) == simdjson::SUCCESS && doc.get_array().get(arr) == simdjson::SUCCESS) {
        live = static_cast<std::int64_t>(arr.size());
      } else {
        std::lock_guard t(table_mutex_);
        live = static_cast<std::int64_t>(sessions_.size());
      }
      if (live >= config_.max_sessions) return detail(429, "too many active sessions");
    }
    auto created = docker_.call("POST", "/containers/create?name=" + name, create_body(sid, archive_key), 60s);
    if (created.status != 201)
      return detail(500, "docker run failed: " + (created.status ? created.body : created.error));
    {
      simdjson::dom::parser p;
      simdjson::dom::element doc;
      std::string_view id;
      if (p.parse(created.body).get(doc) == simdjson::SUCCESS && doc["Id"].get_string().get(id) == simdjson::SUCCESS)
        container_id = std::string(id);
    }
    auto started = docker_.call("POST", "/containers/" + name + "/start", {}, 60s);
    if (started.status != 204 && started.status != 304) {
      remove_container(name);
      return detail(500, "docker run failed: " + (started.status ? started.body : started.error));
    }
  }
  auto mk = run_in(container_id, {"mkdir", "-p", "/workspace/uploads", "/workspace/outputs", "/workspace/skills"}, 20s);
  if (!mk.started || mk.exit_code != 0) {
    remove_container(container_id);
    return detail(500, "workspace init failed: " + (mk.error.empty() ? mk.stderr_data : mk.error));
  }
  auto s = std::make_shared<session>();
  s->id = sid;
  s->container = container_id;
  s->archive_key = archive_key;
  apply_storage(r.body, *s);
  if (s->archive) restore_workspace(*s);
  auto reset = run_in(container_id, {"sh", "-c", std::string(reset_inputs_script)}, 30s);
  if (!reset.started || reset.exit_code != 0) {
    remove_container(container_id);
    return detail(500, "reset inputs failed: " + reset.stderr_data);
  }
  s->ttl_seconds = ttl && *ttl > 0 ? std::clamp<std::int64_t>(*ttl, 1, config_.idle_ttl_cap_seconds) : 0;
  s->last_used = std::chrono::steady_clock::now();
  {
    std::lock_guard g(table_mutex_);
    sessions_[sid] = s;
  }
  std::string body = "{\"session_id\":";
  client::append_json_string(body, sid);
  return {200, body + "}"};
}

http_reply service::delete_session(std::string_view id, const std::string& body) {
  if (!valid_session_id(id)) return detail(400, "invalid session_id");
  body_fields f(body, true);
  if (f.error) return *f.error;
  std::optional<http_reply> err;
  const bool discard = f.boolean("discard");
  auto key = f.string("archive_key", false, err);
  if (err) return *err;
  auto s = find(std::string(id));
  const std::string name = std::string(container_prefix) + std::string(id);
  if (s) {
    s->terminating = true;  // a racing /exec gets a fast 404
    std::unique_lock lock(s->lock, std::defer_lock);
    if (!lock.try_lock_for(std::chrono::seconds(config_.queue_timeout_seconds))) {
      s->terminating = false;
      return detail(429, "session is busy");
    }
    session from_body;
    apply_storage(body, from_body);
    if (from_body.archive) {  // the storage block of this request, when effective, wins
      s->archive = true;
      s->s3 = from_body.s3;
      s->storage_prefix = from_body.storage_prefix;
    }
    if (discard) {
      session target;
      target.archive_key = key && valid_archive_key(*key) ? *key : s->archive_key;
      target.s3 = s->s3;
      target.storage_prefix = s->storage_prefix;
      discard_archive(target);
    } else if (s->archive) {
      archive_workspace(*s);
    }
    remove_container(s->container);
    forget(s->id);
  } else {
    if (discard && key && valid_archive_key(*key)) {
      session target;
      apply_storage(body, target);
      target.archive_key = *key;
      discard_archive(target);
    }
    remove_container(name);  // idempotent, also for sessions a restart forgot
  }
  return {200, R"({"ok":true})"};
}

void service::apply_storage(const std::string& body, session& s) const {
  simdjson::dom::parser p;
  simdjson::dom::element doc, storage;
  const bool given = !body.empty() && p.parse(body).get(doc) == simdjson::SUCCESS &&
                     doc.at_key("storage").get(storage) == simdjson::SUCCESS && storage.is_object();
  auto text = [&](const char* k) {
    std::string_view v;
    return given && storage[k].get_string().get(v) == simdjson::SUCCESS ? std::string(v) : std::string();
  };
  const std::string provider = given ? text("provider") : "local";
  if (auto prefix = text("prefix"); !prefix.empty()) s.storage_prefix = prefix;
  if (provider == "s3") {
    // Effective when a bucket is named (the seed's rule); path-style, SigV4.
    s3_config c;
    c.bucket = text("s3_bucket");
    c.region = text("s3_region").empty() ? "us-east-1" : text("s3_region");
    c.endpoint = text("s3_endpoint").empty() ? "https://s3." + c.region + ".amazonaws.com" : text("s3_endpoint");
    c.access_key = text("s3_access_key");
    c.secret_key = text("s3_secret_key");
    s.archive = !c.bucket.empty();
    if (s.archive) s.s3 = std::move(c);
    return;
  }
  s.archive = storage_effective(provider);
}

void service::discard_archive(const session& s) {
  if (s.s3) {
    if (auto object = archive_object_key(s.storage_prefix, s.archive_key))
      s3_client(*s.s3).delete_object(*object, std::chrono::seconds(config_.s3_read_timeout_s));
    return;
  }
  if (auto path = archive_path(config_.local_storage_dir, s.storage_prefix, s.archive_key)) ::unlink(path->c_str());
}

bool service::storage_effective(const std::string& provider) const {
  // Local archives need the operator's directory; Aliyun OSS is not implemented (not
  // effective: archiving is a no-op, as the seed does for unconfigured storage).
  if (provider != "local") return false;
  std::error_code ec;
  return !config_.local_storage_dir.empty() && std::filesystem::is_directory(config_.local_storage_dir, ec);
}

void service::archive_workspace(const session& s) {
  const auto object = archive_object_key(s.storage_prefix, s.archive_key);
  auto path = archive_path(config_.local_storage_dir, s.storage_prefix, s.archive_key);
  if (s.s3 ? !object : !path) return;
  // At most SANDBOX_MAX_ARCHIVE_BYTES compressed; over it, or on any failure, the archive
  // is skipped (never a half-written one: the write is atomic).
  auto tar = run_in(s.container, {"tar", "czf", "-", "--exclude=./uploads", "--exclude=./skills", "-C", "/workspace", "."},
                    std::chrono::seconds(config_.archive_timeout_s), {}, false, {},
                    static_cast<std::size_t>(config_.max_archive_bytes));
  if (!tar.started || tar.timed_out || tar.exit_code != 0 || tar.stdout_dropped) {
    std::cerr << "dockgate-sidecar: archive of " << s.id << " skipped ("
              << (tar.stdout_dropped ? "over SANDBOX_MAX_ARCHIVE_BYTES" : tar.error + tar.stderr_data) << ")" << std::endl;
    return;
  }
  if (s.s3) {
    // One PUT: the object appears whole or not at all.
    auto put = s3_client(*s.s3).put_object(*object, tar.stdout_data, "application/gzip",
                                           std::chrono::seconds(config_.s3_read_timeout_s));
    if (put.status != 200)
      std::cerr << "dockgate-sidecar: archive of " << s.id << " not stored in S3: "
                << (put.status ? std::to_string(put.status) + " " + put.body.substr(0, 200) : put.error) << std::endl;
    return;
  }
  std::string why;
  if (!write_atomically(*path, tar.stdout_data, &why))
    std::cerr << "dockgate-sidecar: archive of " << s.id << " not written: " << why << std::endl;
}

void service::restore_workspace(const session& s) {
  std::string data;
  std::string where;
  if (s.s3) {
    auto object = archive_object_key(s.storage_prefix, s.archive_key);
    if (!object) return;
    where = "s3://" + s.s3->bucket + "/" + *object;
    auto got = s3_client(*s.s3).get_object(*object, static_cast<std::size_t>(config_.max_archive_bytes) + 1,
                                           std::chrono::seconds(config_.s3_read_timeout_s));
    if (got.status == 404) return;  // nothing archived under this key yet
    if (got.status != 200) {
      std::cerr << "dockgate-sidecar: archive " << where << " not read: "
                << (got.status ? std::to_string(got.status) : got.error) << std::endl;
      return;
    }
    data = std::move(got.body);
  } else {
    auto path = archive_path(config_.local_storage_dir, s.storage_prefix, s.archive_key);
    if (!path) return;
    where = *path;
    std::ifstream in(*path, std::ios::binary);
    if (!in) return;  // nothing archived under this key yet
    data.assign((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  const std::string* path = &where;
  if (data.size() > static_cast<std::size_t>(config_.max_archive_bytes)) {
    std::cerr << "dockgate-sidecar: archive " << *path << " over SANDBOX_MAX_ARCHIVE_BYTES: not restored" << std::endl;
    return;
  }
  const auto max_unpacked = parse_size(config_.workspace_size).value_or(512LL << 20);
  if (auto problem = check_workspace_archive(data, static_cast<std::uint64_t>(max_unpacked))) {
    std::cerr << "dockgate-sidecar: archive " << *path << " refused: " << *problem << std::endl;
    return;
  }
  auto untar = run_in(s.container, {"tar", "--no-same-owner", "-xzf", "-", "-C", "/workspace"},
                      std::chrono::seconds(config_.archive_timeout_s), std::move(data), true);
  if (!untar.started || untar.exit_code != 0)
    std::cerr << "dockgate-sidecar: restore of " << *path << " failed: " << untar.error << untar.stderr_data << std::endl;
}

http_reply service::exec(const http_request& r) {
  body_fields f(r.body);
  if (f.error) return *f.error;
  std::optional<http_reply> err;
  auto sid = f.string("session_id", true, err);
  auto code = f.string("code", true, err);
  auto timeout_ms = f.integer("timeout_ms", err);
  if (err) return *err;
  if (utf8_chars(*code) > static_cast<std::size_t>(config_.max_code_bytes))
    return invalid("code", "ensure this value has at most " + std::to_string(config_.max_code_bytes) + " characters",
                   "value_error.any_str.max_length");
  if (code->size() > static_cast<std::size_t>(config_.max_code_bytes)) return detail(413, "code too large");
  if (!valid_session_id(*sid)) return detail(400, "invalid session_id");
  const std::int64_t ms = std::clamp<std::int64_t>(timeout_ms && *timeout_ms ? *timeout_ms : config_.default_exec_timeout_ms,
                                                   1000, config_.exec_timeout_cap_ms);
  auto s = find(*sid);
  if (!s || s->terminating) return detail(404, "session not found or not running");
  std::unique_lock lock(s->lock, std::defer_lock);
  if (!lock.try_lock_for(std::chrono::seconds(config_.queue_timeout_seconds))) return detail(429, "session is busy");
  if (config_.max_concurrent_execs > 0 && !exec_slots_.try_acquire_for(std::chrono::seconds(config_.queue_timeout_seconds)))
    return detail(429, "exec queue is full");
  struct release {
    std::counting_semaphore<1 << 20>* s;
    ~release() {
      if (s) s->release();
    }
  } slot{config_.max_concurrent_execs > 0 ? &exec_slots_ : nullptr};
  if (s->terminating) return detail(404, "session not found or not running");

  // Two execs around the cell (each exec is three Engine API calls): the first snapshots
  // /workspace/outputs, writes the cell from stdin and becomes `timeout ... python3`; the
  // second kills whatever the cell left behind, removes it and snapshots outputs again.
  const std::string token = random_hex(16);
  const std::string cell = "/tmp/dockgate-cell-" + token + ".py";
  const std::string before_file = "/tmp/dockgate-before-" + token;
  const std::string find_outputs = "find /workspace/outputs -type f -printf '%p\\t%T@\\t%s\\n' 2>/dev/null";
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.3fs", static_cast<double>(ms) / 1000.0);
  client::exec_options run;
  run.cmd = {"sh", "-c",
             find_outputs + " > " + shell_quote(before_file) + "; cat > " + shell_quote(cell) +
                 " || exit 125; exec timeout --kill-after=2s " + seconds + " python3 " + shell_quote(cell)};
  run.env = {"DOCKGATE_CELL_TOKEN=" + token};
  run.stdin_data = *code;
  run.attach_stdin = true;
  run.max_stdout = run.max_stderr = static_cast<std::size_t>(config_.max_output_bytes);
  run.timeout = std::chrono::milliseconds(ms) + 15s;  // the host-side wall clock
  auto result = docker_.exec(s->container, run);
  // Every process the cell started carries the token in its environment (detached and
  // double-forked ones too): all are killed. Nothing keeps running after the answer.
  auto cleanup = run_in(s->container,
                        {"sh", "-c",
                         "for d in /proc/[0-9]*; do if tr '\\000' '\\n' < \"$d/environ\" 2>/dev/null | grep -qxF " +
                             shell_quote("DOCKGATE_CELL_TOKEN=" + token) + "; then kill -9 \"${d#/proc/}\" 2>/dev/null; fi; done; rm -f " +
                             shell_quote(cell) + "; cat " + shell_quote(before_file) + " 2>/dev/null; echo ---; " + find_outputs +
                             "; rm -f " + shell_quote(before_file)},
                        15s);
  if (!result.started && result.error.find("409") != std::string::npos) return detail(404, "session not found or not running");
  if (!result.started && result.error.find("404") != std::string::npos) return detail(404, "session not found or not running");
  if (result.started && result.exit_code == 125 && !result.timed_out)
    return detail(500, "write cell failed: " + result.stderr_data);
  auto parse_snapshot = [](std::string_view text) {
    std::map<std::string, std::string> files;
    while (!text.empty()) {
      auto nl = text.find('\n');
      std::string_view line = text.substr(0, nl);
      text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
      auto t1 = line.find('\t');
      if (t1 == std::string_view::npos) continue;
      files[std::string(line.substr(0, t1))] = std::string(line.substr(t1 + 1));
    }
    return files;
  };
  const std::string_view listing = cleanup.stdout_data;
  const auto separator = listing.find("---\n");
  const auto before = parse_snapshot(listing.substr(0, separator));
  const auto after_files = separator == std::string_view::npos ? std::map<std::string, std::string>{}
                                                               : parse_snapshot(listing.substr(separator + 4));
  if (!result.started) return detail(500, "exec failed: " + result.error);
  std::int64_t exit_code = result.timed_out ? 124 : result.exit_code;
  const std::string kb = std::to_string(config_.max_output_bytes / 1024) + "KB";
  std::string out = valid_utf8(result.stdout_data);
  std::string errs = valid_utf8(result.stderr_data);
  if (result.stdout_dropped) out += "\n... [truncated, stdout exceeded " + kb + "]";
  if (result.stderr_dropped) errs += "\n... [truncated, stderr exceeded " + kb + "]";
  if (exit_code == 124) errs += std::string("\n[sandbox] execution exceeded ") + seconds + " and was killed";
  s->last_used = std::chrono::steady_clock::now();

  // Artifacts: new or changed regular files under /workspace/outputs, by path.
  const auto& after = after_files;
  std::vector<std::string> changed;
  for (const auto& [path, stamp] : after) {
    auto it = before.find(path);
    if (it == before.end() || it->second != stamp) changed.push_back(path);
  }
  std::string files = "[";
  std::int64_t total = 0, count = 0, skipped = 0;
  const auto collect_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(config_.max_collect_seconds);
  for (const auto& path : changed) {
    const std::string& stamp = after.at(path);
    const std::int64_t size = std::strtoll(stamp.substr(stamp.find('\t') + 1).c_str(), nullptr, 10);
    if (std::chrono::steady_clock::now() > collect_deadline || size > config_.max_artifact_bytes ||
        count >= config_.max_files_per_exec || total + size > config_.max_total_artifact_bytes) {
      ++skipped;
      continue;
    }
    auto data = run_in(s->container, {"cat", "--", path}, std::chrono::seconds(config_.collect_file_timeout_s), {}, false,
                       {}, static_cast<std::size_t>(config_.max_artifact_bytes));
    if (!data.started || data.exit_code != 0 || data.stdout_dropped) {
      ++skipped;
      continue;
    }
    const std::string name = path.substr(path.rfind('/') + 1);
    if (count++) files += ',';
    files += "{\"name\":";
    client::append_json_string(files, valid_utf8(name));
    files += ",\"mime_type\":";
    client::append_json_string(files, mime_type_for(name));
    files += ",\"data_base64\":\"" + base64_encode(data.stdout_data) + "\"}";
    total += static_cast<std::int64_t>(data.stdout_data.size());
  }
  files += ']';
  if (skipped) {
    errs += "\n[sandbox] skipped " + std::to_string(skipped) + " output file(s) because artifact limits are " +
            std::to_string(config_.max_files_per_exec) + " files, " + std::to_string(config_.max_artifact_bytes) +
            " bytes per file, " + std::to_string(config_.max_total_artifact_bytes) + " bytes total";
  }
  while (!errs.empty() && (errs.front() == '\n' || errs.front() == ' ')) errs.erase(0, 1);
  std::string body = "{\"stdout\":";
  client::append_json_string(body, out);
  body += ",\"stderr\":";
  client::append_json_string(body, errs);
  body += ",\"exit_code\":" + std::to_string(exit_code) + ",\"files\":" + files + "}";
  return {200, body};
}

http_reply service::put_file(const http_request& r) {
  body_fields f(r.body);
  if (f.error) return *f.error;
  std::optional<http_reply> err;
  auto sid = f.string("session_id", true, err);
  auto path = f.string("path", true, err);
  auto data = f.string("data_base64", true, err);
  if (err) return *err;
  const std::size_t max = static_cast<std::size_t>(config_.max_upload_bytes);
  if (data->size() > (max + 2) / 3 * 4) return detail(413, "file too large");
  auto bytes = base64_decode_strict(*data);
  if (!bytes) return detail(400, "invalid base64");
  if (bytes->size() > max) return detail(413, "file too large");
  auto target = workspace_path(*path);
  if (!target) return detail(400, "path must be under /workspace");
  held_session held;
  if (auto refused = acquire(*sid, held)) return *refused;
  const auto& s = held.s;
  const std::string parent = target->substr(0, target->rfind('/'));
  auto mk = run_in(s->container, {"mkdir", "-p", "--", parent.empty() ? "/" : parent}, 20s);
  if (!mk.started || mk.exit_code != 0) return detail(500, "mkdir failed: " + mk.stderr_data);
  // Resolved inside the container: a symlink in the workspace cannot lead out.
  auto real = run_in(s->container, {"realpath", "-m", "--", *target}, 20s);
  std::string resolved = real.stdout_data;
  while (!resolved.empty() && resolved.back() == '\n') resolved.pop_back();
  if (!real.started || real.exit_code != 0 || !workspace_path(resolved) || *workspace_path(resolved) != resolved)
    return detail(400, "path resolves outside /workspace");
  auto written = run_in(s->container, {"sh", "-c", "cat > " + shell_quote(resolved)}, 60s, std::move(*bytes), true);
  if (!written.started || written.exit_code != 0) return detail(500, "write failed: " + written.stderr_data);
  s->last_used = std::chrono::steady_clock::now();
  return {200, R"({"ok":true})"};
}

http_reply service::get_file(const http_request& r) {
  body_fields f(r.body);
  if (f.error) return *f.error;
  std::optional<http_reply> err;
  auto sid = f.string("session_id", true, err);
  auto path = f.string("path", true, err);
  if (err) return *err;
  auto target = workspace_path(*path);
  if (!target) return detail(400, "path must be under /workspace");
  held_session held;
  if (auto refused = acquire(*sid, held)) return *refused;
  const auto& s = held.s;
  auto real = run_in(s->container, {"realpath", "-m", "--", *target}, 20s);
  std::string resolved = real.stdout_data;
  while (!resolved.empty() && resolved.back() == '\n') resolved.pop_back();
  if (!real.started || real.exit_code != 0 || !workspace_path(resolved) || *workspace_path(resolved) != resolved)
    return detail(400, "path resolves outside /workspace");
  auto is_file = run_in(s->container, {"test", "-f", resolved}, 20s);
  if (!is_file.started || is_file.exit_code != 0) return detail(404, "file not found");
  // Bounded: the answer is base64 in JSON, in memory.
  const std::size_t cap = static_cast<std::size_t>(config_.max_body_bytes);
  auto data = run_in(s->container, {"cat", "--", resolved}, 120s, {}, false, {}, cap);
  if (!data.started || data.exit_code != 0) return detail(500, "read failed: " + data.stderr_data);
  if (data.stdout_dropped) return detail(413, "file too large");
  s->last_used = std::chrono::steady_clock::now();
  return {200, "{\"data_base64\":\"" + base64_encode(data.stdout_data) + "\"}"};
}

http_reply service::list_files(const http_request& r) {
  held_session held;
  if (auto refused = session_request(r, held)) return *refused;
  const auto& s = held.s;
  auto found = run_in(s->container,
                      {"sh", "-c", "find /workspace -maxdepth 6 -type f -printf '%s\\t%P\\0' 2>/dev/null | head -c 1000000"},
                      30s);
  std::vector<std::pair<std::string, std::string>> entries;  // path, size
  std::string_view out = found.stdout_data;
  while (!out.empty()) {
    auto nul = out.find('\0');
    if (nul == std::string_view::npos) break;  // a record cut by head -c
    std::string_view rec = out.substr(0, nul);
    out.remove_prefix(nul + 1);
    auto tab = rec.find('\t');
    if (tab == std::string_view::npos) continue;
    entries.emplace_back(std::string(rec.substr(tab + 1)), std::string(rec.substr(0, tab)));
  }
  std::sort(entries.begin(), entries.end());
  std::string body = "{\"files\":[";
  for (std::size_t i = 0; i < entries.size() && i < 500; ++i) {
    if (i) body += ',';
    body += "{\"path\":";
    client::append_json_string(body, valid_utf8(entries[i].first));
    body += ",\"size\":" + std::to_string(std::strtoll(entries[i].second.c_str(), nullptr, 10)) + "}";
  }
  s->last_used = std::chrono::steady_clock::now();
  return {200, body + "]}"};
}

http_reply service::reset_inputs(const http_request& r) {
  held_session held;
  if (auto refused = session_request(r, held)) return *refused;
  const auto& s = held.s;
  auto reset = run_in(s->container,
                      {"sh", "-c", std::string(reset_inputs_script)},
                      30s);
  if (!reset.started || reset.exit_code != 0) return detail(500, "reset inputs failed: " + reset.stderr_data);
  s->last_used = std::chrono::steady_clock::now();
  return {200, R"({"ok":true})"};
}

void service::reconcile() {
  auto list = docker_.call("GET", "/containers/json?all=1&filters=%7B%22label%22%3A%5B%22" + std::string(session_label) + "%22%5D%7D", {}, 20s);
  if (list.status != 200) return;
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  simdjson::dom::array arr;
  if (p.parse(list.body).get(doc) != simdjson::SUCCESS || doc.get_array().get(arr) != simdjson::SUCCESS) return;
  for (simdjson::dom::element c : arr) {
    std::string_view state, sid, key;
    simdjson::dom::element labels;
    if (c["State"].get_string().get(state) != simdjson::SUCCESS || c["Labels"].get(labels) != simdjson::SUCCESS) continue;
    if (labels[session_label].get_string().get(sid) != simdjson::SUCCESS || !valid_session_id(sid)) continue;
    const std::string name = std::string(container_prefix) + std::string(sid);
    if (state != "running") {
      // A stopped session container of an earlier run: its tmpfs workspace went with it.
      // Removed without archiving, so that the last good archive under its key (if any)
      // is not overwritten by an empty one.
      std::string_view full_id;
      remove_container(c["Id"].get_string().get(full_id) == simdjson::SUCCESS ? std::string(full_id) : name);
      continue;
    }
    auto s = std::make_shared<session>();
    s->id = std::string(sid);
    std::string_view full_id;
    s->container = c["Id"].get_string().get(full_id) == simdjson::SUCCESS ? std::string(full_id) : name;
    if (labels[archive_label].get_string().get(key) == simdjson::SUCCESS && valid_archive_key(key))
      s->archive_key = std::string(key);
    else
      s->archive_key = s->id;
    s->archive = storage_effective("local");  // the archive key survives in the label
    s->last_used = std::chrono::steady_clock::now();  // the TTL restarts at boot
    std::lock_guard g(table_mutex_);
    sessions_[s->id] = s;
  }
}

void service::reap_once() {
  std::vector<std::shared_ptr<session>> all;
  {
    std::lock_guard g(table_mutex_);
    for (auto& [id, s] : sessions_) all.push_back(s);
  }
  const auto now = std::chrono::steady_clock::now();
  for (auto& s : all) {
    const auto ttl = std::chrono::seconds(s->ttl_seconds > 0 ? s->ttl_seconds : config_.idle_ttl_seconds);
    if (now - s->last_used.load() <= ttl) continue;
    std::unique_lock lock(s->lock, std::try_to_lock);
    if (!lock.owns_lock()) continue;  // busy: next sweep
    if (std::chrono::steady_clock::now() - s->last_used.load() <= ttl) continue;
    s->terminating = true;
    if (s->archive) archive_workspace(*s);
    remove_container(s->container);
    forget(s->id);
  }
}

void service::start_reaper() {
  reaper_ = std::thread([this] {
    std::unique_lock lock(reaper_mutex_);
    while (!stopping_) {
      reaper_wake_.wait_for(lock, std::chrono::seconds(config_.idle_reaper_sweep_interval));
      if (stopping_) break;
      lock.unlock();
      reap_once();
      lock.lock();
    }
  });
}

}  // namespace dockgate::sidecar

#include "fake_engine.hpp"

#include <simdjson.h>

#include <cstdio>

namespace dockgate::sidecar::testing {

namespace {
engine_answer answer(unsigned status, std::string body) {
  engine_answer a;
  a.status = status;
  a.body = std::move(body);
  a.content_type = "application/json";
  return a;
}

engine_answer message(unsigned status, std::string_view text) {
  std::string body = "{\"message\":";
  client::append_json_string(body, text);
  return answer(status, body + "}");
}

std::string labels_json(const std::map<std::string, std::string>& labels) {
  std::string out = "{";
  for (const auto& [k, v] : labels) {
    if (out.size() > 1) out += ',';
    client::append_json_string(out, k);
    out += ':';
    client::append_json_string(out, v);
  }
  return out + "}";
}
}  // namespace

fake_engine::container* fake_engine::lookup(std::string_view id_or_name) const {
  for (auto& [id, c] : by_id_)
    if (id == id_or_name || c.name == id_or_name ||
        (id_or_name.size() >= 12 && id.starts_with(id_or_name)))
      return &c;
  return nullptr;
}

std::optional<engine_answer> fake_engine::injected(const std::string& op,
                                                   std::string_view target) const {
  calls_.push_back(op + " " + std::string(target));
  auto f = failures_.find(op);
  if (f == failures_.end()) return std::nullopt;
  auto a = message(f->second.status, f->second.message);
  if (--f->second.times <= 0) failures_.erase(f);
  return a;
}

engine_answer fake_engine::version(timeout) const {
  std::lock_guard l(mutex_);
  if (auto f = injected("version", "")) return *f;
  return answer(200, R"({"Version":"fake","ApiVersion":"1.41"})");
}

engine_answer fake_engine::image_inspect(std::string_view ref, timeout) const {
  std::lock_guard l(mutex_);
  if (auto f = injected("image_inspect", ref)) return *f;
  if (!image_present) return message(404, "No such image: " + std::string(ref));
  return answer(200, R"({"Id":"sha256:fakeimage"})");
}

engine_answer fake_engine::create(std::string_view name, std::string_view body, timeout) const {
  if (on_create) on_create(name);
  std::lock_guard l(mutex_);
  if (auto f = injected("create", name)) return *f;
  for (const auto& [id, c] : by_id_)
    if (c.name == name)
      return message(
          409, "Conflict. The container name \"/" + std::string(name) + "\" is already in use");
  container c;
  char id[65];
  std::snprintf(id, sizeof id, "%064x", next_id_++);
  c.id = id;
  c.name = std::string(name);
  c.body = std::string(body);
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  if (p.parse(c.body).get(doc) != simdjson::SUCCESS || !doc.is_object())
    return message(400, "invalid JSON");
  simdjson::dom::object labels;
  if (doc["Labels"].get_object().get(labels) == simdjson::SUCCESS)
    for (auto [k, v] : labels) {
      std::string_view s;
      if (v.get_string().get(s) == simdjson::SUCCESS) c.labels[std::string(k)] = std::string(s);
    }
  std::string_view mode;
  if (doc["HostConfig"]["NetworkMode"].get_string().get(mode) == simdjson::SUCCESS)
    c.network_mode = std::string(mode);
  by_id_[c.id] = c;
  return answer(201, "{\"Id\":\"" + c.id + "\",\"Warnings\":[]}");
}

engine_answer fake_engine::start(std::string_view id, timeout) const {
  std::lock_guard l(mutex_);
  if (auto f = injected("start", id)) return *f;
  auto* c = lookup(id);
  if (!c) return message(404, "No such container: " + std::string(id));
  if (c->state == "running") return answer(304, "");
  c->state = "running";
  return answer(204, "");
}

engine_answer fake_engine::inspect(std::string_view id, timeout) const {
  std::lock_guard l(mutex_);
  if (auto f = injected("inspect", id)) return *f;
  auto* c = lookup(id);
  if (!c) return message(404, "No such container: " + std::string(id));
  const bool running = c->state == "running" || c->state == "paused";
  std::string body = "{\"Id\":\"" + c->id + "\",\"Name\":";
  client::append_json_string(body, "/" + c->name);
  body += ",\"State\":{\"Status\":";
  client::append_json_string(body, c->state);
  body += std::string(",\"Running\":") + (running ? "true" : "false") +
          ",\"Paused\":" + (c->state == "paused" ? "true" : "false") +
          // The init's host PID: top_processes' first row is the init (pid 1).
          ",\"Restarting\":false,\"Pid\":" + (running ? "1" : "0") + "}";
  body += ",\"Config\":{\"Labels\":" + labels_json(c->labels) + "}";
  // On a network this fake made: its gateway, as the daemon's NetworkSettings shows it.
  if (auto n = networks_.find(c->network_mode); n != networks_.end()) {
    simdjson::dom::parser np;
    simdjson::dom::element net;
    std::string_view gateway;
    if (np.parse(n->second).get(net) == simdjson::SUCCESS &&
        net["IPAM"]["Config"].at(0)["Gateway"].get_string().get(gateway) == simdjson::SUCCESS) {
      body += ",\"NetworkSettings\":{\"Networks\":{";
      client::append_json_string(body, c->network_mode);
      body += ":{\"Gateway\":";
      client::append_json_string(body, gateway);
      body += "}}}";
    }
  }
  // The host config as the create asked it (a daemon applies what it is sent: what the
  // isolation report reads back), else only the network.
  simdjson::dom::parser p;
  simdjson::dom::element asked;
  if (p.parse(c->body).get(asked) == simdjson::SUCCESS &&
      asked["HostConfig"].get(asked) == simdjson::SUCCESS && asked.is_object()) {
    // What a daemon's record always has: the default runtime, unprivileged unless asked.
    std::string host = simdjson::minify(asked);
    if (host.find("\"Privileged\":") == std::string::npos) host.insert(1, "\"Privileged\":false,");
    if (host.find("\"Runtime\":") == std::string::npos) host.insert(1, "\"Runtime\":\"runc\",");
    return answer(200, body + ",\"HostConfig\":" + host + "}");
  }
  body += ",\"HostConfig\":{\"NetworkMode\":";
  client::append_json_string(body, c->network_mode.empty() ? "default" : c->network_mode);
  return answer(200, body + "}}");
}

engine_answer fake_engine::list(std::string_view label, bool all, timeout) const {
  std::lock_guard l(mutex_);
  if (auto f = injected("list", label)) return *f;
  std::string body = "[";
  for (const auto& [id, c] : by_id_) {
    if (!c.labels.contains(std::string(label))) continue;
    if (!all && c.state != "running" && c.state != "paused") continue;
    if (body.size() > 1) body += ',';
    body += "{\"Id\":\"" + id + "\",\"Names\":[";
    client::append_json_string(body, "/" + c.name);
    body += "],\"State\":";
    client::append_json_string(body, c.state);
    body += ",\"Labels\":" + labels_json(c.labels) + "}";
  }
  return answer(200, body + "]");
}

engine_answer fake_engine::top(std::string_view id, std::string_view, timeout) const {
  std::lock_guard l(mutex_);
  if (auto f = injected("top", id)) return *f;
  auto* c = lookup(id);
  if (!c) return message(404, "No such container: " + std::string(id));
  if (c->state != "running")
    return message(409, "Container " + std::string(id) + " is not running");
  return answer(200, R"({"Titles":["PID","UID","STAT","NLWP"],"Processes":)" + top_processes + "}");
}

engine_answer fake_engine::pause(std::string_view id, timeout) const {
  std::lock_guard l(mutex_);
  if (auto f = injected("pause", id)) return *f;
  auto* c = lookup(id);
  if (!c) return message(404, "No such container: " + std::string(id));
  if (c->state != "running")
    return message(409, "Container " + std::string(id) + " is not running");
  c->state = "paused";
  return answer(204, "");
}

engine_answer fake_engine::unpause(std::string_view id, timeout) const {
  std::lock_guard l(mutex_);
  if (auto f = injected("unpause", id)) return *f;
  auto* c = lookup(id);
  if (!c) return message(404, "No such container: " + std::string(id));
  if (c->state != "paused") return message(409, "Container " + std::string(id) + " is not paused");
  c->state = "running";
  return answer(204, "");
}

engine_answer fake_engine::remove(std::string_view id, timeout) const {
  std::lock_guard l(mutex_);
  if (auto f = injected("remove", id)) return *f;
  auto* c = lookup(id);
  if (!c) return message(404, "No such container: " + std::string(id));
  by_id_.erase(c->id);
  return answer(204, "");
}

engine_answer fake_engine::network_inspect(std::string_view name, timeout) const {
  std::lock_guard l(mutex_);
  if (auto f = injected("network_inspect", name)) return *f;
  auto n = networks_.find(std::string(name));
  if (n == networks_.end()) return message(404, "network " + std::string(name) + " not found");
  return answer(200, n->second);
}

engine_answer fake_engine::network_create(std::string_view body, timeout) const {
  std::lock_guard l(mutex_);
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  std::string_view name;
  if (p.parse(std::string(body)).get(doc) != simdjson::SUCCESS ||
      doc["Name"].get_string().get(name) != simdjson::SUCCESS)
    return message(400, "invalid network");
  if (auto f = injected("network_create", name)) return *f;
  std::string inspect = "{\"Name\":";
  client::append_json_string(inspect, name);
  // Each network a subnet of its own, as the daemon gives them (a gateway per network).
  const std::string net = "172.30." + std::to_string(next_network_++ % 256);
  inspect += R"(,"Internal":true,"IPAM":{"Config":[{"Subnet":")" + net + R"(.0/24","Gateway":")" +
             net + R"(.1"}]}})";
  networks_[std::string(name)] = inspect;
  return answer(201, R"({"Id":"fakenetwork"})");
}

engine_answer fake_engine::network_remove(std::string_view name, timeout) const {
  std::lock_guard l(mutex_);
  if (auto f = injected("network_remove", name)) return *f;
  if (!networks_.erase(std::string(name))) return message(404, "network not found");
  return answer(204, "");
}

client::exec_result fake_engine::exec(std::string_view id,
                                      const client::exec_options& options) const {
  container copy;
  {
    std::lock_guard l(mutex_);
    if (auto f = injected("exec", id)) {
      client::exec_result r;
      r.error = f->body;
      return r;
    }
    auto* c = lookup(id);
    if (!c || c->state != "running") {
      client::exec_result r;
      r.error = "No such container or not running: " + std::string(id);
      return r;
    }
    copy = *c;
  }
  if (is_isolation_probe(options.cmd)) {
    client::exec_result r;
    r.started = true;
    r.exit_code = 0;
    r.stdout_data = probe_output;
    return r;
  }
  if (on_exec) return on_exec(copy, options);
  client::exec_result r;
  r.started = true;
  r.exit_code = 0;
  return r;
}

std::optional<client::exec_stream> fake_engine::exec_attach(std::string_view id,
                                                            const std::vector<std::string>& cmd,
                                                            std::string_view,
                                                            client::clock_type::time_point,
                                                            std::string* error) const {
  container copy;
  {
    std::lock_guard l(mutex_);
    if (auto f = injected("exec_attach", id)) {
      if (error) *error = f->body;
      return std::nullopt;
    }
    auto* c = lookup(id);
    if (!c || c->state != "running") {
      if (error) *error = "No such container or not running: " + std::string(id);
      return std::nullopt;
    }
    copy = *c;
  }
  if (on_attach) return on_attach(copy, cmd, error);
  if (error) *error = "the fake engine runs no held exec";
  return std::nullopt;
}

void fake_engine::fail(const std::string& op, unsigned status, std::string msg, int times) {
  std::lock_guard l(mutex_);
  failures_[op] = {status, std::move(msg), times};
}

std::vector<std::string> fake_engine::calls() const {
  std::lock_guard l(mutex_);
  return calls_;
}

std::size_t fake_engine::count(const std::string& op) const {
  std::lock_guard l(mutex_);
  std::size_t n = 0;
  for (const auto& c : calls_)
    if (c.starts_with(op + " ")) ++n;
  return n;
}

std::optional<fake_engine::container> fake_engine::find(std::string_view id_or_name) const {
  std::lock_guard l(mutex_);
  if (auto* c = lookup(id_or_name)) return *c;
  return std::nullopt;
}

std::vector<fake_engine::container> fake_engine::containers() const {
  std::lock_guard l(mutex_);
  std::vector<container> out;
  for (const auto& [id, c] : by_id_) out.push_back(c);
  return out;
}

std::string fake_engine::add_running(const std::string& name,
                                     std::map<std::string, std::string> labels) {
  std::lock_guard l(mutex_);
  container c;
  char id[65];
  std::snprintf(id, sizeof id, "%064x", next_id_++);
  c.id = id;
  c.name = name;
  c.state = "running";
  c.labels = std::move(labels);
  by_id_[c.id] = c;
  return c.id;
}

void fake_engine::set_state(std::string_view id_or_name, const std::string& state) {
  std::lock_guard l(mutex_);
  if (auto* c = lookup(id_or_name)) c->state = state;
}

}  // namespace dockgate::sidecar::testing

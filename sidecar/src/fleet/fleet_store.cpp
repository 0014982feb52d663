// The fleet's records in the workspaces' store: layout, JSON, conditional writes
// (fleet_store.hpp).
#include "fleet/fleet_store.hpp"

#include <simdjson.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "dockgate/client/engine.hpp"
#include "util/ids.hpp"

namespace dockgate::sidecar {

namespace {

bool valid_generation(std::string_view g) {
  if (g.empty()) return true;
  return g.size() == 18 && g.starts_with("g.") && std::all_of(g.begin() + 2, g.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

void field(std::string& out, std::string_view name, std::string_view value) {
  out += out.size() > 1 ? ",\"" : "\"";
  out += name;
  out += "\":";
  client::append_json_string(out, value);
}
void field(std::string& out, std::string_view name, std::int64_t value) {
  out += out.size() > 1 ? ",\"" : "\"";
  out += name;
  out += "\":" + std::to_string(value);
}

struct json_object {
  simdjson::dom::parser parser;
  simdjson::dom::object object;
  bool ok = false;
  explicit json_object(std::string_view json) {
    simdjson::dom::element doc;
    ok = parser.parse(json.data(), json.size()).get(doc) == simdjson::SUCCESS &&
         doc.get_object().get(object) == simdjson::SUCCESS;
  }
  std::string text(std::string_view name) {
    std::string_view v;
    return object[name].get_string().get(v) == simdjson::SUCCESS ? std::string(v) : std::string();
  }
  std::int64_t number(std::string_view name) {
    std::int64_t v = 0;
    return object[name].get_int64().get(v) == simdjson::SUCCESS ? v : 0;
  }
};

template <typename T>
store_read<T> read_record(s3_client& client, const std::string& key) {
  store_read<T> out;
  auto r = client.get_object(key, 64 * 1024);
  // A store that writes an object in place (s3rver) can be read mid-write: a record that
  // does not parse is read again before it counts as unreadable (S3 itself is atomic).
  for (int again = 0; again < 3 && r.status == 200 && !T::parse(r.body); ++again) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    r = client.get_object(key, 64 * 1024);
  }
  out.status = r.status;
  if (r.status == 200) {
    out.record = T::parse(r.body);
    out.etag = r.etag;
    out.age_s = store_age(r);
    if (!out.record) {
      out.status = 500;
      out.error = "unreadable record " + key;
    }
  } else if (r.status != 404) {
    out.error = r.describe();
  }
  return out;
}

}  // namespace

std::int64_t store_age(const s3_result& r) {
  const auto now = parse_s3_time(r.date);
  const auto modified = parse_s3_time(r.last_modified);
  if (now <= 0 || modified <= 0) return -1;
  return now > modified ? now - modified : 0;
}

std::string session_record::to_json() const {
  std::string out = "{";
  field(out, "session_id", session_id);
  field(out, "archive_key", archive_key);
  field(out, "storage", storage);
  field(out, "idle_ttl_sec", idle_ttl_sec);
  field(out, "kernel", kernel);
  field(out, "owner", owner);
  field(out, "holder", holder);
  field(out, "created_at", created_at);
  field(out, "generation", generation);
  if (copy_from) field(out, "copy_from", *copy_from);
  if (!handed_over.empty()) field(out, "handed_over", handed_over);
  if (!facts_sealed.empty()) field(out, "facts_sealed", facts_sealed);
  if (egress_policy) field(out, "egress_policy", *egress_policy);
  return out + "}";
}

std::optional<session_record> session_record::parse(std::string_view json) {
  json_object o(json);
  if (!o.ok) return std::nullopt;
  session_record r;
  r.session_id = o.text("session_id");
  r.archive_key = o.text("archive_key");
  r.storage = o.text("storage");
  r.idle_ttl_sec = o.number("idle_ttl_sec");
  r.kernel = o.text("kernel");
  r.owner = o.text("owner");
  r.holder = o.text("holder");
  r.created_at = o.text("created_at");
  r.generation = o.text("generation");
  r.handed_over = o.text("handed_over");
  r.facts_sealed = o.text("facts_sealed");
  std::string_view from;
  if (o.object["copy_from"].get_string().get(from) == simdjson::SUCCESS)
    r.copy_from = std::string(from);
  std::string_view policy;
  if (o.object["egress_policy"].get_string().get(policy) == simdjson::SUCCESS)
    r.egress_policy = std::string(policy);
  if (r.session_id.empty() || r.archive_key.empty() || r.owner.empty()) return std::nullopt;
  // A generation is "" or g.<hex> (a record that names anything else is not mounted).
  if (!valid_generation(r.generation) || (r.copy_from && !valid_generation(*r.copy_from)))
    return std::nullopt;
  return r;
}

std::string workspace_record::to_json() const {
  std::string out = "{";
  field(out, "archive_key", archive_key);
  field(out, "generation", generation);
  return out + "}";
}

std::optional<workspace_record> workspace_record::parse(std::string_view json) {
  json_object o(json);
  if (!o.ok) return std::nullopt;
  workspace_record r;
  r.archive_key = o.text("archive_key");
  r.generation = o.text("generation");
  if (r.archive_key.empty() || !valid_generation(r.generation)) return std::nullopt;
  return r;
}

std::string lease_record::to_json() const {
  std::string out = "{";
  field(out, "instance", instance);
  field(out, "holder", holder);
  field(out, "url", url);
  field(out, "host", host);
  field(out, "pid", pid);
  field(out, "beat", beat);
  return out + "}";
}

std::optional<lease_record> lease_record::parse(std::string_view json) {
  json_object o(json);
  if (!o.ok) return std::nullopt;
  lease_record r;
  r.instance = o.text("instance");
  r.holder = o.text("holder");
  r.url = o.text("url");
  r.host = o.text("host");
  r.pid = o.number("pid");
  r.beat = o.number("beat");
  if (r.instance.empty() || r.holder.empty()) return std::nullopt;
  return r;
}

fleet_store::fleet_store(const config& c)
    : client_([&] {
        s3_config s;
        s.endpoint = c.store.endpoint;
        s.region = c.store.region;
        s.bucket = c.store.bucket;
        s.access_key = c.store.access_key;
        s.secret_key = c.store.secret_key;
        s.max_attempts = static_cast<int>(c.s3_max_attempts);
        // A lease is renewed every third of its life: no single call may take longer.
        s.timeout = std::chrono::seconds(std::max<std::int64_t>(2, c.instance_lease_s / 3));
        return s;
      }()),
      copy_client_([&] {
        s3_config s;
        s.endpoint = c.store.endpoint;
        s.region = c.store.region;
        s.bucket = c.store.bucket;
        s.access_key = c.store.access_key;
        s.secret_key = c.store.secret_key;
        s.max_attempts = static_cast<int>(c.s3_max_attempts);
        s.timeout = std::chrono::seconds(
            std::max<std::int64_t>(60, c.s3_read_timeout_s + c.s3_connect_timeout_s));
        return s;
      }()) {
  enabled_ = c.workspace_mode == "fuse" && !c.store.bucket.empty() && !c.store.endpoint.empty();
  const std::string prefix = c.store.prefix.empty() ? "" : c.store.prefix + "/";
  root_ = prefix + ".dockgate-fleet/";
  prefix_ = prefix;
  place_ = "s3://" + c.store.bucket + "/" + prefix;
}

std::string fleet_store::new_generation() {
  return "g." + random_hex(8);
}

std::string fleet_store::workspace_key(std::string_view archive_key, std::string_view generation) {
  return (generation.empty() ? std::string() : std::string(generation) + "/") +
         std::string(archive_key);
}

std::string fleet_store::workspace_place(std::string_view archive_key,
                                         std::string_view generation) const {
  return place_ + workspace_key(archive_key, generation) + "/";
}

std::string fleet_store::workspace_record_key(std::string_view archive_key) const {
  return root_ + "workspaces/" + std::string(archive_key) + ".json";
}

store_read<workspace_record> fleet_store::read_workspace(std::string_view archive_key) {
  return read_record<workspace_record>(client_, workspace_record_key(archive_key));
}

s3_result fleet_store::write_workspace(const workspace_record& r, const std::string& if_match) {
  return client_.put_object(workspace_record_key(r.archive_key), r.to_json(), "application/json",
                            &if_match);
}

std::string fleet_store::copy_workspace(std::string_view archive_key,
                                        std::string_view from_generation,
                                        std::string_view to_generation) {
  const std::string from = prefix_ + workspace_key(archive_key, from_generation) + "/";
  const std::string to = prefix_ + workspace_key(archive_key, to_generation) + "/";
  std::vector<s3_object> objects;
  auto listed = copy_client_.list_objects(from, objects);
  if (listed.status != 200) return "list " + from + ": " + listed.describe();
  for (const auto& o : objects) {
    if (!o.key.starts_with(from)) continue;
    const std::string target = to + o.key.substr(from.size());
    auto copied = copy_client_.copy_object(o.key, target);
    // Gone since the listing (its writer deleted it): nothing to copy.
    if (copied.status == 404) continue;
    if (copied.status != 200) return "copy " + o.key + ": " + copied.describe();
  }
  return {};
}
std::string fleet_store::session_key(std::string_view sid) const {
  return root_ + "sessions/" + std::string(sid) + ".json";
}
std::string fleet_store::lease_key(std::string_view instance) const {
  return root_ + "instances/" + std::string(instance) + ".json";
}

store_read<session_record> fleet_store::read_session(std::string_view sid) {
  return read_record<session_record>(client_, session_key(sid));
}

s3_result fleet_store::write_session(const session_record& r, const std::string& if_match) {
  return client_.put_object(session_key(r.session_id), r.to_json(), "application/json", &if_match);
}

s3_result fleet_store::delete_session(std::string_view sid) {
  return client_.delete_object(session_key(sid));
}

store_read<lease_record> fleet_store::read_lease(std::string_view instance) {
  return read_record<lease_record>(client_, lease_key(instance));
}

s3_result fleet_store::write_lease(const lease_record& r, const std::string& if_match) {
  return client_.put_object(lease_key(r.instance), r.to_json(), "application/json", &if_match);
}

s3_result fleet_store::delete_lease(std::string_view instance) {
  return client_.delete_object(lease_key(instance));
}

}  // namespace dockgate::sidecar

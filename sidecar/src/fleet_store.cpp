// The fleet's records in the workspaces' store: layout, JSON, conditional writes
// (fleet_store.hpp).
#include "dockgate/sidecar/fleet_store.hpp"

#include <simdjson.h>

#include "dockgate/client/engine.hpp"

namespace dockgate::sidecar {

namespace {

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
  if (r.session_id.empty() || r.archive_key.empty() || r.owner.empty()) return std::nullopt;
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
      }()) {
  enabled_ = c.workspace_mode == "fuse" && !c.store.bucket.empty() && !c.store.endpoint.empty();
  const std::string prefix = c.store.prefix.empty() ? "" : c.store.prefix + "/";
  root_ = prefix + ".dockgate-fleet/";
  place_ = "s3://" + c.store.bucket + "/" + prefix;
}

std::string fleet_store::workspace_place(std::string_view archive_key) const {
  return place_ + std::string(archive_key) + "/";
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

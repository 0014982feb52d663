// Dormant sessions' records in the operator's directory (dormant_records.hpp).
#include "sessions/workspace/dormant_records.hpp"

#include <simdjson.h>

#include <iostream>

#include "dockgate/client/engine.hpp"
#include "sessions/session.hpp"
#include "util/ids.hpp"

namespace dockgate::sidecar {

namespace {

constexpr std::string_view records_prefix = "dockgate-dormant/records/";
constexpr std::size_t max_record_bytes = 1 << 20;

std::int64_t unix_seconds(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

std::chrono::system_clock::time_point from_unix(std::int64_t s) {
  return std::chrono::system_clock::time_point(std::chrono::seconds(s));
}

void append_strings(std::string& out, const std::vector<std::string>& items) {
  out += '[';
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out += ',';
    client::append_json_string(out, items[i]);
  }
  out += ']';
}

void field(std::string& out, std::string_view name, const std::string& value) {
  out += ",\"" + std::string(name) + "\":";
  client::append_json_string(out, value);
}

bool read_strings(simdjson::dom::element e, std::vector<std::string>& out) {
  simdjson::dom::array items;
  if (e.get_array().get(items) != simdjson::SUCCESS) return false;
  for (auto item : items) {
    std::string_view text;
    if (item.get_string().get(text) != simdjson::SUCCESS) return false;
    out.emplace_back(text);
  }
  return true;
}

}  // namespace

storage_spec dormant_records::own_storage(const std::string& sid) const {
  storage_spec spec;
  spec.provider = storage_provider::local;
  spec.base = "dockgate-dormant/" + sid;
  return spec;
}

std::string dormant_records::record_of(const session& s) const {
  std::string out = "{\"id\":";
  client::append_json_string(out, s.id);
  field(out, "archive_key", s.archive_key);
  out += ",\"storage\":" + (s.storage ? s.storage->label() : std::string("null"));
  out += s.own_archive ? ",\"own_archive\":true" : ",\"own_archive\":false";
  out += ",\"ttl\":" + std::to_string(s.ttl_seconds);
  field(out, "kernel", s.kernel);
  field(out, "image", s.image);
  field(out, "runtime", s.runtime);
  out += ",\"env\":";
  append_strings(out, s.env);
  out += ",\"entrypoint\":";
  append_strings(out, s.entrypoint);
  out += ",\"memory\":" + std::to_string(s.memory_bytes);
  out += ",\"cpus\":" + std::to_string(s.nano_cpus);
  out += s.idle_reaped ? ",\"idle_reaped\":true" : ",\"idle_reaped\":false";
  out += ",\"created\":" + std::to_string(unix_seconds(s.created_at));
  out += s.fuse ? ",\"fuse\":true" : ",\"fuse\":false";
  field(out, "generation", s.generation);
  out += ",\"restored_generation\":";
  if (s.restored_generation)
    client::append_json_string(out, *s.restored_generation);
  else
    out += "null";
  std::lock_guard g(s.facts_mutex);
  out += ",\"expires\":" +
         (s.expires_at ? std::to_string(unix_seconds(*s.expires_at)) : std::string("null"));
  out += ",\"metadata\":{";
  bool first = true;
  for (const auto& [k, v] : s.metadata) {
    if (!first) out += ',';
    first = false;
    client::append_json_string(out, k);
    out += ':';
    client::append_json_string(out, v);
  }
  return out + "}}";
}

std::shared_ptr<session> dormant_records::session_of(std::string_view record) const {
  simdjson::dom::parser p;
  simdjson::dom::object o;
  if (p.parse(record.data(), record.size()).get_object().get(o) != simdjson::SUCCESS)
    return nullptr;
  auto s = std::make_shared<session>();
  std::string_view id, key, kernel, image, generation;
  std::int64_t created = 0;
  bool own = false, fuse = false, idle_reaped = true;
  if (o["id"].get_string().get(id) || !valid_session_id(id) ||
      o["archive_key"].get_string().get(key) || !valid_archive_key(key) ||
      o["own_archive"].get_bool().get(own) || o["ttl"].get_int64().get(s->ttl_seconds) ||
      o["kernel"].get_string().get(kernel) || o["image"].get_string().get(image) ||
      !read_strings(o["env"], s->env) || !read_strings(o["entrypoint"], s->entrypoint) ||
      o["memory"].get_int64().get(s->memory_bytes) || o["cpus"].get_int64().get(s->nano_cpus) ||
      o["idle_reaped"].get_bool().get(idle_reaped) || o["created"].get_int64().get(created) ||
      o["fuse"].get_bool().get(fuse) || o["generation"].get_string().get(generation))
    return nullptr;
  s->id = id;
  s->archive_key = key;
  s->own_archive = own;
  s->kernel = kernel;
  s->image = image;
  s->idle_reaped = idle_reaped;
  s->created_at = from_unix(created);
  s->fuse = fuse;
  s->generation = generation;
  simdjson::dom::element where;
  if (o["storage"].get(where) != simdjson::SUCCESS) return nullptr;
  if (!where.is_null()) {
    s->storage = storage_from_label(simdjson::to_string(where), config_);
    if (!s->storage) return nullptr;
  }
  std::string_view runtime;  // absent in a record older than the field: the default
  if (o["runtime"].get_string().get(runtime) == simdjson::SUCCESS) s->runtime = runtime;
  std::string_view restored;
  if (o["restored_generation"].get_string().get(restored) == simdjson::SUCCESS)
    s->restored_generation = std::string(restored);
  else
    s->restored_generation = std::nullopt;  // unknown: never overwrite
  std::int64_t expires = 0;
  if (o["expires"].get_int64().get(expires) == simdjson::SUCCESS)
    s->expires_at = from_unix(expires);
  simdjson::dom::object metadata;
  if (o["metadata"].get_object().get(metadata) != simdjson::SUCCESS) return nullptr;
  for (auto [k, v] : metadata) {
    std::string_view value;
    if (v.get_string().get(value) != simdjson::SUCCESS) return nullptr;
    s->metadata[std::string(k)] = std::string(value);
  }
  s->dormant = true;
  s->paused = true;
  return s;
}

bool dormant_records::write(const session& s, std::string& error) const {
  if (!usable()) {
    error = "SANDBOX_LOCAL_STORAGE_DIR is not set";
    return false;
  }
  auto store = open_store(storage_spec{}, config_);
  return store
      ->put(std::string(records_prefix) + s.id + ".json", record_of(s), "application/json", error)
      .has_value();
}

bool dormant_records::remove(const std::string& sid, std::string& error) const {
  if (!usable()) return true;
  auto store = open_store(storage_spec{}, config_);
  return store->remove(std::string(records_prefix) + sid + ".json", error);
}

std::vector<std::shared_ptr<session>> dormant_records::load_all() const {
  std::vector<std::shared_ptr<session>> out;
  if (!usable()) return out;
  auto store = open_store(storage_spec{}, config_);
  std::vector<object_entry> entries;
  std::string error;
  if (!store->list(std::string(records_prefix), entries, error)) {
    std::cerr << "dockgate-sidecar: dormant sessions could not be listed: " << error << std::endl;
    return out;
  }
  for (const auto& e : entries) {
    if (!e.key.ends_with(".json")) continue;
    auto got = store->get(e.key, max_record_bytes);
    auto s = got.what == stored_object::state::found ? session_of(got.data) : nullptr;
    if (!s) {
      std::cerr << "dockgate-sidecar: dormant record " << e.key << " unreadable; left there"
                << std::endl;
      continue;
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace dockgate::sidecar

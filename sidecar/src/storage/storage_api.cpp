// POST /storage/put, /storage/delete, /storage/gc: the seed's storage API (§1.3, §1.8)
// with its bodies, status codes and error texts, over the same object stores as the
// workspace archives.
#include "storage/storage_api.hpp"

#include <algorithm>
#include <ctime>

#include "sessions/workspace/archive_store.hpp"
#include "front/request.hpp"
#include "util/util.hpp"

namespace dockgate::sidecar {

http_reply storage_api::put(const http_request& r) {
  body_fields f(r.body);
  if (f.error) return *f.error;
  std::optional<http_reply> err;
  auto key = f.string("key", true, err);
  auto data = f.string("data_base64", true, err);
  auto content_type = f.string("content_type", false, err);
  auto expires_in = f.integer("expires_in", err);
  if (err) return *err;
  auto storage = request_storage(r.body, config_);
  if (storage.error) return detail(400, *storage.error);
  if (!storage.spec) return detail(400, "storage backend not configured");
  if (!valid_object_key(*key)) return detail(400, "invalid storage key");
  auto bytes = base64_decode_strict(*data);
  if (!bytes) return detail(400, "invalid base64");
  std::int64_t ttl = expires_in && *expires_in > 0 ? *expires_in : config_.storage_default_ttl;
  ttl = std::min(ttl, config_.storage_max_ttl);
  const std::string full = storage.spec->object_key(*key);
  auto store = open_store(*storage.spec, config_);
  std::string error;
  if (!store->put(full, *bytes, content_type && !content_type->empty() ? *content_type : "application/octet-stream", error))
    return detail(502, "storage put failed: " + error);
  // As the seed: with local storage the object is written, then the presign step fails.
  auto url = store->presign_get(full, ttl, static_cast<std::int64_t>(std::time(nullptr)));
  if (!url) return detail(400, "presigned URLs are unsupported for local storage");
  std::string body = "{\"provider\":";
  client::append_json_string(body, storage.spec->provider_name());
  body += ",\"key\":";
  client::append_json_string(body, full);
  body += ",\"url\":";
  client::append_json_string(body, *url);
  return {200, body + ",\"expires_in\":" + std::to_string(ttl) + "}"};
}

http_reply storage_api::remove(const http_request& r) {
  body_fields f(r.body);
  if (f.error) return *f.error;
  std::optional<http_reply> err;
  auto key = f.string("key", true, err);
  if (err) return *err;
  auto storage = request_storage(r.body, config_);
  if (storage.error) return detail(400, *storage.error);
  if (!storage.spec) return detail(400, "storage backend not configured");
  if (!valid_object_key(*key)) return detail(400, "invalid storage key");
  // The key may be given whole (already under the prefix) or bare.
  const std::string& base = storage.spec->base;
  const std::string full = !base.empty() && key->starts_with(base + "/") ? *key : storage.spec->object_key(*key);
  auto store = open_store(*storage.spec, config_);
  std::string error;
  if (!store->remove(full, error)) return detail(502, "storage delete failed: " + error);
  std::string body = R"({"ok":true,"key":)";
  client::append_json_string(body, full);
  return {200, body + "}"};
}

http_reply storage_api::gc(const http_request& r) {
  body_fields f(r.body);
  if (f.error) return *f.error;
  std::optional<http_reply> err;
  auto max_age = f.integer("max_age_seconds", err);
  if (!err && !max_age) err = invalid("max_age_seconds", "field required", "value_error.missing");
  if (err) return *err;
  auto storage = request_storage(r.body, config_);
  if (storage.error) return detail(400, *storage.error);
  std::int64_t deleted = 0, scanned = 0, freed = 0;
  if (storage.spec && *max_age > 0) {
    // Only archives (*.tgz) under <base>/workspaces/ and everything under <base>/mineru/,
    // strictly older than the cutoff; an object whose age is unknown is kept.
    const std::int64_t cutoff = static_cast<std::int64_t>(std::time(nullptr)) - *max_age;
    auto store = open_store(*storage.spec, config_);
    for (const std::string area : {"workspaces/", "mineru/"}) {
      std::vector<object_entry> objects;
      std::string error;
      if (!store->list(storage.spec->object_key(area), objects, error)) return detail(502, "storage gc failed: " + error);
      for (const auto& o : objects) {
        if (area == "workspaces/" && !o.key.ends_with(".tgz")) continue;
        ++scanned;
        if (o.last_modified <= 0 || o.last_modified >= cutoff) continue;
        if (!store->remove(o.key, error)) return detail(502, "storage gc failed: " + error);
        ++deleted;
        freed += static_cast<std::int64_t>(o.size);
      }
    }
  }
  return {200, "{\"deleted\":" + std::to_string(deleted) + ",\"scanned\":" + std::to_string(scanned) +
                   ",\"freed_bytes\":" + std::to_string(freed) + "}"};
}

}  // namespace dockgate::sidecar

// Objects a client keeps in its storage: put (with a presigned URL), remove, and the
// garbage collection of old archives and objects (objects.hpp), over the same object
// stores as the workspace archives.
#include "storage/objects.hpp"

#include <algorithm>
#include <ctime>
#include <vector>

namespace dockgate::sidecar {

outcome<object_put_result> put_object(object_put r, const config& c) {
  if (!valid_object_key(r.key)) return refuse(refusal_kind::invalid, "invalid storage key");
  std::int64_t ttl = r.expires_in && *r.expires_in > 0 ? *r.expires_in : c.storage_default_ttl;
  ttl = std::min(ttl, c.storage_max_ttl);
  const std::string full = r.storage.object_key(r.key);
  if (r.storage.provider == storage_provider::local && in_sidecar_own_area(full))
    return refuse(refusal_kind::invalid, "invalid storage key: the sidecar's own area");
  auto store = open_store(r.storage, c);
  std::string error;
  if (!store->put(full, r.bytes,
                  r.content_type.empty() ? "application/octet-stream" : r.content_type, error))
    return refuse(refusal_kind::engine_failed, "storage put failed: " + error);
  // As the Aivory sidecar: with local storage the object is written, then the presign
  // step fails.
  auto url = store->presign_get(full, ttl, static_cast<std::int64_t>(std::time(nullptr)));
  if (!url)
    return refuse(refusal_kind::invalid, "presigned URLs are unsupported for local storage");
  return object_put_result{std::string(r.storage.provider_name()), full, std::move(*url), ttl};
}

outcome<std::string> remove_object(const object_remove& r, const config& c) {
  if (!valid_object_key(r.key)) return refuse(refusal_kind::invalid, "invalid storage key");
  // The key may be given whole (already under the prefix) or bare.
  const std::string& base = r.storage.base;
  const std::string full =
      !base.empty() && r.key.starts_with(base + "/") ? r.key : r.storage.object_key(r.key);
  if (r.storage.provider == storage_provider::local && in_sidecar_own_area(full))
    return refuse(refusal_kind::invalid, "invalid storage key: the sidecar's own area");
  auto store = open_store(r.storage, c);
  std::string error;
  if (!store->remove(full, error))
    return refuse(refusal_kind::engine_failed, "storage delete failed: " + error);
  return full;
}

outcome<object_gc_result> collect_garbage(const object_gc& r, const config& c) {
  object_gc_result out;
  if (!r.storage || r.max_age_seconds <= 0) return out;
  const std::int64_t cutoff = static_cast<std::int64_t>(std::time(nullptr)) - r.max_age_seconds;
  auto store = open_store(*r.storage, c);
  for (const std::string area : {"workspaces/", "mineru/"}) {
    std::vector<object_entry> objects;
    std::string error;
    if (!store->list(r.storage->object_key(area), objects, error))
      return refuse(refusal_kind::engine_failed, "storage gc failed: " + error);
    for (const auto& o : objects) {
      if (area == "workspaces/" && !o.key.ends_with(".tgz")) continue;
      ++out.scanned;
      if (o.last_modified <= 0 || o.last_modified >= cutoff) continue;
      if (!store->remove(o.key, error))
        return refuse(refusal_kind::engine_failed, "storage gc failed: " + error);
      ++out.deleted;
      out.freed_bytes += static_cast<std::int64_t>(o.size);
    }
  }
  return out;
}

}  // namespace dockgate::sidecar

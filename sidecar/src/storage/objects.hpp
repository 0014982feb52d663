#pragma once
// Objects a client keeps in its storage (the Aivory API's /storage/put, /storage/delete,
// /storage/gc), in the same object stores as the workspace archives (storage.hpp). The
// requests come typed from a front (front/aivory/storage_routes.cpp); the answers are
// values or refusals. Internal to the sidecar library.
//
// Invariants kept here (the front checks the same before it calls, for the order of its
// answers; these hold whoever calls):
// - A key is a relative object key (valid_object_key: no `..`, no NUL, no absolute key):
//   it never leaves the storage block's prefix.
// - Garbage collection touches only archives (*.tgz) under <base>/workspaces/ and
//   everything under <base>/mineru/, strictly older than the cutoff; an object whose age
//   the store does not say is kept.

#include <cstdint>
#include <optional>
#include <string>

#include "dockgate/sidecar/config.hpp"
#include "storage/storage.hpp"
#include "util/refusal.hpp"

namespace dockgate::sidecar {

struct object_put {
  storage_spec storage;
  std::string key;  // relative to the storage's prefix
  std::string bytes;
  std::string content_type;                // "" — application/octet-stream
  std::optional<std::int64_t> expires_in;  // the URL's life; absent or ≤ 0 — the default
};

struct object_put_result {
  std::string provider;
  std::string key;  // the full key (<base>/<key>)
  std::string url;  // presigned GET
  std::int64_t expires_in = 0;
};

struct object_remove {
  storage_spec storage;
  std::string key;  // relative, or already under <base>/
};

struct object_gc {
  std::optional<storage_spec> storage;  // none: nothing is scanned
  std::int64_t max_age_seconds = 0;     // ≤ 0: nothing is collected
};

struct object_gc_result {
  std::int64_t deleted = 0;
  std::int64_t scanned = 0;
  std::int64_t freed_bytes = 0;
};

// Writes the object and presigns a GET of it (TTL: SANDBOX_STORAGE_DEFAULT_TTL when the
// request says none, at most SANDBOX_STORAGE_MAX_TTL). Local storage writes the object,
// then refuses (it has no presigned URLs), as the Aivory sidecar does.
outcome<object_put_result> put_object(object_put r, const config& c);
// The full key removed (a missing object is not an error).
outcome<std::string> remove_object(const object_remove& r, const config& c);
outcome<object_gc_result> collect_garbage(const object_gc& r, const config& c);

}  // namespace dockgate::sidecar

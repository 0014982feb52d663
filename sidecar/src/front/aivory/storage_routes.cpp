// The storage routes of the Aivory front: POST /storage/put, /storage/delete, /storage/gc.
// Each body is read once into a typed request (the fields; the "storage" block chosen and
// validated, storage.hpp; the key; the base64), in the order the Aivory sidecar answers
// them; the objects' work is storage/objects.cpp's.
#include <utility>

#include "front/aivory/replies.hpp"
#include "front/aivory/routes.hpp"
#include "storage/objects.hpp"
#include "util/util.hpp"

namespace dockgate::sidecar::aivory {

namespace {

// The request's "storage" block: a spec, or the 400 saying why it cannot be used. With
// `required`, no block (and no storage) is refused too.
parsed<std::optional<storage_spec>> storage_of(body_fields& f, const config& c, bool required) {
  auto chosen = choose_storage(f.raw("storage"), c);
  if (chosen.error) return detail(400, *chosen.error);
  if (required && !chosen.spec) return detail(400, "storage backend not configured");
  return std::move(chosen.spec);
}

parsed<object_put> parse_put(const std::string& body, const config& c) {
  body_fields f(body);
  if (f.error) return *f.error;
  std::optional<http_reply> err;
  auto key = f.string("key", true, err);
  auto data = f.string("data_base64", true, err);
  auto content_type = f.string("content_type", false, err);
  auto expires_in = f.integer("expires_in", err);
  if (err) return *err;
  auto storage = storage_of(f, c, true);
  if (!storage) return storage.error();
  if (!valid_object_key(*key)) return detail(400, "invalid storage key");
  auto bytes = base64_decode_strict(*data);
  if (!bytes) return detail(400, "invalid base64");
  return object_put{std::move(**storage), std::move(*key), std::move(*bytes),
                    content_type.value_or(std::string()), expires_in};
}

parsed<object_remove> parse_delete(const std::string& body, const config& c) {
  body_fields f(body);
  if (f.error) return *f.error;
  std::optional<http_reply> err;
  auto key = f.string("key", true, err);
  if (err) return *err;
  auto storage = storage_of(f, c, true);
  if (!storage) return storage.error();
  if (!valid_object_key(*key)) return detail(400, "invalid storage key");
  return object_remove{std::move(**storage), std::move(*key)};
}

parsed<object_gc> parse_gc(const std::string& body, const config& c) {
  body_fields f(body);
  if (f.error) return *f.error;
  std::optional<http_reply> err;
  auto max_age = f.integer("max_age_seconds", err);
  if (!err && !max_age) err = invalid("max_age_seconds", "field required", "value_error.missing");
  if (err) return *err;
  auto storage = storage_of(f, c, false);
  if (!storage) return storage.error();
  return object_gc{std::move(*storage), *max_age};
}

}  // namespace

http_reply storage_put(session_core& core, const http_request& r, std::string_view) {
  auto req = parse_put(r.body, core.config_of);
  if (!req) return req.error();
  auto put = put_object(std::move(*req), core.config_of);
  if (!put) return reply(put.error());
  std::string body = "{\"provider\":";
  client::append_json_string(body, put->provider);
  body += ",\"key\":";
  client::append_json_string(body, put->key);
  body += ",\"url\":";
  client::append_json_string(body, put->url);
  return {200, body + ",\"expires_in\":" + std::to_string(put->expires_in) + "}"};
}

http_reply storage_delete(session_core& core, const http_request& r, std::string_view) {
  auto req = parse_delete(r.body, core.config_of);
  if (!req) return req.error();
  auto removed = remove_object(*req, core.config_of);
  if (!removed) return reply(removed.error());
  std::string body = R"({"ok":true,"key":)";
  client::append_json_string(body, removed.value());
  return {200, body + "}"};
}

http_reply storage_gc(session_core& core, const http_request& r, std::string_view) {
  auto req = parse_gc(r.body, core.config_of);
  if (!req) return req.error();
  auto gc = collect_garbage(*req, core.config_of);
  if (!gc) return reply(gc.error());
  return {200, "{\"deleted\":" + std::to_string(gc->deleted) +
                   ",\"scanned\":" + std::to_string(gc->scanned) +
                   ",\"freed_bytes\":" + std::to_string(gc->freed_bytes) + "}"};
}

}  // namespace dockgate::sidecar::aivory

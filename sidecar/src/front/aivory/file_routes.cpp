// The files' routes of the Aivory front: POST /files, /files/get, /files/list and
// /files/reset-inputs. Each body is read once into the files room's typed request (the
// fields, the upload's size and base64), the room does the work confined to /workspace
// (files/files.cpp), and its result is written as the Aivory sidecar writes it.
#include <utility>

#include "front/aivory/replies.hpp"
#include "front/aivory/routes.hpp"
#include "util/util.hpp"

namespace dockgate::sidecar::aivory {

namespace {

// {"session_id", "path", "data_base64"}: the upload's size is checked before it is decoded
// (base64 of more than SANDBOX_MAX_UPLOAD_BYTES is 413 unread), and after.
parsed<file_put> parse_put_file(const std::string& body, const config& c) {
  body_fields f(body);
  if (f.error) return *f.error;
  std::optional<http_reply> err;
  auto sid = f.string("session_id", true, err);
  auto path = f.string("path", true, err);
  auto data = f.string("data_base64", true, err);
  if (err) return *err;
  const std::size_t max = static_cast<std::size_t>(c.max_upload_bytes);
  if (data->size() > (max + 2) / 3 * 4) return detail(413, "file too large");
  auto bytes = base64_decode_strict(*data);
  if (!bytes) return detail(400, "invalid base64");
  if (bytes->size() > max) return detail(413, "file too large");
  return file_put{std::move(*sid), std::move(*path), std::move(*bytes)};
}

parsed<file_get> parse_get_file(const std::string& body) {
  body_fields f(body);
  if (f.error) return *f.error;
  std::optional<http_reply> err;
  auto sid = f.string("session_id", true, err);
  auto path = f.string("path", true, err);
  if (err) return *err;
  return file_get{std::move(*sid), std::move(*path)};
}

}  // namespace

http_reply put_file(session_core& core, const http_request& r, std::string_view) {
  auto req = parse_put_file(r.body, core.config_of);
  if (!req) return req.error();
  auto done = core.files.put_file(std::move(*req));
  if (!done) return reply(done.error());
  return {200, R"({"ok":true})"};
}

http_reply get_file(session_core& core, const http_request& r, std::string_view) {
  auto req = parse_get_file(r.body);
  if (!req) return req.error();
  auto data = core.files.get_file(*req);
  if (!data) return reply(data.error());
  return {200, "{\"data_base64\":\"" + base64_encode(data.value()) + "\"}"};
}

http_reply list_files(session_core& core, const http_request& r, std::string_view) {
  auto sid = session_named(r.body);
  if (!sid) return sid.error();
  auto listed = core.files.list_files(*sid);
  if (!listed) return reply(listed.error());
  std::string body = "{\"files\":[";
  bool first = true;
  for (const auto& e : listed.value()) {
    if (!first) body += ',';
    first = false;
    body += "{\"path\":";
    client::append_json_string(body, valid_utf8(e.path));
    body += ",\"size\":" + std::to_string(e.size) + "}";
  }
  return {200, body + "]}"};
}

http_reply reset_inputs(session_core& core, const http_request& r, std::string_view) {
  auto sid = session_named(r.body);
  if (!sid) return sid.error();
  auto reset = core.files.reset_inputs(*sid);
  if (!reset) return reply(reset.error());
  return {200, R"({"ok":true})"};
}

}  // namespace dockgate::sidecar::aivory

// The sessions' routes of the Aivory front: POST /sessions, GET /sessions/{id} (its isolation
// report) and DELETE /sessions/{id}, each body parsed once into the core's typed request
// (sessions/session_request.hpp) and the core's result written as the Aivory body
// (docs/aivory-api.md, "Create: POST /sessions", "GET /sessions/{id}" and "Session lifecycle").
#include <simdjson.h>

#include "cells/kernel.hpp"
#include "front/aivory/replies.hpp"
#include "front/aivory/routes.hpp"
#include "front/request.hpp"
#include "sessions/isolation/isolation.hpp"
#include "util/ids.hpp"
#include "util/util.hpp"

namespace dockgate::sidecar::aivory {

namespace {

// POST /sessions {"idle_ttl_sec"?, "archive_key"?, "kernel"?, "storage"?, "runtime"?}: the
// request, or the answer (422 a field of the wrong type, 400 an unknown kernel, a runtime not
// offered or unusable storage).
std::optional<http_reply> parse_create(const std::string& body, const config& c,
                                       create_request& out) {
  body_fields f(body, true);
  if (f.error) return *f.error;
  std::optional<http_reply> err;
  out.idle_ttl_sec = f.integer("idle_ttl_sec", err);
  auto key = f.string("archive_key", false, err);
  auto kernel = f.string("kernel", false, err);
  auto runtime = f.string("runtime", false, err);
  if (err) return *err;
  // An archive key that is not a valid one is not used: the session ID is the key.
  if (key && valid_archive_key(*key)) out.archive_key = *key;
  // A kernel is asked for by name; an unknown name is refused before anything is made.
  if (kernel) {
    auto known = kernel_name(*kernel);
    if (!known) return detail(400, "unknown kernel: " + *kernel + " (known: python)");
    out.kernel = *known;
  }
  // A runtime is one of the operator's (SANDBOX_RUNTIMES), refused with the list otherwise.
  if (runtime) {
    if (auto why = runtime_refusal(c, *runtime)) return detail(400, *why);
    out.runtime = *runtime;
  }
  // A kernel's driver rests on its /proc/PID/fd being closed to the cell's uid, which gVisor
  // (runsc 20221219) does not keep (kernel.py fd_wall_holds): refused, not served unwalled.
  if (const std::string on = out.runtime ? *out.runtime : default_runtime(c);
      !out.kernel.empty() && gvisor_runtime(on))
    return detail(400, "kernel sessions are not offered on runtime " + on +
                           " (gVisor): a cell could reach the kernel driver's pipes through "
                           "/proc there");
  // A storage block the sidecar cannot use is refused now, not found out at delete.
  auto storage = request_storage(body, c);
  if (storage.error) return detail(400, *storage.error);
  out.storage = storage.spec;
  return std::nullopt;
}

// DELETE /sessions/{id} {"discard"?, "archive_key"?, "storage"?}.
std::optional<http_reply> parse_delete(std::string_view id, const std::string& body,
                                       const config& c, delete_request& out) {
  if (!valid_session_id(id)) return detail(400, "invalid session_id");
  out.session_id = std::string(id);
  body_fields f(body, true);
  if (f.error) return *f.error;
  std::optional<http_reply> err;
  out.discard = f.boolean("discard");
  auto key = f.string("archive_key", false, err);
  if (err) return *err;
  if (key && valid_archive_key(*key)) out.archive_key = *key;
  simdjson::dom::element block;
  out.storage_given = f.doc.at_key("storage").get(block) == simdjson::SUCCESS && !block.is_null();
  auto storage = request_storage(body, c);
  if (storage.error) return detail(400, *storage.error);  // refused before anything is removed
  out.storage = storage.spec;
  return std::nullopt;
}

// The answer's "restore": {"status", "key"?, "skipped": [{"path", "reason"}], "conflicts"?,
// "error"?}.
std::string restore_json(const restore_report& r) {
  std::string out = "{\"status\":";
  client::append_json_string(out, r.status);
  if (!r.key.empty()) {
    out += ",\"key\":";
    client::append_json_string(out, r.key);
  }
  out += ",\"skipped\":[";
  for (std::size_t i = 0; i < r.skipped.size(); ++i) {
    out += i ? ",{\"path\":" : "{\"path\":";
    client::append_json_string(out, valid_utf8(r.skipped[i].path));
    out += ",\"reason\":";
    client::append_json_string(out, valid_utf8(r.skipped[i].reason));
    out += '}';
  }
  out += ']';
  if (!r.conflicts.empty()) {
    out += ",\"conflicts\":[";
    for (std::size_t i = 0; i < r.conflicts.size(); ++i) {
      if (i) out += ',';
      client::append_json_string(out, r.conflicts[i]);
    }
    out += ']';
  }
  if (!r.error.empty()) {
    out += ",\"error\":";
    client::append_json_string(out, valid_utf8(r.error));
  }
  return out + "}";
}

// The answer's "archive": {"status", "key"?, "reason"?}.
std::string archive_json(const archive_outcome& a) {
  std::string out = "{\"status\":";
  client::append_json_string(out, a.status);
  if (!a.key.empty()) {
    out += ",\"key\":";
    client::append_json_string(out, a.key);
  }
  if (!a.reason.empty()) {
    out += ",\"reason\":";
    client::append_json_string(out, valid_utf8(a.reason));
  }
  return out + "}";
}

}  // namespace

http_reply create_session(session_core& core, const http_request& r, std::string_view) {
  create_request request;
  if (auto refused = parse_create(r.body, core.config_of, request)) return *refused;
  auto created = core.lifecycle.create_session(request);
  if (!created) return reply(created.error());
  std::string body = "{\"session_id\":";
  client::append_json_string(body, created->session_id);
  return {200, body + ",\"restore\":" + restore_json(created->restore) + "}"};
}

http_reply get_session(session_core& core, const http_request&, std::string_view id) {
  if (!valid_session_id(id)) return detail(400, "invalid session_id");
  // Read without the session's lock (a cell may hold it for its whole run) and without a
  // call to the engine: the report was read when its container was made (isolation.hpp).
  auto s = core.registry.find(std::string(id));
  if (!s || s->terminating) return detail(404, "session not found or not running");
  std::string body = "{\"session_id\":";
  client::append_json_string(body, s->id);
  return {200, body + ",\"isolation\":" + isolation_json(*s, core.config_of) + "}"};
}

http_reply delete_session(session_core& core, const http_request& r, std::string_view id) {
  delete_request request;
  if (auto refused = parse_delete(id, r.body, core.config_of, request)) return *refused;
  auto deleted = core.lifecycle.delete_session(request);
  if (!deleted) return reply(deleted.error());
  std::string body = R"({"ok":true)";
  if (deleted->archive) body += ",\"archive\":" + archive_json(*deleted->archive);
  return {200, body + "}"};
}

}  // namespace dockgate::sidecar::aivory

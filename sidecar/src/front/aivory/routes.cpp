// The Aivory sidecar's routes (docs/design.md, "A front per API"). GET /healthz and the
// authentication of every other route are the service's (front/service.cpp), before this
// table is consulted.
#include "front/aivory/routes.hpp"

namespace dockgate::sidecar::aivory {

const route_table<route>& routes() {
  static const route_table<route> table({
      {"POST", "/sessions", {create_session}},
      {"GET", "/sessions/{id}", {get_session}},
      {"DELETE", "/sessions/{id}", {delete_session}},
      {"POST", "/sessions/{id}/restart", {restart_kernel}},
      {"POST", "/exec", {exec}},
      {"POST", "/files", {put_file}},
      {"POST", "/files/get", {get_file}},
      {"POST", "/files/list", {list_files}},
      {"POST", "/files/reset-inputs", {reset_inputs}},
      {"POST", "/storage/put", {storage_put, body_limit::storage}},
      {"POST", "/storage/delete", {storage_delete}},
      {"POST", "/storage/gc", {storage_gc}},
  });
  return table;
}

http_reply serve(session_core& core, const http_request& r) {
  const auto found = routes().find(r.method, r.path);
  if (found.handler) return found.handler->serve(core, r, found.id);
  return found.method_missed ? detail(405, "Method Not Allowed") : detail(404, "Not Found");
}

std::size_t max_body(const config& c, std::string_view path) {
  const route* found = routes().find_path(path);
  const bool storage = found && found->limit == body_limit::storage;
  return static_cast<std::size_t>(storage ? c.max_storage_body_bytes : c.max_body_bytes);
}

}  // namespace dockgate::sidecar::aivory

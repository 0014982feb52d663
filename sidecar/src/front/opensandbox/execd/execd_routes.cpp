// execd's routes as the sidecar serves them (docs/opensandbox-api.md, "execd"). The caller (the
// OpenSandbox front's serve) has checked the sandbox's access token; every route here acts
// on that sandbox's session only, as its user. A route not in the table answers 501
// NOT_SUPPORTED with what it is, never a silent 404 or a stub.
#include "front/opensandbox/execd/execd_routes.hpp"

#include "front/opensandbox/execd/routes_inside.hpp"
#include "front/route_table.hpp"

namespace dockgate::sidecar::opensandbox::execd {

namespace {

using handler = http_reply (*)(call&);

http_reply ping(call&) {
  return empty_ok();
}

const route_table<handler>& routes() {
  static const route_table<handler> table({
      {"GET", "/ping", ping},
      {"POST", "/command", run_command},
      {"DELETE", "/command", interrupt_command},
      {"GET", "/command/status/{id}", command_status},
      {"GET", "/command/{id}/logs", command_logs},
      {"GET", "/metrics", metrics},
      {"GET", "/metrics/watch", watch_metrics},
      {"POST", "/session", create_shell},
      {"POST", "/session/{id}/run", run_in_shell},
      {"DELETE", "/session/{id}", delete_shell},
      {"POST", "/code/context", create_context},
      {"POST", "/code", run_code},
      {"DELETE", "/code", interrupt_code},
      {"GET", "/code/contexts", list_contexts},
      {"DELETE", "/code/contexts", delete_contexts},
      {"GET", "/code/contexts/{id}", get_context},
      {"DELETE", "/code/contexts/{id}", delete_context},
      {"POST", "/files/upload", upload_files},
      {"GET", "/files/download", download_file},
      {"GET", "/files/info", file_info_of},
      {"DELETE", "/files", delete_files},
      {"POST", "/directories", make_directories},
      {"DELETE", "/directories", delete_directories},
      {"GET", "/directories/list", list_directory},
      {"POST", "/files/permissions", set_permissions},
      {"POST", "/files/mv", move_files},
      {"GET", "/files/search", search_files},
      {"POST", "/files/replace", replace_in_files},
  });
  return table;
}

}  // namespace

http_reply serve(session_core& core, const http_request& r, const std::string& sandbox_id,
                 std::string_view path) {
  const std::string_view p = path.empty() ? std::string_view("/") : path;
  const auto found = routes().find(r.method, p);
  http_reply reply;
  if (found.handler) {
    call c{core, r, sandbox_id, found.id};
    reply = (*found.handler)(c);
  } else {
    reply = error(501, "NOT_SUPPORTED",
                  r.method + " " + std::string(p) + " is not served by dockgate-sidecar yet");
  }
  if (!reply.streamed) {
    bool has_id = false;
    for (const auto& [n, v] : reply.headers) has_id = has_id || n == "X-Request-ID";
    if (!has_id) reply.headers.push_back({"X-Request-ID", request_id_of(r)});
  }
  return reply;
}

}  // namespace dockgate::sidecar::opensandbox::execd

#pragma once
// The Aivory sidecar's API as a route table over the session core: each route a method, a
// path pattern, a handler and the largest body it reads; each handler parses its request
// once into a typed request (fields, limits, the id), calls the core, and answers through
// replies.hpp. One file of handlers per room. Internal to the sidecar library.

#include <cstddef>
#include <string_view>

#include "core/session_core.hpp"
#include "front/http_server.hpp"
#include "front/request.hpp"
#include "front/route_table.hpp"

namespace dockgate::sidecar::aivory {

// A route's handler: the request, and what its pattern's {id} matched ("" if none).
using handler = http_reply (*)(session_core&, const http_request&, std::string_view id);

// The largest body a route reads (checked by the HTTP server before the body is read):
// SANDBOX_MAX_BODY_BYTES, or SANDBOX_MAX_STORAGE_BODY_BYTES for /storage/put's objects.
enum class body_limit { request, storage };

struct route {
  handler serve;
  body_limit limit = body_limit::request;
};

// The table (routes.cpp).
const route_table<route>& routes();
// `r` served by its route: 404 {"detail":"Not Found"} for a path no route has, 405
// {"detail":"Method Not Allowed"} for one that has only other methods (as FastAPI).
http_reply serve(session_core& core, const http_request& r);
// The body limit for `path` (a path no route matches: SANDBOX_MAX_BODY_BYTES).
std::size_t max_body(const config& c, std::string_view path);

// session_routes.cpp: POST /sessions, GET /sessions/{id}, DELETE /sessions/{id}
http_reply create_session(session_core& core, const http_request& r, std::string_view id);
http_reply get_session(session_core& core, const http_request& r, std::string_view id);
http_reply delete_session(session_core& core, const http_request& r, std::string_view id);
// cell_routes.cpp: POST /exec, POST /sessions/{id}/restart
http_reply exec(session_core& core, const http_request& r, std::string_view id);
http_reply restart_kernel(session_core& core, const http_request& r, std::string_view id);
// file_routes.cpp: POST /files, /files/get, /files/list, /files/reset-inputs
http_reply put_file(session_core& core, const http_request& r, std::string_view id);
http_reply get_file(session_core& core, const http_request& r, std::string_view id);
http_reply list_files(session_core& core, const http_request& r, std::string_view id);
http_reply reset_inputs(session_core& core, const http_request& r, std::string_view id);
// storage_routes.cpp: POST /storage/put, /storage/delete, /storage/gc
http_reply storage_put(session_core& core, const http_request& r, std::string_view id);
http_reply storage_delete(session_core& core, const http_request& r, std::string_view id);
http_reply storage_gc(session_core& core, const http_request& r, std::string_view id);

}  // namespace dockgate::sidecar::aivory

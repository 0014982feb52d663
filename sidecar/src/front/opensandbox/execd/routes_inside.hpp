#pragma once
// The execd front's handlers, one per route of execd_routes.cpp's table. Internal to the
// sidecar library.

#include "front/opensandbox/execd/execd_kit.hpp"

namespace dockgate::sidecar::opensandbox::execd {

// execd's success without data: 200, an empty body (Content-Length: 0).
inline http_reply empty_ok() {
  http_reply r(200);
  r.content_type = "text/plain";
  return r;
}

// command_routes.cpp
http_reply run_command(call& c);
http_reply command_status(call& c);
http_reply command_logs(call& c);
http_reply interrupt_command(call& c);
http_reply metrics(call& c);

}  // namespace dockgate::sidecar::opensandbox::execd

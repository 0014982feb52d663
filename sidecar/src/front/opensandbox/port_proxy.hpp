#pragma once
// The proxy path to a sandbox's own ports (/v1/sandboxes/{id}/proxy/{port}/…, any port but
// execd's 44772 and egress's 18080): one HTTP request forwarded to 127.0.0.1:{port} inside
// the sandbox over a relay exec (commands::connect), its answer streamed back. Internal
// to the sidecar library; the invariants are in port_proxy.cpp.

#include <string>
#include <string_view>

#include "core/session_core.hpp"
#include "front/http_server.hpp"

namespace dockgate::sidecar::opensandbox {

// `port` and `rest` as the proxy path names them (`rest` "" for the port's root). The
// caller has checked the sandbox's access token.
http_reply forward_to_port(session_core& core, const http_request& r, const std::string& sandbox,
                           std::string_view port, std::string_view rest);

}  // namespace dockgate::sidecar::opensandbox

// The hop from one fleet member to another (forward.hpp).
#include "fleet/forward.hpp"

#include <ctime>

#include "dockgate/client/http_client.hpp"
#include "fleet/fleet_auth.hpp"
#include "util/ids.hpp"

namespace dockgate::sidecar {

fleet_answer send_to_member(const config& c, std::string_view to, const common::endpoint& where,
                            std::string_view host, const fleet_call& call,
                            std::chrono::milliseconds connect_timeout) {
  client::transport transport{where, nullptr};
  // The fleet's own credential, never the client's Authorization (fleet_auth.hpp).
  std::string headers = "X-Dockgate-Forwarded: " + c.instance + "\r\nX-Dockgate-Fleet: " +
                        fleet_signature(c.fleet_key, c.instance, std::string(to),
                                        static_cast<std::int64_t>(std::time(nullptr)),
                                        random_hex(16), call.method, call.path, call.body) +
                        "\r\n";
  if (!call.accept.empty()) headers += "Accept: " + call.accept + "\r\n";
  // As long as the holder may take: the longest cell and its collection, and the calls.
  const auto timeout = std::chrono::milliseconds(c.exec_timeout_cap_ms) +
                       std::chrono::seconds(c.max_collect_seconds + 120);
  auto answer = client::http_request(transport, call.method, call.path, call.body, timeout,
                                     static_cast<std::size_t>(c.max_body_bytes) * 2, headers,
                                     std::string(host), "application/json", connect_timeout);
  return {answer.status, std::move(answer.content_type), std::move(answer.body),
          std::move(answer.error)};
}

}  // namespace dockgate::sidecar

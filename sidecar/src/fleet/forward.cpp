// The hop from one fleet member to another (forward.hpp).
#include "fleet/forward.hpp"

#include <ctime>

#include "dockgate/client/http_client.hpp"
#include "fleet/fleet_auth.hpp"
#include "util/ids.hpp"

namespace dockgate::sidecar {

bool forwardable_field(std::string_view name) {
  for (std::string_view kept : {"range", "x-request-id", "if-range"})
    if (name == kept) return true;
  return false;
}

bool returnable_field(std::string_view name) {
  for (std::string_view kept : {"content-range", "accept-ranges", "content-disposition",
                                "x-request-id", "execd-commands-tail-cursor"})
    if (name == kept) return true;
  return false;
}

fleet_answer send_to_member(const config& c, std::string_view to, const common::endpoint& where,
                            std::string_view host, const fleet_call& call,
                            std::chrono::milliseconds connect_timeout) {
  client::transport transport{where, nullptr};
  const std::string target = call.query.empty() ? call.path : call.path + "?" + call.query;
  // The fleet's own credential, never the client's Authorization (fleet_auth.hpp).
  std::string headers = "X-Dockgate-Forwarded: " + c.instance + "\r\nX-Dockgate-Fleet: " +
                        fleet_signature(c.fleet_key, c.instance, std::string(to),
                                        static_cast<std::int64_t>(std::time(nullptr)),
                                        random_hex(16), call.method, target, call.body) +
                        "\r\n";
  if (!call.accept.empty()) headers += "Accept: " + call.accept + "\r\n";
  for (const auto& [name, value] : call.fields)
    if (forwardable_field(name)) headers += name + ": " + value + "\r\n";
  // As long as the holder may take: the longest cell and its collection, and the calls.
  const auto timeout = std::chrono::milliseconds(c.exec_timeout_cap_ms) +
                       std::chrono::seconds(c.max_collect_seconds + 120);
  auto answer = client::http_request(
      transport, call.method, target, call.body, timeout,
      static_cast<std::size_t>(c.max_body_bytes) * 2, headers, std::string(host),
      call.content_type.empty() ? "application/json" : call.content_type, connect_timeout);
  fleet_answer out{answer.status,
                   std::move(answer.content_type),
                   std::move(answer.body),
                   std::move(answer.error),
                   {}};
  for (auto& [name, value] : answer.headers)
    if (returnable_field(name)) out.fields.emplace_back(name, std::move(value));
  return out;
}

}  // namespace dockgate::sidecar

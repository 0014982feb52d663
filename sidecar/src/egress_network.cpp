// The egress network of SANDBOX_NETWORK=allowlist. Invariant: a session's network is
// internal (no masquerading, nothing forwarded off it by the daemon's rules) and the
// sidecar's own; its gateway, the host's address on the bridge, is where the egress proxy
// listens (scripts/egress-proxy.sh, whose firewall rules leave it the only address a
// session reaches). The gate stamps the owner label and, under the sandbox-egress
// profile's networks.internal, makes every network it creates internal whatever this body
// says; the daemon picks the subnet. A network of that name that is not internal is no
// egress network: refused here, and the gate refuses a session joining one it does not own.
#include "dockgate/sidecar/egress_network.hpp"

#include <simdjson.h>

namespace dockgate::sidecar {

using namespace std::chrono_literals;

namespace {

// The network's IPv4 gateway if it is there and internal; "" otherwise.
std::string internal_gateway(const client::engine& docker, const std::string& name,
                             std::string& why) {
  auto r = docker.call("GET", "/networks/" + name, {}, 10s);
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  simdjson::dom::array ipam;
  bool internal = false;
  if (r.status != 200) {
    why = "egress network " + name + ": inspect " + std::to_string(r.status);
    return {};
  }
  if (p.parse(r.body).get(doc) != simdjson::SUCCESS ||
      doc["Internal"].get_bool().get(internal) != simdjson::SUCCESS || !internal ||
      doc["IPAM"]["Config"].get_array().get(ipam) != simdjson::SUCCESS) {
    why = "egress network " + name + " is not internal";
    return {};
  }
  for (simdjson::dom::element c : ipam) {
    std::string_view gw;
    if (c["Gateway"].get_string().get(gw) == simdjson::SUCCESS && !gw.empty() &&
        gw.find(':') == std::string_view::npos)
      return std::string(gw);
  }
  why = "egress network " + name + " has no IPv4 gateway";
  return {};
}

}  // namespace

std::string egress_network(const client::engine& docker, const config& c, std::string& why) {
  std::string gw = internal_gateway(docker, c.egress_network, why);
  if (gw.empty() && why.ends_with("inspect 404")) {
    std::string body = "{\"Name\":";
    client::append_json_string(body, c.egress_network);
    body += R"(,"CheckDuplicate":true,"Driver":"bridge","Internal":true})";
    auto made = docker.call("POST", "/networks/create", body, 20s);
    if (made.status != 201 && made.status != 409) {
      why = "egress network " + c.egress_network + " not created: " + std::to_string(made.status) +
            " " + made.body;
      return {};
    }
    gw = internal_gateway(docker, c.egress_network, why);
  }
  if (gw.empty()) return {};
  return "http://" + gw + ":" + std::to_string(c.egress_proxy_port);
}

}  // namespace dockgate::sidecar

// The egress networks of SANDBOX_NETWORK=allowlist, one per session container. Invariant:
// no session learns of another, reaches another or shares a resolver's view with one
// (issue 39): the daemon's embedded DNS answers, for a container, the names and addresses
// of every container on its networks (forward and reverse: dockgate-sbx-<session id>),
// whatever its own settings, and on one shared bridge every neighbour answers ARP and TCP.
// So each session container joins a network of its own, "<SANDBOX_EGRESS_NETWORK>-<sid>",
// where it is alone: its resolver knows itself only, its bridge has no other port, and
// what it sends off its subnet the host drops. Each network is internal (no masquerading,
// nothing forwarded off it by the daemon's rules) and the sidecar's own; its gateway, the
// host's address on the bridge, is where the egress proxy listens. The gate stamps the
// owner label and, under the sandbox-egress profile, makes every network it creates
// internal (networks.internal) and names its bridge dgsbx<hash> (networks.bridge_prefix),
// whatever this body says: scripts/egress-proxy.sh's firewall rules on dgsbx+ hold the
// bridge from its first packet and leave the proxy the only address a session reaches.
// The daemon picks the subnet. A network of that name that is not internal is no egress
// network: refused here, and the gate refuses a session joining one it does not own.
// A network goes with its container (session_containers::remove), its list
// (egress_policy.hpp) just before it.
#include "egress/egress_network.hpp"

#include <simdjson.h>

#include "egress/egress_policy.hpp"
#include "engine/labels.hpp"

namespace dockgate::sidecar {

using namespace std::chrono_literals;

namespace {

// The network's IPv4 gateway if it is there and internal; "" otherwise.
std::string internal_gateway(const container_engine& engine, const std::string& name,
                             std::string& why) {
  auto r = engine.network_inspect(name, 10s);
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

std::string egress_network_name(const config& c, std::string_view sid) {
  return c.egress_network + "-" + std::string(sid);
}

bool is_egress_network(const config& c, std::string_view name) {
  return name.size() > c.egress_network.size() + 1 && name.starts_with(c.egress_network) &&
         name[c.egress_network.size()] == '-';
}

std::string egress_network(const container_engine& engine, const config& c, const std::string& name,
                           std::string& why) {
  std::string gw = internal_gateway(engine, name, why);
  if (gw.empty() && why.ends_with("inspect 404")) {
    std::string body = "{\"Name\":";
    client::append_json_string(body, name);
    body += R"(,"CheckDuplicate":true,"Driver":"bridge","Internal":true,"Labels":{)";
    client::append_json_string(body, instance_label);
    body += ':';
    client::append_json_string(body, c.instance);
    body += "}}";
    auto made = engine.network_create(body, 20s);
    if (made.status != 201 && made.status != 409) {
      why = "egress network " + name + " not created: " + std::to_string(made.status) + " " +
            made.body;
      return {};
    }
    gw = internal_gateway(engine, name, why);
  }
  return gw;
}

std::string egress_proxy_url(const config& c, const std::string& gateway) {
  return "http://" + gateway + ":" + std::to_string(c.egress_proxy_port);
}

void remove_egress_network(const container_engine& engine, const config& c,
                           const std::string& name) {
  // Its list goes first (egress_policy.hpp): while the network stands no other network
  // has its gateway, so no session ever meets this one's list.
  std::string why;
  if (const std::string gw = internal_gateway(engine, name, why); !gw.empty())
    remove_egress_policy(c, gw);
  engine.network_remove(name, 20s);
}

}  // namespace dockgate::sidecar

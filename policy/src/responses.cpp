#include "dockgate/policy/responses.hpp"

#include <simdjson.h>

#include <algorithm>

#include "dockgate/common/error_body.hpp"

namespace dockgate::policy {

namespace {

// "127.0.0.1:8080->80/tcp, [::1]:0->53/udp": the published ports as they go up, in the
// docker CLI's own notation (0: a port the daemon picks).
std::string loopback_warning(const profile& p, const json_object& body) {
  std::string ports;
  const json_value* host = find(body, "HostConfig");
  const json_value* bindings =
      host && host->as_object() ? find(*host->as_object(), "PortBindings") : nullptr;
  if (bindings && bindings->as_object())
    for (const auto& [key, list] : *bindings->as_object()) {
      if (!list.as_array()) continue;
      for (const auto& b : *list.as_array()) {
        const json_value* ip = find(*b.as_object(), "HostIp");
        const json_value* port = find(*b.as_object(), "HostPort");
        std::string address = ip && ip->as_string() ? *ip->as_string() : std::string();
        if (address.find(':') != std::string::npos) address = "[" + address + "]";
        std::string host_port = port && port->as_string() ? *port->as_string() : std::string();
        if (host_port.empty()) host_port = "0";
        if (!ports.empty()) ports += ", ";
        ports += address + ":" + host_port + "->" + key;
      }
    }
  if (ports.size() > 160) ports = ports.substr(0, 157) + "...";
  return "dockgate: published ports bound to loopback, not every interface: " + ports +
         " (profile " + p.name + ")";
}

}  // namespace

std::vector<std::string> create_warnings(const profile& p, const json_object& body,
                                         const std::vector<body_change>& changes) {
  std::vector<std::string> out;
  const json_value root(body);
  for (const auto& change : changes) {
    // Docker's convention: a warning says what the client asked for could not be honoured.
    // A field the client left unset that the profile fills in is no news to it (the audit
    // line still records it).
    if (!change.from) continue;
    const std::string_view path = change.field;
    const std::string_view how = change.action;
    if (how == "bound to loopback") {
      out.push_back(loopback_warning(p, body));
      continue;
    }
    if (how != "forced" && how != "clamped" && how != "seccomp forced") continue;
    const json_value* v = &root;
    for (std::string_view rest = path; v && v->as_object();) {
      const auto dot = rest.find('.');
      v = find(*v->as_object(), rest.substr(0, dot));
      if (dot == std::string_view::npos) break;
      rest.remove_prefix(dot + 1);
    }
    std::string value = v ? to_json(*v) : std::string("its default");
    // Sizes in bytes read as people write them ("2 GiB"), when they are whole units.
    static constexpr std::string_view byte_fields[] = {
        "HostConfig.Memory", "HostConfig.MemorySwap", "HostConfig.MemoryReservation",
        "HostConfig.KernelMemory", "HostConfig.ShmSize"};
    if (const auto n = v ? v->as_int() : std::nullopt;
        n && *n > 0 &&
        std::find(std::begin(byte_fields), std::end(byte_fields), path) != std::end(byte_fields)) {
      for (const auto& [unit, size] :
           {std::pair{"GiB", 1LL << 30}, {"MiB", 1LL << 20}, {"KiB", 1LL << 10}})
        if (*n % size == 0) {
          value = std::to_string(*n / size) + " " + unit;
          break;
        }
    }
    if (value.size() > 120) value = value.substr(0, 117) + "...";
    out.push_back("dockgate: " + std::string(path) + " " + std::string(how) + " to " + value +
                  " (profile " + p.name + ")");
  }
  return out;
}

std::optional<std::string> created_id(std::string_view answer) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  std::string_view id;
  if (parser.parse(answer.data(), answer.size()).get(doc) != simdjson::SUCCESS ||
      doc["Id"].get_string().get(id) != simdjson::SUCCESS)
    return std::nullopt;
  return std::string(id);
}

std::optional<std::string> add_create_warnings(std::string_view answer,
                                               const std::vector<std::string>& warnings) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  std::string_view id;
  if (parser.parse(answer.data(), answer.size()).get(doc) != simdjson::SUCCESS ||
      doc["Id"].get_string().get(id) != simdjson::SUCCESS)
    return std::nullopt;
  std::string out = "{\"Id\":";
  out += '"';
  common::append_json_escaped(out, id);
  out += '"';
  out += ",\"Warnings\":[";
  bool first = true;
  simdjson::dom::array existing;
  if (doc["Warnings"].get_array().get(existing) == simdjson::SUCCESS)
    for (simdjson::dom::element w : existing) {
      std::string_view text;
      if (w.get_string().get(text) != simdjson::SUCCESS) continue;
      out += first ? "\"" : ",\"";
      common::append_json_escaped(out, text);
      out += '"';
      first = false;
    }
  for (const auto& w : warnings) {
    out += first ? "\"" : ",\"";
    common::append_json_escaped(out, w);
    out += '"';
    first = false;
  }
  return out + "]}\n";
}

}  // namespace dockgate::policy

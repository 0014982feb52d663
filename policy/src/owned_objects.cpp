#include "dockgate/policy/owned_objects.hpp"

#include <simdjson.h>

#include <algorithm>

#include "dockgate/common/error_body.hpp"
#include "dockgate/policy/body_rules.hpp"

namespace dockgate::policy {

namespace {
using simdjson::dom::element;

std::string string_at(element e, std::string_view key) {
  std::string_view s;
  if (e[key].get_string().get(s) != simdjson::SUCCESS) return {};
  return std::string(s);
}

std::string owner_in(element e, std::string_view labels_key) {
  std::string_view s;
  if (e[labels_key][owner_label].get_string().get(s) != simdjson::SUCCESS) return {};
  return std::string(s);
}

void append_key(std::string& out, std::string_view key) {
  out += '"';
  common::append_json_escaped(out, key);
  out += "\":";
}

// The object `e` with the members of its members named in `keys` (objects or arrays of
// objects) kept only where `keep(member key, member value)` says so, and the members named
// in `hidden` written as null.
template <typename Keep>
void write_filtered(std::string& out, element e, std::initializer_list<std::string_view> keys,
                    Keep keep, std::initializer_list<std::string_view> hidden = {}) {
  simdjson::dom::object obj;
  if (e.get_object().get(obj) != simdjson::SUCCESS) {
    out += simdjson::minify(e);
    return;
  }
  out += '{';
  bool first = true;
  for (auto [k, v] : obj) {
    if (!first) out += ',';
    first = false;
    append_key(out, k);
    simdjson::dom::object inner;
    simdjson::dom::array list;
    const bool filtered = std::find(keys.begin(), keys.end(), k) != keys.end();
    if (std::find(hidden.begin(), hidden.end(), k) != hidden.end()) {
      out += "null";
    } else if (filtered && v.get_object().get(inner) == simdjson::SUCCESS) {
      out += '{';
      bool first_inner = true;
      for (auto [ik, iv] : inner) {
        if (!keep(ik, iv)) continue;
        if (!first_inner) out += ',';
        first_inner = false;
        append_key(out, ik);
        out += simdjson::minify(iv);
      }
      out += '}';
    } else if (filtered && v.get_array().get(list) == simdjson::SUCCESS) {
      out += '[';
      bool first_inner = true;
      for (element item : list) {
        if (!keep(std::string_view{}, item)) continue;
        if (!first_inner) out += ',';
        first_inner = false;
        out += simdjson::minify(item);
      }
      out += ']';
    } else {
      out += simdjson::minify(v);
    }
  }
  out += '}';
}
}  // namespace

bool predefined_network(std::string_view name) {
  return name == "bridge" || name == "host" || name == "none";
}

std::optional<inspected_network> parse_network_inspect(std::string_view json) {
  simdjson::dom::parser parser;
  element doc;
  if (parser.parse(json.data(), json.size()).get(doc) != simdjson::SUCCESS || !doc.is_object())
    return std::nullopt;
  inspected_network n{string_at(doc, "Id"), string_at(doc, "Name"), owner_in(doc, "Labels")};
  if (n.id.size() != 64 || n.name.empty()) return std::nullopt;
  return n;
}

std::optional<inspected_volume> parse_volume_inspect(std::string_view json) {
  simdjson::dom::parser parser;
  element doc;
  if (parser.parse(json.data(), json.size()).get(doc) != simdjson::SUCCESS || !doc.is_object())
    return std::nullopt;
  inspected_volume v{string_at(doc, "Name"), owner_in(doc, "Labels")};
  if (v.name.empty()) return std::nullopt;
  return v;
}

std::optional<std::string> filter_networks(std::string_view json, std::string_view owner,
                                           const std::vector<std::string>& owned_containers) {
  simdjson::dom::parser parser;
  element doc;
  if (parser.parse(json.data(), json.size()).get(doc) != simdjson::SUCCESS) return std::nullopt;
  auto visible = [&](element n) {
    return n.is_object() &&
           (owner_in(n, "Labels") == owner ||
            (predefined_network(string_at(n, "Name")) && owner_in(n, "Labels").empty()));
  };
  auto owned_container = [&](std::string_view id, element) {
    return std::find(owned_containers.begin(), owned_containers.end(), id) !=
           owned_containers.end();
  };
  std::string out;
  simdjson::dom::array list;
  if (doc.get_array().get(list) == simdjson::SUCCESS) {
    out += '[';
    bool first = true;
    for (element n : list) {
      if (!visible(n)) continue;
      if (!first) out += ',';
      first = false;
      write_filtered(out, n, {"Containers"}, owned_container);
    }
    out += "]\n";
    return out;
  }
  if (!visible(doc)) return std::nullopt;
  write_filtered(out, doc, {"Containers"}, owned_container);
  out += '\n';
  return out;
}

bool networks_list_containers(std::string_view json) {
  simdjson::dom::parser parser;
  element doc;
  if (parser.parse(json.data(), json.size()).get(doc) != simdjson::SUCCESS) return false;
  auto lists = [](element n) {
    simdjson::dom::object containers;
    return n["Containers"].get_object().get(containers) == simdjson::SUCCESS &&
           containers.size() > 0;
  };
  simdjson::dom::array list;
  if (doc.get_array().get(list) == simdjson::SUCCESS) {
    for (element n : list)
      if (lists(n)) return true;
    return false;
  }
  return lists(doc);
}

std::optional<std::string> filter_volume_list(std::string_view json, std::string_view owner) {
  simdjson::dom::parser parser;
  element doc;
  if (parser.parse(json.data(), json.size()).get(doc) != simdjson::SUCCESS || !doc.is_object())
    return std::nullopt;
  std::string out;
  write_filtered(out, doc, {"Volumes"},
                 [&](std::string_view, element v) { return owner_in(v, "Labels") == owner; });
  return out + "\n";
}

std::optional<std::string> filter_data_usage(std::string_view json, std::string_view owner) {
  simdjson::dom::parser parser;
  element doc;
  simdjson::dom::object obj;
  if (parser.parse(json.data(), json.size()).get(doc) != simdjson::SUCCESS ||
      doc.get_object().get(obj) != simdjson::SUCCESS)
    return std::nullopt;
  auto owned = [&](std::string_view, element v) { return owner_in(v, "Labels") == owner; };
  // ContainerUsage and VolumeUsage (API 1.52) total everything on the daemon: not the
  // profile's to see.
  std::string out;
  write_filtered(out, doc, {"Containers", "Volumes"}, owned, {"ContainerUsage", "VolumeUsage"});
  return out + "\n";
}

std::vector<std::string> container_ids(std::string_view list_json) {
  std::vector<std::string> ids;
  simdjson::dom::parser parser;
  element doc;
  simdjson::dom::array list;
  if (parser.parse(list_json.data(), list_json.size()).get(doc) != simdjson::SUCCESS ||
      doc.get_array().get(list) != simdjson::SUCCESS)
    return ids;
  for (element c : list) {
    auto id = string_at(c, "Id");
    if (id.size() == 64) ids.push_back(std::move(id));
  }
  return ids;
}

}  // namespace dockgate::policy

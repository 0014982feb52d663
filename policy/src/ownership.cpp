#include "dockgate/policy/ownership.hpp"

#include <simdjson.h>

#include <algorithm>
#include <array>
#include <vector>

#include "dockgate/common/error_body.hpp"
#include "dockgate/policy/body_rules.hpp"
#include "dockgate/policy/query.hpp"

namespace dockgate::policy {

namespace {
using simdjson::dom::element;

std::optional<element> at(element e, std::string_view key) {
  element out;
  if (e.at_key(key).get(out) != simdjson::SUCCESS) return std::nullopt;
  return out;
}

std::string string_at(element e, std::string_view key) {
  auto v = at(e, key);
  std::string_view s;
  if (!v || v->get_string().get(s) != simdjson::SUCCESS) return {};
  return std::string(s);
}

std::string owner_of(element labels_parent, std::string_view labels_key) {
  auto labels = at(labels_parent, labels_key);
  if (!labels || !labels->is_object()) return {};
  return string_at(*labels, owner_label);
}

std::string json_string(std::string_view s) {
  std::string out = "\"";
  common::append_json_escaped(out, s);
  return out + "\"";
}
}  // namespace

// The table of ownership.hpp. Rows only for what a confined profile treats differently.
namespace {
struct ownership_row {
  operation op;
  ownership_rule rule;
};
constexpr ownership_rule container{path_object::container};
constexpr ownership_rule exec{path_object::exec};
constexpr ownership_rule network{path_object::network};
constexpr ownership_rule volume{path_object::volume};
constexpr ownership_rule owner_label_joined{path_object::none, owned_filters::by_owner};
constexpr ownership_row ownership_rows[] = {
    {operation::ContainerInspect, container},
    {operation::ContainerTop, container},
    {operation::ContainerLogs, container},
    {operation::ContainerChanges, container},
    {operation::ContainerExport, container},
    {operation::ContainerStats, container},
    {operation::ContainerResize, container},
    {operation::ContainerStart, container},
    {operation::ContainerStop, container},
    {operation::ContainerRestart, container},
    {operation::ContainerKill, container},
    {operation::ContainerUpdate, container},
    {operation::ContainerRename, container},
    {operation::ContainerPause, container},
    {operation::ContainerUnpause, container},
    {operation::ContainerAttach, container},
    {operation::ContainerAttachWebsocket, container},
    {operation::ContainerWait, container},
    {operation::ContainerDelete, container},
    {operation::ContainerArchive, container},
    {operation::ContainerArchiveInfo, container},
    {operation::PutContainerArchive, container},
    {operation::ContainerExec, container},
    {operation::ExecStart, exec},
    {operation::ExecResize, exec},
    {operation::ExecInspect, exec},
    {operation::NetworkInspect,
     {path_object::network, owned_filters::none, owned_answer::networks, true}},
    {operation::NetworkDelete, network},
    {operation::NetworkConnect, network},
    {operation::NetworkDisconnect, network},
    {operation::VolumeInspect, volume},
    {operation::VolumeDelete, volume},
    {operation::VolumeUpdate, volume},
    // Lists, events and prunes see only what the profile owns: the owner label joins the
    // client's filters (dockerd ANDs label filters), and lists and events are filtered
    // again on the way back.
    {operation::ContainerList,
     {path_object::none, owned_filters::by_owner, owned_answer::container_list}},
    {operation::SystemEvents,
     {path_object::none, owned_filters::container_events_by_owner, owned_answer::events}},
    {operation::ContainerPrune, owner_label_joined},
    {operation::NetworkPrune, owner_label_joined},
    {operation::VolumePrune, owner_label_joined},
    // Lists of networks and volumes and the disk-usage view: filtered on the way back.
    {operation::NetworkList, {path_object::none, owned_filters::none, owned_answer::networks}},
    {operation::VolumeList, {path_object::none, owned_filters::none, owned_answer::volume_list}},
    {operation::SystemDataUsage,
     {path_object::none, owned_filters::none, owned_answer::data_usage}},
};
constexpr auto ownership_by_operation = [] {
  std::array<ownership_rule, operation_count> by{};
  for (const auto& row : ownership_rows) by[static_cast<std::size_t>(row.op)] = row.rule;
  return by;
}();
}  // namespace

ownership_rule operation_ownership(operation op) {
  const auto i = static_cast<std::size_t>(op);
  return i < ownership_by_operation.size() ? ownership_by_operation[i] : ownership_rule{};
}

std::optional<inspected_container> parse_container_inspect(std::string_view json) {
  simdjson::dom::parser parser;
  element doc;
  if (parser.parse(json.data(), json.size()).get(doc) != simdjson::SUCCESS || !doc.is_object())
    return std::nullopt;
  inspected_container c;
  c.id = string_at(doc, "Id");
  if (c.id.size() != 64) return std::nullopt;
  if (auto config = at(doc, "Config")) {
    c.owner = owner_of(*config, "Labels");
    std::string_view workspace;
    if ((*config)["Labels"][workspace_label].get_string().get(workspace) == simdjson::SUCCESS)
      c.workspace = std::string(workspace);
  }
  if (auto host = at(doc, "HostConfig")) {
    simdjson::dom::array list;
    if ((*host)["Binds"].get_array().get(list) == simdjson::SUCCESS)
      for (element b : list) {
        std::string_view spec;
        // Host paths only: a source that is not absolute names a volume (dockerd's parser).
        if (b.get_string().get(spec) == simdjson::SUCCESS && spec.starts_with('/'))
          c.bind_sources.emplace_back(spec.substr(0, spec.find(':')));
      }
    if ((*host)["Mounts"].get_array().get(list) == simdjson::SUCCESS)
      for (element m : list) {
        std::string_view type, source;
        if (m["Type"].get_string().get(type) == simdjson::SUCCESS && type == "bind" &&
            m["Source"].get_string().get(source) == simdjson::SUCCESS)
          c.bind_sources.emplace_back(source);
      }
  }
  return c;
}

std::optional<inspected_exec> parse_exec_inspect(std::string_view json) {
  simdjson::dom::parser parser;
  element doc;
  if (parser.parse(json.data(), json.size()).get(doc) != simdjson::SUCCESS || !doc.is_object())
    return std::nullopt;
  inspected_exec e{string_at(doc, "ID"), string_at(doc, "ContainerID")};
  if (e.id.size() != 64 || e.container_id.size() != 64) return std::nullopt;
  return e;
}

std::optional<std::string> confine_filters(std::string_view filters_json, std::string_view owner,
                                           bool events) {
  // Normalise to map[string][]string; keys sorted, values kept.
  std::vector<std::pair<std::string, std::vector<std::string>>> filters;
  if (!filters_json.empty()) {
    simdjson::dom::parser parser;
    element doc;
    simdjson::dom::object obj;
    if (parser.parse(filters_json.data(), filters_json.size()).get(doc) != simdjson::SUCCESS ||
        doc.get_object().get(obj) != simdjson::SUCCESS)
      return std::nullopt;
    for (auto [key, value] : obj) {
      for (const auto& f : filters)
        if (f.first == key) return std::nullopt;  // a repeated key: two readings
      std::vector<std::string> values;
      // (A simdjson_result's value() on a temporary dangles: bind the array or object first.)
      simdjson::dom::array list;
      simdjson::dom::object legacy;
      if (value.get_array().get(list) == simdjson::SUCCESS) {
        for (element v : list) {
          std::string_view s;
          if (v.get_string().get(s) != simdjson::SUCCESS) return std::nullopt;
          values.emplace_back(s);
        }
      } else if (value.get_object().get(legacy) ==
                 simdjson::SUCCESS) {  // legacy {"label": {"a=b": true}}
        for (auto [k, b] : legacy) {
          bool on = false;
          if (b.get_bool().get(on) != simdjson::SUCCESS) return std::nullopt;
          if (on) values.emplace_back(k);
        }
      } else {
        return std::nullopt;
      }
      filters.emplace_back(std::string(key), std::move(values));
    }
  }
  auto slot = [&](std::string_view key) -> std::vector<std::string>& {
    for (auto& f : filters)
      if (f.first == key) return f.second;
    filters.emplace_back(std::string(key), std::vector<std::string>{});
    return filters.back().second;
  };
  // Label filters are ANDed by dockerd: adding ours can only narrow.
  slot("label").push_back(std::string(owner_label) + "=" + std::string(owner));
  // Type filters are ORed: replace, never add.
  if (events) slot("type") = {"container"};
  std::sort(filters.begin(), filters.end());
  std::string out = "{";
  for (std::size_t i = 0; i < filters.size(); ++i) {
    if (i) out += ',';
    out += json_string(filters[i].first) + ":[";
    for (std::size_t j = 0; j < filters[i].second.size(); ++j) {
      if (j) out += ',';
      out += json_string(filters[i].second[j]);
    }
    out += ']';
  }
  return out + "}";
}

std::optional<std::string> confine_query(std::string_view raw_query, std::string_view owner,
                                         bool events) {
  auto params = parse_query(raw_query);
  if (!params) return std::nullopt;
  std::string rebuilt;
  std::optional<std::string> filters;
  for (const auto& p : *params) {
    if (p.key == "filters") {
      if (filters) return std::nullopt;  // given twice (check_query refuses this first)
      filters = confine_filters(p.value, owner, events);
      if (!filters) return std::nullopt;
      continue;
    }
    if (!rebuilt.empty()) rebuilt += '&';
    rebuilt += p.raw;
  }
  if (!filters) filters = confine_filters("", owner, events);
  if (!rebuilt.empty()) rebuilt += '&';
  return rebuilt + "filters=" + query_escape(*filters);
}

std::optional<std::string> filter_container_list(std::string_view json, std::string_view owner) {
  simdjson::dom::parser parser;
  element doc;
  simdjson::dom::array arr;
  if (parser.parse(json.data(), json.size()).get(doc) != simdjson::SUCCESS ||
      doc.get_array().get(arr) != simdjson::SUCCESS)
    return std::nullopt;
  std::string out = "[";
  bool first = true;
  for (element c : arr) {
    if (!c.is_object() || owner_of(c, "Labels") != owner) continue;
    if (!first) out += ',';
    first = false;
    out += simdjson::minify(c);
  }
  return out + "]\n";
}

bool event_owned(std::string_view json_line, std::string_view owner) {
  simdjson::dom::parser parser;
  element doc;
  if (parser.parse(json_line.data(), json_line.size()).get(doc) != simdjson::SUCCESS ||
      !doc.is_object())
    return false;
  if (string_at(doc, "Type") != "container") return false;
  auto actor = at(doc, "Actor");
  return actor && owner_of(*actor, "Attributes") == owner;
}

std::optional<std::string> parse_version_api(std::string_view json) {
  simdjson::dom::parser parser;
  element doc;
  if (parser.parse(json.data(), json.size()).get(doc) != simdjson::SUCCESS || !doc.is_object())
    return std::nullopt;
  auto v = string_at(doc, "ApiVersion");
  if (v.empty()) return std::nullopt;
  return v;
}

bool info_says_cgroup_v1(std::string_view json) {
  simdjson::dom::parser parser;
  element doc;
  if (parser.parse(json.data(), json.size()).get(doc) != simdjson::SUCCESS || !doc.is_object())
    return true;
  return string_at(doc, "CgroupVersion") != "2";  // unknown: assume v1 (the stricter reading)
}

}  // namespace dockgate::policy

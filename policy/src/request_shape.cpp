#include "dockgate/policy/request_shape.hpp"

#include <string>

namespace dockgate::policy {

namespace {

// Streams without a natural end: the daemon ends them only when it stops.
bool endless(operation op) {
  return op == operation::SystemEvents || op == operation::ContainerLogs ||
         op == operation::ContainerStats || op == operation::ContainerWait;
}

// Answers that are one document, read by the client whole (request_shape::document).
bool document(operation op) {
  switch (op) {
    case operation::ConfigInspect:
    case operation::ContainerInspect:
    case operation::DistributionInspect:
    case operation::ExecInspect:
    case operation::ImageInspect:
    case operation::NetworkInspect:
    case operation::NodeInspect:
    case operation::PluginInspect:
    case operation::SecretInspect:
    case operation::ServiceInspect:
    case operation::SwarmInspect:
    case operation::TaskInspect:
    case operation::VolumeInspect:
    case operation::SystemInfo:
    case operation::SystemVersion:
    case operation::ContainerTop:
    case operation::ContainerChanges:
    case operation::ImageHistory:
      return true;
    default:
      return false;
  }
}

// application/x-www-form-urlencoded or multipart/form-data, whatever the parameters and
// the case of the media type.
bool form_type(std::string_view content_type) {
  const std::string_view type = content_type.substr(0, content_type.find(';'));
  return http::iequals(type, "application/x-www-form-urlencoded") ||
         http::iequals(type, "multipart/form-data");
}

}  // namespace

shape_result shape_request(operation op, const request_facts& facts, bool uploads) {
  const bool hijack = operation_hijacks(op);
  const bool upgrade = facts.connection_upgrade || !facts.upgrade.empty();
  if (upgrade && !hijack)
    return shape_refusal{400, "upgrade",
                         "dockgate: Upgrade is allowed only on ContainerAttach and ExecStart"};
  if (upgrade && (!facts.connection_upgrade || !http::iequals(facts.upgrade, "tcp")))
    return shape_refusal{
        400, "upgrade",
        "dockgate: only \"Connection: Upgrade\" with \"Upgrade: tcp\" is supported"};
  const body_kind kind = operation_body(op);
  request_body body = request_body::none;
  if (facts.has_body) {
    // Every Content-Type field counts: a second one must not hide a form.
    for (const auto& f : facts.fields)
      if (http::iequals(f.name, "content-type") && form_type(f.value))
        return shape_refusal{400, "body", "dockgate: form bodies are not accepted"};
    if (kind == body_kind::none || op == operation::ImageCreate)
      body = request_body::dropped;
    else if (kind == body_kind::json)
      body = request_body::json;
    else if (uploads && op == operation::PutContainerArchive)
      body = request_body::archive;
    else
      body = request_body::stream;
  }
  return request_shape{hijack, upgrade, endless(op), document(op), body};
}

std::string_view version_segment(std::string_view path) {
  return path.substr(2, path.find('/', 1) - 2);
}

bool version_too_new(std::string_view segment) {
  const auto version = parse_api_version(segment);
  return version && *version > max_api_version;
}

namespace {
deny too_new(std::string_view requested, api_version maximum) {
  return deny{400, "version",
              "client version " + std::string(requested) +
                  " is too new. Maximum supported API version is " + to_string(maximum)};
}
}  // namespace

deny version_refusal(std::string_view segment, std::optional<api_version> daemon) {
  if (version_too_new(segment)) return too_new(segment, daemon.value_or(max_api_version));
  return deny{400, "version",
              "client version " + std::string(segment) +
                  " is too old. Minimum supported API version is " + to_string(min_api_version) +
                  " (dockgate), please upgrade your client to a newer version"};
}

std::optional<deny> version_refusal(api_version requested, api_version daemon) {
  if (requested > daemon) return too_new(to_string(requested), daemon);
  return std::nullopt;
}

}  // namespace dockgate::policy

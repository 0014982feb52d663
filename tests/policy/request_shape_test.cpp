#include "dockgate/policy/request_shape.hpp"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

using namespace dockgate::policy;
namespace http = dockgate::http;

namespace {

// "<flags> body=<kind>" (flags: hijack, upgrade, endless, document) or "<status> <rule>: <reason>".
std::string shape_text(const shape_result& s) {
  if (const auto* r = std::get_if<shape_refusal>(&s))
    return std::to_string(r->status) + " " + std::string(r->rule) + ": " + std::string(r->reason);
  const auto& a = std::get<request_shape>(s);
  std::string out;
  if (a.hijack) out += "hijack ";
  if (a.upgrade) out += "upgrade ";
  if (a.endless_stream) out += "endless ";
  if (a.document) out += "document ";
  constexpr std::string_view kinds[] = {"none", "dropped", "json", "stream", "archive"};
  out += "body=";
  out += kinds[static_cast<std::size_t>(a.body)];
  return out;
}

constexpr std::string_view not_hijacked =
    "400 upgrade: dockgate: Upgrade is allowed only on ContainerAttach and ExecStart";
constexpr std::string_view not_tcp =
    "400 upgrade: dockgate: only \"Connection: Upgrade\" with \"Upgrade: tcp\" is supported";
constexpr std::string_view form = "400 body: dockgate: form bodies are not accepted";

}  // namespace

TEST_CASE("request shape: hijack, endless stream, body kept, dropped or refused",
          "[request_shape]") {
  struct c {
    operation op;
    bool connection_upgrade;
    std::string_view upgrade;
    bool has_body;
    std::vector<std::string_view> content_types;  // each a Content-Type field
    std::string_view expect;
  };
  const c cases[] = {
      // Hijacking operations: with or without a valid upgrade, body as the operation reads it.
      {operation::ContainerAttach, false, "", false, {}, "hijack body=none"},
      {operation::ContainerAttach, true, "tcp", false, {}, "hijack upgrade body=none"},
      {operation::ContainerAttach, true, "TCP", false, {}, "hijack upgrade body=none"},
      {operation::ContainerAttach,
       true,
       "tcp",
       true,
       {"application/json"},
       "hijack upgrade body=dropped"},
      {operation::ExecStart, false, "", true, {"application/json"}, "hijack body=json"},
      {operation::ExecStart, true, "tcp", true, {"application/json"}, "hijack upgrade body=json"},
      {operation::ExecStart, true, "tcp", false, {}, "hijack upgrade body=none"},
      // An upgrade other than "Connection: Upgrade" + "Upgrade: tcp".
      {operation::ContainerAttach, true, "", false, {}, not_tcp},
      {operation::ContainerAttach, false, "tcp", false, {}, not_tcp},
      {operation::ExecStart, true, "websocket", true, {"application/json"}, not_tcp},
      {operation::ExecStart, true, "h2c", false, {}, not_tcp},
      // Upgrade on an operation the daemon does not hijack, whichever half is sent; checked
      // before the body.
      {operation::ContainerList, true, "tcp", false, {}, not_hijacked},
      {operation::ContainerList, false, "tcp", false, {}, not_hijacked},
      {operation::ContainerList, true, "", false, {}, not_hijacked},
      {operation::SystemEvents, true, "tcp", false, {}, not_hijacked},
      {operation::ContainerCreate, true, "tcp", true, {"multipart/form-data"}, not_hijacked},
      {operation::ContainerCreate, false, "websocket", true, {"application/json"}, not_hijacked},
      // Endless streams: events, logs, stats, wait; not a pull's progress, not a list.
      {operation::SystemEvents, false, "", false, {}, "endless body=none"},
      {operation::ContainerLogs, false, "", false, {}, "endless body=none"},
      {operation::ContainerStats, false, "", false, {}, "endless body=none"},
      {operation::ContainerWait, false, "", false, {}, "endless body=none"},
      {operation::ContainerWait, false, "", true, {"application/json"}, "endless body=dropped"},
      {operation::ContainerList, false, "", false, {}, "body=none"},
      {operation::ImageCreate, false, "", false, {}, "body=none"},
      // JSON bodies are reviewed; without a body nothing is read.
      {operation::ContainerCreate, false, "", true, {"application/json"}, "body=json"},
      {operation::ContainerCreate, false, "", true, {}, "body=json"},
      {operation::ContainerCreate, false, "", false, {}, "body=none"},
      {operation::ContainerCreate, false, "", true, {"text/plain"}, "body=json"},
      // A body on an operation that reads none, or on a pull: dropped.
      {operation::ContainerStart, false, "", true, {"application/json"}, "body=dropped"},
      {operation::ContainerStart, false, "", false, {"application/json"}, "body=none"},
      {operation::ContainerKill, false, "", true, {}, "body=dropped"},
      {operation::ImageCreate, false, "", true, {"application/json"}, "body=dropped"},
      {operation::ImageCreate, false, "", true, {"application/x-tar"}, "body=dropped"},
      // Byte streams pass through.
      {operation::PutContainerArchive, false, "", true, {"application/x-tar"}, "body=stream"},
      {operation::ImageBuild, false, "", true, {"application/x-tar"}, "body=stream"},
      {operation::ImageLoad, false, "", true, {}, "body=stream"},
      // Form bodies, on every kind of operation, whatever the case and parameters, in any
      // Content-Type field.
      {operation::ContainerCreate, false, "", true, {"application/x-www-form-urlencoded"}, form},
      {operation::ContainerCreate, false, "", true, {"Application/X-WWW-Form-Urlencoded"}, form},
      {operation::ContainerCreate, false, "", true, {"multipart/form-data; boundary=xyz"}, form},
      {operation::ContainerCreate, false, "", true, {"MULTIPART/FORM-DATA;boundary=x"}, form},
      {operation::ContainerCreate,
       false,
       "",
       true,
       {"application/json", "multipart/form-data"},
       form},
      {operation::ContainerCreate,
       false,
       "",
       true,
       {"application/x-www-form-urlencoded", "application/json"},
       form},
      {operation::ContainerStart, false, "", true, {"application/x-www-form-urlencoded"}, form},
      {operation::ImageCreate, false, "", true, {"multipart/form-data; boundary=----x"}, form},
      {operation::ImageBuild,
       false,
       "",
       true,
       {"application/x-tar", "multipart/form-data; boundary=b"},
       form},
      {operation::ExecStart, false, "", true, {"Multipart/Form-Data; boundary=b"}, form},
      {operation::ContainerAttach, true, "tcp", true, {"application/x-www-form-urlencoded"}, form},
      // Only a body makes a form: without one there is nothing for ParseForm to read.
      {operation::ContainerCreate,
       false,
       "",
       false,
       {"application/x-www-form-urlencoded"},
       "body=none"},
      {operation::ContainerStart,
       false,
       "",
       false,
       {"multipart/form-data; boundary=b"},
       "body=none"},
      // Not a form type: a prefix or a longer name is another type.
      {operation::ContainerCreate, false, "", true, {"multipart/form-data-x"}, "body=json"},
      {operation::ContainerCreate, false, "", true, {"application/x-www-form"}, "body=json"},
  };
  for (const auto& t : cases) {
    std::vector<http::header_field> fields{{"Host", "docker"}};
    for (auto type : t.content_types) fields.push_back({"Content-Type", type});
    fields.push_back({"User-Agent", "Docker-Client/24.0.7 (linux)"});
    const request_facts facts{t.connection_upgrade, t.upgrade, t.has_body, fields};
    INFO(operation_name(t.op) << " upgrade=" << t.connection_upgrade << "/" << t.upgrade
                              << " body=" << t.has_body);
    CHECK(shape_text(shape_request(t.op, facts)) == t.expect);
  }
}

TEST_CASE("request shape: an inspect's answer is a document, a pull's or an export's is not",
          "[request_shape]") {
  const std::vector<http::header_field> fields{{"Host", "docker"}};
  const request_facts facts{false, "", false, fields};
  for (auto op : {operation::ContainerInspect, operation::ImageInspect, operation::NetworkInspect,
                  operation::VolumeInspect, operation::ExecInspect, operation::SystemInfo,
                  operation::SystemVersion, operation::ContainerTop, operation::ImageHistory}) {
    INFO(operation_name(op));
    CHECK(shape_text(shape_request(op, facts)) == "document body=none");
  }
  // Streams that may last (progress, a tar, a build's output) stay streams: held, with the
  // client watched, never waited for in the request's coroutine.
  for (auto op : {operation::ImageCreate, operation::ImagePush, operation::ContainerExport,
                  operation::ImageGet, operation::ContainerArchive, operation::ImageBuild,
                  operation::ContainerList}) {
    INFO(operation_name(op));
    CHECK(shape_text(shape_request(op, facts)) == "body=none");
  }
  CHECK(shape_text(shape_request(operation::SystemEvents, facts)) == "endless body=none");
}

TEST_CASE("request shape: the facts are read from a parsed head", "[request_shape]") {
  http::request_head h;
  constexpr std::string_view raw =
      "POST /v1.41/containers/create HTTP/1.1\r\nHost: docker\r\n"
      "content-type: application/json\r\nCONTENT-TYPE: multipart/form-data; boundary=q\r\n"
      "Content-Length: 2\r\n\r\n";
  REQUIRE_FALSE(http::parse_request_head(raw, h));
  CHECK(shape_text(shape_request(operation::ContainerCreate, facts_of(h))) == form);
  constexpr std::string_view upgrade =
      "POST /v1.41/exec/x/start HTTP/1.1\r\nHost: docker\r\nConnection: Upgrade\r\n"
      "Upgrade: tcp\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n";
  REQUIRE_FALSE(http::parse_request_head(upgrade, h));
  CHECK(shape_text(shape_request(operation::ExecStart, facts_of(h))) == "hijack upgrade body=json");
}

TEST_CASE("version refusals in dockerd's words", "[request_shape]") {
  CHECK(version_segment("/v1.99/containers/json") == "1.99");
  CHECK(version_segment("/v1.12/version") == "1.12");
  CHECK(version_segment("/v9.0") == "9.0");
  CHECK(version_too_new("1.99"));
  CHECK(version_too_new("2.0"));
  CHECK_FALSE(version_too_new("1.12"));
  CHECK_FALSE(version_too_new("1.56"));
  CHECK_FALSE(version_too_new("1.999999"));  // not a version: answered as too old

  const std::optional<api_version> unknown;
  const std::optional<api_version> v1_45 = api_version{1, 45};
  const deny too_new_unknown{
      400, "version", "client version 1.99 is too new. Maximum supported API version is 1.56"};
  const deny too_new_known{400, "version",
                           "client version 1.99 is too new. Maximum supported API version is 1.45"};
  const deny too_old{400, "version",
                     "client version 1.12 is too old. Minimum supported API version is 1.24 "
                     "(dockgate), please upgrade your client to a newer version"};
  CHECK(version_refusal("1.99", unknown) == too_new_unknown);
  CHECK(version_refusal("1.99", v1_45) == too_new_known);
  CHECK(version_refusal("1.12", unknown) == too_old);
  CHECK(version_refusal("1.12", v1_45) == too_old);
  CHECK(version_refusal("1.999999", v1_45).reason ==
        "client version 1.999999 is too old. Minimum supported API version is 1.24 (dockgate), "
        "please upgrade your client to a newer version");

  // A routed version against the daemon's: above it is answered as dockerd answers it.
  CHECK(version_refusal(api_version{1, 46}, api_version{1, 45}) ==
        deny{400, "version",
             "client version 1.46 is too new. Maximum supported API version is 1.45"});
  CHECK(version_refusal(api_version{1, 45}, api_version{1, 45}) == std::nullopt);
  CHECK(version_refusal(api_version{1, 24}, api_version{1, 45}) == std::nullopt);
}

TEST_CASE("request shape: an upload under an upload rule is an archive the gate reads whole",
          "[request_shape][uploads]") {
  const request_facts body{false, {}, true, {}};
  CHECK(shape_text(shape_request(operation::PutContainerArchive, body)) == "body=stream");
  CHECK(shape_text(shape_request(operation::PutContainerArchive, body, true)) == "body=archive");
  CHECK(shape_text(shape_request(operation::PutContainerArchive, {}, true)) == "body=none");
  CHECK(shape_text(shape_request(operation::ImageLoad, body, true)) == "body=stream");
}

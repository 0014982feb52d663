#pragma once
// One structured audit line per request (docs/operating.md, "Audit lines"; the schema is
// docs/audit.schema.json). Bodies and X-Registry-Auth are never logged.

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "dockgate/policy/decision.hpp"

namespace dockgate::proxy {

// Who the client is, as the listener learned it when it accepted the connection; formatted
// once per connection (format_audit_client), not per request.
struct audit_client {
  std::string_view transport;        // "unix", "tcp" or "tls"
  std::optional<std::uint32_t> uid;  // unix: SO_PEERCRED
  std::optional<std::uint32_t> gid;
  std::optional<std::int32_t> pid;  // in the gate's PID namespace (0: not visible there)
  std::string process;              // unix: /proc/<pid>/comm at accept, empty if unreadable
  std::string address;              // tcp, tls: numeric peer address
  std::optional<std::uint16_t> port;
  std::string subject;  // tls: the verified client certificate's subject
};

// The client as the JSON object of the audit line's "client" field.
std::string format_audit_client(const audit_client& c);

struct audit_record {
  std::chrono::system_clock::time_point time;  // when the request head arrived
  std::string_view request_id;                 // also the response's Dockgate-Request-Id header
  std::string_view client;                     // a JSON object, from format_audit_client
  std::string_view profile;
  std::string_view method;
  std::string_view path;       // target path without the query
  std::string_view operation;  // operationId, empty when routing failed
  // The object the request names or creates: its kind ("container", "image", ...), the
  // name or reference the client used, and the full ID the gate forwarded or the daemon
  // answered with. Each empty when unknown.
  std::string_view object_type;
  std::string_view object_name;
  std::string_view object_id;
  std::string_view object_image;   // a container create: the image reference its body names
  std::string_view object_digest;  // the image digest, where the reference pins one
  std::string_view exec_id;        // ContainerExec: the ID of the exec the daemon created
  std::string_view verdict;        // "allow" or "deny"
  std::string_view rule;           // which rule decided ("operation", "framing", "route", ...)
  std::string_view reason;
  std::span<const policy::body_change> changes;  // what the profile changed: a JSON array
  std::string_view would;    // audit mode: what enforce mode would have refused or changed
  std::string_view dropped;  // what the daemon ignores and the gate left out ("query:x,body")
  // A profile with "record": "fields": what the client set in a create or exec body, a
  // JSON object from policy::body_seen (values only of fields a rule can name, never of
  // those that may carry secrets), copied as it is.
  std::string_view seen;
  unsigned status = 0;
  std::uint64_t bytes_in = 0;   // request body bytes (and client->daemon bytes of a hijack)
  std::uint64_t bytes_out = 0;  // response body bytes (and daemon->client bytes of a hijack)
  double duration_ms = 0;
  bool hijacked = false;
};

// Formats the record as one JSON object (no newline).
std::string format_audit(const audit_record& r);
// The same, appended to `out`.
void append_audit(std::string& out, const audit_record& r);
// RFC 3339 UTC with microseconds ("2026-12-01T20:14:11.123456Z"), appended to `out`.
void append_rfc3339(std::string& out, std::chrono::system_clock::time_point t);
// The kind of object an operation acts on, from its operationId ("ContainerStart":
// "container"); empty for operations on no object (SystemPing, ContainerList, ...).
std::string_view audit_object_type(std::string_view operation);
// The digest an image reference pins ("busybox@sha256:ab…": "sha256:ab…"), empty if none.
std::string_view audit_image_digest(std::string_view reference);

}  // namespace dockgate::proxy

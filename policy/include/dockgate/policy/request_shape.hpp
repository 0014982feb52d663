#pragma once
// The shape of a routed request: whether the connection may be hijacked, whether the
// stream has no natural end, what becomes of the body, or why the request is refused
// before anything reaches the daemon. The proxy applies the answer; it decides none of it.
//
// Invariants kept here:
// - `Upgrade` is forwarded only on the operations the daemon hijacks (ContainerAttach,
//   ExecStart), and only as dockerd accepts it: "Connection: Upgrade" with "Upgrade: tcp".
//   Anything else asking to switch protocols is refused, so the gate never splices a
//   connection the daemon did not agree to hijack.
// - Form bodies are refused: dockerd's ParseForm reads an urlencoded or multipart body into
//   the same values as the query, ahead of it, so a form body could override what the
//   query review saw.
// - A body on an operation that reads none (clients send "{}" to stop, kill, start...) is
//   dropped: the daemon ignores it too. ImageCreate passes the query review only as a pull,
//   whose body the daemon never reads (dockerode sends one); the import form, which reads
//   it, is refused there.
// Total and allocation-free: the answer is a small value, refusal texts are constants.

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <variant>

#include "dockgate/http/request_head.hpp"
#include "dockgate/policy/decision.hpp"
#include "dockgate/policy/operation.hpp"
#include "dockgate/policy/route.hpp"

namespace dockgate::policy {

// The facts of a request head the shape depends on (views into the head).
struct request_facts {
  bool connection_upgrade = false;             // Connection lists `upgrade`
  std::string_view upgrade;                    // the Upgrade field's value, if any
  bool has_body = false;                       // chunked, or a Content-Length above 0
  std::span<const http::header_field> fields;  // every field, for the Content-Type ones
};

inline request_facts facts_of(const http::request_head& h) {
  return {h.connection_upgrade, h.upgrade, h.has_body(), {h.fields.data(), h.field_count}};
}

// What becomes of the request body.
enum class request_body : std::uint8_t {
  none,     // no body: nothing read; a client's "Content-Length: 0" is forwarded
  dropped,  // read within a small limit, never forwarded (the daemon would ignore it)
  json,     // read whole under the operation's cap, reviewed, forwarded as the gate writes it
  stream,   // passed through as it arrives, in the gate's own framing
  archive,  // PutContainerArchive under an upload rule: spooled, its entries judged, and
            // the gate's own tar forwarded (upload_archive.hpp)
};

struct request_shape {
  // The daemon may switch protocols (101, or 200 with a raw stream): the connection is
  // then spliced both ways.
  bool hijack = false;
  // The client asked to upgrade (validly): forwarded as "Connection: Upgrade", "Upgrade: tcp".
  bool upgrade = false;
  // A stream with no natural end (events, logs, stats, wait): if the daemon goes away
  // mid-stream, the client's stream is ended cleanly (its last chunk) rather than cut.
  bool endless_stream = false;
  // The answer is one document (an inspect, info, version), however the daemon frames it:
  // dockerd chunks a JSON answer over 4 KiB and its pieces may come apart. The gate relays
  // it to its end at once instead of holding it as a stream.
  bool document = false;
  request_body body = request_body::none;
  bool operator==(const request_shape&) const = default;
};

// A refusal before anything is forwarded; the connection is closed after it.
struct shape_refusal {
  unsigned status = 400;
  std::string_view rule;    // for the audit line
  std::string_view reason;  // the message the client sees
  bool operator==(const shape_refusal&) const = default;
};

using shape_result = std::variant<request_shape, shape_refusal>;

// The shape of a request routed to `op` (allowed by the profile, its query reviewed).
// `uploads`: the profile has an upload rule it enforces (a PutContainerArchive's body is
// then an archive, not a stream).
shape_result shape_request(operation op, const request_facts& facts, bool uploads = false);

// A request's `/vX.Y` the gate does not forward, answered in dockerd's words (a client
// reads "too new" and negotiates down): 400, rule "version". `daemon` is the daemon's API
// version (capped at max_api_version) once learned.

// The version segment ("1.99") of a request path the router refused with
// route_error::unsupported_version ("/v1.99/containers/json").
std::string_view version_segment(std::string_view path);
// The version is above every version the route table knows: its answer names the
// daemon's version, which the proxy learns first when it can.
bool version_too_new(std::string_view segment);
// The refusal of a version the router refused (unsupported_version).
deny version_refusal(std::string_view segment, std::optional<api_version> daemon);
// A routed request's version, against the daemon's: nullopt when it is forwarded as asked.
std::optional<deny> version_refusal(api_version requested, api_version daemon);

}  // namespace dockgate::policy

#pragma once
// What belongs to one request of a connection and its response, apart from what belongs to
// the connection (connection.hpp: its sockets, buffers, deadline, client and profile).
//
// Invariant: nothing of one request is seen by the next on a kept-alive connection. The
// request path keeps its request's state in one value, `connection::req_`, and
// admit_request (step 2) replaces it with a fresh one, request_state::after(), before the
// next request is looked at: every field as a new request_state has it (the default member
// initialisers below), none reset by hand.
//
// Without an allocation per request (tests/integration/proxy_stream_alloc_test.cpp): what
// would allocate again for every request is storage the connection keeps, carried over
// emptied. The strings' capacity moves from the last request's state to the fresh one
// (swapped, then cleared), and the extras, made the first time a request of the
// connection needs them, move over with their strings and vectors cleared. Nothing else
// in the state owns memory. So a field added here is fresh per request by construction;
// a string added without its line in after() starts empty (one allocation when used,
// which those tests count), never with the last request's text.

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "daemon_facts.hpp"
#include "dockgate/http/chunked.hpp"
#include "dockgate/policy/decision.hpp"
#include "dockgate/policy/ownership.hpp"
#include "upload_spool.hpp"

namespace dockgate::proxy {

class events_hub;  // events_hub.hpp

// How a response body is framed towards the client.
enum class response_framing { none, length, chunked, raw };

// What the audit line records as the request goes (connection::audit_line adds the rest,
// which lives in the state already: the record is not kept twice, a held stream carries it).
struct request_record {
  std::chrono::system_clock::time_point time;  // when the request head arrived
  std::string_view method;
  std::string_view operation;  // operationId, empty when routing failed
  std::string_view verdict;    // "allow" or "deny"
  std::string_view rule;
  std::string_view reason;
  std::span<const policy::body_change> changes;
  std::string_view would;
  std::string_view dropped;
  std::string_view seen;
  unsigned status = 0;
  bool hijacked = false;
  std::uint64_t bytes_in = 0;
  std::uint64_t bytes_out = 0;
};

// What only some requests fill in: a JSON body, what the gate left out or the profile
// changed, audit mode's findings, a create's image and an exec's ID. Made the first time a
// request of the connection needs it and kept for the connection's later requests, emptied.
// A connection that never needs it (a ping or inspect client, most held streams) does not
// carry it: ~250 of the ~2.5 KiB a held stream costs.
struct request_extras {
  std::string json_body;  // a JSON request body read whole (also a daemon's answer filtered whole)
  std::string would;      // audit mode: what the profile would have refused or changed
  std::string dropped;    // what the gate left out because the daemon ignores it
  std::string seen;       // "record": "fields": what the client set in the body (policy::body_seen)
  std::vector<policy::body_change> changes;  // what the profile changed, for the audit line
  std::vector<std::string> warnings;         // added to a create answer: what the profile changed
  std::string object_image;            // a container create: the image reference its body names
  std::string exec_id;                 // ContainerExec: the exec the daemon created
  std::optional<upload_spool> upload;  // an upload by archive: the gate's tar (upload_stage.cpp)
  // Emptied for the next request, capacity kept.
  void clear() noexcept {
    json_body.clear();
    would.clear();
    dropped.clear();
    seen.clear();
    changes.clear();
    warnings.clear();
    object_image.clear();
    exec_id.clear();
    upload.reset();
  }
};

struct request_state {
  // The state for the next request: fresh, with `last`'s storage carried over emptied (see
  // the top of this file). `last` is left without storage.
  static request_state after(request_state& last) noexcept;

  // Steps 1 to 3: the request as it arrived, its ID and the clock read once for it.
  request_record audit;
  // "<process prefix>-<count>" in hex, for the audit line and Dockgate-Request-Id.
  std::array<char, 32> id{};  // up to 8 + 1 + 16 hex digits
  std::uint8_t id_size = 0;
  std::chrono::steady_clock::time_point started;
  std::string path;  // the request's path, for the audit line
  // The object the request names or creates, for the audit line (copies: the head's bytes
  // move once the body is read); object_id is also what the path's object was resolved to.
  std::string object_name;
  std::string object_id;
  bool endless_stream = false;  // events, logs, stats, wait: ended cleanly if the daemon goes
  bool document = false;        // an inspect's answer: relayed to its end, never held

  // Step 4: what goes upstream, pinned and resolved.
  std::string query;              // the query forwarded: the client's parameters the daemon reads
  std::string forward_version;    // the API version forwarded ("1.41")
  policy::api_version version{};  // the same, for the body review
  daemon_facts daemon;            // what the gate knew of the daemon as this request began
  std::string target;             // the forwarded request target (pinned version, full IDs)
  // What of the daemon's answer goes back (policy::operation_ownership, for a confined
  // profile); and whether it is a create's answer, read whole for the ID it names
  // (ContainerCreate, ContainerExec) with the profile's warnings added.
  policy::owned_answer answer_filter = policy::owned_answer::as_is;
  bool create_answer = false;

  // Step 6: a GET or HEAD whose forwarded bytes are the head alone (out_): it may be sent
  // again on a new daemon connection if a reused one failed before any answer
  // (connection::resend_on_fresh_upstream). Never a request with a body or another method.
  bool resendable = false;

  // Steps 5 and 6: the request body's framing.
  http::chunked_decoder body_decoder;
  std::uint64_t body_remaining = 0;  // Content-Length bytes still to come

  // Steps 7 and 8: the response, and a stream held while it waits.
  response_framing framing = response_framing::none;
  unsigned response_status = 0;
  bool response_keep_alive = false;
  bool upstream_keeps = false;
  // A chunked answer relayed to its last chunk leaves the daemon connection reusable by
  // another client (upstream_pool.hpp): HTTP/1.1 both ways, neither side asked to close,
  // not an endless stream.
  bool upstream_poolable = false;
  bool response_head_pending = false;  // out_ holds the client's head, not yet written
  bool response_chunked_in = false;    // the daemon chunks the body (else: until close)
  http::chunked_decoder response_decoder;
  std::string event_line;        // a partial event line while filtering events
  std::string owned_events;      // the owned event lines of one read
  bool stream_ended = false;     // the daemon's body has ended
  bool stream_waiting = false;   // relay_stream waits on the daemon: watch_client watches
  bool watch_pending = false;    // watch_client's wait has not completed
  bool upstream_active = false;  // a held stream's daemon side: waiting or relaying
  bool upstream_ended = false;   // the daemon's side of a relayed body ended or failed
  bool client_gone = false;      // the client went away, or a write to it failed: nothing more goes
  bool client_ended = false;     // the client ended its side mid-stream (it may still read)
  bool client_writing = false;   // a held stream's write to the client is under way
  bool relay_failed = false;
  // A GET /events that may share a daemon stream with the same request of the profile's
  // other clients (events_hub.hpp), and, once held so, the hub it holds of (null when it
  // left it); out_ then holds what the client has not taken yet (shared_events.cpp).
  bool events_shareable = false;
  bool events_shared = false;
  bool write_waiting = false;  // a held shared stream waits for its client to take more
  bool watch_epoll = false;    // its client's watch is its hub's epoll set, not an Asio wait
  bool end_posted = false;     // its end is on its way (never from inside the hub's callbacks)
  bool hub_ended = false;      // the daemon's stream ended or went: the client gets the end
  events_hub* hub = nullptr;

  // See request_extras; null until a request of the connection needs them.
  std::unique_ptr<request_extras> extras;
};

inline request_state request_state::after(request_state& last) noexcept {
  request_state next;
  const auto keep = [](std::string& to, std::string& from) noexcept {
    to.swap(from);
    to.clear();
  };
  keep(next.path, last.path);
  keep(next.object_name, last.object_name);
  keep(next.object_id, last.object_id);
  keep(next.query, last.query);
  keep(next.forward_version, last.forward_version);
  keep(next.target, last.target);
  keep(next.event_line, last.event_line);
  keep(next.owned_events, last.owned_events);
  next.extras = std::move(last.extras);
  if (next.extras) next.extras->clear();
  return next;
}

}  // namespace dockgate::proxy

#pragma once
// One client connection: the request path of docs/design.md, "The request path", one
// request at a time. `connection` holds the connection's state and life (its sockets,
// buffers, deadline, client and profile), and `req_` the state of the request being
// served, a value made fresh as each request begins (request_state.hpp); each stage
// is a member function in a file of its own (proxy/src/), and serve_one() calls them in
// order. The steps (the source of truth for docs/design.md):
//
//   1. Read the head: strict framing, within the head timeout and max_head_bytes.
//      read_head, request_head_stage.cpp
//   2. Parse and route: a fresh request_state; one operation, or 400/404/405; an
//      unsupported /vX.Y answered in the daemon's words (policy::version_refusal).
//      admit_request, refuse_version, request_head_stage.cpp
//   3. Decide: the profile's decision, its review of the query, the request's shape
//      (policy::shape_request: hijack, endless stream, body kept, dropped or refused).
//      admit_request, request_head_stage.cpp
//   4. Ownership and version pinning: the daemon's version learned, the request pinned
//      to one version, referenced objects resolved and checked to be the profile's, list
//      filters confined (which, by policy::operation_ownership's table); the forwarded
//      target.
//      prepare_target, upstream_lookups.cpp
//   5. The request body: read (a dropped one within a small limit), a JSON body read
//      whole, reviewed, its bind sources and named objects checked; an upload under an
//      upload rule spooled, its entries judged, the gate's own tar made.
//      read_request_body, request_body_stage.cpp; read_upload_body, upload_stage.cpp
//   6. Forward: the gate's serialisation of the request, then a streamed body.
//      forward_request, request_body_stage.cpp
//   7. Relay the response: a sized answer in one gathered write, a confined list
//      filtered whole, a stream handed to step 8, a hijack to step 9.
//      relay_response, response_relay.cpp
//   8. Held streams: a chunked or until-close body relayed as it comes, held by callbacks
//      while it waits, ended cleanly; a GET /events the profile's other clients already
//      hold shares their daemon stream (events_hub.hpp).
//      relay_stream ... end_stream, held_streams.cpp; join_shared_events, shared_events.cpp
//   9. Splice: a hijacked connection, both ways, with splice(2).
//      splice, splice.cpp
//  10. Record: one audit line and the metrics per request.
//      finish_audit, connection.cpp

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "buffer_pool.hpp"
#include "context.hpp"
#include "dockgate/http/chunked.hpp"
#include "dockgate/http/request_head.hpp"
#include "dockgate/http/response_head.hpp"
#include "dockgate/policy/body_review.hpp"
#include "dockgate/policy/request_shape.hpp"
#include "dockgate/proxy/audit.hpp"
#include "events_fanout.hpp"
#include "request_state.hpp"
#include "upstream_socket.hpp"

namespace dockgate::proxy {

class connection final : private events_subscriber {
 public:
  // `client` names the peer in log messages; `client_json` is the audit line's client
  // object (format_audit_client), both made once when the connection was accepted. Made on
  // the thread of `ctx`, which serves it to the end.
  connection(proxy_context& ctx, connection_slot slot, protocol::socket socket, std::string client,
             const policy::client_identity& identity, std::string client_json);
  ~connection();
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  // Serves the connection: owned by the coroutine while it runs, by its own callbacks
  // while a stream is held (see relay_stream), and again by a coroutine after.
  static net::awaitable<void> start(std::unique_ptr<connection> self);

  // Graceful shutdown: an idle connection closes now, a busy one after its response.
  void shutdown();
  // Deadline passed: close both sockets, whatever is in flight.
  void abort();
  // Called by the watchdog (server.cpp) about once a second: acts on a passed deadline.
  void check_deadline(std::chrono::steady_clock::time_point now);

 private:
  // relay_stream: the response head is known and its body goes on in relay_stream(), from
  // run(), so that the request's larger coroutine frames are gone while a stream waits.
  // held: the stream waits on callbacks, which own the connection now.
  enum class outcome { keep_alive, close, relay_stream, held };
  enum class ended { closed, held };

  net::awaitable<ended> run();
  net::awaitable<void> close_gracefully();
  // A request that passed steps 2 and 3: its route (views into the head) and its shape.
  struct admitted {
    policy::route route;
    policy::request_shape shape;
  };
  // A /vX.Y outside the route table's range: answered by refuse_version().
  struct unsupported_version {};
  using admission = std::variant<admitted, policy::deny, unsupported_version>;

  net::awaitable<outcome> serve_one();
  // Step 1 (request_head_stage.cpp): a whole head in the buffer (head_size), 0 if too large.
  net::awaitable<bool> read_head(std::size_t& head_size);
  // Steps 2 and 3 (request_head_stage.cpp), no I/O: parse, route, decide, shape.
  admission admit_request(std::size_t head_size);
  net::awaitable<void> refuse_version();
  net::awaitable<void> refuse(unsigned status, std::string_view rule, std::string_view message);
  // The connection's daemon connection: its own, else an idle one of the thread's pool,
  // else a new one (`fresh`: a new one only).
  net::awaitable<bool> connect_upstream(bool fresh = false);
  // A GET or HEAD whose daemon connection was reused and failed before any byte of the
  // answer came back (the daemon may have closed it while idle): sent again, once, on a
  // new connection. False when it may not be, or that failed too.
  net::awaitable<bool> resend_on_fresh_upstream();
  // As the connection ends: its daemon connection to the thread's pool if its last
  // exchange left it reusable (upstream_pool.hpp), else closed.
  void release_upstream();
  // Steps 5 and 6 (request_body_stage.cpp). Each returns false after answering the client
  // itself (or when it is gone).
  net::awaitable<bool> read_request_body(const policy::route& r, policy::request_body body);
  net::awaitable<bool> forward_request(policy::request_body body);
  void serialize_request_head(bool upgrade);
  // Step 4 (upstream_lookups.cpp), ownership and version pinning: builds req_.target for the
  // forwarded request. Returns false after answering the client itself.
  net::awaitable<bool> prepare_target(const policy::route& r);
  // The same without waiting, where nothing needs the daemon (its version known, no
  // object to look up but a container the cache knows, no binds to check) and nothing is
  // refused: true when req_.target is built; false leaves it to prepare_target (which does the
  // whole step again). No coroutine frame on the way of most requests.
  bool prepare_target_now(const policy::route& r);
  // Its parts, shared by both: the version pinned (a refusal if the daemon's is older
  // than asked), the owner joined to a list's or events' filters (false: malformed), the
  // forwarded target; whether a start's binds are checked first.
  std::optional<policy::deny> pin_version(const policy::route& r);
  bool confine_filters(const policy::route& r);
  void build_target(const policy::route& r, std::string_view param_as);
  bool checks_binds_at_start(const policy::route& r) const;
  bool upstream_ready() { return upstream_ && upstream_->is_open(); }
  net::awaitable<bool> learn_api_version();
  // A GET to the daemon on the upstream connection (inspect, version); status 0 on error.
  net::awaitable<std::pair<unsigned, std::string>> upstream_get(std::string_view target);
  net::awaitable<std::pair<unsigned, std::string>> upstream_request(std::string_view method,
                                                                    std::string_view target,
                                                                    std::string_view json);
  // The networks and volumes a reviewed body names are the profile's (creating missing
  // volumes with its label); the message of the refusal if not.
  net::awaitable<std::optional<policy::deny>> check_named_objects(const policy::route& r,
                                                                  policy::rewrite& rw);
  net::awaitable<bool> owned_container_id(std::string_view reference, std::string& id);
  // The same from the thread's cache only (a full ID seen owned): no lookup.
  bool owned_from_cache(std::string_view reference, std::string& id);
  // Why a container's binds may not be mounted now (check_bind_source), if they may not.
  net::awaitable<std::optional<std::string>> binds_problem(std::string_view container);
  net::awaitable<void> relay_filtered_list(const http::response_head& res, bool keep);
  // Reads a whole response body (after the head in the response block) into extras().json_body.
  net::awaitable<bool> read_whole_body(const http::response_head& res, std::size_t limit);
  net::awaitable<bool> read_client_more();
  enum class body_piece { data, done, malformed, closed };
  net::awaitable<std::pair<body_piece, std::string_view>> next_body_piece();
  net::awaitable<bool> read_json_body(std::size_t limit);
  net::awaitable<bool> forward_body();
  // An upload by archive under an upload rule (upload_stage.cpp): steps 5 and 6.
  net::awaitable<bool> read_upload_body();
  net::awaitable<bool> forward_upload();
  net::awaitable<bool> refuse_upload(const policy::deny& d);
  // Step 7 (response_relay.cpp); steps 8 (held_streams.cpp) and 9 (splice.cpp) follow it.
  net::awaitable<outcome> relay_response(bool hijack_allowed);
  // The body of a chunked or until-close response: what is buffered first (with the head
  // when it has not gone yet, in one write), then what the daemon sends, as it sends it.
  net::awaitable<outcome> relay_stream();
  // Relays what the response block holds (and the pending head) in one gathered write.
  net::awaitable<void> relay_buffered_stream();
  // One write's worth of `in` as the client gets it (de-chunked, events filtered, framed
  // anew) into `out`: the number of buffers, and the body bytes in `total`.
  static constexpr std::size_t max_stream_pieces = 32;
  std::size_t gather_stream(std::string_view& in, std::span<net::const_buffer> out,
                            std::span<char, 24> size_line, std::size_t& total);
  // A held stream: the daemon's side waits in a callback; readable bytes are relayed by
  // relay_available(); upstream_done() and the client's watch end it; stream_over() hands
  // the connection to resume(), which ends the stream (end_stream) and goes on.
  void wait_upstream();
  net::awaitable<void> relay_available();
  void upstream_failed(beast::error_code ec);
  void note_upstream_error(beast::error_code ec);  // ended (until-close body) or failed
  void upstream_done();
  void stream_over();
  static net::awaitable<void> resume(std::unique_ptr<connection> self);
  net::awaitable<outcome> end_stream();
  // Whether end_stream writes the terminating chunk itself (the daemon's did not come).
  bool gate_ends_stream() const;
  void watch_client();
  void client_event(beast::error_code ec);  // the client's socket readable, or its wait failed
  void client_readable() override;          // the same, from its hub's epoll set
  // Whether a unix client closed (both directions shut) rather than ending only its side.
  static bool closed_both_ways(int fd) noexcept;
  // The client ended its side mid-stream: passed on to the daemon, whose end is relayed
  // (or, past half_close_grace, the gate's).
  void client_ended();
  // The shutdown deadline: a held stream between two chunks gets its end before abort()
  // closes it.
  void end_held_stream_now() noexcept;
  // A shared events stream (shared_events.cpp): whether this request may share one, joining
  // one that is held (no daemon connection: false if none or it has just ended), opening
  // one with this request's daemon answer (false: held on its own as any stream).
  bool shares_events(const policy::route& r, const policy::request_shape& shape) const;
  bool join_shared_events(std::size_t head_size);
  bool open_shared_events(std::string& daemon_head);
  void hold_shared(events_hub& hub);
  void take_events(std::string_view lines) override;
  void events_over(bool clean) override;
  void flush_shared();
  void wait_client_writable();
  void cut_shared();
  void end_shared();
  void shared_done_if_idle();
  static net::awaitable<void> finish_shared(std::unique_ptr<connection> self);
  net::awaitable<void> splice(std::string_view response_leftover);
  // One direction of a hijacked stream, through a pipe with splice(2).
  net::awaitable<void> splice_one_way(protocol::socket& from, protocol::socket& to,
                                      std::uint64_t& bytes);
  net::awaitable<void> copy_one_way(protocol::socket& from, protocol::socket& to,
                                    std::uint64_t& bytes);
  // Serialises the daemon's response head into out_, minus its hop-by-hop headers;
  // `content_length` replaces the daemon's when set.
  void write_response_head(const http::response_head& res, response_framing framing,
                           bool keep_alive,
                           std::optional<std::size_t> content_length = std::nullopt);
  void finish_audit(unsigned status);
  // --audit-mode blocking: the line of the decision (status 0), written before forwarding;
  // false if a sink could not take it.
  bool write_decision_line();
  // The audit line of this request: what req_.audit recorded as it went, with what the
  // connection's members say (its ID, the client, the profile, the path, the object).
  audit_record audit_line() const;

  std::string_view buffered() const { return {in_data_ + in_begin_, in_end_ - in_begin_}; }
  void consume(std::size_t n) { in_begin_ += n; }
  void compact();
  // The client-bytes buffer: a pooled block while the connection has bytes to work on,
  // a larger one only for a head past the block's size, none while it waits.
  char* in_buffer();
  bool grow_in_buffer();
  void release_in_buffer_if_empty();
  void set_deadline(std::chrono::steady_clock::duration d, bool upstream_only = false) {
    deadline_ = std::chrono::steady_clock::now() + d;
    deadline_upstream_only_ = upstream_only;
  }
  void clear_deadline() { deadline_ = std::chrono::steady_clock::time_point::max(); }
  static const policy::profile& no_profile();
  // The daemon's API version once learned (it is learned again after the daemon was away).
  std::optional<policy::api_version> known_daemon_version() const {
    return ctx_.daemon.api_version ? std::optional(ctx_.daemon.version) : std::nullopt;
  }
  // True if a policy refusal must be enforced; in audit mode records it instead.
  bool enforce(const policy::deny& d);

  proxy_context& ctx_;
  connection_slot slot_;  // one of the process's max_connections
  protocol::socket client_;
  upstream_socket upstream_;  // a plain socket, or a tls:// relay's plaintext end
  // The daemon connection has carried a whole answer before the request now on it (it was
  // kept, or came from the pool): a failure before the answer's first byte may be a
  // connection the daemon closed while it was idle (resend_on_fresh_upstream).
  bool upstream_reused_ = false;
  // Its last exchange ended as upstream_pool.hpp requires (a whole, framed answer; no
  // hijack, stream, refusal or error since): it may go to the pool when the client goes.
  bool upstream_reusable_ = false;
  // One deadline for whatever the connection waits on now, checked by the watchdog: no
  // timer system call per request.
  std::chrono::steady_clock::time_point deadline_ = std::chrono::steady_clock::time_point::max();
  bool deadline_upstream_only_ = false;  // on expiry close only the daemon's side
  std::string client_id_;
  std::string client_json_;
  policy::client_identity identity_;
  std::shared_ptr<const policy::policy> policy_;  // the policy of the request being served
  const policy::profile* profile_ptr_;            // nullptr: no profile for this client
  const policy::profile* profile_;                // profile_ptr_, or the empty profile

  // Client bytes: the head is parsed in place, so head fields view into this buffer
  // until the head has been forwarded.
  static constexpr std::size_t large_in_capacity = http::max_head_bytes + buffer_pool::block_size;
  pooled_block in_block_;
  std::unique_ptr<char[]> in_large_;
  char* in_data_ = nullptr;
  std::size_t in_capacity_ = 0;
  std::size_t in_begin_ = 0;
  std::size_t in_end_ = 0;

  // The daemon's response: read into a pooled block, relayed from it.
  pooled_block response_;
  std::size_t response_begin_ = 0;
  std::size_t response_end_ = 0;

  std::string out_;  // serialisation buffer, reused across requests

  request_extras& extras() {
    if (!req_.extras) req_.extras = std::make_unique<request_extras>();
    return *req_.extras;
  }
  std::string_view dropped() const {
    return req_.extras ? std::string_view(req_.extras->dropped) : std::string_view();
  }

  // The parsed head views into the client-bytes buffer; held from a small free list
  // while a request is parsed and forwarded, not while the connection waits.
  mapped_ptr<http::request_head> head_;
  static constexpr std::string_view last_chunk = "0\r\n\r\n";
  // How long a daemon has to end a stream after the client ended its side (dockerd ends it
  // at once); then the gate cuts the daemon off and ends the stream itself.
  static constexpr auto half_close_grace = std::chrono::seconds(5);
  // A body on an operation that takes none is read up to this and never forwarded.
  static constexpr std::size_t ignored_body_limit = 64 * 1024;
  std::string_view request_id() const { return {req_.id.data(), req_.id_size}; }
  void append_request_id_header(std::string& out) const;
  void note_object(const policy::route& r);
  bool idle_ = true;          // waiting for a request: shutdown() closes it now
  bool client_done_ = false;  // the client ended its side between two requests (read_head)

  // The request being served and its response: a fresh value per request (admit_request),
  // apart from the connection's state above (request_state.hpp).
  request_state req_;
};

}  // namespace dockgate::proxy

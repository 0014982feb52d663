// One client connection: its state and its life (start, the request loop, graceful
// close, the deadline the watchdog checks, the client-bytes buffer), the refusal writer
// and the audit record (step 10). Each stage of the request path lives in its own file:
// the steps are listed in connection.hpp.
//
// Invariants kept here:
// - After any refusal the connection is closed (serve_one returns close), so no request
//   pipelined behind a refused one is ever read.
// - A connection that waits (for a request, or for the next event) holds no I/O buffer
//   and no parsed head: blocks come from the pool when data arrives. (A document's rest,
//   milliseconds behind its first piece, is waited for with the response block: step 8.)
// - One deadline per connection, a time point the watchdog looks at: no timer system call
//   per request.
#include "connection.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/http/status.hpp>
#include <cstring>

#include "dockgate/common/error_body.hpp"
#include "events_hub.hpp"
#include "readiness.hpp"
#include "socket_io.hpp"
#include "upstream_tls.hpp"

namespace dockgate::proxy {

namespace {

constexpr auto upstream_connect_timeout = std::chrono::seconds(10);
constexpr auto refusal_write_timeout = std::chrono::seconds(5);
constexpr auto linger_timeout = std::chrono::seconds(2);

void set_no_delay(protocol::socket& s) {
  beast::error_code ignored;  // fails on unix sockets, which is fine
  s.set_option(net::ip::tcp::no_delay(true), ignored);
}

}  // namespace

namespace beast_http = beast::http;

connection::connection(proxy_context& ctx, connection_slot slot, protocol::socket socket,
                       std::string client, const policy::client_identity& identity,
                       std::string client_json)
    : ctx_(ctx),
      slot_(std::move(slot)),
      client_(std::move(socket)),
      client_id_(std::move(client)),
      client_json_(std::move(client_json)),
      identity_(identity),
      policy_(ctx.policy),
      profile_ptr_(policy_->select(identity_)),
      profile_(profile_ptr_ ? profile_ptr_ : &no_profile()),
      in_block_(ctx.buffers),
      response_(ctx.buffers) {
  if (!identity.address.empty()) set_no_delay(client_);  // TCP (a unix socket refuses it)
  report_end(client_);  // its next request is then awaited with no system call (readiness.hpp)
  ctx_.connections.insert(this);
  ctx_.stats.connection(+1);
}

connection::~connection() {
  if (req_.hub) req_.hub->leave(*this);
  ctx_.give_back_head(std::move(head_));
  ctx_.connections.erase(this);
  ctx_.stats.connection(-1);
}

void connection::shutdown() {
  if (idle_) client_.cancel();
}

void connection::abort() {
  end_held_stream_now();  // a held stream gets its end (held_streams.cpp), not a cut
  if (req_.events_shared && req_.stream_waiting) {
    // Out of its hub's epoll set before the close takes it out unseen (no callback would
    // come): its stream is over (shared_events.cpp).
    req_.client_gone = true;
    end_shared();
  }
  beast::error_code ignored;
  client_.close(ignored);
  if (upstream_) upstream_->close(ignored);
}

void connection::check_deadline(std::chrono::steady_clock::time_point now) {
  if (now < deadline_) return;
  clear_deadline();
  if (!deadline_upstream_only_) {
    abort();
  } else if (upstream_) {
    beast::error_code ignored;
    upstream_->close(ignored);
  }
}

const policy::profile& connection::no_profile() {
  static const policy::profile none = [] {
    policy::profile p;  // enforce, nothing allowed
    p.name = "(none)";
    p.description = "clients no rule matches";
    return p;
  }();
  return none;
}

bool connection::enforce(const policy::deny& d) {
  // Audit mode lets policy refusals (403, and 404 for ownership) through and records
  // them; malformed or ambiguous requests (other 4xx) are refused in every mode.
  if (profile_->mode != policy::profile::mode_kind::audit || (d.status != 403 && d.status != 404))
    return true;
  auto& would = extras().would;
  if (!would.empty()) would += "; ";
  would += d.reason;
  req_.audit.would = would;
  return false;
}

void connection::compact() {
  if (in_begin_ == 0) return;
  std::memmove(in_data_, in_data_ + in_begin_, in_end_ - in_begin_);
  in_end_ -= in_begin_;
  in_begin_ = 0;
}

char* connection::in_buffer() {
  if (!in_data_) {
    in_data_ = in_block_.get();
    in_capacity_ = in_block_.size();
  }
  return in_data_;
}

// A head longer than a block (up to max_head_bytes): the rare large buffer.
bool connection::grow_in_buffer() {
  if (in_large_) return false;
  compact();
  auto large = std::make_unique<char[]>(large_in_capacity);
  std::memcpy(large.get(), in_data_, in_end_);
  in_block_.release();
  in_large_ = std::move(large);
  in_data_ = in_large_.get();
  in_capacity_ = large_in_capacity;
  return true;
}

void connection::release_in_buffer_if_empty() {
  if (in_begin_ != in_end_) return;
  in_block_.release();
  in_large_.reset();
  in_data_ = nullptr;
  in_capacity_ = in_begin_ = in_end_ = 0;
}

net::awaitable<void> connection::start(std::unique_ptr<connection> self) {
  connection& c = *self;
  if (co_await c.run() == ended::held) self.release();  // the held stream's callbacks own it now
}

net::awaitable<connection::ended> connection::run() {
  try {
    while (!ctx_.stopping) {
      auto o = co_await serve_one();
      if (o == outcome::relay_stream) {
        // The request's frames are gone; what the stream needs lives in members. Client
        // bytes pipelined behind the request (rare) keep their buffer until it ends.
        ctx_.give_back_head(std::move(head_));
        release_in_buffer_if_empty();
        o = co_await relay_stream();
        // A document or a short stream relayed to its last chunk here, never held: the
        // daemon connection is between two exchanges (a held stream comes back through
        // resume() and leaves it not reusable).
        if (o == outcome::keep_alive && req_.upstream_poolable && upstream_)
          upstream_reusable_ = true;
      }
      if (o == outcome::held) co_return ended::held;
      if (o == outcome::close) break;
    }
  } catch (const std::exception& e) {
    upstream_reusable_ = false;  // whatever was under way on it did not end
    ctx_.log->error("client {}: connection failed: {}", client_id_, e.what());
  }
  co_await close_gracefully();
  co_return ended::closed;
}

net::awaitable<void> connection::close_gracefully() {
  release_upstream();  // first: the next client may be waiting for a daemon connection
  response_.release();
  // Lingering close: stop sending, then drain what the client still sends for a moment,
  // so that a refusal is not destroyed by a reset while the client is still writing. A
  // client that ended its side with nothing unread (the docker CLI after its answer)
  // sends nothing more: it is closed at once, without the shutdown, read and pass
  // through the event loop.
  beast::error_code ec;
  if (!client_done_) client_.shutdown(net::socket_base::shutdown_send, ec);
  if (!ec && !client_done_) {
    set_deadline(linger_timeout);
    in_begin_ = in_end_ = 0;
    for (int i = 0; i < 64; ++i) {
      auto [rec, n] =
          co_await client_.async_read_some(net::buffer(in_buffer(), in_capacity_), use_tuple);
      if (rec) break;
    }
  }
  clear_deadline();
  client_.close(ec);
  if (upstream_) upstream_->close(ec);
}

// The request path, one stage after the other (the steps of connection.hpp).
net::awaitable<connection::outcome> connection::serve_one() {
  std::size_t head_size = 0;
  if (!co_await read_head(head_size)) co_return outcome::close;  // step 1
  auto verdict = admit_request(head_size);                       // steps 2 and 3
  if (const auto* d = std::get_if<policy::deny>(&verdict)) {
    co_await refuse(d->status, d->rule, d->reason);
    co_return outcome::close;
  }
  if (std::holds_alternative<unsupported_version>(verdict)) {
    co_await refuse_version();
    co_return outcome::close;
  }
  const auto& [r, shape] = std::get<admitted>(verdict);
  // Step 4, and for a GET /events the profile's other clients hold already, step 8 with
  // no daemon connection: their daemon stream is shared (shared_events.cpp).
  bool target_ready = false;
  if (shares_events(r, shape)) {
    req_.events_shareable = true;
    target_ready = prepare_target_now(r);
    if (target_ready && join_shared_events(head_size)) co_return outcome::held;
  }
  upstream_reusable_ = false;  // until this request's answer has come back whole
  if (!upstream_ready() && !co_await connect_upstream()) {
    co_await refuse(502, "upstream", "dockgate: cannot reach the Docker daemon");
    co_return outcome::close;
  }
  if (!target_ready && !prepare_target_now(r) && !co_await prepare_target(r))
    co_return outcome::close;

  // From here the head's bytes may move (the body is read into the same buffer): the head
  // is serialised first, and only values of head_ are used afterwards.
  req_.audit.dropped = dropped();
  serialize_request_head(shape.upgrade);
  consume(head_size);
  req_.body_remaining = head_->content_length.value_or(0);
  if (shape.body != policy::request_body::none &&
      !co_await read_request_body(r, shape.body))  // step 5
    co_return outcome::close;
  if (!co_await forward_request(shape.body)) co_return outcome::close;  // step 6
  co_return co_await relay_response(shape.hijack);                      // step 7
}

net::awaitable<bool> connection::connect_upstream(bool fresh) {
  if (upstream_ && upstream_->is_open()) co_return true;
  if (!fresh && ctx_.idle_upstreams.take(upstream_)) {
    upstream_reused_ = true;
    co_return true;
  }
  upstream_reused_ = false;
  std::string failed;
  if (ctx_.upstream_tls) [[unlikely]] {
    failed = co_await connect_tls_upstream(ctx_, upstream_, upstream_connect_timeout);
  } else {
    upstream_.emplace(client_.get_executor());
    set_deadline(upstream_connect_timeout, true);
    auto [ec] = co_await upstream_->async_connect(ctx_.upstream, use_tuple);
    clear_deadline();
    if (ec) failed = ec.message();
  }
  if (!failed.empty()) {
    ctx_.log->error("upstream connect failed: {}", failed);
    upstream_.reset();
    // The daemon is away: when it is back it may be another version (an upgrade), so its
    // version is learned again by the next request that reaches it.
    if (ctx_.process.daemon.forget())
      ctx_.log->warn("the daemon is unreachable: its API version will be learned again");
    ctx_.daemon.api_version.reset();
    co_return false;
  }
  set_no_delay(*upstream_);
  co_return true;
}

// Go's http.Transport does the same for a request on a reused connection that gets no
// byte back: only an idempotent request, and only once. A POST, PUT or DELETE the daemon
// may have read before it closed is never sent twice; its client gets the 502.
net::awaitable<bool> connection::resend_on_fresh_upstream() {
  if (!upstream_reused_ || !req_.resendable) co_return false;
  req_.resendable = false;
  upstream_.reset();
  if (!co_await connect_upstream(true)) co_return false;
  ctx_.log->debug("client {}: a reused daemon connection had closed; {} sent again", client_id_,
                  req_.path);
  not_readable_yet(*upstream_);
  auto [ec, n] = co_await write_all(*upstream_, net::buffer(out_));
  if (ec) upstream_.reset();
  co_return !ec;
}

void connection::release_upstream() {
  if (upstream_reusable_ && upstream_ && !ctx_.stopping)
    ctx_.idle_upstreams.give_back(upstream_, std::chrono::steady_clock::now());
  upstream_reusable_ = false;
}

net::awaitable<void> connection::refuse(unsigned status, std::string_view rule,
                                        std::string_view message) {
  // A refusal before the decision is a deny; after an allow (upstream trouble) the verdict
  // stays "allow" and the rule names what failed. The connection closes after it, and its
  // daemon connection is not given to another.
  upstream_reusable_ = false;
  if (req_.audit.verdict.empty()) req_.audit.verdict = "deny";
  req_.audit.rule = rule;
  req_.audit.reason = message;
  const std::string body = common::docker_error_body(message);
  out_.clear();
  out_ += "HTTP/1.1 ";
  out_ += std::to_string(status);
  out_ += ' ';
  out_ += beast_http::obsolete_reason(beast_http::int_to_status(status));
  out_ += "\r\nContent-Type: application/json\r\nContent-Length: ";
  out_ += std::to_string(body.size());
  out_ += "\r\n";
  append_request_id_header(out_);
  out_ += "Connection: close\r\n\r\n";
  if (!(req_.audit.method == "HEAD")) out_ += body;
  set_deadline(refusal_write_timeout);
  co_await write_all(client_, net::buffer(out_));
  finish_audit(status);
}

void connection::append_request_id_header(std::string& out) const {
  out += "Dockgate-Request-Id: ";
  out += request_id();
  out += "\r\n";
}

audit_record connection::audit_line() const {
  audit_record line;
  line.time = req_.audit.time;
  line.request_id = request_id();
  line.client = client_json_;
  line.profile = profile_->name;
  line.method = req_.audit.method;
  line.path = req_.path;
  line.operation = req_.audit.operation;
  if (!req_.object_name.empty() || !req_.object_id.empty()) {
    line.object_type = audit_object_type(req_.audit.operation);
    line.object_name = req_.object_name;
    line.object_id = req_.object_id;
    if (req_.extras) {
      line.object_image = req_.extras->object_image;
      line.exec_id = req_.extras->exec_id;
    }
    line.object_digest = audit_image_digest(!line.object_image.empty()    ? line.object_image
                                            : line.object_type == "image" ? line.object_name
                                                                          : std::string_view());
  }
  line.verdict = req_.audit.verdict;
  line.rule = req_.audit.rule;
  line.reason = req_.audit.reason;
  line.changes = req_.audit.changes;
  line.would = req_.audit.would;
  line.dropped = req_.audit.dropped;
  line.seen = req_.audit.seen;
  line.status = req_.audit.status;
  line.bytes_in = req_.audit.bytes_in;
  line.bytes_out = req_.audit.bytes_out;
  line.duration_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - req_.started)
          .count();
  line.hijacked = req_.audit.hijacked;
  return line;
}

bool connection::write_decision_line() {
  return ctx_.audit.write(audit_line());
}

void connection::finish_audit(unsigned status) {
  req_.audit.status = status;
  const audit_record line = audit_line();
  ctx_.audit.write(line);
  ctx_.stats.record(profile_ptr_ ? std::string_view(profile_->name) : std::string_view(),
                    req_.audit.operation, req_.audit.verdict == "deny", status, req_.audit.rule,
                    line.duration_ms / 1000);
  if (req_.audit.rule == "upstream") ctx_.stats.upstream_error();
}

}  // namespace dockgate::proxy

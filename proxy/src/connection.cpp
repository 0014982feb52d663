// One client connection through the gate.
//
// Invariants kept here:
// - Nothing reaches the daemon before the head has been parsed strictly, routed to one
//   operation and allowed by the profile; after any refusal the connection is closed, so
//   no request pipelined behind a refused one is ever read.
// - What goes upstream is the proxy's own serialisation: request line with the checked
//   target, the client's end-to-end headers, and framing the proxy chose. JSON bodies are
//   read whole (under a cap) before anything is forwarded, so the daemon never acts on a
//   prefix of a body that the proxy has not seen end.
// - `Upgrade` is forwarded only for ContainerAttach and ExecStart, and the connection is
//   spliced only after the daemon answered 101 (or the legacy 200 raw stream). Bytes
//   already buffered on either side are forwarded first; half-close is passed on.
// - Streams (events, logs, wait, pull progress) are relayed as they arrive, with no idle
//   timeout and no allocation per chunk. A connection that waits (for a request, or for
//   the next event) holds no I/O buffer: blocks come from the pool when data arrives.
// - A response whose end is already in hand is relayed with one gathered write; a
//   hijacked stream moves through a pipe with splice(2), never through user space.
#include "connection.hpp"
#include "socket_io.hpp"

#include "bind_check.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/status.hpp>
#include <cerrno>
#include <cstring>
#include <span>

#include "dockgate/common/error_body.hpp"
#include "dockgate/policy/ownership.hpp"
#include "dockgate/policy/query.hpp"
#include "dockgate/policy/request_shape.hpp"
#include "dockgate/policy/responses.hpp"
#include "dockgate/http/chunked.hpp"


namespace dockgate::proxy {

namespace beast_http = beast::http;
using namespace net::experimental::awaitable_operators;

namespace {

constexpr auto upstream_connect_timeout = std::chrono::seconds(10);
constexpr auto refusal_write_timeout = std::chrono::seconds(5);
constexpr auto linger_timeout = std::chrono::seconds(2);

void set_no_delay(protocol::socket& s) {
  beast::error_code ignored;  // fails on unix sockets, which is fine
  s.set_option(net::ip::tcp::no_delay(true), ignored);
}

bool is_raw_stream(const http::response_head& res) {
  return res.content_type == "application/vnd.docker.raw-stream" ||
         res.content_type == "application/vnd.docker.multiplexed-stream";
}

std::string_view path_of(std::string_view target) { return target.substr(0, target.find('?')); }

constexpr std::string_view last_chunk = "0\r\n\r\n";

// One chunk of a chunked body in the proxy's own framing, written with one gather write
// and no allocation (Beast's chunked serializer allocates a shared_ptr per chunk).
net::awaitable<beast::error_code> write_chunk(protocol::socket& s, std::string_view data) {
  char size_line[24];
  const int len = std::snprintf(size_line, sizeof size_line, "%zx\r\n", data.size());
  const std::array<net::const_buffer, 3> chunk{net::buffer(size_line, static_cast<std::size_t>(len)),
                                               net::buffer(data.data(), data.size()),
                                               net::buffer("\r\n", 2)};
  auto [ec, n] = co_await write_all(s, chunk);
  co_return ec;
}

}  // namespace

connection::connection(proxy_context& ctx, protocol::socket socket, std::string client,
                       const policy::client_identity& identity)
    : ctx_(ctx),
      client_(std::move(socket)),
      client_id_(std::move(client)),
      identity_(identity),
      policy_(ctx.policy),
      profile_ptr_(policy_->select(identity_)),
      profile_(profile_ptr_ ? profile_ptr_ : &no_profile()),
      in_block_(ctx.buffers),
      response_(ctx.buffers) {
  set_no_delay(client_);
  ctx_.connections.insert(this);
  ctx_.stats.connection(+1);
}

connection::~connection() {
  ctx_.give_back_head(std::move(head_));
  ctx_.connections.erase(this);
  ctx_.stats.connection(-1);
}

void connection::shutdown() {
  if (idle_) client_.cancel();
}

void connection::abort() {
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
  static const policy::profile none{"(none)", "clients no rule matches", policy::profile::mode_kind::enforce, {}, {}};
  return none;
}

bool connection::enforce(const policy::deny& d) {
  // Audit mode lets policy refusals (403, and 404 for ownership) through and records
  // them; malformed or ambiguous requests (other 4xx) are refused in every mode.
  if (profile_->mode != policy::profile::mode_kind::audit || (d.status != 403 && d.status != 404)) return true;
  if (!would_.empty()) would_ += "; ";
  would_ += d.reason;
  audit_.would = would_;
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
      }
      if (o == outcome::held) co_return ended::held;
      if (o == outcome::close) break;
    }
  } catch (const std::exception& e) {
    ctx_.log->error("client {}: connection failed: {}", client_id_, e.what());
  }
  co_await close_gracefully();
  co_return ended::closed;
}

net::awaitable<void> connection::close_gracefully() {
  response_.release();
  // Lingering close: stop sending, then drain what the client still sends for a moment,
  // so that a refusal is not destroyed by a reset while the client is still writing.
  beast::error_code ec;
  client_.shutdown(net::socket_base::shutdown_send, ec);
  if (!ec) {
    set_deadline(linger_timeout);
    in_begin_ = in_end_ = 0;
    for (int i = 0; i < 64; ++i) {
      auto [rec, n] = co_await client_.async_read_some(net::buffer(in_buffer(), in_capacity_), use_tuple);
      if (rec) break;
    }
  }
  clear_deadline();
  client_.close(ec);
  if (upstream_) upstream_->close(ec);
}

net::awaitable<bool> connection::read_head(std::size_t& head_size) {
  set_deadline(ctx_.options.head_timeout);
  head_size = 0;
  for (;;) {
    std::string_view have = buffered();
    if (std::size_t end = http::find_head_end(have.substr(0, http::max_head_bytes + 4)); end != 0) {
      head_size = end;
      co_return true;
    }
    if (have.size() > http::max_head_bytes) co_return true;  // head_size 0: too large
    idle_ = have.empty();
    if (idle_ && ctx_.stopping) co_return false;
    if (idle_) {
      // Waiting for the next request: no buffer and no parsed head held meanwhile.
      release_in_buffer_if_empty();
      ctx_.give_back_head(std::move(head_));
      auto [wec] = co_await client_.async_wait(net::socket_base::wait_read, use_tuple);
      if (wec) co_return false;
    }
    in_buffer();
    compact();
    if (in_end_ == in_capacity_ && !grow_in_buffer()) co_return true;  // too large
    const net::mutable_buffer room(in_data_ + in_end_, in_capacity_ - in_end_);
    auto [ec, n] = idle_ ? co_await read_now(client_, room) : co_await client_.async_read_some(room, use_tuple);
    idle_ = false;
    in_end_ += n;
    if (ec) co_return false;  // EOF, reset, timeout or shutdown: nothing to answer
  }
}

net::awaitable<void> connection::refuse(unsigned status, std::string_view rule,
                                         std::string_view message) {
  // A refusal before the decision is a deny; after an allow (upstream trouble) the verdict
  // stays "allow" and the rule names what failed.
  if (audit_.verdict.empty()) audit_.verdict = "deny";
  audit_.rule = rule;
  audit_.reason = message;
  const std::string body = common::docker_error_body(message);
  out_.clear();
  out_ += "HTTP/1.1 ";
  out_ += std::to_string(status);
  out_ += ' ';
  out_ += beast_http::obsolete_reason(beast_http::int_to_status(status));
  out_ += "\r\nContent-Type: application/json\r\nContent-Length: ";
  out_ += std::to_string(body.size());
  out_ += "\r\nConnection: close\r\n\r\n";
  if (!(audit_.method == "HEAD")) out_ += body;
  set_deadline(refusal_write_timeout);
  co_await write_all(client_, net::buffer(out_));
  finish_audit(status);
}

void connection::finish_audit(unsigned status) {
  audit_.status = status;
  audit_.duration_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started_).count();
  ctx_.audit.write(audit_);
  ctx_.stats.record(profile_ptr_ ? std::string_view(profile_->name) : std::string_view(), audit_.operation,
                    audit_.verdict == "deny", status, audit_.rule, audit_.duration_ms / 1000);
  if (audit_.rule == "upstream") ctx_.stats.upstream_error();
}

net::awaitable<connection::outcome> connection::serve_one() {
  std::size_t head_size = 0;
  if (!co_await read_head(head_size)) co_return outcome::close;
  if (!head_) head_ = ctx_.take_head();
  // A reloaded policy (SIGHUP) applies from the next request on; a request in flight, a
  // stream or a hijacked session keeps the policy it started with (policy_ holds it).
  if (policy_ != ctx_.policy) {
    policy_ = ctx_.policy;
    profile_ptr_ = policy_->select(identity_);
    profile_ = profile_ptr_ ? profile_ptr_ : &no_profile();
  }
  started_ = std::chrono::steady_clock::now();
  audit_ = audit_record{};
  upstream_ended_ = false;
  audit_.client = client_id_;
  audit_.profile = profile_->name;
  would_.clear();

  if (head_size == 0) {
    co_await refuse(431, "framing", "dockgate: request head too large");
    co_return outcome::close;
  }
  if (auto err = http::parse_request_head(buffered().substr(0, head_size), *head_)) {
    std::string message = "dockgate: ";
    message += http::head_error_text(*err);
    co_await refuse(400, "framing", message);
    co_return outcome::close;
  }
  audit_.method = http::method_name(head_->method);
  path_.assign(path_of(head_->target));  // the head's bytes move once the body is read
  audit_.path = path_;

  auto routed = policy::route_request(head_->method, head_->target);
  if (auto* err = std::get_if<policy::route_error>(&routed); err && *err == policy::route_error::unsupported_version) {
    // Answered in the daemon's words, naming its version when it is too new.
    const std::string_view segment = policy::version_segment(path_);
    if (policy::version_too_new(segment) && !ctx_.api_version && co_await connect_upstream()) co_await learn_api_version();
    const auto d = policy::version_refusal(segment, known_daemon_version());
    co_await refuse(d.status, d.rule, d.reason);
    co_return outcome::close;
  }
  if (auto* err = std::get_if<policy::route_error>(&routed)) {
    std::string message = "dockgate: ";
    message += policy::route_error_text(*err);
    message += ": ";
    message += audit_.method;
    message += ' ';
    message += audit_.path;
    co_await refuse(policy::route_error_status(*err), "route", message);
    co_return outcome::close;
  }
  const auto& r = std::get<policy::route>(routed);
  audit_.operation = policy::operation_name(r.op);

  if (!profile_ptr_) {
    co_await refuse(403, "client", "dockgate: no profile for client " + client_id_);
    co_return outcome::close;
  }
  auto decision = policy::decide(*profile_, r);
  if (auto* d = std::get_if<policy::deny>(&decision); d && enforce(*d)) {
    co_await refuse(d->status, d->rule, d->reason);
    co_return outcome::close;
  }
  // The query that goes upstream is the gate's: what the daemon ignores is left out.
  dropped_.clear();
  auto reviewed_query = policy::review_query(*profile_, r);
  if (auto* d = std::get_if<policy::deny>(&reviewed_query)) {
    if (enforce(*d)) {
      co_await refuse(d->status, d->rule, d->reason);
      co_return outcome::close;
    }
    query_.assign(r.query);  // audit mode: forwarded as sent
  } else {
    auto& q = std::get<policy::query_review>(reviewed_query);
    query_ = std::move(q.query);
    for (const auto& name : q.dropped) dropped_ += (dropped_.empty() ? "query:" : ",query:") + name;
  }

  // Hijack, endless stream, what becomes of the body, or a refusal (request_shape.hpp).
  const auto shaped = policy::shape_request(r.op, policy::facts_of(*head_));
  if (const auto* refused = std::get_if<policy::shape_refusal>(&shaped)) {
    co_await refuse(refused->status, refused->rule, refused->reason);
    co_return outcome::close;
  }
  const auto shape = std::get<policy::request_shape>(shaped);
  endless_stream_ = shape.endless_stream;
  const bool drop_body = shape.body == policy::request_body::dropped;
  if (drop_body) dropped_ += dropped_.empty() ? "body" : ",body";
  audit_.verdict = "allow";

  if (!co_await connect_upstream()) {
    co_await refuse(502, "upstream", "dockgate: cannot reach the Docker daemon");
    co_return outcome::close;
  }
  if (!co_await prepare_target(r)) co_return outcome::close;

  // From here the head's bytes may move (the body is read into the same buffer): the head
  // is serialised first, and only values of head_ are used afterwards.
  const bool json_body = shape.body == policy::request_body::json;
  if (!dropped_.empty()) audit_.dropped = dropped_;
  serialize_request_head(shape.upgrade);
  consume(head_size);
  body_decoder_ = http::chunked_decoder{};
  body_remaining_ = head_->content_length.value_or(0);
  if (head_->expect_continue && head_->has_body()) {
    static constexpr std::string_view continue_100 = "HTTP/1.1 100 Continue\r\n\r\n";
    auto [ec, n] = co_await write_all(client_, net::buffer(continue_100));
    if (ec) co_return outcome::close;
  }
  if (drop_body) {
    if (!co_await read_json_body(ignored_body_limit)) co_return outcome::close;
    audit_.bytes_in = json_body_.size();
    json_body_.clear();
  }
  if (json_body) {
    if (!co_await read_json_body(policy::json_body_limit(r.op))) co_return outcome::close;
    auto reviewed = policy::review_body(*profile_, r.op, json_body_, {version_, ctx_.daemon_cgroup_v1});
    if (auto* d = std::get_if<policy::deny>(&reviewed); d && enforce(*d)) {
      audit_.verdict = "deny";
      co_await refuse(d->status, d->rule, d->reason);
      co_return outcome::close;
    }
    auto* rw = std::get_if<policy::rewrite>(&reviewed);
    if (rw && profile_->mode == policy::profile::mode_kind::audit) {
      // Audit mode: the client's body goes up as sent; what would change is recorded.
      if (!rw->changes.empty()) {
        if (!would_.empty()) would_ += "; ";
        would_ += "change";
        for (const auto& c : rw->changes) would_ += " " + c;
        audit_.would = would_;
      }
      rw = nullptr;
    }
    if (rw) {
      // Every host path the body binds is checked on the host before the daemon sees it.
      std::vector<std::pair<std::string_view, bind_check_options>> sources;
      if (profile_->rules.binds)
        for (const auto& source : rw->bind_sources) sources.emplace_back(source, bind_check_options{profile_->rules.binds->require_fuse, false});
      if (!rw->workspace_source.empty())
        sources.emplace_back(rw->workspace_source, bind_check_options{profile_->rules.workspace->require_fuse, true});
      for (const auto& [source, options] : sources) {
        auto problem = check_bind_source(source, options);
        if (!problem) continue;
        const policy::deny d{403, "binds", "dockgate: bind source " + *problem + " (profile " + profile_->name + ")"};
        if (!enforce(d)) continue;
        audit_.verdict = "deny";
        co_await refuse(d.status, d.rule, d.reason);
        co_return outcome::close;
      }
    }
    if (rw) {
      if (auto d = co_await check_named_objects(r, *rw); d && enforce(*d)) {
        audit_.verdict = "deny";
        co_await refuse(d->status, d->rule, d->reason);
        co_return outcome::close;
      }
    }
    if (rw) {
      // What goes upstream is the proxy's serialisation of what it checked.
      for (const auto& key : rw->dropped) dropped_ += (dropped_.empty() ? "body:" : ",body:") + key;
      if (!dropped_.empty()) audit_.dropped = dropped_;
      // The client hears what the profile changed, in the answer's Warnings (the docker
      // CLI and the SDKs print them).
      if (r.op == policy::operation::ContainerCreate) {
        warnings_ = std::move(rw->warnings);
        if (!warnings_.empty()) filter_ = response_filter::create_warnings;
      }
      json_body_ = std::move(rw->body);
      changes_.clear();
      for (const auto& c : rw->changes) {
        if (!changes_.empty()) changes_ += ',';
        changes_ += c;
      }
      audit_.changes = changes_;
    }
  }

  // Framing of the forwarded request: the proxy's own.
  if (json_body) {
    out_ += "Content-Length: ";
    out_ += std::to_string(json_body_.size());
    out_ += "\r\n";
  } else if (drop_body) {
    // no body upstream
  } else if (head_->chunked) {
    out_ += "Transfer-Encoding: chunked\r\n";
  } else if (head_->content_length) {
    out_ += "Content-Length: ";
    out_ += std::to_string(*head_->content_length);
    out_ += "\r\n";
  }
  out_ += "\r\n";

  if (!co_await connect_upstream()) {
    co_await refuse(502, "upstream", "dockgate: cannot reach the Docker daemon");
    co_return outcome::close;
  }
  clear_deadline();
  const std::array<net::const_buffer, 2> request{
      net::buffer(out_), net::buffer(json_body_.data(), json_body ? json_body_.size() : 0)};
  auto [ec, n] = co_await write_all(*upstream_, request);
  if (ec) {
    upstream_.reset();
    co_await refuse(502, "upstream", "dockgate: lost the connection to the Docker daemon");
    co_return outcome::close;
  }
  if (json_body) audit_.bytes_in = json_body_.size();
  else if (shape.body == policy::request_body::stream && !co_await forward_body()) co_return outcome::close;
  co_return co_await relay_response(shape.hijack);
}

net::awaitable<bool> connection::connect_upstream() {
  if (upstream_ && upstream_->is_open()) co_return true;
  upstream_.emplace(client_.get_executor());
  upstream_buffer_.clear();
  set_deadline(upstream_connect_timeout, true);
  auto [ec] = co_await upstream_->async_connect(ctx_.upstream, use_tuple);
  clear_deadline();
  if (ec) {
    ctx_.log->error("upstream connect failed: {}", ec.message());
    upstream_.reset();
    // The daemon is away: when it is back it may be another version (an upgrade), so its
    // version is learned again by the next request that reaches it.
    if (ctx_.api_version) ctx_.log->warn("the daemon is unreachable: its API version will be learned again");
    ctx_.api_version.reset();
    co_return false;
  }
  set_no_delay(*upstream_);
  co_return true;
}

// Request line and the client's end-to-end headers into out_; the caller adds framing.
void connection::serialize_request_head(bool upgrade) {
  out_.clear();
  out_ += http::method_name(head_->method);
  out_ += ' ';
  out_ += target_;
  out_ += " HTTP/1.1\r\n";
  bool has_host = false;
  for (std::size_t i = 0; i < head_->field_count; ++i) {
    const auto& f = head_->fields[i];
    if (http::is_hop_by_hop(f.name, head_->connection)) continue;
    has_host = has_host || http::iequals(f.name, "host");
    out_ += f.name;
    out_ += ": ";
    out_ += f.value;
    out_ += "\r\n";
  }
  if (!has_host) out_ += "Host: docker\r\n";  // HTTP/1.0 clients may omit it; Go requires it
  if (upgrade) out_ += "Connection: Upgrade\r\nUpgrade: tcp\r\n";
}

net::awaitable<bool> connection::read_client_more() {
  in_buffer();
  compact();
  if (in_end_ == in_capacity_) co_return false;
  set_deadline(ctx_.options.body_timeout);
  auto [ec, n] = co_await client_.async_read_some(net::buffer(in_data_ + in_end_, in_capacity_ - in_end_), use_tuple);
  in_end_ += n;
  co_return n > 0;
}

// The next piece of the request body, whatever its framing: Content-Length bytes, or the
// data of the next chunk. The view stays valid until the next call. One place decodes
// request-body framing, for bodies read whole and bodies streamed alike.
net::awaitable<std::pair<connection::body_piece, std::string_view>> connection::next_body_piece() {
  for (;;) {
    if (head_->chunked) {
      auto res = body_decoder_.feed(buffered());
      consume(res.consumed);  // the bytes stay in place until read_client_more compacts
      switch (res.state) {
        case http::chunked_decoder::status::data: co_return std::pair{body_piece::data, res.data};
        case http::chunked_decoder::status::done: co_return std::pair{body_piece::done, std::string_view{}};
        case http::chunked_decoder::status::error: co_return std::pair{body_piece::malformed, std::string_view{}};
        case http::chunked_decoder::status::need_more: break;
      }
    } else {
      if (body_remaining_ == 0) co_return std::pair{body_piece::done, std::string_view{}};
      if (!buffered().empty()) {
        const auto take = static_cast<std::size_t>(std::min<std::uint64_t>(body_remaining_, buffered().size()));
        const std::string_view data = buffered().substr(0, take);
        consume(take);
        body_remaining_ -= take;
        co_return std::pair{body_piece::data, data};
      }
    }
    if (!co_await read_client_more()) co_return std::pair{body_piece::closed, std::string_view{}};
  }
}

// Reads a JSON body whole (de-chunked) into json_body_, under `limit`. Nothing has been
// sent upstream yet: a client that stops mid-body gets nothing forwarded.
net::awaitable<bool> connection::read_json_body(std::size_t limit) {
  json_body_.clear();
  if (head_->content_length.value_or(0) > limit) {
    co_await refuse(413, "body", "dockgate: request body too large");
    co_return false;
  }
  for (;;) {
    auto [status, data] = co_await next_body_piece();
    switch (status) {
      case body_piece::data:
        if (json_body_.size() + data.size() > limit) {
          co_await refuse(413, "body", "dockgate: request body too large");
          co_return false;
        }
        json_body_ += data;
        break;
      case body_piece::done: co_return true;
      case body_piece::malformed:
        co_await refuse(400, "framing", "dockgate: malformed chunked body");
        co_return false;
      case body_piece::closed: co_return false;
    }
  }
}

// Streams a byte-stream body upstream as it arrives, in the proxy's own framing.
net::awaitable<bool> connection::forward_body() {
  for (;;) {
    auto [status, data] = co_await next_body_piece();
    beast::error_code ec;
    if (status == body_piece::data) {
      if (head_->chunked) {
        ec = co_await write_chunk(*upstream_, data);
      } else {
        ec = std::get<0>(co_await write_all(*upstream_, net::buffer(data.data(), data.size())));
      }
      audit_.bytes_in += data.size();
      if (!ec) continue;
    } else if (status == body_piece::done) {
      if (head_->chunked) ec = std::get<0>(co_await write_all(*upstream_, net::buffer(last_chunk)));
      if (!ec) co_return true;
    }
    // The daemon saw a partial request: that upstream connection is unusable.
    upstream_.reset();
    co_await refuse(400, "framing", "dockgate: malformed or truncated request body");
    co_return false;
  }
}

net::awaitable<connection::outcome> connection::relay_response(bool hijack_allowed) {
  // The head (and whatever of the body came with it) in one read into a pooled block. The
  // wait is unbounded: wait, logs and pull answer when they answer.
  clear_deadline();
  char* buf = response_.get();
  response_begin_ = response_end_ = 0;
  std::size_t head_size = 0;
  while (head_size == 0) {
    auto [ec, n] = co_await upstream_->async_read_some(net::buffer(buf + response_end_, response_.size() - response_end_), use_tuple);
    response_end_ += n;
    head_size = http::find_head_end({buf, response_end_});
    if (head_size == 0 && (ec || response_end_ == response_.size())) {
      upstream_.reset();
      co_await refuse(502, "upstream", ec ? "dockgate: no response from the Docker daemon"
                                          : "dockgate: the Docker daemon's response head is too large");
      co_return outcome::close;
    }
  }
  http::response_head res;
  if (!http::parse_response_head({buf, head_size}, res) || (res.status < 200 && res.status != 101)) {
    upstream_.reset();
    co_await refuse(502, "upstream", "dockgate: malformed response from the Docker daemon");
    co_return outcome::close;
  }
  response_begin_ = head_size;
  const unsigned status = res.status;
  const bool head_request = head_->method == http::method::head;

  if (hijack_allowed && (status == 101 || (status == 200 && !res.content_length && !res.chunked && is_raw_stream(res)))) {
    write_response_head(res, response_framing::raw, false);
    auto [wec, wn] = co_await write_all(client_, net::buffer(out_));
    audit_.hijacked = true;
    if (!wec) {
      ctx_.stats.hijack(+1);
      co_await splice({buf + response_begin_, response_end_ - response_begin_});
      ctx_.stats.hijack(-1);
    }
    response_.release();
    finish_audit(status);
    co_return outcome::close;
  }

  // How the body goes to the client. The proxy writes its own framing: the daemon's
  // connection headers belong to the daemon's hop.
  response_framing framing = response_framing::none;
  if (res.has_body(head_request)) {
    if (res.content_length) framing = *res.content_length ? response_framing::length : response_framing::none;
    else if (res.chunked && head_->version_minor == 1) framing = response_framing::chunked;
    else framing = response_framing::raw;  // until the daemon closes (or HTTP/1.0 client)
  }
  upstream_keeps_ = res.keep_alive;
  const bool whole_list = filter_ == response_filter::container_list || filter_ == response_filter::networks ||
                          filter_ == response_filter::volume_list || filter_ == response_filter::data_usage;
  if (((whole_list && status == 200) || (filter_ == response_filter::create_warnings && status == 201)) &&
      framing != response_framing::none) {
    // A container list is filtered whole: only the profile's own containers go back. A
    // create answer gains the warnings of what the profile changed.
    const bool keep = head_->keep_alive && !ctx_.stopping;
    const bool whole = co_await read_whole_body(res, 64 * 1024 * 1024);
    if (whole) co_await relay_filtered_list(res, keep);
    response_.release();
    if (json_body_.capacity() > 1024 * 1024) json_body_.shrink_to_fit();
    finish_audit(status);
    if (!whole || !upstream_keeps_) upstream_.reset();
    co_return keep && whole ? outcome::keep_alive : outcome::close;
  }
  const bool keep = head_->keep_alive && framing != response_framing::raw && !ctx_.stopping;
  write_response_head(res, framing, keep);
  response_status_ = status;
  response_keep_alive_ = keep;
  client_gone_ = relay_failed_ = false;

  if (framing == response_framing::none || framing == response_framing::length) {
    // A sized response: the head goes out with the body bytes in hand, in one write.
    std::uint64_t remaining = framing == response_framing::length ? *res.content_length : 0;
    std::string_view head = out_;
    const char* data = buf + response_begin_;
    std::size_t got = static_cast<std::size_t>(std::min<std::uint64_t>(remaining, response_end_ - response_begin_));
    for (;;) {
      const std::array<net::const_buffer, 2> pieces{net::buffer(head.data(), head.size()), net::buffer(data, got)};
      auto [wec, wn] = co_await write_all(client_, pieces);
      audit_.bytes_out += got;
      remaining -= got;
      head = {};
      if (wec) relay_failed_ = true;
      if (wec || remaining == 0) break;
      auto [rec, rn] = co_await upstream_->async_read_some(
          net::buffer(buf, static_cast<std::size_t>(std::min<std::uint64_t>(remaining, response_.size()))), use_tuple);
      if (rec) {
        relay_failed_ = true;
        break;
      }
      data = buf;
      got = rn;
    }
    response_.release();
    finish_audit(status);
    if (relay_failed_ || !upstream_keeps_) upstream_.reset();
    if (relay_failed_) co_return outcome::close;
    co_return keep ? outcome::keep_alive : outcome::close;
  }
  // Chunked or until close: relay_stream, from run().
  framing_ = framing;
  response_chunked_in_ = res.chunked;
  response_head_pending_ = true;
  stream_ended_ = upstream_ended_ = false;
  response_decoder_ = http::chunked_decoder{};
  event_line_.clear();
  co_return outcome::relay_stream;
}

net::awaitable<connection::outcome> connection::relay_stream() {
  // What came with the head first: a body already whole (an inspect answer, which the
  // daemon chunks) goes out with the head in one write and never waits.
  co_await relay_buffered_stream();
  if (stream_ended_ || relay_failed_) co_return co_await end_stream();
  // A stream that goes on (events, logs, wait): no coroutine waits for it. Two plain
  // callbacks do, on the daemon's side and on the client's, and the connection object is
  // all a held stream costs; bytes from the daemon start a short coroutine that relays
  // them and goes back to waiting (wait_upstream, relay_available).
  ctx_.stats.stream(+1);
  stream_waiting_ = true;
  // What only built the request that has gone (its head, target and query: the events
  // filter a profile adds makes them ~120 bytes each) is not kept for the stream's life.
  if (!response_head_pending_) std::string().swap(out_);
  std::string().swap(target_);
  std::string().swap(query_);
  response_.release();
  watch_client();
  wait_upstream();
  co_return outcome::held;
}

// The daemon's side of a held stream: readable (relay what it has), or failed.
void connection::wait_upstream() {
  upstream_active_ = true;
  upstream_->async_wait(net::socket_base::wait_read, [this](beast::error_code ec) {
    if (!ec && !client_gone_) {
      net::co_spawn(client_.get_executor(), relay_available(), net::detached);
      return;
    }
    upstream_failed(ec);
  });
}

void connection::upstream_failed(beast::error_code ec) {
  if (ec == net::error::eof && !response_chunked_in_) {
    stream_ended_ = true;  // a body framed by the daemon's close has ended
  } else if (!stream_ended_) {
    upstream_ended_ = ec && ec != net::error::operation_aborted;  // the daemon's side, not ours
    relay_failed_ = true;
  }
  upstream_done();
}

// What the daemon has now, relayed as it comes (one recv(2) per read, never waiting);
// when it has nothing more, back to waiting in a callback with no block held.
net::awaitable<void> connection::relay_available() {
  try {
    while (!relay_failed_ && !stream_ended_ && !client_gone_) {
      const ssize_t n = ::recv(upstream_->native_handle(), response_.get(), response_.size(), MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        response_.release();
        wait_upstream();
        co_return;
      }
      if (n <= 0) {
        response_.release();
        upstream_failed(n == 0 ? beast::error_code(net::error::eof)
                               : beast::error_code(errno, boost::system::system_category()));
        co_return;
      }
      response_begin_ = 0;
      response_end_ = static_cast<std::size_t>(n);
      co_await relay_buffered_stream();
    }
  } catch (const std::exception& e) {
    ctx_.log->error("client {}: stream failed: {}", client_id_, e.what());
    relay_failed_ = true;
  }
  response_.release();
  upstream_done();
}

// The daemon's side is over (ended, failed, or cancelled because the client went): the
// client's watch is cancelled, and once neither callback is pending the stream ends.
void connection::upstream_done() {
  upstream_active_ = false;
  stream_waiting_ = false;
  if (watch_pending_) {
    beast::error_code ignored;
    client_.cancel(ignored);  // its handler calls stream_over()
    return;
  }
  stream_over();
}

// Neither callback pending: a coroutine takes the connection back (it owns it again), ends
// the stream and serves the next request or closes.
void connection::stream_over() {
  if (upstream_active_ || watch_pending_) return;
  net::co_spawn(client_.get_executor(), resume(std::unique_ptr<connection>(this)), net::detached);
}

net::awaitable<void> connection::resume(std::unique_ptr<connection> self) {
  connection& c = *self;
  c.ctx_.stats.stream(-1);
  bool keep_alive = false;
  try {
    keep_alive = co_await c.end_stream() == outcome::keep_alive;
  } catch (const std::exception& ex) {
    c.ctx_.log->error("client {}: connection failed: {}", c.client_id_, ex.what());
  }
  if (keep_alive) co_await start(std::move(self));  // the next request, as any connection's
  else co_await c.close_gracefully();
}

// The end of a relayed stream, held or not: the daemon's end passed on, the audit line,
// whether the connections go on.
net::awaitable<connection::outcome> connection::end_stream() {
  // A daemon that went away mid-stream (restart, crash) ends an endless stream as the
  // daemon would have on a clean stop; the client (not gone) sees its end, not a cut.
  if (relay_failed_ && !client_gone_ && endless_stream_ && upstream_ended_ && framing_ == response_framing::chunked)
    co_await write_all(client_, net::buffer(last_chunk));
  response_.release();
  finish_audit(response_status_);
  if (relay_failed_ || client_gone_ || !upstream_keeps_ || !stream_ended_ || !response_chunked_in_) upstream_.reset();
  if (relay_failed_ || client_gone_ || !stream_ended_) co_return outcome::close;
  co_return response_keep_alive_ ? outcome::keep_alive : outcome::close;
}

// Relays what the response block holds, and the head if it has not gone yet, in one
// gathered write: every complete chunk in the block becomes one chunk of the proxy's.
net::awaitable<void> connection::relay_buffered_stream() {
  std::string_view in(response_.get() + response_begin_, response_end_ - response_begin_);
  response_begin_ = response_end_ = 0;
  const bool chunked_out = framing_ == response_framing::chunked;
  constexpr std::size_t max_pieces = 32;
  std::array<net::const_buffer, max_pieces + 5> out;
  std::array<std::string_view, max_pieces> pieces;
  while (!relay_failed_ && (!in.empty() || response_head_pending_)) {
    std::size_t count = 0;
    while (!in.empty() && count < max_pieces && !stream_ended_) {
      if (!response_chunked_in_) {  // until close: the bytes as they are
        pieces[count++] = in;
        in = {};
        break;
      }
      auto r = response_decoder_.feed(in);
      in.remove_prefix(r.consumed);
      if (r.state == http::chunked_decoder::status::data) pieces[count++] = r.data;
      else if (r.state == http::chunked_decoder::status::done) stream_ended_ = true;
      else if (r.state == http::chunked_decoder::status::error) relay_failed_ = true;
      if (relay_failed_) co_return;  // the daemon's framing is broken: the client's connection ends
    }
    if (filter_ == response_filter::events && response_status_ == 200 && count > 0) {
      // Events of containers the profile does not own are dropped, line by line.
      owned_events_.clear();
      for (std::size_t i = 0; i < count; ++i) {
        event_line_.append(pieces[i]);
        std::size_t keep_upto = 0;
        for (std::size_t start = 0, nl; (nl = event_line_.find('\n', start)) != std::string::npos; start = nl + 1) {
          const std::string_view line(event_line_.data() + start, nl + 1 - start);
          if (policy::event_owned(line, profile_->rules.owner)) owned_events_.append(line);
          keep_upto = nl + 1;
        }
        event_line_.erase(0, keep_upto);
      }
      if (event_line_.size() > 1024 * 1024) {  // one event line, not a stream
        relay_failed_ = true;
        co_return;
      }
      count = owned_events_.empty() ? 0 : 1;
      pieces[0] = owned_events_;
    }
    std::size_t total = 0;
    for (std::size_t i = 0; i < count; ++i) total += pieces[i].size();
    std::size_t n = 0;
    if (response_head_pending_) out[n++] = net::buffer(out_);
    char size_line[24];
    if (total > 0) {
      if (chunked_out) {
        const int len = std::snprintf(size_line, sizeof size_line, "%zx\r\n", total);
        out[n++] = net::buffer(size_line, static_cast<std::size_t>(len));
      }
      for (std::size_t i = 0; i < count; ++i) out[n++] = net::buffer(pieces[i].data(), pieces[i].size());
      if (chunked_out) out[n++] = net::buffer("\r\n", 2);
    }
    if (stream_ended_ && chunked_out) out[n++] = net::buffer(last_chunk);
    if (n > 0) {
      response_head_pending_ = false;
      auto [wec, wn] = co_await write_all(client_, std::span(out.data(), n));
      audit_.bytes_out += total;
      if (wec) relay_failed_ = true;
    }
    if (stream_ended_) {
      if (!in.empty()) upstream_keeps_ = false;  // bytes past the end: that connection is not reused
      break;
    }
  }
}

// The client's side of a stream: readable means it went away (or pipelined a request,
// which waits in the kernel until the stream ends).
void connection::watch_client() {
  watch_pending_ = true;
  client_.async_wait(net::socket_base::wait_read, [this](beast::error_code ec) {
    watch_pending_ = false;
    if (!stream_waiting_) return stream_over();  // the stream ended first: this is the cancellation
    char c;
    const ssize_t n = ec ? -1 : ::recv(client_.native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && !ec && (errno == EAGAIN || errno == EINTR)) return watch_client();
    if (n > 0) return;  // a pipelined request: read when the stream is over
    client_gone_ = true;
    beast::error_code ignored;
    if (upstream_) upstream_->cancel(ignored);  // the daemon's side ends, then the stream
  });
}

void connection::write_response_head(const http::response_head& res, response_framing framing, bool keep_alive,
                                     std::optional<std::size_t> content_length) {
  out_.clear();
  out_ += "HTTP/1.1 ";
  char status[8];
  out_.append(status, static_cast<std::size_t>(std::snprintf(status, sizeof status, "%u", res.status)));
  out_ += ' ';
  out_ += res.reason;
  out_ += "\r\n";
  const bool hijack = framing == response_framing::raw && !keep_alive && res.status == 101;
  http::for_each_field(res.fields, [&](std::string_view name, std::string_view value) {
    if (http::iequals(name, "connection") || http::iequals(name, "upgrade")) {
      if (!hijack) return;  // only a 101 keeps Connection: Upgrade / Upgrade: tcp
    } else if (http::iequals(name, "keep-alive") || http::iequals(name, "proxy-connection") || http::iequals(name, "te") ||
               http::iequals(name, "trailer")) {
      return;
    } else if (http::iequals(name, "transfer-encoding")) {
      if (framing != response_framing::chunked) return;
    } else if (http::iequals(name, "content-length")) {
      if (content_length) return;
    }
    out_ += name;
    out_ += ": ";
    out_ += value;
    out_ += "\r\n";
  });
  if (content_length) {
    out_ += "Content-Length: ";
    out_ += std::to_string(*content_length);
    out_ += "\r\n";
  }
  if (!keep_alive && !hijack) out_ += "Connection: close\r\n";
  out_ += "\r\n";
}

net::awaitable<void> connection::splice(std::string_view response_leftover) {
  // Bytes the daemon sent right behind its 101, and bytes the client sent right behind
  // its request (stdin typed early): both belong to the stream.
  if (!response_leftover.empty()) {
    auto [ec, n] = co_await write_all(client_, net::buffer(response_leftover.data(), response_leftover.size()));
    if (ec) co_return;
    audit_.bytes_out += n;
  }
  response_.release();
  if (!buffered().empty()) {
    auto [ec, n] = co_await write_all(*upstream_, net::buffer(buffered().data(), buffered().size()));
    if (ec) co_return;
    audit_.bytes_in += n;
  }
  in_begin_ = in_end_ = 0;
  release_in_buffer_if_empty();
  clear_deadline();
  // `&&` keeps output flowing after the client has shut down its side (stdin EOF).
  co_await (splice_one_way(client_, *upstream_, audit_.bytes_in) && splice_one_way(*upstream_, client_, audit_.bytes_out));
  upstream_.reset();
}

// One direction of a hijacked stream: socket -> pipe -> socket with splice(2), the bytes
// never copied through the proxy. At EOF the half-close is passed on (shutdown(send)).
net::awaitable<void> connection::splice_one_way(protocol::socket& from, protocol::socket& to, std::uint64_t& bytes) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    co_await copy_one_way(from, to, bytes);
    co_return;
  }
  struct pipe_closer {
    int* fds;
    ~pipe_closer() {
      ::close(fds[0]);
      ::close(fds[1]);
    }
  } closer{pipe_fds};
  beast::error_code ignored;
  from.native_non_blocking(true, ignored);
  to.native_non_blocking(true, ignored);
  constexpr std::size_t pipe_capacity = 64 * 1024;
  std::size_t in_pipe = 0;
  bool eof = false, write_failed = false;
  while (!write_failed && (!eof || in_pipe > 0)) {
    if (!eof && in_pipe < pipe_capacity) {
      const ssize_t n = ::splice(from.native_handle(), nullptr, pipe_fds[1], nullptr, pipe_capacity - in_pipe,
                                 SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
      if (n > 0) {
        in_pipe += static_cast<std::size_t>(n);
      } else if (n == 0) {
        eof = true;
      } else if (errno == EINVAL && in_pipe == 0 && bytes == 0) {
        co_await copy_one_way(from, to, bytes);  // a socket that cannot splice
        co_return;
      } else if (errno != EAGAIN && errno != EINTR) {
        eof = true;  // reset: what is in the pipe still goes out
      } else if (in_pipe == 0) {
        auto [ec] = co_await from.async_wait(net::socket_base::wait_read, use_tuple);
        if (ec) eof = true;
        continue;
      }
    }
    if (in_pipe > 0) {
      const ssize_t m = ::splice(pipe_fds[0], nullptr, to.native_handle(), nullptr, in_pipe, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
      if (m > 0) {
        in_pipe -= static_cast<std::size_t>(m);
        bytes += static_cast<std::uint64_t>(m);
      } else if (m < 0 && (errno == EAGAIN || errno == EINTR)) {
        auto [ec] = co_await to.async_wait(net::socket_base::wait_write, use_tuple);
        if (ec) write_failed = true;
      } else {
        write_failed = true;
      }
    }
  }
  if (write_failed) from.shutdown(net::socket_base::shutdown_receive, ignored);
  to.shutdown(net::socket_base::shutdown_send, ignored);
}

// The same through a pooled block, where splice(2) is not available.
net::awaitable<void> connection::copy_one_way(protocol::socket& from, protocol::socket& to, std::uint64_t& bytes) {
  pooled_block block(ctx_.buffers);
  for (;;) {
    auto [ec, n] = co_await from.async_read_some(net::buffer(block.get(), block.size()), use_tuple);
    if (n > 0) {
      auto [wec, wn] = co_await net::async_write(to, net::buffer(block.get(), n), use_tuple);
      bytes += wn;
      if (wec) {
        beast::error_code ignored;
        from.shutdown(net::socket_base::shutdown_receive, ignored);
        co_return;
      }
    }
    if (ec) break;
  }
  beast::error_code ignored;
  to.shutdown(net::socket_base::shutdown_send, ignored);
}

}  // namespace dockgate::proxy

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
//   timeout, through one fixed buffer: no allocation per chunk.
#include "connection.hpp"

#include "bind_check.hpp"

#include <sys/socket.h>

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/status.hpp>
#include <boost/beast/http/write.hpp>
#include <cstring>

#include "dockgate/common/error_body.hpp"
#include "dockgate/policy/ownership.hpp"
#include "dockgate/policy/query.hpp"
#include "dockgate/policy/responses.hpp"
#include "dockgate/proxy/chunked.hpp"


namespace dockgate::proxy {

namespace http = beast::http;
using namespace net::experimental::awaitable_operators;

namespace {

constexpr auto upstream_connect_timeout = std::chrono::seconds(10);
constexpr auto refusal_write_timeout = std::chrono::seconds(5);
constexpr auto linger_timeout = std::chrono::seconds(2);

void set_no_delay(protocol::socket& s) {
  beast::error_code ignored;  // fails on unix sockets, which is fine
  s.set_option(net::ip::tcp::no_delay(true), ignored);
}

bool is_raw_stream(const http::response_header<>& res) {
  auto type = res[http::field::content_type];
  return type == "application/vnd.docker.raw-stream" ||
         type == "application/vnd.docker.multiplexed-stream";
}

std::string_view path_of(std::string_view target) { return target.substr(0, target.find('?')); }

constexpr std::string_view last_chunk = "0\r\n\r\n";

// One chunk of a chunked body in the proxy's own framing, written with one gather write
// and no allocation (Beast's chunked serializer allocates a shared_ptr per chunk).
net::awaitable<beast::error_code> write_chunk(stream& s, std::string_view data) {
  char size_line[24];
  const int len = std::snprintf(size_line, sizeof size_line, "%zx\r\n", data.size());
  const std::array<net::const_buffer, 3> chunk{net::buffer(size_line, static_cast<std::size_t>(len)),
                                               net::buffer(data.data(), data.size()),
                                               net::buffer("\r\n", 2)};
  auto [ec, n] = co_await net::async_write(s, chunk, use_tuple);
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
      in_(new char[in_capacity]),
      body_(new char[chunk_size]) {
  set_no_delay(client_.socket());
  out_.reserve(4096);
  ctx_.connections.insert(this);
  ctx_.stats.connection(+1);
}

connection::~connection() {
  ctx_.connections.erase(this);
  ctx_.stats.connection(-1);
}

void connection::shutdown() {
  if (idle_) client_.cancel();
}

void connection::abort() {
  client_.close();
  if (upstream_) upstream_->close();
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
  std::memmove(in_.get(), in_.get() + in_begin_, in_end_ - in_begin_);
  in_end_ -= in_begin_;
  in_begin_ = 0;
}

net::awaitable<void> connection::run() {
  try {
    while (!ctx_.stopping) {
      if (co_await serve_one() == outcome::close) break;
    }
  } catch (const std::exception& e) {
    ctx_.log->error("client {}: connection failed: {}", client_id_, e.what());
  }
  // Lingering close: stop sending, then drain what the client still sends for a moment,
  // so that a refusal is not destroyed by a reset while the client is still writing.
  beast::error_code ec;
  client_.socket().shutdown(net::socket_base::shutdown_send, ec);
  if (!ec) {
    client_.expires_after(linger_timeout);
    for (int i = 0; i < 64; ++i) {
      auto [rec, n] = co_await client_.async_read_some(net::buffer(in_.get(), in_capacity), use_tuple);
      if (rec) break;
    }
  }
  client_.close();
  if (upstream_) upstream_->close();
}

net::awaitable<bool> connection::read_head(std::size_t& head_size) {
  client_.expires_after(ctx_.options.head_timeout);
  head_size = 0;
  for (;;) {
    std::string_view have = buffered();
    if (std::size_t end = find_head_end(have.substr(0, max_head_bytes + 4)); end != 0) {
      head_size = end;
      co_return true;
    }
    if (have.size() > max_head_bytes) co_return true;  // head_size 0: too large
    compact();
    idle_ = in_end_ == 0;
    if (idle_ && ctx_.stopping) co_return false;
    auto [ec, n] = co_await client_.async_read_some(
        net::buffer(in_.get() + in_end_, in_capacity - in_end_), use_tuple);
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
  out_ += http::obsolete_reason(http::int_to_status(status));
  out_ += "\r\nContent-Type: application/json\r\nContent-Length: ";
  out_ += std::to_string(body.size());
  out_ += "\r\nConnection: close\r\n\r\n";
  if (!(audit_.method == "HEAD")) out_ += body;
  client_.expires_after(refusal_write_timeout);
  co_await net::async_write(client_, net::buffer(out_), use_tuple);
  finish_audit(status);
}

void connection::finish_audit(unsigned status) {
  audit_.status = status;
  audit_.duration_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started_).count();
  ctx_.audit->info(format_audit(audit_));
  ctx_.stats.record(profile_ptr_ ? std::string_view(profile_->name) : std::string_view(), audit_.operation,
                    audit_.verdict == "deny", status, audit_.rule, audit_.duration_ms / 1000);
  if (audit_.rule == "upstream") ctx_.stats.upstream_error();
}

net::awaitable<connection::outcome> connection::serve_one() {
  std::size_t head_size = 0;
  if (!co_await read_head(head_size)) co_return outcome::close;
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
  if (auto err = parse_request_head(buffered().substr(0, head_size), head_)) {
    std::string message = "dockgate: ";
    message += head_error_text(*err);
    co_await refuse(400, "framing", message);
    co_return outcome::close;
  }
  audit_.method = policy::method_name(head_.method);
  path_.assign(path_of(head_.target));  // the head's bytes move once the body is read
  audit_.path = path_;

  auto routed = policy::route_request(head_.method, head_.target);
  if (auto* err = std::get_if<policy::route_error>(&routed); err && *err == policy::route_error::unsupported_version) {
    // Answered in the daemon's words: a client reads "too new" to negotiate down.
    const std::string_view segment = std::string_view(path_).substr(2, path_.find('/', 1) - 2);
    const auto version = policy::parse_api_version(segment);
    if (version && *version > policy::max_api_version) {
      if (!ctx_.api_version && co_await connect_upstream()) co_await learn_api_version();
      co_await refuse(400, "version", "client version " + std::string(segment) + " is too new. Maximum supported API version is " +
                                          ctx_.api_version.value_or(policy::to_string(policy::max_api_version)));
    } else {
      co_await refuse(400, "version", "client version " + std::string(segment) +
                                          " is too old. Minimum supported API version is " + policy::to_string(policy::min_api_version) +
                                          " (dockgate), please upgrade your client to a newer version");
    }
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

  const bool hijack = policy::operation_hijacks(r.op);
  // Streams without a natural end: if the daemon goes away mid-stream, the client's
  // stream is ended cleanly (its last chunk) rather than cut.
  endless_stream_ = r.op == policy::operation::SystemEvents || r.op == policy::operation::ContainerLogs ||
                    r.op == policy::operation::ContainerStats || r.op == policy::operation::ContainerWait;
  const bool upgrade = head_.connection_upgrade || !head_.upgrade.empty();
  if (upgrade && !hijack) {
    co_await refuse(400, "upgrade", "dockgate: Upgrade is allowed only on ContainerAttach and ExecStart");
    co_return outcome::close;
  }
  if (upgrade && (!head_.connection_upgrade || !iequals(head_.upgrade, "tcp"))) {
    co_await refuse(400, "upgrade", "dockgate: only \"Connection: Upgrade\" with \"Upgrade: tcp\" is supported");
    co_return outcome::close;
  }
  const auto body = policy::operation_body(r.op);
  if (head_.has_body()) {
    // dockerd's ParseForm reads a form body into the same values as the query, ahead of
    // it: a form body could override what the query check saw.
    for (std::size_t i = 0; i < head_.field_count; ++i) {
      const auto& f = head_.fields[i];
      if (!iequals(f.name, "content-type")) continue;
      const std::string_view type = f.value.substr(0, f.value.find(';'));
      if (iequals(type, "application/x-www-form-urlencoded") || iequals(type, "multipart/form-data")) {
        co_await refuse(400, "body", "dockgate: form bodies are not accepted");
        co_return outcome::close;
      }
    }
  }
  // A body on an operation that takes none (clients send "{}" to stop, kill, start...):
  // read within a small limit, never forwarded. The daemon ignores it too. ImageCreate
  // passes the query review only as a pull, whose body the daemon never reads (dockerode
  // sends one); the import form, which reads it, is refused there.
  const bool drop_body =
      (body == policy::body_kind::none || r.op == policy::operation::ImageCreate) && head_.has_body();
  if (drop_body) dropped_ += dropped_.empty() ? "body" : ",body";
  audit_.verdict = "allow";

  if (!co_await connect_upstream()) {
    co_await refuse(502, "upstream", "dockgate: cannot reach the Docker daemon");
    co_return outcome::close;
  }
  if (!co_await prepare_target(r)) co_return outcome::close;

  // From here the head's bytes may move (the body is read into the same buffer): the head
  // is serialised first, and only values of head_ are used afterwards.
  const bool json_body = body == policy::body_kind::json && head_.has_body();
  if (!dropped_.empty()) audit_.dropped = dropped_;
  serialize_request_head(upgrade);
  consume(head_size);
  body_decoder_ = chunked_decoder{};
  body_remaining_ = head_.content_length.value_or(0);
  if (head_.expect_continue && head_.has_body()) {
    static constexpr std::string_view continue_100 = "HTTP/1.1 100 Continue\r\n\r\n";
    auto [ec, n] = co_await net::async_write(client_, net::buffer(continue_100), use_tuple);
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
  } else if (head_.chunked) {
    out_ += "Transfer-Encoding: chunked\r\n";
  } else if (head_.content_length) {
    out_ += "Content-Length: ";
    out_ += std::to_string(*head_.content_length);
    out_ += "\r\n";
  }
  out_ += "\r\n";

  if (!co_await connect_upstream()) {
    co_await refuse(502, "upstream", "dockgate: cannot reach the Docker daemon");
    co_return outcome::close;
  }
  upstream_->expires_never();
  const std::array<net::const_buffer, 2> request{
      net::buffer(out_), net::buffer(json_body_.data(), json_body ? json_body_.size() : 0)};
  auto [ec, n] = co_await net::async_write(*upstream_, request, use_tuple);
  if (ec) {
    upstream_.reset();
    co_await refuse(502, "upstream", "dockgate: lost the connection to the Docker daemon");
    co_return outcome::close;
  }
  if (json_body) audit_.bytes_in = json_body_.size();
  else if (head_.has_body() && !drop_body && !co_await forward_body()) co_return outcome::close;
  co_return co_await relay_response(hijack);
}

net::awaitable<bool> connection::connect_upstream() {
  if (upstream_ && upstream_->socket().is_open()) co_return true;
  upstream_.emplace(client_.get_executor());
  upstream_buffer_.clear();
  upstream_->expires_after(upstream_connect_timeout);
  auto [ec] = co_await upstream_->async_connect(ctx_.upstream, use_tuple);
  if (ec) {
    ctx_.log->error("upstream connect failed: {}", ec.message());
    upstream_.reset();
    // The daemon is away: when it is back it may be another version (an upgrade), so its
    // version is learned again by the next request that reaches it.
    if (ctx_.api_version) ctx_.log->warn("the daemon is unreachable: its API version will be learned again");
    ctx_.api_version.reset();
    co_return false;
  }
  set_no_delay(upstream_->socket());
  co_return true;
}

// Request line and the client's end-to-end headers into out_; the caller adds framing.
void connection::serialize_request_head(bool upgrade) {
  out_.clear();
  out_ += policy::method_name(head_.method);
  out_ += ' ';
  out_ += target_;
  out_ += " HTTP/1.1\r\n";
  bool has_host = false;
  for (std::size_t i = 0; i < head_.field_count; ++i) {
    const auto& f = head_.fields[i];
    if (is_hop_by_hop(f.name, head_.connection)) continue;
    has_host = has_host || iequals(f.name, "host");
    out_ += f.name;
    out_ += ": ";
    out_ += f.value;
    out_ += "\r\n";
  }
  if (!has_host) out_ += "Host: docker\r\n";  // HTTP/1.0 clients may omit it; Go requires it
  if (upgrade) out_ += "Connection: Upgrade\r\nUpgrade: tcp\r\n";
}

net::awaitable<bool> connection::read_client_more() {
  compact();
  if (in_end_ == in_capacity) co_return false;
  client_.expires_after(ctx_.options.body_timeout);
  auto [ec, n] = co_await client_.async_read_some(
      net::buffer(in_.get() + in_end_, in_capacity - in_end_), use_tuple);
  in_end_ += n;
  co_return n > 0;
}

// The next piece of the request body, whatever its framing: Content-Length bytes, or the
// data of the next chunk. The view stays valid until the next call. One place decodes
// request-body framing, for bodies read whole and bodies streamed alike.
net::awaitable<std::pair<connection::body_piece, std::string_view>> connection::next_body_piece() {
  for (;;) {
    if (head_.chunked) {
      auto res = body_decoder_.feed(buffered());
      consume(res.consumed);  // the bytes stay in place until read_client_more compacts
      switch (res.state) {
        case chunked_decoder::status::data: co_return std::pair{body_piece::data, res.data};
        case chunked_decoder::status::done: co_return std::pair{body_piece::done, std::string_view{}};
        case chunked_decoder::status::error: co_return std::pair{body_piece::malformed, std::string_view{}};
        case chunked_decoder::status::need_more: break;
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
  if (head_.content_length.value_or(0) > limit) {
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
      if (head_.chunked) {
        ec = co_await write_chunk(*upstream_, data);
      } else {
        ec = std::get<0>(co_await net::async_write(*upstream_, net::buffer(data.data(), data.size()), use_tuple));
      }
      audit_.bytes_in += data.size();
      if (!ec) continue;
    } else if (status == body_piece::done) {
      if (head_.chunked) ec = std::get<0>(co_await net::async_write(*upstream_, net::buffer(last_chunk), use_tuple));
      if (!ec) co_return true;
    }
    // The daemon saw a partial request: that upstream connection is unusable.
    upstream_.reset();
    co_await refuse(400, "framing", "dockgate: malformed or truncated request body");
    co_return false;
  }
}

net::awaitable<connection::outcome> connection::relay_response(bool hijack_allowed) {
  http::response_parser<http::buffer_body> parser;
  parser.body_limit(boost::none);  // streams are unbounded by design
  parser.header_limit(max_head_bytes);
  if (head_.method == policy::http_method::head) parser.skip(true);
  upstream_->expires_never();  // wait, logs and pull answer when they answer
  auto [ec, n] = co_await http::async_read_header(*upstream_, upstream_buffer_, parser, use_tuple);
  if (ec) {
    upstream_.reset();
    co_await refuse(502, "upstream", "dockgate: no response from the Docker daemon");
    co_return outcome::close;
  }
  auto& res = parser.get();
  const unsigned status = res.result_int();

  if (hijack_allowed && (status == 101 || (status == 200 && !res.has_content_length() &&
                                           !res.chunked() && is_raw_stream(res)))) {
    write_response_head(res, response_framing::raw, false);
    client_.expires_never();
    auto [wec, wn] = co_await net::async_write(client_, net::buffer(out_), use_tuple);
    audit_.hijacked = true;
    if (!wec) {
      auto leftover = upstream_buffer_.data();
      ctx_.stats.hijack(+1);
      co_await splice({static_cast<const char*>(leftover.data()), leftover.size()});
      ctx_.stats.hijack(-1);
    }
    finish_audit(status);
    co_return outcome::close;
  }

  // How the body goes to the client. The proxy writes its own framing: the daemon's
  // connection headers belong to the daemon's hop.
  response_framing framing = response_framing::none;
  if (!parser.is_done()) {
    if (res.has_content_length()) framing = response_framing::length;
    else if (res.chunked() && head_.version_minor == 1) framing = response_framing::chunked;
    else framing = response_framing::raw;  // until the daemon closes (or HTTP/1.0 client)
  }
  const bool upstream_keeps = parser.keep_alive();
  const bool whole_list = filter_ == response_filter::container_list || filter_ == response_filter::networks ||
                          filter_ == response_filter::volume_list || filter_ == response_filter::data_usage;
  if (((whole_list && status == 200) || (filter_ == response_filter::create_warnings && status == 201)) &&
      framing != response_framing::none) {
    // A container list is filtered whole: only the profile's own containers go back. A
    // create answer gains the warnings of what the profile changed.
    const bool keep = head_.keep_alive && !ctx_.stopping;
    co_await relay_filtered_list(parser, keep);
    finish_audit(status);
    if (!upstream_keeps || !parser.is_done()) upstream_.reset();
    co_return keep && parser.is_done() ? outcome::keep_alive : outcome::close;
  }
  const bool filter_events = filter_ == response_filter::events && status == 200;
  event_line_.clear();
  const bool keep = head_.keep_alive && framing != response_framing::raw && !ctx_.stopping;
  write_response_head(res, framing, keep);
  client_.expires_never();
  struct open_stream {
    metrics* stats = nullptr;
    ~open_stream() {
      if (stats) stats->stream(-1);
    }
  } streaming;
  if (framing == response_framing::chunked || framing == response_framing::raw) {
    streaming.stats = &ctx_.stats;
    ctx_.stats.stream(+1);
  }

  // Reads the next piece of the body into the fixed buffer; 0 with `done` at the end.
  bool relay_failed = false;
  auto read_piece = [&]() -> net::awaitable<std::size_t> {
    for (;;) {
      res.body().data = body_.get();
      res.body().size = chunk_size;
      auto [rec, rn] = co_await http::async_read_some(*upstream_, upstream_buffer_, parser, use_tuple);
      if (rec == http::error::need_buffer) rec = {};
      if (rec) {
        relay_failed = true;
        upstream_ended_ = rec != net::error::operation_aborted;  // the daemon's side, not ours
        co_return 0;
      }
      const std::size_t got = chunk_size - res.body().size;
      // A read may parse only framing (a chunk header): nothing to send yet.
      if (got > 0 || parser.is_done()) co_return got;
    }
  };

  if (framing == response_framing::none || framing == response_framing::length) {
    // A sized response: the head goes out with the first body bytes, in one write.
    std::string_view head = out_;
    while (!relay_failed) {
      const std::size_t got = framing == response_framing::none ? 0 : co_await read_piece();
      const std::array<net::const_buffer, 2> pieces{net::buffer(head.data(), head.size()),
                                                    net::buffer(body_.get(), got)};
      auto [wec, wn] = co_await net::async_write(client_, pieces, use_tuple);
      if (wec) relay_failed = true;
      audit_.bytes_out += got;
      head = {};
      if (framing == response_framing::none || parser.is_done()) break;
    }
  } else {
    // A stream: the head goes out now (a `wait` client learns it is registered), then
    // each piece as it comes, while watching for the client to go away.
    bool relay_done = false;
    auto relay = [&]() -> net::awaitable<void> {
      auto [hec, hn] = co_await net::async_write(client_, net::buffer(out_), use_tuple);
      relay_failed = static_cast<bool>(hec);
      while (!relay_failed && !parser.is_done()) {
        const std::size_t got = co_await read_piece();
        if (relay_failed || got == 0) continue;
        std::string_view piece(body_.get(), got);
        if (filter_events) {
          // Events of containers the profile does not own are dropped, line by line.
          event_line_.append(piece);
          std::size_t keep_upto = 0;
          std::size_t start = 0;
          std::string owned;
          for (std::size_t nl; (nl = event_line_.find('\n', start)) != std::string::npos; start = nl + 1) {
            const std::string_view line(event_line_.data() + start, nl + 1 - start);
            if (policy::event_owned(line, profile_->rules.owner)) owned.append(line);
            keep_upto = nl + 1;
          }
          event_line_.erase(0, keep_upto);
          if (event_line_.size() > 1024 * 1024) {  // one event line, not a stream
            relay_failed = true;
            continue;
          }
          if (owned.empty()) continue;
          audit_.bytes_out += owned.size();
          beast::error_code wec =
              framing == response_framing::chunked
                  ? co_await write_chunk(client_, owned)
                  : std::get<0>(co_await net::async_write(client_, net::buffer(owned), use_tuple));
          relay_failed = static_cast<bool>(wec);
          continue;
        }
        audit_.bytes_out += got;
        beast::error_code wec =
            framing == response_framing::chunked
                ? co_await write_chunk(client_, piece)
                : std::get<0>(co_await net::async_write(client_, net::buffer(piece.data(), piece.size()), use_tuple));
        relay_failed = static_cast<bool>(wec);
      }
      // A daemon that went away mid-stream (restart, crash) ends an endless stream as the
      // daemon would have on a clean stop; the client (not gone) sees its end, not a cut.
      const bool daemon_gone = relay_failed && !client_gone_ && endless_stream_ && upstream_ended_;
      if ((!relay_failed || daemon_gone) && framing == response_framing::chunked) {
        auto [lec, ln] = co_await net::async_write(client_, net::buffer(last_chunk), use_tuple);
        relay_failed = static_cast<bool>(lec) || daemon_gone;
      }
      relay_done = true;
      beast::error_code ignored;
      client_.socket().cancel(ignored);  // ends the watcher below
    };
    // A client that goes away mid-stream (Ctrl-C on `docker events`) ends the stream,
    // even when the daemon has nothing to send for a long time.
    auto watch = [&]() -> net::awaitable<void> {
      while (!relay_done) {
        compact();
        if (in_end_ == in_capacity) break;  // pipelined bytes fill the buffer: stop watching
        auto [wec, wn] = co_await client_.socket().async_read_some(
            net::buffer(in_.get() + in_end_, in_capacity - in_end_), use_tuple);
        in_end_ += wn;
        if (wec && !relay_done) {
          client_gone_ = true;
          beast::error_code ignored;
          if (upstream_) upstream_->socket().cancel(ignored);
          break;
        }
        if (wec) break;
      }
    };
    co_await (relay() && watch());
  }
  finish_audit(status);
  if (relay_failed || client_gone_ || !upstream_keeps || !parser.is_done()) upstream_.reset();
  if (relay_failed || client_gone_) co_return outcome::close;
  co_return keep ? outcome::keep_alive : outcome::close;
}

void connection::write_response_head(const http::response_header<>& res, response_framing framing,
                                     bool keep_alive) {
  out_.clear();
  out_ += "HTTP/1.1 ";
  out_ += std::to_string(res.result_int());
  out_ += ' ';
  out_ += res.reason();
  out_ += "\r\n";
  const bool hijack = framing == response_framing::raw && !keep_alive && res.result_int() == 101;
  for (const auto& f : res) {
    switch (f.name()) {
      case http::field::connection:
      case http::field::upgrade:
        if (!hijack) continue;  // only a 101 keeps Connection: Upgrade / Upgrade: tcp
        break;
      case http::field::keep_alive:
      case http::field::proxy_connection:
      case http::field::te:
        continue;
      case http::field::transfer_encoding:
        if (framing != response_framing::chunked) continue;
        break;
      default:
        break;
    }
    out_ += f.name_string();
    out_ += ": ";
    out_ += f.value();
    out_ += "\r\n";
  }
  if (!keep_alive && !hijack) out_ += "Connection: close\r\n";
  out_ += "\r\n";
}

net::awaitable<void> connection::splice(std::string_view response_leftover) {
  // Bytes the daemon sent right behind its 101, and bytes the client sent right behind
  // its request (stdin typed early): both belong to the stream.
  if (!response_leftover.empty()) {
    auto [ec, n] = co_await net::async_write(client_, net::buffer(response_leftover.data(), response_leftover.size()), use_tuple);
    if (ec) co_return;
    audit_.bytes_out += n;
  }
  upstream_buffer_.clear();
  if (!buffered().empty()) {
    auto [ec, n] = co_await net::async_write(*upstream_, net::buffer(buffered().data(), buffered().size()), use_tuple);
    if (ec) co_return;
    audit_.bytes_in += n;
  }
  in_begin_ = in_end_ = 0;
  client_.expires_never();
  upstream_->expires_never();

  // One direction: read until EOF, then pass the half-close on with shutdown(send).
  // `&&` keeps output flowing after the client has shut down its side (stdin EOF).
  auto pump = [](stream& from, stream& to, char* buf, std::size_t cap,
                 std::uint64_t& bytes) -> net::awaitable<void> {
    for (;;) {
      auto [ec, n] = co_await from.async_read_some(net::buffer(buf, cap), use_tuple);
      if (n > 0) {
        auto [wec, wn] = co_await net::async_write(to, net::buffer(buf, n), use_tuple);
        bytes += wn;
        if (wec) {
          beast::error_code ignored;
          from.socket().shutdown(net::socket_base::shutdown_receive, ignored);
          co_return;
        }
      }
      if (ec) break;
    }
    beast::error_code ignored;
    to.socket().shutdown(net::socket_base::shutdown_send, ignored);
  };
  co_await (pump(client_, *upstream_, in_.get(), in_capacity, audit_.bytes_in) &&
            pump(*upstream_, client_, body_.get(), chunk_size, audit_.bytes_out));
  upstream_.reset();
}

}  // namespace dockgate::proxy

// Steps 5 and 6 of the request path (connection.hpp): the request body, and the request
// as it goes upstream.
//
// Invariants kept here:
// - What goes upstream is the proxy's own serialisation: request line with the checked
//   target, the client's end-to-end headers, and framing the proxy chose. JSON bodies are
//   read whole (under a cap) before anything is forwarded, so the daemon never acts on a
//   prefix of a body that the proxy has not seen end.
// - Every host path a reviewed body binds is checked on the host, and every network and
//   volume it names is asked of the daemon, before the daemon sees the body.
// - An upload under an upload rule (request_body::archive) is read whole and replaced by
//   the gate's own tar (upload_stage.cpp).
#include "bind_check.hpp"
#include "connection.hpp"
#include "dockgate/policy/body_seen.hpp"
#include "dockgate/policy/request_shape.hpp"
#include "readiness.hpp"
#include "socket_io.hpp"

namespace dockgate::proxy {

namespace {

// One chunk of a chunked body in the proxy's own framing, written with one gather write
// and no allocation (Beast's chunked serializer allocates a shared_ptr per chunk).
net::awaitable<beast::error_code> write_chunk(protocol::socket& s, std::string_view data) {
  char size_line[24];
  const int len = std::snprintf(size_line, sizeof size_line, "%zx\r\n", data.size());
  const std::array<net::const_buffer, 3> chunk{
      net::buffer(size_line, static_cast<std::size_t>(len)), net::buffer(data.data(), data.size()),
      net::buffer("\r\n", 2)};
  auto [ec, n] = co_await write_all(s, chunk);
  co_return ec;
}

}  // namespace

// Step 5: the request body, read before anything of it is forwarded: a body the daemon
// ignores is read and left out; a JSON body is read whole, reviewed by the profile, its
// host paths and named objects checked, and replaced by the gate's serialisation.
net::awaitable<bool> connection::read_request_body(const policy::route& r,
                                                   policy::request_body body) {
  if (head_->expect_continue && head_->has_body()) {
    static constexpr std::string_view continue_100 = "HTTP/1.1 100 Continue\r\n\r\n";
    auto [ec, n] = co_await write_all(client_, net::buffer(continue_100));
    if (ec) co_return false;
  }
  if (body == policy::request_body::dropped) {
    if (!co_await read_json_body(ignored_body_limit)) co_return false;
    req_.audit.bytes_in = req_.extras->json_body.size();
    req_.extras->json_body.clear();
  }
  if (body == policy::request_body::archive) co_return co_await read_upload_body();
  if (body != policy::request_body::json) co_return true;
  // A create's answer is read whole (it is small): the ID it names goes into the audit line.
  if (r.op == policy::operation::ContainerCreate || r.op == policy::operation::ContainerExec)
    req_.create_answer = true;
  if (!co_await read_json_body(policy::json_body_limit(r.op))) co_return false;
  auto& x = *req_.extras;  // made by read_json_body
  // Learning: what the client asked for, refused or not (docs/policy.md, "Learning a profile").
  if (profile_->record_fields && !(x.seen = policy::body_seen(r.op, x.json_body)).empty())
    req_.audit.seen = x.seen;
  auto reviewed =
      policy::review_body(*profile_, r.op, x.json_body, {req_.version, req_.daemon.cgroup_v1});
  if (auto* d = std::get_if<policy::deny>(&reviewed); d && enforce(*d)) {
    req_.audit.verdict = "deny";
    co_await refuse(d->status, d->rule, d->reason);
    co_return false;
  }
  auto* rw = std::get_if<policy::rewrite>(&reviewed);
  if (rw && profile_->mode == policy::profile::mode_kind::audit) {
    // Audit mode: the client's body goes up as sent; what would change is recorded.
    // `would` stays a sentence for people: the refusals' reasons and "change <field>
    // <action>" once per field, without values (the body went up as sent).
    if (!rw->changes.empty()) {
      if (!x.would.empty()) x.would += "; ";
      x.would += "change";
      for (const auto& c : rw->changes) {
        x.would += &c == rw->changes.data() ? " " : ", ";
        x.would += c.field + " " + c.action;
      }
      req_.audit.would = x.would;
    }
    rw = nullptr;
  }
  if (rw) {
    // Every host path the body binds is checked on the host before the daemon sees it.
    std::vector<std::pair<std::string_view, bind_check_options>> sources;
    if (profile_->rules.binds)
      for (const auto& source : rw->bind_sources)
        sources.emplace_back(source,
                             bind_check_options{profile_->rules.binds->require_fuse, false});
    if (!rw->workspace_source.empty())
      sources.emplace_back(rw->workspace_source,
                           bind_check_options{profile_->rules.workspace->require_fuse, true});
    for (const auto& [source, options] : sources) {
      auto problem = check_bind_source(source, options);
      if (!problem) continue;
      const policy::deny d{
          403, "binds", "dockgate: bind source " + *problem + " (profile " + profile_->name + ")"};
      if (!enforce(d)) continue;
      req_.audit.verdict = "deny";
      co_await refuse(d.status, d.rule, d.reason);
      co_return false;
    }
  }
  if (rw) {
    if (auto d = co_await check_named_objects(r, *rw); d && enforce(*d)) {
      req_.audit.verdict = "deny";
      co_await refuse(d->status, d->rule, d->reason);
      co_return false;
    }
  }
  if (rw) {
    // What goes upstream is the proxy's serialisation of what it checked.
    for (const auto& key : rw->dropped) x.dropped += (x.dropped.empty() ? "body:" : ",body:") + key;
    req_.audit.dropped = x.dropped;
    // The client hears what the profile changed, in the answer's Warnings (the docker
    // CLI and the SDKs print them).
    if (r.op == policy::operation::ContainerCreate) {
      x.warnings = std::move(rw->warnings);
    }
    // The object the body names, for the audit line.
    if (!rw->name.empty() && req_.object_name.empty()) req_.object_name = std::move(rw->name);
    x.object_image = std::move(rw->image);
    x.json_body = std::move(rw->body);
    x.changes = std::move(rw->changes);
    req_.audit.changes = x.changes;
  }
  co_return true;
}

// Request line and the client's end-to-end headers into out_; the caller adds framing.
void connection::serialize_request_head(bool upgrade) {
  out_.clear();
  out_ += http::method_name(head_->method);
  out_ += ' ';
  out_ += req_.target;
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
  auto [ec, n] = co_await client_.async_read_some(
      net::buffer(in_data_ + in_end_, in_capacity_ - in_end_), use_tuple);
  in_end_ += n;
  co_return n > 0;
}

// The next piece of the request body, whatever its framing: Content-Length bytes, or the
// data of the next chunk. The view stays valid until the next call. One place decodes
// request-body framing, for bodies read whole and bodies streamed alike.
net::awaitable<std::pair<connection::body_piece, std::string_view>> connection::next_body_piece() {
  for (;;) {
    if (head_->chunked) {
      auto res = req_.body_decoder.feed(buffered());
      consume(res.consumed);  // the bytes stay in place until read_client_more compacts
      switch (res.state) {
        case http::chunked_decoder::status::data:
          co_return std::pair{body_piece::data, res.data};
        case http::chunked_decoder::status::done:
          co_return std::pair{body_piece::done, std::string_view{}};
        case http::chunked_decoder::status::error:
          co_return std::pair{body_piece::malformed, std::string_view{}};
        case http::chunked_decoder::status::need_more:
          break;
      }
    } else {
      if (req_.body_remaining == 0) co_return std::pair{body_piece::done, std::string_view{}};
      if (!buffered().empty()) {
        const auto take = static_cast<std::size_t>(
            std::min<std::uint64_t>(req_.body_remaining, buffered().size()));
        const std::string_view data = buffered().substr(0, take);
        consume(take);
        req_.body_remaining -= take;
        co_return std::pair{body_piece::data, data};
      }
    }
    if (!co_await read_client_more()) co_return std::pair{body_piece::closed, std::string_view{}};
  }
}

// Reads a JSON body whole (de-chunked) into extras().json_body, under `limit`. Nothing has
// been sent upstream yet: a client that stops mid-body gets nothing forwarded.
net::awaitable<bool> connection::read_json_body(std::size_t limit) {
  std::string& json_body = extras().json_body;
  json_body.clear();
  if (head_->content_length.value_or(0) > limit) {
    co_await refuse(413, "body", "dockgate: request body too large");
    co_return false;
  }
  for (;;) {
    auto [status, data] = co_await next_body_piece();
    switch (status) {
      case body_piece::data:
        if (json_body.size() + data.size() > limit) {
          co_await refuse(413, "body", "dockgate: request body too large");
          co_return false;
        }
        json_body += data;
        break;
      case body_piece::done:
        co_return true;
      case body_piece::malformed:
        co_await refuse(400, "framing", "dockgate: malformed chunked body");
        co_return false;
      case body_piece::closed:
        co_return false;
    }
  }
}

// Step 6: the request goes upstream as the gate's own serialisation (the head written by
// serialize_request_head, the framing chosen here); a byte-stream body follows as it
// arrives.
net::awaitable<bool> connection::forward_request(policy::request_body body) {
  const bool json_body = body == policy::request_body::json;
  // A JSON body was read whole (read_json_body made the extras); others send none here.
  const std::string_view body_bytes =
      json_body ? std::string_view(req_.extras->json_body) : std::string_view();
  // Framing of the forwarded request: the proxy's own.
  if (json_body) {
    out_ += "Content-Length: ";
    out_ += std::to_string(body_bytes.size());
    out_ += "\r\n";
  } else if (body == policy::request_body::archive) {
    out_ += "Content-Length: ";  // the gate's tar (upload_stage.cpp)
    out_ += std::to_string(req_.extras->upload->size());
    out_ += "\r\n";
  } else if (body == policy::request_body::dropped) {
    // no body upstream
  } else if (head_->chunked) {
    out_ += "Transfer-Encoding: chunked\r\n";
  } else if (head_->content_length) {
    out_ += "Content-Length: ";
    out_ += std::to_string(*head_->content_length);
    out_ += "\r\n";
  }
  out_ += "\r\n";

  // --audit-mode blocking: the decision (status 0) is in every sink before the daemon sees
  // the request; a sink that cannot take it refuses the request (audit_sink.hpp).
  if (ctx_.audit.blocking() && !write_decision_line()) {
    co_await refuse(503, "audit",
                    "dockgate: the audit trail cannot be written; request not forwarded");
    co_return false;
  }
  if (!upstream_ready() && !co_await connect_upstream()) {
    co_await refuse(502, "upstream", "dockgate: cannot reach the Docker daemon");
    co_return false;
  }
  clear_deadline();
  const std::array<net::const_buffer, 2> request{net::buffer(out_),
                                                 net::buffer(body_bytes.data(), body_bytes.size())};
  // Its answer cannot be there before the request is: the read of it waits for epoll's
  // word instead of first meeting EAGAIN (readiness.hpp).
  not_readable_yet(*upstream_);
  // A GET or HEAD with nothing after its head may go again on a new daemon connection if a
  // reused one turns out to have been closed (resend_on_fresh_upstream).
  req_.resendable = !json_body && body != policy::request_body::stream &&
                    body != policy::request_body::archive &&
                    (head_->method == http::method::get || head_->method == http::method::head);
  auto [ec, n] = co_await write_all(*upstream_, request);
  if (ec && co_await resend_on_fresh_upstream()) ec = {};
  if (ec) {
    upstream_.reset();
    co_await refuse(502, "upstream", "dockgate: lost the connection to the Docker daemon");
    co_return false;
  }
  if (json_body)
    req_.audit.bytes_in = body_bytes.size();
  else if (body == policy::request_body::stream && !co_await forward_body())
    co_return false;
  else if (body == policy::request_body::archive && !co_await forward_upload())
    co_return false;
  co_return true;
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
      req_.audit.bytes_in += data.size();
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

}  // namespace dockgate::proxy

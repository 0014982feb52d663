// Step 7 of the request path (connection.hpp): the daemon's answer goes back. Its head is
// read into a pooled block and parsed in place; the proxy writes its own framing (the
// daemon's connection headers belong to the daemon's hop).
//
// Invariants kept here:
// - The connection is spliced (step 9) only when the operation may hijack (request_shape)
//   and the daemon answered 101, or the legacy 200 with a raw stream.
// - A response whose end is already in hand is relayed with one gathered write; a chunked
//   or until-close body is handed to the stream stage (step 8), which holds it unless it
//   is a document.
// - Lists and a create answer a profile confines are filtered whole: only what the
//   profile owns goes back.
#include "connection.hpp"
#include "dockgate/policy/owned_objects.hpp"
#include "dockgate/policy/ownership.hpp"
#include "dockgate/policy/responses.hpp"
#include "dockgate/policy/system_info.hpp"
#include "socket_io.hpp"

namespace dockgate::proxy {

namespace {

bool is_raw_stream(const http::response_head& res) {
  return res.content_type == "application/vnd.docker.raw-stream" ||
         res.content_type == "application/vnd.docker.multiplexed-stream";
}

}  // namespace

net::awaitable<connection::outcome> connection::relay_response(bool hijack_allowed) {
  // The head (and whatever of the body came with it) in one read into a pooled block. The
  // wait is unbounded: wait, logs and pull answer when they answer.
  clear_deadline();
  char* buf = response_.get();
  response_begin_ = response_end_ = 0;
  std::size_t head_size = 0;
  while (head_size == 0) {
    auto [ec, n] = co_await upstream_->async_read_some(
        net::buffer(buf + response_end_, response_.size() - response_end_), use_tuple);
    response_end_ += n;
    head_size = http::find_head_end({buf, response_end_});
    if (head_size == 0 && (ec || response_end_ == response_.size())) {
      // Nothing came back on a reused connection: a GET or HEAD goes again on a new one.
      if (ec && response_end_ == 0 && co_await resend_on_fresh_upstream()) continue;
      upstream_.reset();
      co_await refuse(502, "upstream",
                      ec ? "dockgate: no response from the Docker daemon"
                         : "dockgate: the Docker daemon's response head is too large");
      co_return outcome::close;
    }
  }
  http::response_head res;
  if (!http::parse_response_head({buf, head_size}, res) ||
      (res.status < 200 && res.status != 101)) {
    upstream_.reset();
    co_await refuse(502, "upstream", "dockgate: malformed response from the Docker daemon");
    co_return outcome::close;
  }
  response_begin_ = head_size;
  upstream_reused_ = true;  // it has answered: a later failure on it is not this request's
  const unsigned status = res.status;
  const bool head_request = head_->method == http::method::head;
  // Whether this exchange, once its body has come whole, leaves the daemon connection fit
  // for another client (upstream_pool.hpp): HTTP/1.1 both ways, neither side asked to
  // close, not an endless stream. A hijack never is (splice closes it).
  const bool poolable = head_->version_minor == 1 && head_->keep_alive && res.version_minor == 1 &&
                        res.keep_alive && !req_.endless_stream;

  if (hijack_allowed && (status == 101 || (status == 200 && !res.content_length && !res.chunked &&
                                           is_raw_stream(res)))) {
    write_response_head(res, response_framing::raw, false);
    auto [wec, wn] = co_await write_all(client_, net::buffer(out_));
    req_.audit.hijacked = true;
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
    if (res.content_length)
      framing = *res.content_length ? response_framing::length : response_framing::none;
    else if (res.chunked && head_->version_minor == 1)
      framing = response_framing::chunked;
    else
      framing = response_framing::raw;  // until the daemon closes (or HTTP/1.0 client)
  }
  req_.upstream_keeps = res.keep_alive;
  // Events are filtered as they stream (held_streams.cpp); every other confined answer whole.
  const bool whole_list = req_.answer_filter != policy::owned_answer::as_is &&
                          req_.answer_filter != policy::owned_answer::events;
  if (((whole_list && status == 200) || (req_.create_answer && status == 201)) &&
      framing != response_framing::none) {
    // A container list is filtered whole: only the profile's own containers go back. A
    // create answer gains the warnings of what the profile changed.
    const bool keep = head_->keep_alive && !ctx_.stopping;
    const bool whole = co_await read_whole_body(res, 64 * 1024 * 1024);
    if (whole) co_await relay_filtered_list(res, keep);
    response_.release();
    if (req_.extras->json_body.capacity() > 1024 * 1024) req_.extras->json_body.shrink_to_fit();
    finish_audit(status);
    if (!whole || !req_.upstream_keeps) upstream_.reset();
    upstream_reusable_ = poolable && keep && whole && req_.upstream_keeps;
    co_return keep&& whole ? outcome::keep_alive : outcome::close;
  }
  const bool keep = head_->keep_alive && framing != response_framing::raw && !ctx_.stopping;
  write_response_head(res, framing, keep);
  req_.response_status = status;
  req_.response_keep_alive = keep;

  if (framing == response_framing::none || framing == response_framing::length) {
    // A sized response: the head goes out with the body bytes in hand, in one write.
    std::uint64_t remaining = framing == response_framing::length ? *res.content_length : 0;
    std::string_view head = out_;
    const char* data = buf + response_begin_;
    std::size_t got = static_cast<std::size_t>(
        std::min<std::uint64_t>(remaining, response_end_ - response_begin_));
    // Bytes past the answer's end: no request asked for them, so that connection is not
    // used again (they would be read as the next answer).
    if (response_end_ - response_begin_ > got) req_.upstream_keeps = false;
    for (;;) {
      const std::array<net::const_buffer, 2> pieces{net::buffer(head.data(), head.size()),
                                                    net::buffer(data, got)};
      auto [wec, wn] = co_await write_all(client_, pieces);
      req_.audit.bytes_out += got;
      remaining -= got;
      head = {};
      if (wec) req_.relay_failed = true;
      if (wec || remaining == 0) break;
      auto [rec, rn] = co_await upstream_->async_read_some(
          net::buffer(
              buf, static_cast<std::size_t>(std::min<std::uint64_t>(remaining, response_.size()))),
          use_tuple);
      if (rec) {
        req_.relay_failed = true;
        break;
      }
      data = buf;
      got = rn;
    }
    response_.release();
    finish_audit(status);
    if (req_.relay_failed || !req_.upstream_keeps) upstream_.reset();
    upstream_reusable_ = poolable && keep && !req_.relay_failed && req_.upstream_keeps;
    if (req_.relay_failed) co_return outcome::close;
    co_return keep ? outcome::keep_alive : outcome::close;
  }
  // Chunked or until close: relay_stream, from run().
  req_.framing = framing;
  req_.upstream_poolable = poolable && keep && res.chunked;
  req_.response_chunked_in = res.chunked;
  req_.response_head_pending = true;
  co_return outcome::relay_stream;
}

void connection::write_response_head(const http::response_head& res, response_framing framing,
                                     bool keep_alive, std::optional<std::size_t> content_length) {
  out_.clear();
  out_ += "HTTP/1.1 ";
  // parse_response_head took three digits.
  out_ += static_cast<char>('0' + res.status / 100);
  out_ += static_cast<char>('0' + res.status / 10 % 10);
  out_ += static_cast<char>('0' + res.status % 10);
  out_ += ' ';
  out_ += res.reason;
  out_ += "\r\n";
  const bool hijack = framing == response_framing::raw && !keep_alive && res.status == 101;
  // Which of the daemon's fields go on: not those of the daemon's hop, not a
  // Dockgate-Request-Id (the gate's own goes once: a daemon's, or a gate's upstream's,
  // does not pass), and the framing fields only where the gate's framing is the daemon's.
  const auto passes = [&](std::string_view name) {
    if (http::iequals(name, "connection") || http::iequals(name, "upgrade"))
      return hijack;  // only a 101 keeps Connection: Upgrade / Upgrade: tcp
    if (http::iequals(name, "keep-alive") || http::iequals(name, "proxy-connection") ||
        http::iequals(name, "te") || http::iequals(name, "trailer") ||
        http::iequals(name, "dockgate-request-id"))
      return false;
    if (http::iequals(name, "transfer-encoding")) return framing == response_framing::chunked;
    if (http::iequals(name, "content-length")) return !content_length;
    return true;
  };
  // The field lines as the daemon wrote them (parse_response_head checked each), a run of
  // passing lines in one append.
  std::string_view fields = res.fields;
  std::size_t run = 0, at = 0;
  while (at < fields.size()) {
    const std::size_t colon = fields.find(':', at);
    const std::size_t next = fields.find('\n', colon) + 1;
    if (!passes(fields.substr(at, colon - at))) {
      out_ += fields.substr(run, at - run);
      run = next;
    }
    at = next;
  }
  out_ += fields.substr(run);
  if (content_length) {
    out_ += "Content-Length: ";
    out_ += std::to_string(*content_length);
    out_ += "\r\n";
  }
  append_request_id_header(out_);
  if (!keep_alive && !hijack) out_ += "Connection: close\r\n";
  out_ += "\r\n";
}

net::awaitable<bool> connection::read_whole_body(const http::response_head& res,
                                                 std::size_t limit) {
  std::string& whole = extras().json_body;
  whole.clear();
  char* buf = response_.get();
  std::string_view in(buf + response_begin_, response_end_ - response_begin_);
  std::uint64_t remaining = res.content_length.value_or(0);
  http::chunked_decoder decoder;
  for (;;) {
    if (res.chunked) {
      while (!in.empty()) {
        auto r = decoder.feed(in);
        in.remove_prefix(r.consumed);
        if (r.state == http::chunked_decoder::status::error) co_return false;
        if (r.state == http::chunked_decoder::status::data) whole.append(r.data);
        if (r.state == http::chunked_decoder::status::done) co_return in.empty();
      }
    } else {
      const auto take = static_cast<std::size_t>(std::min<std::uint64_t>(remaining, in.size()));
      whole.append(in.substr(0, take));
      remaining -= take;
      // Bytes past the end: that connection is not used again.
      if (take < in.size()) req_.upstream_keeps = false;
      if (remaining == 0) co_return true;
    }
    if (whole.size() > limit) co_return false;
    // The head stays where it is (res views into it); the body goes behind it.
    char* rest = buf + response_begin_;
    const std::size_t room = response_.size() - response_begin_;
    if (room < 1024) co_return false;
    auto [ec, n] = co_await upstream_->async_read_some(net::buffer(rest, room), use_tuple);
    if (ec) co_return false;  // the client sees the connection close without an answer
    in = std::string_view(rest, n);
  }
}

net::awaitable<void> connection::relay_filtered_list(const http::response_head& res, bool keep) {
  auto& x = *req_.extras;  // made by read_whole_body
  const std::string& whole = x.json_body;
  std::optional<std::string> filtered;
  const std::string& owner = profile_->rules.owner;
  if (req_.create_answer) {
    // The answer goes back as the daemon wrote it unless the profile has warnings to add.
    if (!x.warnings.empty()) filtered = policy::add_create_warnings(whole, x.warnings);
    if (auto id = policy::created_id(whole))
      (req_.audit.operation == "ContainerExec" ? x.exec_id : req_.object_id) = std::move(*id);
    if (!filtered) filtered = whole;
  } else {
    switch (req_.answer_filter) {
      case policy::owned_answer::networks: {
        std::vector<std::string> owned;
        if (policy::networks_list_containers(whole)) {
          // Which of the containers it lists are the profile's: one list call.
          const std::string target =
              "/v" + *req_.daemon.api_version + "/containers/json?all=1&filters=" +
              policy::query_escape("{\"label\":[\"" + std::string(policy::owner_label) + "=" +
                                   owner + "\"]}");
          auto [status, list] = co_await upstream_get(target);
          if (status == 200) owned = policy::container_ids(list);
        }
        filtered = policy::filter_networks(whole, owner, owned);
        // Not a network answer: nothing of it is known to be the profile's.
        if (!filtered) filtered = whole.starts_with("[") ? "[]\n" : "{}\n";
        break;
      }
      case policy::owned_answer::volume_list:
        filtered = policy::filter_volume_list(whole, owner);
        if (!filtered) filtered = "{\"Volumes\":[],\"Warnings\":null}\n";
        break;
      case policy::owned_answer::system_info:
        filtered = policy::filter_system_info(whole, *profile_->system_info_keep);
        break;
      case policy::owned_answer::data_usage:
        filtered = policy::filter_data_usage(whole, owner);
        if (!filtered) filtered = "{}\n";
        break;
      default:
        filtered = policy::filter_container_list(whole, owner);
        if (!filtered) filtered = "[]\n";  // not a list: nothing of it is known to be owned
    }
  }
  write_response_head(res, response_framing::length, keep, filtered->size());
  const std::array<net::const_buffer, 2> pieces{net::buffer(out_), net::buffer(*filtered)};
  co_await write_all(client_, pieces);
  req_.audit.bytes_out += filtered->size();
}

}  // namespace dockgate::proxy

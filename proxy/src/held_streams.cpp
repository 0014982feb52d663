// Step 8 of the request path (connection.hpp): a chunked or until-close answer relayed
// as it arrives (events, logs, stats, wait, pull progress), and ended cleanly.
//
// Invariants kept here:
// - Streams are relayed as they arrive, with no idle timeout and no allocation per chunk.
//   A held stream is no coroutine: two waiting callbacks (the daemon's side, and a watch
//   of the client) and the connection object; bytes from the daemon start a short
//   coroutine that relays them in a pooled block and goes back to waiting with none.
// - A document (request_shape::document: an inspect whose chunks came apart) is not held:
//   the request's coroutine relays it to its end with its block, and goes on.
// - An endless stream (request_shape) whose daemon went away mid-stream is ended as the
//   daemon would have ended it on a clean stop, not cut.
// - A client that shuts down its side (its write half: the end of its request) gets the
//   answer dockerd gives it: dockerd reads that end as a cancelled request and ends its
//   answer (a terminating chunk; a wait's error document first). The gate passes the end
//   on to the daemon and relays the daemon's own end; a daemon that has not ended within
//   half_close_grace is cut off and the gate ends an endless stream itself.
// - The client never gets part of a chunk followed by more bytes: each of the gate's
//   chunks goes out in one write, and after a write that failed (maybe part of a chunk)
//   nothing more is written. An end the gate writes (the daemon gone, the client's end,
//   the shutdown deadline) goes between two chunks; at the shutdown deadline a stream
//   whose client has not taken its last chunk yet is closed as it is.
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <span>

#include "connection.hpp"
#include "dockgate/policy/ownership.hpp"
#include "events_hub.hpp"
#include "socket_io.hpp"

namespace dockgate::proxy {

net::awaitable<connection::outcome> connection::relay_stream() {
  // A GET /events others of the profile may share: the daemon's head as it came (still in
  // the response block, before the body), for the heads of those who join.
  std::string daemon_head;
  if (req_.events_shareable) daemon_head.assign(response_.get(), response_begin_);
  // What came with the head first: a body already whole (an inspect answer, which the
  // daemon chunks) goes out with the head in one write and never waits.
  co_await relay_buffered_stream();
  // A document (an inspect whose chunks came apart) is relayed to its end here, by this
  // coroutine: nothing of the request is given back to be made again for the next one,
  // and no coroutine is started to take the connection back.
  while (req_.document && !req_.stream_ended && !req_.relay_failed) {
    auto [ec, n] = co_await upstream_->async_read_some(
        net::buffer(response_.get(), response_.size()), use_tuple);
    if (ec) {
      note_upstream_error(ec);
      break;
    }
    response_begin_ = 0;
    response_end_ = n;
    co_await relay_buffered_stream();
  }
  if (req_.stream_ended || req_.relay_failed) co_return co_await end_stream();
  // The profile's next requests for these events share this one's daemon stream: it goes
  // over to a hub, which this stream holds of as they will (shared_events.cpp).
  if (req_.events_shareable && open_shared_events(daemon_head)) co_return outcome::held;
  // A stream that goes on (events, logs, wait): no coroutine waits for it. Two plain
  // callbacks do, on the daemon's side and on the client's, and the connection object is
  // all a held stream costs; bytes from the daemon start a short coroutine that relays
  // them and goes back to waiting (wait_upstream, relay_available).
  ctx_.stats.stream(+1);
  req_.stream_waiting = true;
  // What only built the request that has gone (its head, target and query: the events
  // filter a profile adds makes them ~120 bytes each) is not kept for the stream's life.
  if (!req_.response_head_pending) std::string().swap(out_);
  std::string().swap(req_.target);
  std::string().swap(req_.query);
  response_.release();
  watch_client();
  wait_upstream();
  co_return outcome::held;
}

// The daemon's side of a held stream: readable (relay what it has), or failed.
void connection::wait_upstream() {
  req_.upstream_active = true;
  upstream_->async_wait(net::socket_base::wait_read, [this](beast::error_code ec) {
    if (!ec && !req_.client_gone) {
      net::co_spawn(client_.get_executor(), relay_available(), net::detached);
      return;
    }
    upstream_failed(ec);
  });
}

void connection::upstream_failed(beast::error_code ec) {
  note_upstream_error(ec);
  upstream_done();
}

void connection::note_upstream_error(beast::error_code ec) {
  if (ec == net::error::eof && !req_.response_chunked_in) {
    req_.stream_ended = true;  // a body framed by the daemon's close has ended
  } else if (!req_.stream_ended) {
    req_.upstream_ended = ec && ec != net::error::operation_aborted;  // the daemon's side, not ours
    req_.relay_failed = true;
  }
}

// What the daemon has now, relayed as it comes (one recv(2) per read, never waiting);
// when it has nothing more, back to waiting in a callback with no block held.
net::awaitable<void> connection::relay_available() {
  try {
    while (!req_.relay_failed && !req_.stream_ended && !req_.client_gone) {
      const ssize_t n =
          ::recv(upstream_->native_handle(), response_.get(), response_.size(), MSG_DONTWAIT);
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
    req_.relay_failed = true;
  }
  response_.release();
  upstream_done();
}

// The daemon's side is over (ended, failed, or cancelled because the client went): the
// client's watch is cancelled, and once neither callback is pending the stream ends.
void connection::upstream_done() {
  req_.upstream_active = false;
  req_.stream_waiting = false;
  if (req_.watch_pending) {
    beast::error_code ignored;
    client_.cancel(ignored);  // its handler calls stream_over()
    return;
  }
  stream_over();
}

// Neither callback pending: a coroutine takes the connection back (it owns it again), ends
// the stream and serves the next request or closes.
void connection::stream_over() {
  if (req_.events_shared) return shared_done_if_idle();
  if (req_.upstream_active || req_.watch_pending) return;
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
  if (keep_alive)
    co_await start(std::move(self));  // the next request, as any connection's
  else
    co_await c.close_gracefully();
}

// The end of a relayed stream, held or not: the daemon's end passed on, the audit line,
// whether the connections go on.
net::awaitable<connection::outcome> connection::end_stream() {
  // The gate ends an endless stream itself where the daemon's end did not come and the
  // client still reads: the daemon went away mid-stream (restart, crash), which ends it as
  // a clean stop would, or the client ended its side and the daemon did not end within
  // half_close_grace. The client sees an end, not a cut.
  if (gate_ends_stream()) co_await write_all(client_, net::buffer(last_chunk));
  clear_deadline();
  response_.release();
  finish_audit(req_.response_status);
  // After the client's end the daemon's connection has had its end too: not reused.
  if (req_.relay_failed || req_.client_gone || req_.client_ended || !req_.upstream_keeps ||
      !req_.stream_ended || !req_.response_chunked_in)
    upstream_.reset();
  if (req_.relay_failed || req_.client_gone || req_.client_ended || !req_.stream_ended)
    co_return outcome::close;
  co_return req_.response_keep_alive ? outcome::keep_alive : outcome::close;
}

bool connection::gate_ends_stream() const {
  return !req_.stream_ended && !req_.client_gone && req_.endless_stream &&
         req_.framing == response_framing::chunked &&
         (req_.client_ended || (req_.relay_failed && req_.upstream_ended));
}

// Relays what the response block holds, and the head if it has not gone yet, in one
// gathered write: every complete chunk in the block becomes one chunk of the proxy's.
std::size_t connection::gather_stream(std::string_view& in, std::span<net::const_buffer> out,
                                      std::span<char, 24> size_line, std::size_t& total) {
  const bool chunked_out = req_.framing == response_framing::chunked;
  std::array<std::string_view, max_stream_pieces> pieces;
  std::size_t count = 0;
  total = 0;
  while (!in.empty() && count < max_stream_pieces && !req_.stream_ended) {
    if (!req_.response_chunked_in) {  // until close: the bytes as they are
      pieces[count++] = in;
      in = {};
      break;
    }
    auto r = req_.response_decoder.feed(in);
    in.remove_prefix(r.consumed);
    if (r.state == http::chunked_decoder::status::data)
      pieces[count++] = r.data;
    else if (r.state == http::chunked_decoder::status::done)
      req_.stream_ended = true;
    else if (r.state == http::chunked_decoder::status::error)
      req_.relay_failed = true;
    if (req_.relay_failed)
      return 0;  // the daemon's framing is broken: the client's connection ends
  }
  if (req_.answer_filter == policy::owned_answer::events && req_.response_status == 200 &&
      count > 0) {
    // Events of containers the profile does not own are dropped, line by line.
    req_.owned_events.clear();
    for (std::size_t i = 0; i < count; ++i) {
      req_.event_line.append(pieces[i]);
      std::size_t keep_upto = 0;
      for (std::size_t start = 0, nl; (nl = req_.event_line.find('\n', start)) != std::string::npos;
           start = nl + 1) {
        const std::string_view line(req_.event_line.data() + start, nl + 1 - start);
        if (policy::event_owned(line, profile_->rules.owner)) req_.owned_events.append(line);
        keep_upto = nl + 1;
      }
      req_.event_line.erase(0, keep_upto);
    }
    if (req_.event_line.size() > 1024 * 1024) {  // one event line, not a stream
      req_.relay_failed = true;
      return 0;
    }
    count = req_.owned_events.empty() ? 0 : 1;
    pieces[0] = req_.owned_events;
  }
  for (std::size_t i = 0; i < count; ++i) total += pieces[i].size();
  std::size_t n = 0;
  if (req_.response_head_pending) out[n++] = net::buffer(out_);
  if (total > 0) {
    if (chunked_out) {
      const int len = std::snprintf(size_line.data(), size_line.size(), "%zx\r\n", total);
      out[n++] = net::buffer(size_line.data(), static_cast<std::size_t>(len));
    }
    for (std::size_t i = 0; i < count; ++i)
      out[n++] = net::buffer(pieces[i].data(), pieces[i].size());
    if (chunked_out) out[n++] = net::buffer("\r\n", 2);
  }
  if (req_.stream_ended && chunked_out) out[n++] = net::buffer(last_chunk);
  return n;
}

net::awaitable<void> connection::relay_buffered_stream() {
  std::string_view in(response_.get() + response_begin_, response_end_ - response_begin_);
  response_begin_ = response_end_ = 0;
  // The pieces are decoded outside this frame (gather_stream): what waits here while a write
  // waits is the buffers only, so that the frame stays small enough for Asio to reuse it.
  std::array<net::const_buffer, max_stream_pieces + 5> out;
  std::array<char, 24> size_line;
  while (!req_.relay_failed && (!in.empty() || req_.response_head_pending)) {
    std::size_t total = 0;
    const std::size_t n = gather_stream(in, out, size_line, total);
    if (req_.relay_failed) co_return;
    if (n > 0) {
      req_.response_head_pending = false;
      req_.client_writing = true;
      auto [wec, wn] = co_await write_all(client_, std::span(out.data(), n));
      req_.client_writing = false;
      req_.audit.bytes_out += total;
      // Maybe part of a chunk went: nothing more may follow it (no end of the gate's).
      if (wec) req_.relay_failed = req_.client_gone = true;
    }
    if (req_.stream_ended) {
      if (!in.empty())
        req_.upstream_keeps = false;  // bytes past the end: that connection is not reused
      break;
    }
  }
}

// The client's side of a stream: readable means it ended its side, went away, or
// pipelined a request (which waits in the kernel until the stream ends).
void connection::watch_client() {
  req_.watch_pending = true;
  // A shared stream's client is watched in its hub's epoll set, with the other holders'.
  req_.watch_epoll =
      req_.events_shared && req_.hub && req_.hub->watch(*this, client_.native_handle());
  if (req_.watch_epoll) return;
  client_.async_wait(net::socket_base::wait_read,
                     [this](beast::error_code ec) { client_event(ec); });
}

void connection::client_readable() {
  client_event({});
}

void connection::client_event(beast::error_code ec) {
  req_.watch_pending = false;
  if (!req_.stream_waiting)
    return stream_over();  // the stream ended first: this is the cancellation
  char c;
  const ssize_t n = ec ? -1 : ::recv(client_.native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n < 0 && !ec && (errno == EAGAIN || errno == EINTR)) return watch_client();
  if (n > 0) return;  // a pipelined request: read when the stream is over
  // Its end: only its side (shutdown(SHUT_WR): it may still read) or a close. A unix
  // client that closed has both directions of this socket shut, which poll reports as
  // POLLHUP (unix_release_sock sets the peer's sk_shutdown to SHUTDOWN_MASK; a shutdown
  // of the write side sets RCV_SHUTDOWN only): gone, nothing to end for it. A TCP
  // client's close is a FIN like a shutdown, told apart only by a later write: its end.
  if (n == 0 && !closed_both_ways(client_.native_handle())) return client_ended();
  req_.client_gone = true;
  if (req_.events_shared) return end_shared();  // out of the hub, then the stream ends
  beast::error_code ignored;
  if (upstream_) upstream_->cancel(ignored);  // the daemon's side ends, then the stream
}

bool connection::closed_both_ways(int fd) noexcept {
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLHUP) != 0;
}

// The client ended its side mid-stream. dockerd reads its client's end as a cancelled
// request and ends the answer (Go's net/http cancels the request's context): the end goes
// on to the daemon, whose own end the stream relays as any. One that has not ended within
// half_close_grace is cut off by the watchdog (the daemon's side only), and end_stream
// ends the stream. Not watched again: the end stays readable.
void connection::client_ended() {
  req_.client_ended = true;
  if (req_.events_shared) return end_shared();  // the gate ends it, as dockerd would
  beast::error_code ignored;
  if (upstream_) upstream_->shutdown(net::socket_base::shutdown_send, ignored);
  set_deadline(half_close_grace, true);
}

// The shutdown deadline (server.cpp): a held stream between two chunks is ended as end_stream
// would end it, in what the socket takes now; one whose client has not taken its last chunk
// yet is closed as it is (that client reads nothing more anyway).
void connection::end_held_stream_now() noexcept {
  if (!req_.stream_waiting || req_.client_writing) return;
  req_.relay_failed = req_.upstream_ended = true;  // to the client, the gate's stop is the daemon's
  if (gate_ends_stream())
    (void)::send(client_.native_handle(), last_chunk.data(), last_chunk.size(),
                 MSG_NOSIGNAL | MSG_DONTWAIT);
  req_.client_gone = true;  // nothing more is written to it
}

}  // namespace dockgate::proxy

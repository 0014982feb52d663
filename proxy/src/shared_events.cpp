// Step 8 for a GET /events that shares its daemon stream with the same request of the
// profile's other clients (events_hub.hpp): the connection is one holder of the hub.
//
// Invariants kept here:
// - Shared only where nothing but the stream's start can differ: GET /events with no
//   `since` or `until` (they replay history and end: each such request is the daemon's
//   own), no body, a daemon on a unix socket (its clock is the gate's), no blocking audit
//   (whose decision line goes before the daemon sees a request). The key holds the profile
//   and the forwarded target, the owner label and the client's filters in it.
// - A joining client's stream starts at its join: events the daemon made before are not
//   its (events_fanout.hpp); its head is the daemon's head of the shared answer, as
//   write_response_head makes every head (its Date is the shared answer's).
// - A client that does not take its events does not stall the others: what it has not
//   taken waits in out_, at most max_unsent bytes; past that it is cut off (closed, as a
//   client whose write failed), never written part of a chunk and then more.
// - Its end is the unshared stream's: the daemon's end, or its going away, or the client's
//   end of its side is a terminating chunk after the whole chunks; the shutdown deadline
//   as end_held_stream_now does it. A shared stream's connection closes after it.
#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>
#include <chrono>
#include <cstdio>

#include "connection.hpp"
#include "events_hub.hpp"
#include "socket_io.hpp"

namespace dockgate::proxy {

namespace {

// What a held shared stream may leave untaken: one event line at most (events_fanout's
// limit) and more besides.
constexpr std::size_t max_unsent = 2 * events_fanout::max_line;

std::int64_t realtime_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

bool connection::shares_events(const policy::route& r, const policy::request_shape& shape) const {
  if (r.op != policy::operation::SystemEvents || head_->method != http::method::get ||
      shape.body != policy::request_body::none || shape.upgrade || shape.hijack)
    return false;
  if (ctx_.options.upstream.scheme != common::endpoint::kind::unix_socket || ctx_.audit.blocking())
    return false;
  // The query the daemon gets: `filters` only (dockerd's getEvents reads since, until and
  // filters).
  std::string_view q = req_.query;
  while (!q.empty()) {
    const std::size_t amp = q.find('&');
    const std::string_view item = q.substr(0, amp);
    if (item.substr(0, item.find('=')) != "filters") return false;
    q = amp == std::string_view::npos ? std::string_view() : q.substr(amp + 1);
  }
  return true;
}

bool connection::join_shared_events(std::size_t head_size) {
  events_hub* hub = events_hub::find(ctx_, events_hub::key(ctx_, *profile_, req_.target));
  if (!hub) return false;
  http::response_head res;
  if (!http::parse_response_head(hub->head(), res)) return false;
  req_.framing = head_->version_minor == 1 ? response_framing::chunked : response_framing::raw;
  req_.response_keep_alive = false;  // it closes after its end
  req_.response_status = res.status;
  req_.response_chunked_in = true;
  write_response_head(res, req_.framing,
                      head_->keep_alive && req_.framing != response_framing::raw);
  // Its events begin now: those the hub still has on their way go to the holders before it.
  if (!hub->join(*this, realtime_ns())) return false;  // over just now: as any request
  consume(head_size);
  ctx_.give_back_head(std::move(head_));
  release_in_buffer_if_empty();
  release_upstream();  // an idle connection to the daemon of an earlier request: to the pool
  upstream_.reset();
  hold_shared(*hub);
  flush_shared();  // the head
  return true;
}

bool connection::open_shared_events(std::string& daemon_head) {
  if (req_.response_status != 200 || !req_.response_chunked_in || !upstream_ || req_.client_gone ||
      req_.response_head_pending || daemon_head.empty())
    return false;
  std::string key(events_hub::key(ctx_, *profile_, req_.target));
  if (events_hub::find(ctx_, key)) return false;  // another opened one meanwhile
  events_hub& hub =
      events_hub::open(ctx_, std::move(key), std::move(*upstream_), std::move(daemon_head), policy_,
                       *profile_, req_.answer_filter == policy::owned_answer::events);
  upstream_.reset();
  hub.resume(req_.response_decoder, req_.event_line);
  hub.join(*this, 0);  // the daemon's stream is this request's own: all of it
  std::string().swap(out_);
  hold_shared(hub);
  return true;
}

void connection::hold_shared(events_hub& hub) {
  req_.hub = &hub;
  req_.events_shared = true;
  slot_.client_only();  // its daemon socket is the hub's now, or none
  ctx_.stats.stream(+1);
  req_.stream_waiting = true;
  std::string().swap(req_.target);
  std::string().swap(req_.query);
  std::string().swap(req_.event_line);
  std::string().swap(req_.owned_events);
  response_.release();
  watch_client();
}

// From the hub's fan-out: written now without waiting, what the socket does not take
// kept in out_ behind what waits there already.
void connection::take_events(std::string_view lines) {
  if (req_.client_gone || req_.end_posted) return;
  std::array<char, 24> size_line;
  const bool chunked = req_.framing == response_framing::chunked;
  const int len =
      chunked ? std::snprintf(size_line.data(), size_line.size(), "%zx\r\n", lines.size()) : 0;
  const std::array<std::string_view, 3> pieces{
      std::string_view(size_line.data(), static_cast<std::size_t>(len)), lines,
      chunked ? std::string_view("\r\n") : std::string_view()};
  req_.audit.bytes_out += lines.size();
  std::size_t sent = 0;
  if (out_.empty()) {
    std::array<iovec, 3> iov;
    for (std::size_t i = 0; i < 3; ++i)
      iov[i] = {const_cast<char*>(pieces[i].data()), pieces[i].size()};
    msghdr msg{};
    msg.msg_iov = iov.data();
    msg.msg_iovlen = iov.size();
    ssize_t n;
    do n = ::sendmsg(client_.native_handle(), &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return cut_shared();
    sent = n < 0 ? 0 : static_cast<std::size_t>(n);
  }
  const std::size_t total = pieces[0].size() + pieces[1].size() + pieces[2].size();
  if (sent == total) return;
  if (out_.size() + total - sent > max_unsent) return cut_shared();
  for (const auto piece : pieces) {
    const std::size_t skip = std::min(sent, piece.size());
    out_.append(piece.substr(skip));
    sent -= skip;
  }
  req_.client_writing = true;  // part of a chunk may be out: the shutdown cuts, never ends
  wait_client_writable();
}

void connection::flush_shared() {
  while (!out_.empty()) {
    const ssize_t n =
        ::send(client_.native_handle(), out_.data(), out_.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      req_.client_writing = true;  // maybe part of a chunk out: the shutdown cuts, never ends
      return wait_client_writable();
    }
    if (n < 0) return cut_shared();
    out_.erase(0, static_cast<std::size_t>(n));
  }
  std::string().swap(out_);  // an idle holder keeps no buffer
  req_.client_writing = false;
}

void connection::wait_client_writable() {
  if (req_.write_waiting) return;
  req_.write_waiting = true;
  client_.async_wait(net::socket_base::wait_write, [this](beast::error_code ec) {
    req_.write_waiting = false;
    if (!req_.stream_waiting) return shared_done_if_idle();  // over: this is the cancellation
    if (ec) return cut_shared();
    flush_shared();
  });
}

// The client cannot take its stream (a failed write, or too much untaken): nothing more
// is written to it, and it leaves the hub (later: this may run inside the hub's fan-out).
void connection::cut_shared() {
  req_.client_gone = true;
  if (req_.end_posted) return;
  req_.end_posted = true;
  net::post(client_.get_executor(), [this] {
    req_.end_posted = false;
    end_shared();
  });
}

// From the hub's end (inside its callbacks): it has let go of this holder already.
void connection::events_over(bool) {
  req_.hub = nullptr;
  if (req_.watch_epoll) req_.watch_pending = false;  // the hub's epoll set is gone
  req_.hub_ended = true;
  if (req_.end_posted) return;
  req_.end_posted = true;
  net::post(client_.get_executor(), [this] {
    req_.end_posted = false;
    end_shared();
  });
}

// The stream is over for this holder: out of the hub, its waits cancelled; once none is
// pending, finish_shared ends it.
void connection::end_shared() {
  if (req_.watch_epoll) {  // armed, or fired and left registered (a pipelined request)
    if (req_.hub) req_.hub->unwatch(*this, client_.native_handle());
    req_.watch_pending = false;
  }
  if (req_.hub) {
    events_hub* hub = req_.hub;
    req_.hub = nullptr;
    hub->leave(*this);
  }
  req_.stream_waiting = false;
  if (req_.watch_pending || req_.write_waiting) {
    beast::error_code ignored;
    client_.cancel(ignored);  // their handlers come back here (shared_done_if_idle)
  }
  shared_done_if_idle();
}

void connection::shared_done_if_idle() {
  if (!req_.events_shared || req_.stream_waiting || req_.watch_pending || req_.write_waiting ||
      req_.end_posted)
    return;
  req_.events_shared = false;  // once: nothing calls back into it any more
  net::co_spawn(client_.get_executor(), finish_shared(std::unique_ptr<connection>(this)),
                net::detached);
}

net::awaitable<void> connection::finish_shared(std::unique_ptr<connection> self) {
  connection& c = *self;
  c.ctx_.stats.stream(-1);
  try {
    // The end an unshared stream gets (end_stream): the daemon's, or the gate's when the
    // daemon went away or the client ended its side, after the chunks it has not taken.
    if (!c.req_.client_gone && c.req_.framing == response_framing::chunked &&
        (c.req_.hub_ended || c.req_.client_ended))
      c.out_ += last_chunk;
    if (!c.req_.client_gone && !c.out_.empty()) {
      c.set_deadline(half_close_grace);
      co_await write_all(c.client_, net::buffer(c.out_));
      c.clear_deadline();
    }
  } catch (const std::exception& ex) {
    c.ctx_.log->error("client {}: stream failed: {}", c.client_id_, ex.what());
  }
  c.finish_audit(c.req_.response_status);
  co_await c.close_gracefully();
}

}  // namespace dockgate::proxy

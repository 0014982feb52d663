#pragma once
// What the relay knows about a socket's readability that Asio's epoll reactor cannot.
//
// The reactor registers every socket once, edge-triggered (EPOLLIN | EPOLLET): each arrival
// is reported once, and an event that finds no read queued only sets the socket's "try a
// read at once" flag (descriptor_state::try_speculative_). The reactor clears that flag only
// after a read that returned end of stream, so every read the relay queues is first tried at
// once. For the read of the daemon's answer, queued right after the request went out, that
// try meets EAGAIN: one wasted recv(2) per request, which nginx's relay does not make.
//
// not_readable_yet(s), called before a request is written to the daemon, clears the flag:
// the answer cannot come before its request, and anything that arrives after this point is
// reported by epoll (edge-triggered: every arrival, whatever the socket held) and sets the
// flag again, in whatever order the loop then runs. What was in the socket before the request
// is not news the relay waits for: a daemon that closed an idle connection makes the write
// fail (EPIPE on a unix socket, a reset on TCP, which epoll reports as an error to the read).
//
// A client's next request is awaited the same way, with two more parts:
// - until_readable(s) waits for the flag or epoll's next report with no system call.
//   async_wait cannot: it re-arms the socket with epoll_ctl(2) every time, one more system
//   call per request than nginx, which waits on the event it registered once.
// - The flag is cleared after a short read of the client (drained_unless_ended). A short read
//   alone does not show the socket is drained: the client's end (FIN) may have come with its
//   last bytes, recv(2) returns the bytes without saying so, and that event is spent, so a
//   read queued without a try would wait for an arrival that never comes (tests/integration:
//   a truncated body followed by the client's half-close). nginx's answer is EPOLLRDHUP:
//   report_end(s) adds it to the socket's registration once, and from then on every event
//   the reactor takes for the socket says whether the peer has ended. The flag is cleared
//   only when the last one did not: an end that came before that event is in it, and an end
//   that came after it is an arrival that epoll will still report.
//
// Two implementations, chosen by the CMake option DOCKGATE_ASIO_REACTOR_PEEK
// (cmake/dependencies.cmake): readiness.cpp reaches into Boost 1.81's epoll reactor
// (detail/, private members, by the standard's explicit-instantiation rule) and does the
// above; readiness_portable.cpp uses public Asio only (nothing marked, async_wait for the
// next request: two system calls more per request, nothing lost). The option is ON by
// default only when the Boost found is 1.81.0 exactly, so a Boost upgrade builds the
// portable path: slower, never broken. Before readiness.cpp is moved to another Boost,
// re-read epoll_reactor::start_op and descriptor_state::perform_io.

#include <tuple>

#include "net.hpp"

namespace dockgate::proxy {

// Before writing a request (the read of its answer waits for epoll's word), and after a
// read that met EAGAIN (nothing there, and no end either: that would have read as 0).
void not_readable_yet(protocol::socket& s) noexcept;
// Whether the reactor would try a read on `s` at once.
bool maybe_readable(protocol::socket& s) noexcept;

// Once per client socket, before its first wait: epoll reports the peer's end (EPOLLRDHUP)
// with its readability. One epoll_ctl(2); false if that failed (the flag is then never
// cleared after a read, which is only slower).
bool report_end(protocol::socket& s) noexcept;
// After a read that left room in its buffer: nothing is left unread that epoll will not
// report, unless the last event the reactor took for `s` said the peer has ended (or its end
// is not reported at all: report_end), in which case the flag is kept.
void drained_unless_ended(protocol::socket& s) noexcept;
// Completes when `s` may have something to read: at once if the reactor's flag says so,
// otherwise at epoll's next report for it; no system call either way. Cancelled like any
// operation on `s` (cancel, close).
net::awaitable<std::tuple<boost::system::error_code>> until_readable(protocol::socket& s);

}  // namespace dockgate::proxy

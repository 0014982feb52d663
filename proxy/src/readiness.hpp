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
// Not used for clients, on purpose: a short read of a client does not show the socket is
// drained, because the client's end (FIN) may have come with its last bytes, and recv(2)
// returns the bytes without saying so; its event is already spent, so a read queued without
// a try would wait for an arrival that never comes (tests/integration: a truncated body
// followed by the client's half-close; tests/proxy/readiness_test.cpp keeps that case).
//
// Reaches into Boost 1.81's epoll reactor (detail/, private members, by the standard's
// explicit-instantiation rule): readiness.cpp checks the version, and a Boost upgrade must
// re-read epoll_reactor::start_op and descriptor_state::perform_io before changing it.

#include "net.hpp"

namespace dockgate::proxy {

// Before writing a request: the read of its answer waits for epoll's word.
void not_readable_yet(protocol::socket& s) noexcept;
// Whether the reactor would try a read on `s` at once.
bool maybe_readable(protocol::socket& s) noexcept;

}  // namespace dockgate::proxy

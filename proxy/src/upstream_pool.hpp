#pragma once
// Idle connections to the daemon, kept by one gate thread for the next client connection
// that needs one (docs/design.md, "The request path", step 3; docs/proxy.md, "Daemon
// connections"). A client that opens a connection per request (the docker CLI: one
// process, one connection) then costs the daemon no accept, no connection set-up and no
// tear-down per request.
//
// Invariant (with its callers, connection.cpp): a daemon connection is idle here only
// between two whole exchanges. It is given back only after a complete, framed response
// (a Content-Length read whole, or chunked to its last chunk) to an HTTP/1.1 request
// that neither the client nor the daemon asked to close, with no byte after it; never
// after a hijack (101, or the raw-stream 200), an endless or held stream (events, logs,
// stats, wait), a refusal, an error, or an answer the gate cut. It is checked again when
// taken (the daemon may have closed it, or sent what no request asked for: both are
// dropped). Nothing about a daemon connection depends on the profile or the client: the
// gate has one --upstream and one TLS identity toward it, every request carries its own
// target, and dockerd keeps no per-connection state between requests; so the pool is
// keyed by nothing but the thread (a socket belongs to its thread's event loop).
//
// Bounded: at most idle_cap per thread (the descriptor reserve counts them, server.cpp),
// each closed after idle_timeout, well below any idle timeout of a daemon or a proxy in
// front of one (dockerd sets none; Go's default transport closes its own at 90 s), and all
// closed at shutdown.

#include <chrono>
#include <cstddef>
#include <deque>

#include "upstream_socket.hpp"

namespace dockgate::proxy {

class upstream_pool {
 public:
  using clock = std::chrono::steady_clock;
  static constexpr std::size_t idle_cap = 8;  // per thread
  static constexpr clock::duration idle_timeout = std::chrono::seconds(30);

  // Moves the most recently given back connection that is still usable into `into` (an
  // empty socket); false if there is none. Those found unusable are closed on the way.
  bool take(upstream_socket& into);
  // Keeps `from` (open, between two exchanges) for the next taker; the oldest goes when
  // the pool is full. `from` is left empty.
  void give_back(upstream_socket& from, clock::time_point now);
  // Closes those idle since before `now - idle_timeout`: the watchdog's, once a second.
  void expire(clock::time_point now);
  void clear() noexcept { idle_.clear(); }
  std::size_t idle() const noexcept { return idle_.size(); }

  // Whether a socket between two exchanges can carry the next request: the peer has
  // neither ended nor reset it, and sent nothing (bytes no request asked for would be
  // read as the next answer). One recv(MSG_PEEK | MSG_DONTWAIT): EAGAIN is the one good
  // answer.
  static bool still_usable(int fd) noexcept;

 private:
  struct entry {
    upstream_socket socket;
    clock::time_point since;
  };
  std::deque<entry> idle_;  // the oldest first
};

}  // namespace dockgate::proxy

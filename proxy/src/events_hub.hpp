#pragma once
// A daemon `GET /events` stream that the held streams of one gate thread share (issue 43:
// a held stream costs one descriptor, its client's, not two): requests of one profile for
// the same forwarded target (the same filters, the profile's owner label joined; no
// `since` or `until`, which replay history and end) are given one daemon answer. The first
// such request opens it as any request does and hands its socket over (held_streams.cpp);
// the next ones join without reaching the daemon (shared_events.cpp).
//
// Invariants kept here:
// - Never across profiles, nor across policies: the key is the profile's address and the
//   forwarded target, and the hub keeps its policy alive, so that address names one
//   profile for the hub's life (a reload makes new hubs for new requests).
// - Only a daemon on a unix socket (its clock is the gate's: events_fanout.hpp).
// - Nothing one holder does stalls the others: the hub reads as the daemon sends and each
//   holder writes without waiting (a bounded buffer per holder; past it, that holder is
//   cut off, as a client whose write failed is).
// - The daemon's stream ends when its last holder goes (the hub closes its socket, as a
//   client's close ends a direct subscription) or when the daemon ends it; its holders
//   then get the end an unshared stream gets (the terminating chunk).

#include <boost/asio/posix/stream_descriptor.hpp>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "context.hpp"
#include "events_fanout.hpp"
#include "net.hpp"

namespace dockgate::proxy {

class events_hub {
 public:
  // The hub's key: the profile (by address) and the target forwarded to the daemon, built
  // in ctx.hub_key (its capacity kept for the thread's next request).
  static std::string_view key(proxy_context& ctx, const policy::profile& profile,
                              std::string_view target);
  static events_hub* find(proxy_context& ctx, std::string_view key);

  // Takes over a daemon events answer whose head `head` (as the daemon sent it) has been
  // read and relayed, with the decoder and partial line where that relay left off. The
  // hub lives in ctx.events_hubs until its stream is over or its last holder leaves.
  static events_hub& open(proxy_context& ctx, std::string key, protocol::socket upstream,
                          std::string head, std::shared_ptr<const policy::policy> policy,
                          const policy::profile& profile, bool filter_owned);
  events_hub(const events_hub&) = delete;
  events_hub& operator=(const events_hub&) = delete;

  // Gives what the daemon has sent so far to the present holders, then adds `s` (whose
  // events begin at `joined_ns`; 0: the opener's, all it reads from now, and never false).
  // False, and `s` not added, if the stream turned out to be over (the hub may be gone).
  bool join(events_subscriber& s, std::int64_t joined_ns);
  // From outside the hub's callbacks only (a holder's own end, posted).
  void leave(events_subscriber& s);
  void resume(const http::chunked_decoder& decoder, std::string_view partial_line) {
    fanout_.resume(decoder, partial_line);
  }
  // Watches a holder's client for readability (its end), once: s.client_readable() is
  // called from the hub's one wait on an epoll set of all its holders' clients, not from
  // an Asio wait of each (~340 bytes a holder). False if epoll refused it. unwatch() before
  // the holder leaves; the hub's end forgets them all (its holders are told events_over).
  bool watch(events_subscriber& s, int fd);
  void unwatch(events_subscriber& s, int fd);
  // The daemon's response head, for a joining client's own.
  std::string_view head() const { return head_; }

 private:
  events_hub(proxy_context& ctx, std::string key, protocol::socket upstream, std::string head,
             std::shared_ptr<const policy::policy> policy, const policy::profile& profile,
             bool filter_owned);
  ~events_hub();
  void wait();
  void wait_clients();
  void pump();
  void over(bool clean);
  void close();
  void forget();
  void delete_if_done();

  proxy_context& ctx_;
  std::string key_;
  protocol::socket upstream_;
  std::string head_;
  std::shared_ptr<const policy::policy> policy_;
  events_fanout fanout_;
  bool waiting_ = false;  // a read wait is pending: its callback deletes a done hub
  // The holders' clients: an epoll set (EPOLLONESHOT each), waited on as one descriptor.
  std::optional<net::posix::stream_descriptor> clients_;
  bool clients_waiting_ = false;
  bool in_clients_ = false;  // its callback is at work: the hub is not deleted under it
  bool over_ = false;
  bool listed_ = true;  // in ctx.events_hubs
};

}  // namespace dockgate::proxy

#pragma once
// One daemon `GET /events` answer given to several held streams (events_hub.hpp does the
// I/O): the daemon's chunked body decoded once, cut into whole event lines, filtered once
// for what the profile owns, and each line handed to every holder that may have it.
//
// Invariants kept here:
// - A holder is given only lines that arrive after it joined (read order), and of those
//   only events made no earlier than it joined (the event's own `timeNano`, the daemon's
//   CLOCK_REALTIME, against the join's: events_hub shares only a daemon on a unix socket,
//   whose clock is the gate's). Direct, dockerd subscribes a client just after it flushed
//   its head (api/server/router/system getEvents: Flush, then SubscribeToEvents, with no
//   `since`): a shared stream gives what a subscription made as the head went would give,
//   never an event the daemon made before the client's head (one still on its way in the
//   socket when the client joined included).
// - Owned lines only (policy::event_owned with the profile's owner), as the unshared relay
//   filters them (held_streams.cpp); a hub is never shared across profiles (its key).
// - One event line is at most 1 MiB, as the unshared relay holds it: a daemon that sends
//   more without a newline has broken its stream (failed).
// No Asio, no clock: bytes and times in, lines out (tests/proxy/events_fanout_test.cpp).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "dockgate/http/chunked.hpp"

namespace dockgate::proxy {

class events_fanout;

// One holder of a shared events stream (a held connection).
class events_subscriber {
 public:
  // Whole event lines, each ending in '\n', to be written to the client in this order.
  virtual void take_events(std::string_view lines) = 0;
  // The daemon's stream is over: the fan-out has let go of this holder already. `clean`:
  // the daemon ended it (its terminating chunk); else it went away or broke its framing.
  virtual void events_over(bool clean) = 0;
  // Its client's socket is readable (events_hub::watch: its end, or bytes it sent).
  virtual void client_readable() = 0;
  bool subscribed() const noexcept { return fanout_ != nullptr; }

 protected:
  events_subscriber() = default;
  virtual ~events_subscriber() = default;

 private:
  friend class events_fanout;
  friend class events_hub;
  events_fanout* fanout_ = nullptr;
  bool in_epoll_ = false;  // its client is in its hub's epoll set (events_hub::watch)
  events_subscriber* prev_ = nullptr;
  events_subscriber* next_ = nullptr;
  // Events made before this (ns since the epoch) are not its; 0: every line read after it
  // joined is (the holder whose request opened the daemon's stream).
  std::int64_t joined_ns_ = 0;
  // Set once it was given an event made after it joined: later lines need no look.
  bool settled_ = false;
};

class events_fanout {
 public:
  enum class state { open, ended, failed };
  // `owner`: the profile's owner label; only events of containers it owns go on (audit
  // mode or an unconfined profile: `filter_owned` false, every line).
  events_fanout(std::string owner, bool filter_owned)
      : owner_(std::move(owner)), filter_owned_(filter_owned) {}
  events_fanout(const events_fanout&) = delete;
  events_fanout& operator=(const events_fanout&) = delete;
  ~events_fanout() { end(false); }

  // Where the relay that opened the stream left off: the decoder's state past the bytes it
  // relayed itself, and a partial line it held.
  void resume(const http::chunked_decoder& decoder, std::string_view partial_line);
  // Bytes of the daemon's chunked body, as read: whole lines go to the holders now.
  state feed(std::string_view bytes);
  void join(events_subscriber& s, std::int64_t joined_ns) noexcept;
  void leave(events_subscriber& s) noexcept;
  // Every holder let go of, then told (events_over).
  void end(bool clean) noexcept;
  bool empty() const noexcept { return first_ == nullptr; }
  std::size_t size() const noexcept { return count_; }

  // The event's `timeNano`, -1 if it has none. Go writes events.Message's fields in their
  // order, Actor (whose Attributes may hold a label named timeNano) before the top-level
  // timeNano, so the last key of that name is the event's own; inside a JSON string the
  // quote before the colon would be escaped.
  static std::int64_t time_nano(std::string_view line) noexcept;
  static constexpr std::size_t max_line = 1024 * 1024;

 private:
  void dispatch();

  std::string owner_;
  bool filter_owned_;
  http::chunked_decoder decoder_;
  std::string line_;   // the start of a line the next read ends
  std::string batch_;  // the owned whole lines of one read
  std::string some_;   // what one holder takes of a batch that began before it joined
  events_subscriber* first_ = nullptr;
  std::size_t count_ = 0;
};

}  // namespace dockgate::proxy

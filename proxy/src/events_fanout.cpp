// One daemon events answer, decoded and filtered once, given to each holder that may have
// each line (the invariants: events_fanout.hpp).
#include "events_fanout.hpp"

#include "dockgate/policy/ownership.hpp"

namespace dockgate::proxy {

void events_fanout::resume(const http::chunked_decoder& decoder, std::string_view partial_line) {
  decoder_ = decoder;
  line_.assign(partial_line);
}

events_fanout::state events_fanout::feed(std::string_view in) {
  batch_.clear();
  state result = state::open;
  while (!in.empty()) {
    const auto r = decoder_.feed(in);
    in.remove_prefix(r.consumed);
    if (r.state == http::chunked_decoder::status::error) return state::failed;
    if (r.state == http::chunked_decoder::status::done) {
      result = state::ended;  // bytes past the end are the daemon's mistake: not read
      break;
    }
    if (r.state == http::chunked_decoder::status::need_more) {
      if (r.consumed == 0) break;
      continue;
    }
    // Whole lines of this piece (with the start a last read left), each judged once.
    std::string_view data = r.data;
    for (std::size_t nl; (nl = data.find('\n')) != std::string_view::npos;) {
      std::string_view line = data.substr(0, nl + 1);
      if (!line_.empty()) {
        line_.append(line);
        line = line_;
      }
      if (!filter_owned_ || policy::event_owned(line, owner_)) batch_.append(line);
      line_.clear();
      data.remove_prefix(nl + 1);
    }
    line_.append(data);
    if (line_.size() > max_line) return state::failed;  // one event line, not a stream
  }
  if (!batch_.empty()) dispatch();
  if (line_.empty() && line_.capacity() > 4096) std::string().swap(line_);
  return result;
}

void events_fanout::dispatch() {
  for (events_subscriber* s = first_; s;) {
    events_subscriber* next = s->next_;  // a holder does not leave from take_events: kept safe
    if (s->settled_) {
      s->take_events(batch_);
    } else {
      // Its first lines: those made before it joined are not its (the top of the .hpp).
      some_.clear();
      std::string_view rest = batch_;
      while (!rest.empty()) {
        const std::string_view line = rest.substr(0, rest.find('\n') + 1);
        rest.remove_prefix(line.size());
        const std::int64_t t = time_nano(line);
        if (t >= 0 && t < s->joined_ns_) continue;
        if (t >= s->joined_ns_) s->settled_ = true;
        some_.append(line);
      }
      if (!some_.empty()) s->take_events(some_);
    }
    s = next;
  }
  if (some_.capacity() > 4096) std::string().swap(some_);
  if (batch_.capacity() > 64 * 1024) std::string().swap(batch_);
}

void events_fanout::join(events_subscriber& s, std::int64_t joined_ns) noexcept {
  s.fanout_ = this;
  s.joined_ns_ = joined_ns;
  s.settled_ = joined_ns <= 0;
  s.prev_ = nullptr;
  s.next_ = first_;
  if (first_) first_->prev_ = &s;
  first_ = &s;
  ++count_;
}

void events_fanout::leave(events_subscriber& s) noexcept {
  if (s.fanout_ != this) return;
  if (s.prev_)
    s.prev_->next_ = s.next_;
  else
    first_ = s.next_;
  if (s.next_) s.next_->prev_ = s.prev_;
  s.fanout_ = nullptr;
  s.prev_ = s.next_ = nullptr;
  --count_;
}

void events_fanout::end(bool clean) noexcept {
  while (first_) {
    events_subscriber& s = *first_;
    leave(s);
    s.in_epoll_ = false;  // the hub's epoll set goes with it
    s.events_over(clean);
  }
}

std::int64_t events_fanout::time_nano(std::string_view line) noexcept {
  constexpr std::string_view key = "\"timeNano\":";
  const std::size_t at = line.rfind(key);
  if (at == std::string_view::npos) return -1;
  std::int64_t t = 0;
  std::size_t i = at + key.size();
  while (i < line.size() && line[i] == ' ') ++i;
  const std::size_t first = i;
  for (; i < line.size() && line[i] >= '0' && line[i] <= '9' && i - first < 19; ++i)
    t = t * 10 + (line[i] - '0');
  return i == first ? -1 : t;
}

}  // namespace dockgate::proxy

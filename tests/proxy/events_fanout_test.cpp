// events_fanout.hpp: one daemon events answer given to several held streams. Each holder
// gets whole lines, in order, only those read after it joined and made no earlier than its
// join; only the profile's own events; the daemon's end or broken framing ends every holder.
#include "events_fanout.hpp"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

using namespace dockgate::proxy;

namespace {

struct recorder final : events_subscriber {
  std::string got;
  int writes = 0;
  int ended = 0;
  bool clean = false;
  void take_events(std::string_view lines) override {
    got.append(lines);
    ++writes;
  }
  void events_over(bool c) override {
    ++ended;
    clean = c;
  }
  void client_readable() override {}
};

// An event of a container with the owner label `owner`, made at `nanos`.
std::string event(const std::string& id, const std::string& owner, long long nanos) {
  return R"({"status":"create","id":")" + id + R"(","Type":"container","Action":"create",)" +
         R"("Actor":{"ID":")" + id + R"(","Attributes":{"dockgate.owner":")" + owner +
         R"(","timeNano":"1"}},"scope":"local","time":)" + std::to_string(nanos / 1000000000) +
         R"(,"timeNano":)" + std::to_string(nanos) + "}\n";
}

std::string chunk(const std::string& data) {
  char size[24];
  std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  return size + data + "\r\n";
}

constexpr long long t0 = 1765000000000000000;

}  // namespace

TEST_CASE("events_fanout: every holder gets the owned lines read after it joined",
          "[unit][proxy][events]") {
  // (The holders before the fan-out: it is destroyed first, and ends those it still has.)
  recorder first, second;
  events_fanout fan("a", true);
  fan.join(first, 0);
  const auto mine1 = event("c1", "a", t0 + 10);
  const auto theirs = event("c2", "b", t0 + 20);
  CHECK(fan.feed(chunk(mine1 + theirs)) == events_fanout::state::open);
  fan.join(second, t0 + 15);
  const auto mine2 = event("c3", "a", t0 + 30);
  // A line split across chunks and reads comes out whole, once.
  const std::string bytes = chunk(mine2.substr(0, 40)) + chunk(mine2.substr(40));
  CHECK(fan.feed(bytes.substr(0, 25)) == events_fanout::state::open);
  CHECK(first.got == mine1);
  CHECK(fan.feed(bytes.substr(25)) == events_fanout::state::open);
  CHECK(first.got == mine1 + mine2);
  CHECK(second.got == mine2);
  CHECK(first.writes == 2);
  CHECK(fan.size() == 2);
}

TEST_CASE("events_fanout: a holder never gets an event made before it joined",
          "[unit][proxy][events]") {
  recorder opener, joiner;
  events_fanout fan("", false);  // unconfined: every line
  fan.join(opener, 0);
  fan.join(joiner, t0 + 100);
  // Read after the join, made before it (on its way in the socket): the opener's only.
  const auto before = event("c1", "x", t0 + 50);
  const auto after = event("c2", "x", t0 + 150);
  const std::string no_time = "{\"status\":\"x\"}\n";  // no timeNano: read order decides
  CHECK(fan.feed(chunk(before + no_time + after)) == events_fanout::state::open);
  CHECK(opener.got == before + no_time + after);
  CHECK(joiner.got == no_time + after);
  // Settled: later lines are not looked at for it (one made "earlier" by a clock step goes).
  const auto late = event("c3", "x", t0 + 60);
  CHECK(fan.feed(chunk(late)) == events_fanout::state::open);
  CHECK(joiner.got == no_time + after + late);
}

TEST_CASE("events_fanout: the event's own timeNano, not a label of that name",
          "[unit][proxy][events]") {
  CHECK(events_fanout::time_nano(event("c", "a", t0 + 7)) == t0 + 7);
  CHECK(events_fanout::time_nano(R"({"Actor":{"Attributes":{"timeNano":"9"}}})") == -1);
  CHECK(events_fanout::time_nano(R"({"timeNano":9223372036854775807})") == 9223372036854775807);
}

TEST_CASE("events_fanout: the daemon's end and broken framing end every holder",
          "[unit][proxy][events]") {
  SECTION("the terminating chunk") {
    recorder h;
    events_fanout fan("a", true);
    fan.join(h, 0);
    CHECK(fan.feed(chunk(event("c1", "a", t0)) + "0\r\n\r\n") == events_fanout::state::ended);
    CHECK(h.got == event("c1", "a", t0));
    fan.end(true);
    CHECK(h.ended == 1);
    CHECK(h.clean);
    CHECK(!h.subscribed());
    CHECK(fan.empty());
  }
  SECTION("a broken chunk") {
    recorder h;
    events_fanout fan("a", true);
    fan.join(h, 0);
    CHECK(fan.feed("zz\r\n") == events_fanout::state::failed);
  }
  SECTION("a line past 1 MiB") {
    recorder h;
    events_fanout fan("", false);
    fan.join(h, 0);
    const std::string part(64 * 1024, 'x');
    events_fanout::state s = events_fanout::state::open;
    for (int i = 0; i < 20 && s == events_fanout::state::open; ++i) s = fan.feed(chunk(part));
    CHECK(s == events_fanout::state::failed);
    CHECK(h.got.empty());
  }
  SECTION("where the opening relay left off") {
    recorder h;
    events_fanout fan("", false);
    fan.join(h, 0);
    dockgate::http::chunked_decoder d;
    const std::string line = "{\"status\":\"start\"}\n";
    const std::string bytes = chunk(line);
    // The opening relay decoded the size line and 6 bytes of the line, and keeps them.
    std::string_view first = std::string_view(bytes).substr(0, 10);
    std::string partial;
    while (!first.empty()) {
      const auto r = d.feed(first);
      first.remove_prefix(r.consumed);
      partial.append(r.data);
    }
    CHECK(partial == line.substr(0, 6));
    fan.resume(d, partial);
    CHECK(fan.feed(std::string_view(bytes).substr(10)) == events_fanout::state::open);
    CHECK(h.got == line);
  }
  SECTION("a holder that leaves gets nothing more") {
    recorder a, b;
    events_fanout fan("", false);
    fan.join(a, 0);
    fan.join(b, 0);
    fan.leave(a);
    CHECK(fan.feed(chunk("{}\n")) == events_fanout::state::open);
    CHECK(a.got.empty());
    CHECK(b.got == "{}\n");
    fan.end(false);
    CHECK(a.ended == 0);
    CHECK(b.ended == 1);
    CHECK(!b.clean);
  }
}

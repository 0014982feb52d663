#include "sessions/instance_lease.hpp"

#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>

#include "fake_engine.hpp"

using namespace dockgate::sidecar;

TEST_CASE("instance lease: a holder is provably gone only on this kernel and PID namespace",
          "[lease]") {
  lease_holder self;
  self.pid = 100;
  self.process = "boot-a pid:[4026531836] 5000";
  auto holder = [](std::int64_t pid, std::string process) {
    lease_holder h;
    h.pid = pid;
    h.process = std::move(process);
    return h;
  };
  // What /proc says here: PID 42 runs, started at tick 7000; no other PID runs.
  auto here = [](std::int64_t pid) -> std::optional<std::string> {
    if (pid == 42) return "7000";
    if (pid == 100) return "5000";
    return std::nullopt;
  };
  struct row {
    lease_holder h;
    bool gone;
  };
  const row table[] = {
      {holder(43, "boot-a pid:[4026531836] 6000"), true},   // no such PID
      {holder(42, "boot-a pid:[4026531836] 6000"), true},   // the PID is another process's
      {holder(42, "boot-a pid:[4026531836] 7000"), false},  // it runs
      {holder(43, "boot-b pid:[4026531836] 6000"), false},  // another kernel (or a reboot: unknown)
      {holder(43, "boot-a pid:[4026532000] 6000"), false},  // another PID namespace
      {holder(100, "boot-a pid:[4026531836] 5000"), false},  // this very process
      {holder(43, ""), false},                               // unreadable labels
      {holder(0, "boot-a pid:[4026531836] 6000"), false},
      {holder(43, "boot-a pid:[4026531836]"), false},
  };
  for (const auto& r : table) {
    CAPTURE(r.h.pid, r.h.process);
    CHECK(holder_provably_gone(r.h, self, here) == r.gone);
  }
  // Unknown about ourselves (a /proc of another namespace): never provably gone.
  lease_holder blind = self;
  blind.process.clear();
  CHECK_FALSE(holder_provably_gone(holder(43, "boot-a pid:[4026531836] 6000"), blind, here));
}

TEST_CASE("instance lease: this process names itself, and its labels name it back", "[lease]") {
  const auto me = lease_holder::of_this_process();
  CHECK(me.id.size() == 32);
  CHECK(me.pid == ::getpid());
  CHECK(lease_holder::of_this_process().id != me.id);  // random per holder
  REQUIRE_FALSE(me.process.empty());                   // this test's /proc is its own
  // Alive: its own PID with its own start tick.
  CHECK(start_tick_of_pid(me.pid).has_value());
  CHECK_FALSE(holder_provably_gone(me, lease_holder::of_this_process(), start_tick_of_pid));
  const auto back = lease_holder::from_labels({{"sandbox.lease.holder", me.id},
                                               {"sandbox.lease.host", "h"},
                                               {"sandbox.lease.pid", "42"},
                                               {"sandbox.lease.started_at", "0"},
                                               {"sandbox.lease.process", me.process}});
  CHECK(back.id == me.id);
  CHECK(back.pid == 42);
  CHECK(back.describe() == "holder " + me.id + " on host h, pid 42, since (unknown)");
}

TEST_CASE("instance lease: its name is keyed by the API key, so another owner cannot take it first",
          "[lease]") {
  config c;
  c.instance = "default";
  c.api_key = "test-key-0123456789";
  // Known answer (openssl dgst -sha256 -hmac test-key-0123456789 over
  // "dockgate-instance-lease\ndefault"): the first 64 bits.
  CHECK(lease_name(c) == "dockgate-instance-default-6dceb6b7cffeeb0a");
  config other = c;
  other.api_key = "another-owners-key";
  CHECK(lease_name(other) != lease_name(c));
  other = c;
  other.instance = "default2";
  CHECK(lease_name(other) != lease_name(c));
  // No key (SANDBOX_ALLOW_NO_AUTH): the plain, guessable name.
  other = c;
  other.api_key.clear();
  CHECK(lease_name(other) == "dockgate-instance-default");
}

// The lease's acquire against the fake engine (its answers the Engine API's own): what it
// removes, and whom it refuses.
namespace {
config lease_config() {
  config c;
  c.instance = "default";
  c.api_key = "test-key-0123456789";
  c.instance_lease_s = 2;
  return c;
}

std::map<std::string, std::string> held_by(const std::string& holder) {
  return {{"sandbox.lease", "default"},
          {"sandbox.lease.holder", holder},
          {"sandbox.lease.host", "elsewhere"},
          {"sandbox.lease.pid", "7"},
          {"sandbox.lease.started_at", "0"}};
}

// The heartbeat as read_heartbeat's exec prints it: the container's clock, the file's
// mtime, its sequence number.
dockgate::client::exec_result beat_seen(std::int64_t now, std::int64_t mtime, int seq) {
  dockgate::client::exec_result e;
  e.started = true;
  e.exit_code = 0;
  e.stdout_data =
      std::to_string(now) + "\n" + std::to_string(mtime) + "\n" + std::to_string(seq) + "\n";
  return e;
}
}  // namespace

TEST_CASE("instance lease: an expired lease is removed by its container ID, never by name",
          "[lease]") {
  const config c = lease_config();
  const std::string name = lease_name(c);
  SECTION("its container stopped") {
    testing::fake_engine e;
    const std::string old = e.add_running(name, held_by("gone"));
    e.set_state(old, "exited");
    std::string error;
    auto lease = instance_lease::acquire(e, c, error);
    // The fake runs no held exec: the new lease cannot beat, and is removed again (by ID).
    CHECK_FALSE(lease);
    CHECK(error.find("could not be made live") != std::string::npos);
    CHECK_FALSE(e.find(old));
    CHECK(e.count("remove") >= 1);
    const auto calls = e.calls();
    for (const auto& call : calls) CHECK(call != "remove " + name);
    CHECK(std::count(calls.begin(), calls.end(), "remove " + old) == 1);
  }
  SECTION("its heartbeat older than a lease") {
    testing::fake_engine e;
    const std::string old = e.add_running(name, held_by("silent"));
    e.on_exec = [](const auto&, const dockgate::client::exec_options&) {
      return beat_seen(1000, 990, 4);
    };
    std::string error;
    instance_lease::acquire(e, c, error);
    CHECK_FALSE(e.find(old));
    for (const auto& call : e.calls()) CHECK(call != "remove " + name);
  }
}

TEST_CASE("instance lease: a lease renewed while this start watches refuses it, the holder named",
          "[lease]") {
  const config c = lease_config();
  testing::fake_engine e;
  const std::string live = e.add_running(lease_name(c), held_by("h-live"));
  int reads = 0;
  e.on_exec = [&reads](const auto&, const dockgate::client::exec_options&) {
    ++reads;
    return reads == 1 ? beat_seen(1000, 1000, 1) : beat_seen(1000, 1000, 2);
  };
  std::string error;
  CHECK_FALSE(instance_lease::acquire(e, c, error));
  CHECK(error.find("is held by a live sidecar: holder h-live on host elsewhere") !=
        std::string::npos);
  CHECK(e.find(live));  // the live holder's lease stays
  CHECK(e.count("remove") == 0);
  CHECK(e.count("create") == 1);  // the one that found the name taken
}

// The warm pool's bookkeeping (sidecar/src/sessions/pool/pool.hpp) with in-memory containers: the
// Engine API side is covered by tests/integration/sidecar_pool_test.cpp.
#include "sessions/pool/pool.hpp"

#include <atomic>
#include <catch2/catch.hpp>
#include <mutex>
#include <set>
#include <thread>

#include "dockgate/sidecar/config.hpp"

using namespace dockgate::sidecar;
using namespace std::chrono_literals;

namespace {

// An engine in memory: containers by ID, the image's ID, failures and a session limit.
struct fake_engine {
  std::mutex m;
  std::set<std::string> live;
  std::set<std::string> removed;
  std::string image = "sha256:one";
  int next = 0;
  int fail_next = 0;
  std::size_t limit = 1000;
  std::chrono::milliseconds delay{0};      // how long a create takes
  std::set<std::string> frozen;            // containers that cannot run a cell (hooks::ready)
  std::vector<std::string> readied;        // the containers hooks::ready was asked about
  int claims_asked = 0, checks_asked = 0;  // by a claim, by the pool's own check
  std::vector<std::chrono::steady_clock::time_point> attempts;
  std::atomic<int> creates_begun{0};  // the pool marks a fill in flight before it calls create

  warm_pool::hooks hooks() {
    warm_pool::hooks h;
    h.create = [this](std::string& error, bool& full) -> std::optional<pooled_container> {
      ++creates_begun;
      std::this_thread::sleep_for(delay);
      std::lock_guard g(m);
      attempts.push_back(std::chrono::steady_clock::now());
      if (fail_next > 0) {
        --fail_next;
        error = "engine said no";
        return std::nullopt;
      }
      if (live.size() >= limit) {
        full = true;
        return std::nullopt;
      }
      pooled_container c{"sid" + std::to_string(next), "id" + std::to_string(next), image, nullptr};
      ++next;
      live.insert(c.id);
      return c;
    };
    h.remove = [this](const std::string& id) {
      std::lock_guard g(m);
      live.erase(id);
      removed.insert(id);
    };
    h.image_id = [this] {
      std::lock_guard g(m);
      return image;
    };
    h.running = [this]() -> std::optional<std::set<std::string>> {
      std::lock_guard g(m);
      return live;
    };
    h.ready = [this](pooled_container& c, bool claiming) {
      std::lock_guard g(m);
      readied.push_back(c.id);
      (claiming ? claims_asked : checks_asked)++;
      return !frozen.contains(c.id);
    };
    return h;
  }
  std::size_t live_count() {
    std::lock_guard g(m);
    return live.size();
  }
};

template <class F>
bool eventually(F f) {
  for (int i = 0; i < 500; ++i) {
    if (f()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return false;
}

}  // namespace

TEST_CASE("warm pool: fills to its size, a claim leaves it once and it refills",
          "[unit][sidecar][pool]") {
  fake_engine engine;
  warm_pool pool(3, engine.hooks());
  CHECK_FALSE(pool.claim());  // not started: empty
  pool.start();
  REQUIRE(eventually([&] { return pool.size() == 3; }));
  auto c = pool.claim();
  REQUIRE(c);
  CHECK(c->image_id == "sha256:one");
  REQUIRE(eventually([&] { return pool.size() == 3; }));
  CHECK(engine.live_count() == 4);  // three warm, one claimed
  // stop() removes the warm ones, never the claimed one.
  CHECK(pool.stop() == 3);
  CHECK(engine.live == std::set<std::string>{c->id});
  CHECK(pool.stop() == 0);
}

TEST_CASE("warm pool: a claim waits for the container being made, not for later ones",
          "[unit][sidecar][pool]") {
  fake_engine engine;
  engine.delay = 150ms;
  warm_pool pool(1, engine.hooks());
  pool.start();
  REQUIRE(eventually([&] { return engine.creates_begun == 1; }));  // the first create is in flight
  const auto t0 = std::chrono::steady_clock::now();
  auto c = pool.claim(5s);
  REQUIRE(c);
  CHECK(std::chrono::steady_clock::now() - t0 < 1s);
  // The refill begins after the claim; a claimer arriving meanwhile waits for it.
  REQUIRE(eventually([&] { return engine.creates_begun == 2; }));
  const auto t1 = std::chrono::steady_clock::now();
  auto second = pool.claim(5s);
  CHECK(second);
  CHECK(std::chrono::steady_clock::now() - t1 < 1s);
  // With none in flight (just after the claim, before the thread starts the next fill: a
  // claim that does not wait) there is nothing to have.
  CHECK_FALSE(pool.claim(0ms));
}

TEST_CASE("warm pool: concurrent claims never get the same container", "[unit][sidecar][pool]") {
  fake_engine engine;
  warm_pool pool(8, engine.hooks());
  pool.start();
  REQUIRE(eventually([&] { return pool.size() == 8; }));
  std::mutex m;
  std::vector<std::string> got;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 20; ++i)
        if (auto c = pool.claim()) {
          std::lock_guard g(m);
          got.push_back(c->id);
        }
    });
  for (auto& t : threads) t.join();
  const std::set<std::string> distinct(got.begin(), got.end());
  CHECK(distinct.size() == got.size());
  CHECK(got.size() >= 8);
}

TEST_CASE("warm pool: errors back off, a full engine waits for wake()", "[unit][sidecar][pool]") {
  fake_engine engine;
  engine.fail_next = 3;
  warm_pool pool(1, engine.hooks(), {10'000ms, 40ms, 1'000ms});
  pool.start();
  REQUIRE(eventually([&] { return pool.size() == 1; }));
  {
    std::lock_guard g(engine.m);
    REQUIRE(engine.attempts.size() == 4);
    // 40, 80, 160 ms between the failed attempts.
    CHECK(engine.attempts[1] - engine.attempts[0] >= 40ms);
    CHECK(engine.attempts[2] - engine.attempts[1] >= 80ms);
    CHECK(engine.attempts[3] - engine.attempts[2] >= 160ms);
  }
  // At the limit (the claimed one counts), the pool does not spin: one attempt, then wake().
  {
    std::lock_guard g(engine.m);
    engine.limit = 1;
  }
  auto c = pool.claim();
  REQUIRE(c);
  std::this_thread::sleep_for(200ms);
  std::size_t tries = 0;
  {
    std::lock_guard g(engine.m);
    tries = engine.attempts.size();
  }
  CHECK(tries == 5);
  CHECK(pool.size() == 0);
  {
    std::lock_guard g(engine.m);
    engine.live.erase(c->id);  // the session ended
    engine.limit = 1000;
  }
  pool.wake();
  CHECK(eventually([&] { return pool.size() == 1; }));
}

TEST_CASE("warm pool: a re-tagged image retires the warm containers of the old one",
          "[unit][sidecar][pool]") {
  fake_engine engine;
  warm_pool pool(2, engine.hooks(), {50ms, 10ms, 100ms});
  pool.start();
  REQUIRE(eventually([&] { return pool.size() == 2; }));
  {
    std::lock_guard g(engine.m);
    engine.image = "sha256:two";
  }
  // After the next check, only containers of the new image are handed out.
  REQUIRE(eventually([&] {
    std::lock_guard g(engine.m);
    return engine.removed.size() == 2;
  }));
  REQUIRE(eventually([&] { return pool.size() == 2; }));
  auto c = pool.claim();
  REQUIRE(c);
  CHECK(c->image_id == "sha256:two");
}

TEST_CASE("warm pool: a container that stopped running leaves the pool", "[unit][sidecar][pool]") {
  fake_engine engine;
  warm_pool pool(1, engine.hooks(), {50ms, 10ms, 100ms});
  pool.start();
  REQUIRE(eventually([&] { return pool.size() == 1; }));
  {
    std::lock_guard g(engine.m);
    engine.live.erase("id0");  // killed behind the sidecar's back
  }
  REQUIRE(eventually([&] {
    std::lock_guard g(engine.m);
    return engine.live.contains("id1");
  }));
  REQUIRE(eventually([&] { return pool.size() == 1; }));
  CHECK(pool.claim()->id == "id1");
}

TEST_CASE(
    "warm pool: a claim never hands out a container that cannot run a cell now, it is removed",
    "[unit][sidecar][pool]") {
  fake_engine engine;
  warm_pool pool(2, engine.hooks());
  pool.start();
  REQUIRE(eventually([&] { return pool.size() == 2; }));
  {
    std::lock_guard g(engine.m);
    engine.frozen.insert("id0");  // e.g. paused in the pool
  }
  auto c = pool.claim();
  REQUIRE(c);
  CHECK(c->id == "id1");
  REQUIRE(eventually([&] {
    std::lock_guard g(engine.m);
    return engine.removed.contains("id0");
  }));
  {
    std::lock_guard g(engine.m);
    CHECK(engine.readied == std::vector<std::string>{"id0", "id1"});  // each asked, in order
  }
  REQUIRE(eventually([&] { return pool.size() == 2; }));  // id2, id3
  {
    std::lock_guard g(engine.m);
    engine.frozen = {"id2", "id3"};
  }
  // Both are passed over and removed; what comes, if anything, is a later one.
  auto later = pool.claim(5s);
  if (later) CHECK((later->id != "id2" && later->id != "id3"));
  REQUIRE(eventually([&] {
    std::lock_guard g(engine.m);
    return engine.removed.contains("id2") && engine.removed.contains("id3");
  }));
}

TEST_CASE("warm pool: the check removes containers that cannot run a cell now",
          "[unit][sidecar][pool]") {
  fake_engine engine;
  warm_pool pool(2, engine.hooks(), {50ms, 10ms, 100ms});
  pool.start();
  REQUIRE(eventually([&] { return pool.size() == 2; }));
  {
    std::lock_guard g(engine.m);
    engine.frozen.insert("id1");  // its runner killed, or the container paused
  }
  // No claim: the check alone removes it, and the pool refills with a ready one.
  REQUIRE(eventually([&] {
    std::lock_guard g(engine.m);
    return engine.removed == std::set<std::string>{"id1"} && engine.live.contains("id2");
  }));
  REQUIRE(eventually([&] { return pool.size() == 2; }));
  std::set<std::string> claimed;
  for (int i = 0; i < 2; ++i) claimed.insert(pool.claim()->id);
  CHECK(claimed == std::set<std::string>{"id0", "id2"});
  // The check asked as the pool's own (its longer bound), the claims as claims.
  std::lock_guard g(engine.m);
  CHECK(engine.claims_asked == 2);
  CHECK(engine.checks_asked >= 2);
}

TEST_CASE("warm pool: the check's sweep is told every container the pool made that may still exist",
          "[unit][sidecar][pool]") {
  fake_engine engine;
  std::mutex m;
  std::vector<std::set<std::string>> told;
  auto hooks = engine.hooks();
  hooks.sweep = [&](const std::set<std::string>& made) -> std::optional<std::set<std::string>> {
    std::lock_guard g(m);
    told.push_back(made);
    std::lock_guard e(engine.m);
    std::set<std::string> existing;
    for (const auto& id : made)
      if (engine.live.contains(id)) existing.insert(id);
    return existing;
  };
  warm_pool pool(2, hooks, {50ms, 10ms, 100ms});
  pool.start();
  REQUIRE(eventually([&] { return pool.size() == 2; }));
  auto c = pool.claim();
  REQUIRE(c);
  REQUIRE(eventually([&] { return pool.size() == 2; }));
  // The claimed one is still the pool's own while it exists (a session's), then forgotten.
  REQUIRE(eventually([&] {
    std::lock_guard g(m);
    return !told.empty() && told.back() == std::set<std::string>{"id0", "id1", "id2"};
  }));
  {
    std::lock_guard g(engine.m);
    engine.live.erase(c->id);  // the session ended
  }
  CHECK(eventually([&] {
    std::lock_guard g(m);
    return told.back() == std::set<std::string>{"id1", "id2"};
  }));
}

TEST_CASE(
    "warm pool: an inspect says a container runs now only when running, not paused or restarting",
    "[unit][sidecar][pool]") {
  CHECK(inspect_runs_now(R"({"State":{"Running":true,"Paused":false,"Restarting":false}})"));
  CHECK_FALSE(inspect_runs_now(R"({"State":{"Running":true,"Paused":true,"Restarting":false}})"));
  CHECK_FALSE(inspect_runs_now(R"({"State":{"Running":true,"Paused":false,"Restarting":true}})"));
  CHECK_FALSE(inspect_runs_now(R"({"State":{"Running":false,"Paused":false,"Restarting":false}})"));
  CHECK_FALSE(inspect_runs_now(R"({"State":{"Running":true}})"));  // unsure: no
  CHECK_FALSE(
      inspect_runs_now(R"({"State":{"Running":"true","Paused":false,"Restarting":false}})"));
  CHECK_FALSE(inspect_runs_now("not json"));
}

TEST_CASE("warm pool: posted jobs run on its thread, and at stop", "[unit][sidecar][pool]") {
  fake_engine engine;
  warm_pool pool(0, engine.hooks());
  std::atomic<int> ran{0};
  pool.post([&] { ++ran; });  // not started yet: runs at stop
  pool.start();
  CHECK(eventually([&] { return ran == 1; }));
  pool.stop();
  pool.post([&] { ++ran; });
  CHECK(pool.stop() == 0);
  CHECK(ran == 2);
}

TEST_CASE("config: SANDBOX_WARM_POOL", "[unit][sidecar][pool]") {
  std::map<std::string, std::string> env{{"SANDBOX_ALLOW_NO_AUTH", "1"}};
  CHECK(load_config(env).value->warm_pool == 2);
  env["SANDBOX_WARM_POOL"] = "0";
  CHECK(load_config(env).value->warm_pool == 0);
  env["SANDBOX_WARM_POOL"] = "-3";
  CHECK(load_config(env).value->warm_pool == 0);
  env["SANDBOX_WARM_POOL"] = "65";
  CHECK_FALSE(load_config(env).value);
  env["SANDBOX_WARM_POOL"] = "two";
  CHECK_FALSE(load_config(env).value);
}

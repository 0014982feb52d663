// The session lifecycle and the registry against the fake engine (no dockerd): create
// (pool miss, pool hit, SANDBOX_MAX_SESSIONS, failures leave nothing behind), restore from a
// local store, reap, adopt at start-up, and acquire's refusals. What is judged is the
// engine's record (the fake's containers and calls) and the registry's, not only the answer.
#include <archive.h>
#include <archive_entry.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <condition_variable>
#include <filesystem>
#include <future>
#include <mutex>
#include <thread>

#include "cells/runner.hpp"
#include "core/session_executors.hpp"
#include "engine/labels.hpp"
#include "fake_engine.hpp"
#include "fake_runner.hpp"
#include "sessions/pool/pool_sessions.hpp"
#include "sessions/session.hpp"
#include "sessions/session_containers.hpp"
#include "sessions/session_lifecycle.hpp"
#include "sessions/session_limit.hpp"
#include "sessions/session_registry.hpp"
#include "sessions/workspace/archive_store.hpp"
#include "sessions/workspace/workspace_mounts.hpp"
#include "util/ids.hpp"

using namespace dockgate::sidecar;
using namespace std::chrono_literals;

namespace {

// The sessions room as the core wires it, over the fake engine and hooks of the test's own.
struct rig {
  explicit rig(config cfg = {}) : c(std::move(cfg)) {}
  ~rig() { pool.stop(); }
  config c;
  testing::fake_engine engine;
  executor_hooks executors;
  session_containers containers{c, engine, executors};
  workspace_mounts mounts{c};
  session_registry registry{c, containers};
  session_limit limit;
  archive_store archives{c, containers};
  session_pool pool{c, engine, executors, containers, registry, limit};
  session_lifecycle lifecycle{c,        engine, executors, containers, registry,
                              archives, mounts, pool,      limit,      nullptr};

  std::size_t running() const {
    std::size_t n = 0;
    for (const auto& k : engine.containers())
      if (k.state == "running") ++n;
    return n;
  }
};

config no_pool() {
  config c;
  c.warm_pool = 0;
  return c;
}

std::string sid_of(char digit) {
  return std::string(32, digit);
}

std::map<std::string, std::string> session_labels(const std::string& sid,
                                                  const std::string& instance = "default") {
  return {{std::string(session_label), sid}, {std::string(instance_label), instance}};
}

// A workspace archive of one file, as tar makes it.
std::string one_file_tgz(const std::string& path, const std::string& data) {
  std::vector<char> buffer(1 << 20);
  std::size_t used = 0;
  struct archive* a = archive_write_new();
  archive_write_add_filter_gzip(a);
  archive_write_set_format_pax_restricted(a);
  archive_write_open_memory(a, buffer.data(), buffer.size(), &used);
  struct archive_entry* e = archive_entry_new();
  archive_entry_set_pathname(e, path.c_str());
  archive_entry_set_filetype(e, AE_IFREG);
  archive_entry_set_perm(e, 0644);
  archive_entry_set_size(e, static_cast<la_int64_t>(data.size()));
  archive_write_header(a, e);
  archive_write_data(a, data.data(), data.size());
  archive_entry_free(e);
  archive_write_close(a);
  archive_write_free(a);
  return std::string(buffer.data(), used);
}

struct temp_dir {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() /
      ("dockgate-lifecycle-" + std::to_string(::getpid()) + "-" + random_hex(4));
  temp_dir() { std::filesystem::create_directories(path); }
  ~temp_dir() { std::filesystem::remove_all(path); }
};

}  // namespace

TEST_CASE("lifecycle: a pool miss creates and starts a hardened container, then registers it",
          "[lifecycle]") {
  rig r(no_pool());
  create_request req;
  req.idle_ttl_sec = 60;
  req.archive_key = "notes";
  auto created = r.lifecycle.create_session(req);
  REQUIRE(created.ok());
  const std::string sid = created->session_id;
  CHECK(valid_session_id(sid));
  CHECK(created->restore.status == "none");
  // The engine's record: one container, named for the session, running, with its labels.
  auto k = r.engine.find(std::string(container_prefix) + sid);
  REQUIRE(k);
  CHECK(k->state == "running");
  CHECK(k->labels.at(std::string(session_label)) == sid);
  CHECK(k->labels.at(std::string(instance_label)) == "default");
  CHECK(k->labels.at(std::string(archive_label)) == "notes");
  CHECK(k->labels.at(std::string(ttl_label)) == "60");
  CHECK(k->network_mode == "none");
  CHECK(k->body.find(R"("CapDrop":["ALL"])") != std::string::npos);
  CHECK(r.engine.count("create") == 1);
  CHECK(r.engine.count("start") == 1);
  // Its workspace made by one exec (no runner hook here).
  CHECK(r.engine.count("exec") == 1);
  auto s = r.registry.find(sid);
  REQUIRE(s);
  CHECK(s->container == k->id);
  CHECK_FALSE(s->pooled);
  CHECK(s->ttl_seconds == 60);
}

TEST_CASE("lifecycle: a pool hit claims the warm container and records the claim", "[lifecycle]") {
  config c;
  c.warm_pool = 1;
  rig r(c);
  r.pool.start();
  // The pool's container, made by its thread (claim waits for a fill in flight).
  std::optional<testing::fake_engine::container> warm;
  for (int i = 0; i < 500 && !warm; ++i) {
    for (const auto& k : r.engine.containers())
      if (k.labels.contains(std::string(pool_label))) warm = k;
    if (!warm) std::this_thread::sleep_for(10ms);
  }
  REQUIRE(warm);
  const std::string warm_sid = warm->labels.at(std::string(session_label));
  auto created = r.lifecycle.create_session(create_request{});
  REQUIRE(created.ok());
  // The session is the warm container's: its session ID, its container, no start of its own.
  CHECK(created->session_id == warm_sid);
  auto s = r.registry.find(warm_sid);
  REQUIRE(s);
  CHECK(s->container == warm->id);
  CHECK(s->pooled);
  // Its claim record: created (never started), naming the warm container.
  auto claim = r.engine.find(std::string(container_prefix) + warm_sid + std::string(claim_suffix));
  REQUIRE(claim);
  CHECK(claim->state == "created");
  CHECK(claim->labels.at(std::string(claim_label)) == warm->id);
  for (const auto& call : r.engine.calls())
    if (call.starts_with("start "))
      CHECK_FALSE(call == "start " + std::string(container_prefix) + warm_sid);
  r.pool.stop();
  CHECK(r.engine.find(warm->id));  // the session's: not removed with the pool
}

TEST_CASE(
    "lifecycle: a warm container joins the pool once its runner has warmed up, a claim's round "
    "trip starts no process, a miss waits for no warm-up",
    "[lifecycle]") {
  using testing::fake_runner;
  using testing::frame;
  // The runner's answers: a command at once; the warm-up's end (W) only once released.
  std::mutex m;
  std::condition_variable cv;
  bool warmed = false;
  auto answer = [&](const fake_runner::request& q) -> std::string {
    if (q.op == 'W') {
      std::unique_lock l(m);
      cv.wait(l, [&] { return warmed; });
    }
    // The workspace's mkdir (the isolation probe, which makes the folders) is answered as a
    // hardened container's; any other command fails: the claim's round trip starts none.
    if (q.op == 'R' && testing::is_isolation_probe(q.lists.at(0)))
      return frame('S', "") + frame('O', testing::hardened_probe_output) + frame('X', "0 0 0");
    if (q.op == 'R' && q.lists.at(0).at(0) != "mkdir") return frame('S', "") + frame('X', "1 0 0");
    return frame('S', "") + frame('X', "0 0 0");
  };
  auto ops = [](fake_runner& runner) {
    std::string out;
    for (const auto& q : runner.requests()) out += q.op;
    return out;
  };
  SECTION("the pool") {
    fake_runner runner;
    runner.answer = answer;
    config c;
    c.warm_pool = 1;
    c.cell_runner = true;
    rig r(c);
    r.executors = session_executors(r.engine);
    r.engine.on_attach = [&](const auto&, const auto&, std::string*) { return runner.attach(); };
    r.pool.start();
    // Made, started and its workspace made by the runner, which then waits in its warm-up.
    for (int i = 0; i < 500 && ops(runner) != "RW"; ++i) std::this_thread::sleep_for(10ms);
    REQUIRE(ops(runner) == "RW");
    CHECK(r.running() == 1);
    CHECK_FALSE(r.pool.claim(0ms));  // not in the pool yet
    {
      std::lock_guard l(m);
      warmed = true;
    }
    cv.notify_all();
    // Warm now: handed out (the claim's round trip, W again, answered by the runner itself).
    std::optional<pooled_container> got;
    for (int i = 0; i < 500 && !got; ++i) {
      got = r.pool.claim(0ms);
      if (!got) std::this_thread::sleep_for(10ms);
    }
    REQUIRE(got);
    REQUIRE(got->runner);
    CHECK(got->runner->usable());
    got->runner->close();
  }
  SECTION("a miss") {
    fake_runner runner;
    runner.answer = answer;  // W would never be answered here
    config c = no_pool();
    c.cell_runner = true;
    rig r(c);
    r.executors = session_executors(r.engine);
    r.engine.on_attach = [&](const auto&, const auto&, std::string*) { return runner.attach(); };
    auto created = r.lifecycle.create_session(create_request{});
    REQUIRE(created.ok());
    auto s = r.registry.find(created->session_id);
    REQUIRE(s);
    REQUIRE(s->runner);
    CHECK(s->runner->usable());
    // Answered after the runner's hello and its mkdir, nothing more.
    CHECK(ops(runner) == "R");
    CHECK(r.engine.count("exec") == 0);
    s->runner->close();
  }
  {
    std::lock_guard l(m);
    warmed = true;
  }
  cv.notify_all();
}

TEST_CASE("lifecycle: SANDBOX_MAX_SESSIONS refuses a create and makes nothing", "[lifecycle]") {
  config c = no_pool();
  c.max_sessions = 1;
  rig r(c);
  r.engine.add_running(std::string(container_prefix) + sid_of('a'), session_labels(sid_of('a')));
  // Another instance's container does not count against this one's limit.
  r.engine.add_running(std::string(container_prefix) + sid_of('b'),
                       session_labels(sid_of('b'), "other"));
  auto refused = r.lifecycle.create_session(create_request{});
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error() == refusal{refusal_kind::busy, "too many active sessions"});
  CHECK(r.engine.count("create") == 0);
  CHECK(r.registry.size() == 0);
  r.engine.remove(std::string(container_prefix) + sid_of('a'), 1s);
  CHECK(r.lifecycle.create_session(create_request{}).ok());
}

TEST_CASE(
    "lifecycle: concurrent pool misses create at the engine at once, and SANDBOX_MAX_SESSIONS "
    "still gives its last place to one",
    "[lifecycle]") {
  std::mutex m;
  std::condition_variable cv;
  SECTION("two places: both creates in flight together") {
    config c = no_pool();
    c.max_sessions = 2;
    rig r(c);
    int in_flight = 0, most = 0;
    r.engine.on_create = [&](std::string_view) {
      std::unique_lock l(m);
      most = std::max(most, ++in_flight);
      cv.notify_all();
      // Each create waits for the other (let go after 10 s where they cannot overlap).
      cv.wait_for(l, 10s, [&] { return most == 2; });
      --in_flight;
    };
    auto one = std::async(std::launch::async, [&] { return r.lifecycle.create_session({}); });
    auto two = std::async(std::launch::async, [&] { return r.lifecycle.create_session({}); });
    CHECK(one.get().ok());
    CHECK(two.get().ok());
    CHECK(most == 2);
    CHECK(r.running() == 2);
  }
  SECTION("one place: the create in flight holds it") {
    config c = no_pool();
    c.max_sessions = 1;
    rig r(c);
    bool second_done = false;
    r.engine.on_create = [&](std::string_view) {
      std::unique_lock l(m);
      cv.wait_for(l, 10s, [&] { return second_done; });
    };
    auto first = std::async(std::launch::async, [&] { return r.lifecycle.create_session({}); });
    for (int i = 0; i < 500 && r.engine.count("list") == 0; ++i) std::this_thread::sleep_for(10ms);
    auto second = r.lifecycle.create_session({});
    {
      std::lock_guard l(m);
      second_done = true;
    }
    cv.notify_all();
    REQUIRE_FALSE(second.ok());
    CHECK(second.error() == refusal{refusal_kind::busy, "too many active sessions"});
    CHECK(first.get().ok());
    CHECK(r.engine.count("create") == 1);
    CHECK(r.running() == 1);
  }
}

TEST_CASE("lifecycle: a create that fails at any step leaves no container behind", "[lifecycle]") {
  rig r(no_pool());
  SECTION("the create") {
    r.engine.fail("create", 500, "no space");
    auto refused = r.lifecycle.create_session(create_request{});
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().kind == refusal_kind::failed);
    CHECK(refused.error().message == R"(docker run failed: {"message":"no space"})");
    CHECK(r.engine.count("start") == 0);
  }
  SECTION("the start") {
    r.engine.fail("start", 500, "cgroup refused");
    auto refused = r.lifecycle.create_session(create_request{});
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().message == R"(docker run failed: {"message":"cgroup refused"})");
    CHECK(r.engine.count("remove") == 1);
  }
  SECTION("the workspace") {
    r.engine.on_exec = [](const auto&, const dockgate::client::exec_options&) {
      dockgate::client::exec_result e;
      e.started = true;
      e.exit_code = 1;
      e.stderr_data = "mkdir: read-only";
      return e;
    };
    auto refused = r.lifecycle.create_session(create_request{});
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().message == "workspace init failed: mkdir: read-only");
  }
  SECTION("the kernel") {
    r.executors.start_kernel = [](session&) { return std::string("ipykernel is missing"); };
    create_request req;
    req.kernel = "python";
    auto refused = r.lifecycle.create_session(req);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().message == "ipykernel is missing");
  }
  CHECK(r.engine.containers().empty());
  CHECK(r.registry.size() == 0);
}

TEST_CASE("lifecycle: a session with an archive in a local store restores it into /workspace",
          "[lifecycle]") {
  temp_dir dir;
  config c = no_pool();
  c.local_storage_dir = dir.path.string();
  rig r(c);
  auto storage = choose_storage(R"({"provider":"local"})", c).spec;
  REQUIRE(storage);
  const std::string tgz = one_file_tgz("outputs/report.txt", "hello");
  std::string error;
  REQUIRE(open_store(*storage, c)->put(storage->archive_key("k1"), tgz, "application/gzip", error));
  std::vector<std::vector<std::string>> commands;
  std::string unpacked;
  r.engine.on_exec = [&](const auto&, const dockgate::client::exec_options& o) {
    commands.push_back(o.cmd);
    if (o.cmd.at(0) == "tar") unpacked = o.stdin_data;
    dockgate::client::exec_result e;
    e.started = true;
    e.exit_code = 0;
    return e;
  };
  create_request req;
  req.archive_key = "k1";
  req.storage = storage;
  auto created = r.lifecycle.create_session(req);
  REQUIRE(created.ok());
  CHECK(created->restore.status == "restored");
  CHECK(created->restore.key == storage->archive_key("k1"));
  // The commands in the container: the workspace made, the archive unpacked (its plan's
  // tgz on stdin), then the inputs emptied again.
  REQUIRE(commands.size() == 3);
  CHECK(commands[0].at(0) == "mkdir");
  CHECK(commands[1] == std::vector<std::string>{"tar", "--no-same-owner", "--no-overwrite-dir",
                                                "-xzf", "-", "-C", "/workspace"});
  CHECK_FALSE(unpacked.empty());
  CHECK(commands[2].at(0) == "sh");
  CHECK(commands[2].at(2).find("rm -rf -- /workspace/uploads") != std::string::npos);
  // The container's labels record where it came from, for a restarted sidecar.
  auto k = r.engine.find(std::string(container_prefix) + created->session_id);
  REQUIRE(k);
  CHECK(k->labels.at(std::string(restore_label)) == "restored");
  CHECK(k->labels.contains(std::string(generation_label)));
  CHECK(k->labels.contains(std::string(storage_label)));
}

TEST_CASE("lifecycle: the reaper ends a session idle past its TTL and only that one",
          "[lifecycle]") {
  rig r(no_pool());
  create_request short_lived;
  short_lived.idle_ttl_sec = 1;
  auto idle = r.lifecycle.create_session(short_lived);
  auto busy = r.lifecycle.create_session(create_request{});
  REQUIRE(idle.ok());
  REQUIRE(busy.ok());
  auto s = r.registry.find(idle->session_id);
  REQUIRE(s);
  const std::string container = s->container;
  s->last_used = std::chrono::steady_clock::now() - 5s;
  s.reset();
  r.registry.reap_idle([&](session& x) { r.lifecycle.reap(x); });
  CHECK_FALSE(r.registry.find(idle->session_id));
  CHECK_FALSE(r.engine.find(container));
  CHECK(r.registry.find(busy->session_id));
  CHECK(r.running() == 1);
}

TEST_CASE("lifecycle: reconcile adopts this instance's running sessions and removes the rest",
          "[lifecycle]") {
  rig r(no_pool());
  auto labels = session_labels(sid_of('1'));
  labels[std::string(archive_label)] = "keyA";
  labels[std::string(ttl_label)] = "60";
  const std::string adopted =
      r.engine.add_running(std::string(container_prefix) + sid_of('1'), labels);
  const std::string stopped = r.engine.add_running(std::string(container_prefix) + sid_of('2'),
                                                   session_labels(sid_of('2')));
  r.engine.set_state(stopped, "exited");
  const std::string others = r.engine.add_running(std::string(container_prefix) + sid_of('3'),
                                                  session_labels(sid_of('3'), "other"));
  auto pool_labels = session_labels(sid_of('4'));
  pool_labels[std::string(pool_label)] = "1";
  const std::string unclaimed =
      r.engine.add_running(std::string(container_prefix) + sid_of('4'), pool_labels);
  // A warm container claimed before the last stop: adopted with its claim record's labels.
  pool_labels[std::string(session_label)] = sid_of('5');
  const std::string claimed =
      r.engine.add_running(std::string(container_prefix) + sid_of('5'), pool_labels);
  auto claim_labels = session_labels(sid_of('5'));
  claim_labels[std::string(claim_label)] = claimed;
  claim_labels[std::string(archive_label)] = "keyB";
  const std::string record = r.engine.add_running(
      std::string(container_prefix) + sid_of('5') + std::string(claim_suffix), claim_labels);
  r.engine.set_state(record, "created");
  // A claim record whose container is gone.
  auto stale_labels = session_labels(sid_of('6'));
  stale_labels[std::string(claim_label)] = "0123456789ab";
  const std::string stale = r.engine.add_running(
      std::string(container_prefix) + sid_of('6') + std::string(claim_suffix), stale_labels);
  r.engine.set_state(stale, "created");

  r.lifecycle.reconcile();

  auto a = r.registry.find(sid_of('1'));
  REQUIRE(a);
  CHECK(a->container == adopted);
  CHECK(a->archive_key == "keyA");
  CHECK(a->ttl_seconds == 60);
  CHECK(a->sweep_before_runner == false);  // the sweep found only the container's own
  auto b = r.registry.find(sid_of('5'));
  REQUIRE(b);
  CHECK(b->container == claimed);
  CHECK(b->archive_key == "keyB");
  CHECK(b->pooled);
  CHECK(r.registry.size() == 2);
  // The engine's record: adopted ones and the other instance's stay; the rest is gone.
  CHECK(r.engine.find(adopted));
  CHECK(r.engine.find(claimed));
  CHECK(r.engine.find(record));
  CHECK(r.engine.find(others));
  CHECK_FALSE(r.engine.find(stopped));
  CHECK_FALSE(r.engine.find(unclaimed));
  CHECK_FALSE(r.engine.find(stale));
}

TEST_CASE("lifecycle: reconcile removes a session whose cell's process outlived the sweep",
          "[lifecycle]") {
  rig r(no_pool());
  const std::string id = r.engine.add_running(std::string(container_prefix) + sid_of('7'),
                                              session_labels(sid_of('7')));
  r.engine.top_processes = R"([["1","65534","Ss","1"],["42","1000","T","1"]])";
  r.lifecycle.reconcile();
  CHECK_FALSE(r.registry.find(sid_of('7')));
  CHECK_FALSE(r.engine.find(id));
}

TEST_CASE("lifecycle: on an engine with userns-remap the sweep judges uids as the host sees them",
          "[lifecycle][userns]") {
  // dockerd --userns-remap: top shows host uids, the keep-alive's 65534 as 165534 and the
  // session user's 1000 as 101000. The container's init (State.Pid) says which is its own.
  for (const auto& [processes, kept] : std::vector<std::pair<std::string, bool>>{
           {R"([["1","165534","Ss","1"],["12","165534","S","1"]])", true},
           {R"([["1","165534","Ss","1"],["42","101000","S","1"]])", false},
           // The init not among the rows: the engine cannot say (unknown): kept, and its
           // next cell sweeps again first (settle_adopted), as when top fails.
           {R"([["12","165534","S","1"]])", true}}) {
    CAPTURE(processes);
    rig r(no_pool());
    const std::string id = r.engine.add_running(std::string(container_prefix) + sid_of('7'),
                                                session_labels(sid_of('7')));
    r.engine.top_processes = processes;
    r.lifecycle.reconcile();
    CHECK(static_cast<bool>(r.registry.find(sid_of('7'))) == kept);
    CHECK(static_cast<bool>(r.engine.find(id)) == kept);
  }
}

TEST_CASE("lifecycle: delete archives the workspace where the session was created", "[lifecycle]") {
  temp_dir dir;
  config c = no_pool();
  c.local_storage_dir = dir.path.string();
  rig r(c);
  auto storage = choose_storage(R"({"provider":"local"})", c).spec;
  REQUIRE(storage);
  const std::string tgz = one_file_tgz("outputs/result.csv", "a,b\n");
  r.engine.on_exec = [&](const auto&, const dockgate::client::exec_options& o) {
    dockgate::client::exec_result e;
    e.started = true;
    e.exit_code = 0;
    if (o.cmd.at(0) == "sh" && o.cmd.at(2).find("tar --null") != std::string::npos)
      e.stdout_data = tgz;
    return e;
  };
  create_request req;
  req.archive_key = "k2";
  req.storage = storage;
  auto created = r.lifecycle.create_session(req);
  REQUIRE(created.ok());
  const std::string container = r.registry.find(created->session_id)->container;
  delete_request del;
  del.session_id = created->session_id;
  auto deleted = r.lifecycle.delete_session(del);
  REQUIRE(deleted.ok());
  REQUIRE(deleted->archive);
  CHECK(deleted->archive->status == "written");
  CHECK(deleted->archive->key == storage->archive_key("k2"));
  // The store's record: the archive is the workspace's bytes.
  auto got = open_store(*storage, c)->get(storage->archive_key("k2"), 1 << 20);
  CHECK(got.data == tgz);
  CHECK_FALSE(r.engine.find(container));
  CHECK_FALSE(r.registry.find(created->session_id));
  // Again: idempotent, nothing archived.
  auto again = r.lifecycle.delete_session(del);
  REQUIRE(again.ok());
  CHECK_FALSE(again->archive);
}

TEST_CASE("registry: acquire refuses an invalid id, an unknown session and a busy one",
          "[registry]") {
  config c = no_pool();
  c.queue_timeout_seconds = 0;
  rig r(c);
  held_session held;
  CHECK(r.registry.acquire("not-a-session", held) ==
        refusal{refusal_kind::invalid, "invalid session_id"});
  CHECK(r.registry.acquire(sid_of('c'), held) ==
        refusal{refusal_kind::not_found, "session not found or not running"});
  auto created = r.lifecycle.create_session(create_request{});
  REQUIRE(created.ok());
  const std::string sid = created->session_id;
  {
    auto s = r.registry.find(sid);
    std::unique_lock other(s->lock);  // another request holds it
    auto refused = std::async(std::launch::async, [&] {
                     held_session h;
                     return r.registry.acquire(sid, h);
                   }).get();
    CHECK(refused == refusal{refusal_kind::busy, "session is busy"});
  }
  CHECK_FALSE(r.registry.acquire(sid, held));
  CHECK(held.lock.owns_lock());
  held = {};
  // Its container stopped behind the sidecar's back: not found.
  r.engine.set_state(r.registry.find(sid)->container, "exited");
  CHECK(r.registry.acquire(sid, held) ==
        refusal{refusal_kind::not_found, "session not found or not running"});
}

TEST_CASE("lifecycle: reconcile adopts a paused session, thawed for its sweep and frozen again",
          "[lifecycle]") {
  rig r(no_pool());
  auto labels = session_labels(sid_of('7'));
  labels[std::string(metadata_label_prefix) + "team"] = "a";
  labels[std::string(created_label)] = "1700000000";
  const std::string paused =
      r.engine.add_running(std::string(container_prefix) + sid_of('7'), labels);
  r.engine.set_state(paused, "paused");

  r.lifecycle.reconcile();

  auto s = r.registry.find(sid_of('7'));
  REQUIRE(s);
  CHECK(s->paused);
  CHECK(s->metadata == std::map<std::string, std::string>{{"team", "a"}});
  CHECK(
      std::chrono::duration_cast<std::chrono::seconds>(s->created_at.time_since_epoch()).count() ==
      1700000000);
  REQUIRE(r.engine.find(paused));
  CHECK(r.engine.find(paused)->state == "paused");
  CHECK(r.engine.count("unpause") == 1);
  CHECK(r.engine.count("pause") == 1);
  CHECK(r.engine.count("remove") == 0);
}

// The isolation report's reading and judging (sessions/isolation/isolation.hpp), and the
// session core's use of it against the fake engine: a container whose walls fell is never
// handed out, and leaves nothing on the engine.
#include "sessions/isolation/isolation.hpp"

#include <simdjson.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <thread>

#include "egress/egress_policy.hpp"
#include "engine/labels.hpp"
#include "fake_engine.hpp"
#include "sessions/pool/pool_sessions.hpp"
#include "sessions/session.hpp"
#include "sessions/session_containers.hpp"
#include "sessions/session_lifecycle.hpp"
#include "sessions/session_limit.hpp"
#include "sessions/session_registry.hpp"
#include "sessions/workspace/archive_store.hpp"
#include "sessions/workspace/workspace_mounts.hpp"

using namespace dockgate::sidecar;
using namespace std::chrono_literals;

namespace {

// What the probe prints in a container whose walls all hold (runc, the sandbox profile).
const std::string held = testing::hardened_probe_output;

// The daemon's record of a hardened session container, the gate's seccomp profile named.
const std::string record =
    R"({"State":{"Running":true},"Config":{"User":"65534:65534","Labels":{}},)"
    R"("HostConfig":{"Runtime":"runc","NetworkMode":"none","Privileged":false,)"
    R"("ReadonlyRootfs":true,"CapAdd":null,"CapDrop":["ALL"],)"
    R"("SecurityOpt":["no-new-privileges","seccomp={\"name\":\"dockgate-python\",\"defaultAction\":\"SCMP_ACT_ERRNO\"}"],)"
    R"("Tmpfs":{"/tmp":"rw,nosuid,nodev,exec,size=256m"},"Memory":2147483648,)"
    R"("MemorySwap":2147483648,"NanoCpus":1000000000,"PidsLimit":256,)"
    R"("Ulimits":[{"Name":"nofile","Soft":1024,"Hard":1024}]},"Mounts":[]})";

const std::string asked_body =
    R"({"Image":"x","HostConfig":{"NetworkMode":"none","Memory":2147483648,)"
    R"("MemorySwap":2147483648,"NanoCpus":1000000000,"PidsLimit":256,"ReadonlyRootfs":true}})";

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

std::vector<std::string> failures_of(const std::string& probe, const std::string& inspect,
                                     const std::string& body = asked_body) {
  return isolation_failures(isolation_asked_of(body), read_isolation_record(inspect),
                            read_probe_output(probe));
}

bool mentions(const std::vector<std::string>& failures, const std::string& text) {
  for (const auto& f : failures)
    if (f.find(text) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("isolation: a hardened record and a probe whose walls all refused pass", "[isolation]") {
  CHECK(failures_of(held, record).empty());
  const auto r = read_isolation_record(record);
  CHECK(r.read);
  CHECK(r.runtime == "runc");
  CHECK(r.user == "65534:65534");
  CHECK(r.seccomp == "custom");
  CHECK(r.seccomp_profile == "dockgate-python");
  CHECK(r.no_new_privileges);
  CHECK(r.read_only_root);
  CHECK(r.tmpfs == std::vector<std::pair<std::string, std::string>>{
                       {"/tmp", "rw,nosuid,nodev,exec,size=256m"}});
  CHECK(r.nofile == std::pair<std::int64_t, std::int64_t>(1024, 1024));
  // No seccomp named: the daemon's own profile; unconfined said as such (and refused).
  const auto plain = read_isolation_record(replaced(
      record, R"(,"seccomp={\"name\":\"dockgate-python\",\"defaultAction\":\"SCMP_ACT_ERRNO\"}")",
      ""));
  CHECK(plain.seccomp == "default");
  CHECK(plain.seccomp_profile == "docker-default");
  const auto unnamed =
      read_isolation_record(replaced(record, R"(\"name\":\"dockgate-python\",)", ""));
  CHECK(unnamed.seccomp_profile == "custom");
}

TEST_CASE("isolation: each wall that fell, and each asked value not applied, refuses",
          "[isolation]") {
  struct row {
    std::string probe, inspect, body, why;
  };
  const std::vector<row> rows = {
      {replaced(held, "deny.root_write=EROFS", "deny.root_write=allowed"), record, asked_body,
       "a write to the root file system succeeded"},
      // EACCES alone is the mode of `/`: the file system itself is writable.
      {replaced(replaced(held, "deny.root_write=EROFS", "deny.root_write=EACCES"), "root.ro=1",
                "root.ro=0"),
       record, asked_body, "not EROFS"},
      {replaced(held, "deny.raw_inet=EPERM", "deny.raw_inet=allowed"), record, asked_body,
       "a raw socket (AF_INET, SOCK_RAW) succeeded"},
      {replaced(held, "deny.raw_packet=EPERM", "deny.raw_packet=allowed"), record, asked_body,
       "(AF_PACKET) succeeded"},
      {replaced(held, "deny.mount=EPERM", "deny.mount=allowed"), record, asked_body,
       "a mount (tmpfs) succeeded"},
      // A probe that went wrong proves nothing: ENOENT is no refusal.
      {replaced(held, "deny.mount=EPERM", "deny.mount=ENOENT"), record, asked_body,
       "ENOENT does not show the wall"},
      {replaced(held, "deny.ptrace=EPERM", "deny.ptrace=allowed"), record, asked_body,
       "a ptrace attach of PID 1 succeeded"},
      {replaced(held, "deny.ptrace=EPERM\n", ""), record, asked_body, "not tried"},
      {replaced(held, "end=1\n", ""), record, asked_body, "did not run to its end"},
      {"exit=127 python3: not found\n", record, asked_body, "did not run to its end (exit 127"},
      {"", record, asked_body, "did not run to its end"},
      {replaced(held, "status.CapBnd=0000000000000000", "status.CapBnd=0000000000002000"), record,
       asked_body, "CapBnd is 0000000000002000"},
      {replaced(held, "status.Uid=1000 1000 1000 1000", "status.Uid=0 0 0 0"), record, asked_body,
       "the session user is root"},
      {held, replaced(record, R"("CapAdd":null)", R"("CapAdd":["NET_RAW"])"), asked_body,
       "capabilities added: NET_RAW"},
      {held, replaced(record, R"("Privileged":false)", R"("Privileged":true)"), asked_body,
       "privileged"},
      {held, replaced(record, R"("no-new-privileges",)", ""), asked_body,
       "no-new-privileges is not set"},
      {held, replaced(record, R"("Running":true)", R"("Running":false)"), asked_body,
       "not running"},
      {held, "not json", asked_body, "could not be read"},
      {held, replaced(record, R"("Memory":2147483648)", R"("Memory":1073741824)"), asked_body,
       "memory asked 2147483648, the record has 1073741824"},
      {held, replaced(record, R"("NanoCpus":1000000000)", R"("NanoCpus":500000000)"), asked_body,
       "NanoCpus asked"},
      {held, replaced(record, R"("ReadonlyRootfs":true)", R"("ReadonlyRootfs":false)"), asked_body,
       "a read-only root asked"},
      {held, replaced(record, R"("NetworkMode":"none")", R"("NetworkMode":"bridge")"), asked_body,
       "network asked none, the record has bridge"},
      {held, record,
       replaced(asked_body, R"("NetworkMode":"none")", R"("Runtime":"runsc","NetworkMode":"none")"),
       "runtime asked runsc, the record has runc"},
  };
  for (const auto& r : rows) {
    CAPTURE(r.why, r.probe, r.inspect);
    const auto failures = failures_of(r.probe, r.inspect, r.body);
    CAPTURE(failures);
    CHECK(mentions(failures, r.why));
  }
  // Under gVisor with no network a socket family may not be offered at all: still refused.
  CHECK(failures_of(replaced(held, "deny.raw_packet=EPERM", "deny.raw_packet=EAFNOSUPPORT"), record)
            .empty());
  // A seccomp profile's ENOSYS for a call it does not name is a refusal too.
  CHECK(failures_of(replaced(held, "deny.mount=EPERM", "deny.mount=ENOSYS"), record).empty());
  // Nothing asked known (an adopted container): the walls alone are judged.
  CHECK(isolation_failures(
            std::nullopt,
            read_isolation_record(replaced(record, R"("Memory":2147483648)", R"("Memory":1)")),
            read_probe_output(held))
            .empty());
}

namespace {

struct rig {
  explicit rig(config cfg) : c(std::move(cfg)) { executors.isolation_probe = {"probe"}; }
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
  // The probe's answer in every container (the fake runs no program).
  void probe_answers(std::string out) {
    engine.on_exec = [out](const testing::fake_engine::container&,
                           const dockgate::client::exec_options& o) {
      dockgate::client::exec_result r;
      r.started = true;
      r.exit_code = 0;
      if (!o.cmd.empty() && o.cmd.front() == "probe") r.stdout_data = out;
      return r;
    };
  }
};

config no_pool() {
  config c;
  c.warm_pool = 0;
  return c;
}

}  // namespace

TEST_CASE("isolation: a create keeps the report of its container, read once", "[isolation]") {
  rig r(no_pool());
  r.probe_answers(held);
  auto created = r.lifecycle.create_session({});
  REQUIRE(created.ok());
  auto s = r.registry.find(created->session_id);
  REQUIRE(s);
  REQUIRE(s->isolation);
  CHECK(s->isolation->failures.empty());
  CHECK(s->isolation->read_at == "create");
  const auto inspects = r.engine.count("inspect");
  const std::string json = isolation_json(*s, r.c);
  CHECK(r.engine.count("inspect") == inspects);  // the answer reads no engine
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  REQUIRE(p.parse(json).get(doc) == simdjson::SUCCESS);
  bool passed = false;
  CHECK(doc["self_test"]["passed"].get(passed) == simdjson::SUCCESS);
  CHECK(passed);
  std::int64_t memory = 0;
  CHECK(doc["limits"]["memory"]["record"].get(memory) == simdjson::SUCCESS);
  CHECK(memory == r.c.memory_bytes);
  std::string_view v;
  CHECK(doc["limits"]["pids"]["seen"].is_null());  // the probe did not show it: said so
  CHECK(doc["seccomp"]["profile"].get(v) == simdjson::SUCCESS);
  CHECK(v == "docker-default");
  CHECK(doc["workspace"]["backing"].get(v) == simdjson::SUCCESS);
  CHECK(v == "tmpfs");
}

TEST_CASE("isolation: a container whose walls fell is refused and removed", "[isolation]") {
  rig r(no_pool());
  r.probe_answers(replaced(held, "deny.raw_inet=EPERM", "deny.raw_inet=allowed"));
  auto created = r.lifecycle.create_session({});
  REQUIRE_FALSE(created.ok());
  CHECK(created.error().kind == refusal_kind::failed);
  CHECK(created.error().message.find("a raw socket (AF_INET, SOCK_RAW) succeeded") !=
        std::string::npos);
  CHECK(r.engine.containers().empty());  // the engine's record: nothing left
  CHECK(r.registry.size() == 0);
}

TEST_CASE("isolation: a warm container whose walls fell never joins the pool", "[isolation]") {
  config c;
  c.warm_pool = 1;
  rig r(c);
  r.probe_answers(replaced(held, "deny.mount=EPERM", "deny.mount=allowed"));
  r.pool.start();
  // The pool tries (and removes) at least one container; none is ever claimable.
  for (int i = 0; i < 200 && r.engine.count("remove") == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(r.engine.count("remove") >= 1);
  CHECK_FALSE(r.pool.claim(std::chrono::milliseconds(0)));
  r.pool.stop();
  for (const auto& k : r.engine.containers()) CHECK(k.state != "running");
}

TEST_CASE("isolation: an adopted container is probed again, one whose walls fell is removed",
          "[isolation]") {
  rig r(no_pool());
  const std::string good(32, 'a'), bad(32, 'b');
  // Two session containers of an earlier run, made as a session's (the same create body).
  for (const auto& sid : {good, bad}) {
    session earlier;
    earlier.id = sid;
    earlier.archive_key = sid;
    const std::string name = std::string(container_prefix) + sid;
    REQUIRE(r.engine.create(name, r.containers.create_body(sid, earlier), 1s).status == 201);
    REQUIRE(r.engine.start(name, 1s).status == 204);
  }
  const std::string fell = replaced(held, "deny.ptrace=EPERM", "deny.ptrace=allowed");
  r.engine.on_exec = [&](const testing::fake_engine::container& c,
                         const dockgate::client::exec_options& o) {
    dockgate::client::exec_result e;
    e.started = true;
    e.exit_code = 0;
    if (!o.cmd.empty() && o.cmd.front() == "probe")
      e.stdout_data = c.name.ends_with(bad) ? fell : held;
    return e;
  };
  r.lifecycle.reconcile();
  auto adopted = r.registry.find(good);
  REQUIRE(adopted);
  REQUIRE(adopted->isolation);
  CHECK(adopted->isolation->read_at == "adopt");
  CHECK(adopted->isolation->failures.empty());
  CHECK_FALSE(r.registry.find(bad));
  CHECK_FALSE(r.engine.find(std::string(container_prefix) + bad));  // removed, not adopted
}

TEST_CASE("isolation: an egress session's report holds the list its proxy reads, read back",
          "[isolation]") {
  const auto dir =
      std::filesystem::temp_directory_path() / ("dockgate-isolation-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  struct cleanup {
    std::filesystem::path p;
    ~cleanup() { std::filesystem::remove_all(p); }
  } gone{dir};
  config c = no_pool();
  c.network = "allowlist";
  c.egress_allow = {"a.example", ".c.example"};
  c.egress_policy_dir = dir.string();
  rig r(c);
  r.probe_answers(held);
  create_request req;
  req.egress_policy = egress_rules{{true, "a.example"}};
  auto created = r.lifecycle.create_session(req);
  REQUIRE(created.ok());
  auto s = r.registry.find(created->session_id);
  REQUIRE(s);
  REQUIRE(s->isolation);
  REQUIRE(s->isolation->egress_list);
  CHECK(parse_egress_policy_text(*s->isolation->egress_list) == req.egress_policy);
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  REQUIRE(p.parse(isolation_json(*s, r.c)).get(doc) == simdjson::SUCCESS);
  CHECK(simdjson::minify(doc["network"]["egress_allowlist"]) ==
        R"([{"action":"allow","target":"a.example"}])");
  // A list that could not be written (the proxy then refuses every name): the report says
  // it could not read one, and guesses none.
  r.c.egress_policy_dir = (dir / "missing").string();
  auto second = r.lifecycle.create_session(req);
  REQUIRE(second.ok());
  auto t = r.registry.find(second->session_id);
  REQUIRE(t);
  CHECK_FALSE(t->isolation->egress_list);
  const std::string json = isolation_json(*t, r.c);
  REQUIRE(p.parse(json).get(doc) == simdjson::SUCCESS);
  CHECK(doc["network"]["egress_allowlist"].is_null());
  CHECK(json.find("the egress proxy's list for its network: not read") != std::string::npos);
}

// Dormant sessions against the fake engine (no dockerd): the reaper's decision, a session
// put to sleep (archived, recorded, its container removed) and brought back under its id
// by a resume, its next call, or a restarted sidecar's record; the failure paths that keep
// it live; its end by DELETE and expiry. What is judged is the engine's record (the fake's
// containers), the bytes in the operator's directory and the registry.
#include <archive.h>
#include <archive_entry.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "engine/labels.hpp"
#include "fake_engine.hpp"
#include "sessions/pool/pool_sessions.hpp"
#include "sessions/session.hpp"
#include "sessions/session_containers.hpp"
#include "sessions/session_controls.hpp"
#include "sessions/session_lifecycle.hpp"
#include "sessions/session_limit.hpp"
#include "sessions/session_registry.hpp"
#include "sessions/workspace/archive_store.hpp"
#include "sessions/workspace/dormant_records.hpp"
#include "sessions/workspace/workspace_mounts.hpp"
#include "util/ids.hpp"

using namespace dockgate::sidecar;
using namespace std::chrono_literals;

namespace {

struct temp_dir {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() /
      ("dockgate-dormancy-" + std::to_string(::getpid()) + "-" + random_hex(4));
  temp_dir() { std::filesystem::create_directories(path); }
  ~temp_dir() { std::filesystem::remove_all(path); }
};

// The sessions room as the core wires it (the waker included), over the fake engine.
struct rig {
  explicit rig(config cfg) : c(std::move(cfg)) {
    registry.set_waker([this](session& s) { return lifecycle.wake(s); });
  }
  ~rig() { pool.stop(); }
  config c;
  dockgate::sidecar::testing::fake_engine engine;
  executor_hooks executors;
  session_containers containers{c, engine, executors};
  workspace_mounts mounts{c};
  session_registry registry{c, containers};
  session_limit limit;
  archive_store archives{c, containers};
  session_pool pool{c, engine, executors, containers, registry, limit};
  session_lifecycle lifecycle{c,        engine, executors, containers, registry,
                              archives, mounts, pool,      limit,      nullptr};
  session_controls controls{c, engine, registry};

  void sweep() {
    registry.reap_idle([this](session& s) { lifecycle.reap(s); },
                       [this](session& s) { lifecycle.sleep(s); });
  }
  void age(const std::string& sid, std::chrono::seconds by) {
    registry.find(sid)->last_used = std::chrono::steady_clock::now() - by;
  }
  bool has_container(const std::string& sid) const {
    return engine.find(std::string(container_prefix) + sid).has_value();
  }
};

config dormant_config(const temp_dir& dir) {
  config c;
  c.warm_pool = 0;
  c.local_storage_dir = dir.path.string();
  c.dormant_after_seconds = 2;
  return c;
}

// A workspace archive of one file, as tar makes it; and a member's bytes read back.
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

std::string member_of(const std::string& tgz, const std::string& path) {
  struct archive* a = archive_read_new();
  archive_read_support_filter_all(a);
  archive_read_support_format_all(a);
  std::string out = "(missing)";
  if (archive_read_open_memory(a, tgz.data(), tgz.size()) == ARCHIVE_OK) {
    struct archive_entry* e = nullptr;
    while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
      std::string name = archive_entry_pathname(e);
      if (name.starts_with("./")) name.erase(0, 2);
      if (name != path) continue;
      out.assign(static_cast<std::size_t>(archive_entry_size(e)), '\0');
      archive_read_data(a, out.data(), out.size());
      break;
    }
  }
  archive_read_free(a);
  return out;
}

// The container's side: tar of the workspace answers `workspace`; an unpack records its
// stdin; `tar_fails`: the archive's tar cannot run.
struct container_side {
  std::string workspace = one_file_tgz("outputs/probe.txt", "probe-1");
  std::string unpacked;
  std::vector<std::vector<std::string>> commands;
  bool tar_fails = false;
  void attach(rig& r) {
    r.engine.on_exec = [this](const auto&, const dockgate::client::exec_options& o) {
      commands.push_back(o.cmd);
      dockgate::client::exec_result e;
      e.started = true;
      e.exit_code = 0;
      const bool archiving = o.cmd.at(0) == "sh" && o.cmd.size() > 2 &&
                             o.cmd.at(2).find("tar --null") != std::string::npos;
      if (archiving && tar_fails) {
        e.started = false;
        e.error = "injected";
      } else if (archiving) {
        e.stdout_data = workspace;
      }
      if (o.cmd.at(0) == "tar") unpacked = o.stdin_data;
      return e;
    };
  }
};

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// An OpenSandbox-like sandbox: no storage, its life its expiry, labels and an entrypoint.
create_request sandbox_request() {
  create_request req;
  req.idle_reaped = false;
  req.metadata = {{"team", "a"}};
  req.expires_at = std::chrono::system_clock::now() + 1h;
  req.entrypoint = {"tail", "-f", "/dev/null"};
  return req;
}

std::filesystem::path record_path(const temp_dir& dir, const std::string& sid) {
  return dir.path / "dockgate-dormant" / "records" / (sid + ".json");
}

std::filesystem::path own_archive_path(const temp_dir& dir, const std::string& sid) {
  return dir.path / "dockgate-dormant" / sid / "workspaces" / (sid + ".tgz");
}

}  // namespace

TEST_CASE("dormancy: the reaper's decision", "[dormant]") {
  config c;
  c.dormant_after_seconds = 10;
  const auto now = std::chrono::steady_clock::now();
  const auto wall = std::chrono::system_clock::now();
  session s;
  s.idle_reaped = false;
  s.last_used = now - 20s;
  CHECK(idle_decision(s, c, now, wall) == idle_action::keep);  // running, not asked
  s.paused = true;
  CHECK(idle_decision(s, c, now, wall) == idle_action::sleep);
  s.last_used = now - 5s;
  CHECK(idle_decision(s, c, now, wall) == idle_action::keep);  // not idle long enough
  s.last_used = now - 20s;
  s.dormant = true;
  CHECK(idle_decision(s, c, now, wall) == idle_action::keep);  // asleep already
  s.expires_at = wall - 1s;
  CHECK(idle_decision(s, c, now, wall) == idle_action::reap);  // its expiry ends it, dormant too
  s.expires_at.reset();
  s.dormant = false;
  s.paused = false;
  c.dormant_idle = true;
  CHECK(idle_decision(s, c, now, wall) == idle_action::sleep);  // running, the operator asked
  s.idle_reaped = true;
  s.ttl_seconds = 15;
  CHECK(idle_decision(s, c, now, wall) == idle_action::reap);  // its TTL first
  s.ttl_seconds = 60;
  CHECK(idle_decision(s, c, now, wall) == idle_action::sleep);
  c.dormant_after_seconds = 0;
  CHECK(idle_decision(s, c, now, wall) == idle_action::keep);  // off
}

TEST_CASE(
    "dormancy: a paused sandbox idle past the setting is archived and its container removed, "
    "and resume brings it back under its id with its files",
    "[dormant]") {
  temp_dir dir;
  rig r(dormant_config(dir));
  container_side inside;
  inside.attach(r);
  auto created = r.lifecycle.create_session(sandbox_request());
  REQUIRE(created.ok());
  const std::string sid = created->session_id;
  const auto expiry = *r.registry.find(sid)->expires_at;
  REQUIRE_FALSE(r.controls.pause(sid));
  CHECK(r.engine.find(std::string(container_prefix) + sid)->state == "paused");

  r.age(sid, 1s);
  r.sweep();  // not idle long enough
  CHECK(r.has_container(sid));
  r.age(sid, 5s);
  r.sweep();
  // The engine has nothing of it; the directory has its record and its workspace.
  CHECK_FALSE(r.has_container(sid));
  CHECK(r.engine.containers().empty());
  auto s = r.registry.find(sid);
  REQUIRE(s);
  CHECK(s->dormant);
  CHECK(s->paused);
  CHECK(s->container.empty());
  CHECK(std::filesystem::exists(record_path(dir, sid)));
  CHECK(member_of(read_file(own_archive_path(dir, sid)), "outputs/probe.txt") == "probe-1");
  // Paused already; resume is its wake.
  auto again = r.controls.pause(sid);
  REQUIRE(again);
  CHECK(again->kind == refusal_kind::conflict);

  inside.commands.clear();
  REQUIRE_FALSE(r.controls.resume(sid));
  auto k = r.engine.find(std::string(container_prefix) + sid);
  REQUIRE(k);
  CHECK(k->state == "running");
  CHECK(k->labels.at(std::string(session_label)) == sid);
  CHECK(member_of(inside.unpacked, "outputs/probe.txt") == "probe-1");
  // Its entrypoint started again (its processes were not kept).
  bool entrypoint = false;
  for (const auto& cmd : inside.commands)
    entrypoint = entrypoint || (cmd.size() > 4 && cmd.back() == "/dev/null" && cmd.at(4) == "tail");
  CHECK(entrypoint);
  CHECK_FALSE(s->dormant);
  CHECK_FALSE(s->paused);
  CHECK(s->container == k->id);
  CHECK(s->metadata.at("team") == "a");
  CHECK(*s->expires_at == expiry);
  CHECK_FALSE(std::filesystem::exists(record_path(dir, sid)));
}

TEST_CASE("dormancy: a dormant session's next call brings it back", "[dormant]") {
  temp_dir dir;
  config c = dormant_config(dir);
  c.dormant_idle = true;  // an Aivory session: running, idle
  rig r(c);
  container_side inside;
  inside.attach(r);
  create_request req;
  req.storage = choose_storage(R"({"provider":"local"})", c).spec;
  req.archive_key = "notes";
  auto created = r.lifecycle.create_session(req);
  REQUIRE(created.ok());
  const std::string sid = created->session_id;
  r.age(sid, 5s);
  r.sweep();
  REQUIRE(r.registry.find(sid)->dormant);
  CHECK_FALSE(r.has_container(sid));
  // Its archive is in its own storage, where a DELETE would have written it.
  CHECK(member_of(read_file(dir.path / req.storage->archive_key("notes")), "outputs/probe.txt") ==
        "probe-1");

  held_session held;
  REQUIRE_FALSE(r.registry.acquire(sid, held));  // what a file call or an exec does
  CHECK(r.has_container(sid));
  CHECK(held.s->container == r.engine.find(std::string(container_prefix) + sid)->id);
  CHECK(member_of(inside.unpacked, "outputs/probe.txt") == "probe-1");
}

TEST_CASE(
    "dormancy: an archive that cannot be written keeps the container, paused, for the next "
    "sweep",
    "[dormant]") {
  temp_dir dir;
  rig r(dormant_config(dir));
  container_side inside;
  inside.attach(r);
  auto created = r.lifecycle.create_session(sandbox_request());
  REQUIRE(created.ok());
  const std::string sid = created->session_id;
  REQUIRE_FALSE(r.controls.pause(sid));
  inside.tar_fails = true;
  r.age(sid, 5s);
  r.sweep();
  auto k = r.engine.find(std::string(container_prefix) + sid);
  REQUIRE(k);
  CHECK(k->state == "paused");
  CHECK_FALSE(r.registry.find(sid)->dormant);
  CHECK(r.registry.find(sid)->paused);
  CHECK_FALSE(std::filesystem::exists(record_path(dir, sid)));
  // The next sweep, with tar working again, puts it to sleep.
  inside.tar_fails = false;
  r.sweep();
  CHECK_FALSE(r.has_container(sid));
  CHECK(r.registry.find(sid)->dormant);
}

TEST_CASE("dormancy: a container the engine does not remove keeps the session live", "[dormant]") {
  temp_dir dir;
  rig r(dormant_config(dir));
  container_side inside;
  inside.attach(r);
  auto created = r.lifecycle.create_session(sandbox_request());
  REQUIRE(created.ok());
  const std::string sid = created->session_id;
  REQUIRE_FALSE(r.controls.pause(sid));
  r.engine.fail("remove", 500, "device busy");
  r.age(sid, 5s);
  r.sweep();
  auto k = r.engine.find(std::string(container_prefix) + sid);
  REQUIRE(k);
  CHECK(k->state == "paused");
  CHECK_FALSE(r.registry.find(sid)->dormant);
  CHECK_FALSE(std::filesystem::exists(record_path(dir, sid)));
}

TEST_CASE("dormancy: a restarted sidecar keeps a dormant session from its record", "[dormant]") {
  temp_dir dir;
  const config c = dormant_config(dir);
  std::string sid;
  {
    rig first(c);
    container_side inside;
    inside.attach(first);
    auto created = first.lifecycle.create_session(sandbox_request());
    REQUIRE(created.ok());
    sid = created->session_id;
    REQUIRE(first.controls.patch_metadata(sid, {{"stage", "two"}}).ok());
    REQUIRE_FALSE(first.controls.pause(sid));
    first.age(sid, 5s);
    first.sweep();
    REQUIRE(first.registry.find(sid)->dormant);
    // A label changed while it sleeps reaches its record.
    REQUIRE(first.controls.patch_metadata(sid, {{"stage", "three"}}).ok());
    REQUIRE(first.lifecycle.end_all_sessions() == 0);
  }
  rig second(c);  // another process, the same directory; its engine has nothing
  container_side inside;
  inside.attach(second);
  second.lifecycle.reconcile();
  auto s = second.registry.find(sid);
  REQUIRE(s);
  CHECK(s->dormant);
  CHECK(s->paused);
  CHECK(s->metadata.at("team") == "a");
  CHECK(s->metadata.at("stage") == "three");
  CHECK(s->expires_at.has_value());
  CHECK_FALSE(s->idle_reaped);
  REQUIRE_FALSE(second.registry.wake(sid));
  CHECK(second.has_container(sid));
  CHECK(member_of(inside.unpacked, "outputs/probe.txt") == "probe-1");
}

TEST_CASE("dormancy: DELETE and expiry of a dormant sandbox remove its archive and record",
          "[dormant]") {
  temp_dir dir;
  rig r(dormant_config(dir));
  container_side inside;
  inside.attach(r);
  std::vector<std::string> sids;
  for (int i = 0; i < 2; ++i) {
    auto created = r.lifecycle.create_session(sandbox_request());
    REQUIRE(created.ok());
    sids.push_back(created->session_id);
    REQUIRE_FALSE(r.controls.pause(created->session_id));
    r.age(created->session_id, 5s);
  }
  r.sweep();
  for (const auto& sid : sids) {
    REQUIRE(r.registry.find(sid)->dormant);
    REQUIRE(std::filesystem::exists(own_archive_path(dir, sid)));
  }
  delete_request del;
  del.session_id = sids[0];
  REQUIRE(r.lifecycle.delete_session(del).ok());
  r.registry.find(sids[1])->expires_at = std::chrono::system_clock::now() - 1s;
  r.sweep();
  for (const auto& sid : sids) {
    CHECK_FALSE(r.registry.find(sid));
    CHECK_FALSE(std::filesystem::exists(own_archive_path(dir, sid)));
    CHECK_FALSE(std::filesystem::exists(record_path(dir, sid)));
  }
  CHECK(r.engine.containers().empty());
}

TEST_CASE("dormancy: an archive that cannot be read keeps it dormant, with no container left",
          "[dormant]") {
  temp_dir dir;
  rig r(dormant_config(dir));
  container_side inside;
  inside.attach(r);
  auto created = r.lifecycle.create_session(sandbox_request());
  REQUIRE(created.ok());
  const std::string sid = created->session_id;
  REQUIRE_FALSE(r.controls.pause(sid));
  r.age(sid, 5s);
  r.sweep();
  REQUIRE(r.registry.find(sid)->dormant);
  std::ofstream(own_archive_path(dir, sid), std::ios::trunc) << "not a tar.gz";
  auto refused = r.controls.resume(sid);
  REQUIRE(refused);
  CHECK(refused->kind == refusal_kind::unavailable);
  CHECK(r.registry.find(sid)->dormant);
  CHECK(r.engine.containers().empty());
  CHECK(std::filesystem::exists(record_path(dir, sid)));
}

TEST_CASE("dormancy: a record reads back as the session it was written from", "[dormant]") {
  temp_dir dir;
  const config c = dormant_config(dir);
  dormant_records records(c);
  session s;
  s.id = std::string(32, 'a');
  s.archive_key = "k-1";
  s.storage = choose_storage(R"({"provider":"local","prefix":"p"})", c).spec;
  s.ttl_seconds = 60;
  s.kernel = "python";
  s.image = "python:3.12";
  s.env = {"A=1", "B=\"two\""};
  s.entrypoint = {"sh", "-c", "echo hi"};
  s.memory_bytes = 1 << 30;
  s.nano_cpus = 500000000;
  s.metadata = {{"x", "y"}};
  s.restored_generation = "g7";
  s.runtime = "runsc";
  auto back = records.session_of(records.record_of(s));
  REQUIRE(back);
  CHECK(back->id == s.id);
  CHECK(back->archive_key == "k-1");
  REQUIRE(back->storage);
  CHECK(back->storage->same_place(*s.storage));
  CHECK(back->ttl_seconds == 60);
  CHECK(back->kernel == "python");
  CHECK(back->image == "python:3.12");
  CHECK(back->runtime == "runsc");  // it wakes on the runtime it was made on
  CHECK(back->env == s.env);
  CHECK(back->entrypoint == s.entrypoint);
  CHECK(back->memory_bytes == s.memory_bytes);
  CHECK(back->nano_cpus == s.nano_cpus);
  CHECK(back->metadata == s.metadata);
  CHECK(back->restored_generation == std::optional<std::string>("g7"));
  CHECK_FALSE(back->expires_at);
  CHECK(back->dormant);
  CHECK_FALSE(records.session_of("{\"id\":\"../x\"}"));
}

TEST_CASE("dormancy: a session adopted live at start-up keeps its container and its record goes",
          "[dormant]") {
  temp_dir dir;
  const config c = dormant_config(dir);
  std::string sid;
  {
    rig first(c);
    container_side inside;
    inside.attach(first);
    auto created = first.lifecycle.create_session(sandbox_request());
    REQUIRE(created.ok());
    sid = created->session_id;
    REQUIRE_FALSE(first.controls.pause(sid));
    first.age(sid, 5s);
    first.sweep();
    REQUIRE(std::filesystem::exists(record_path(dir, sid)));
  }
  // A stop between the record and the container's removal: the engine still runs it.
  rig second(c);
  std::map<std::string, std::string> labels = {{std::string(session_label), sid},
                                               {std::string(instance_label), "default"}};
  const std::string live = second.engine.add_running(std::string(container_prefix) + sid, labels);
  second.lifecycle.reconcile();
  auto s = second.registry.find(sid);
  REQUIRE(s);
  CHECK_FALSE(s->dormant);
  CHECK(s->container == live);
  CHECK_FALSE(std::filesystem::exists(record_path(dir, sid)));
}

TEST_CASE(
    "dormancy: a FUSE workspace stays in its bucket: unmounted when dormant, mounted again "
    "on resume, nothing archived",
    "[dormant]") {
  temp_dir dir;
  config c = dormant_config(dir);
  c.workspace_mode = "fuse";
  // dockgate-mount's place: records its arguments and succeeds.
  const auto calls = dir.path / "mount-calls";
  const auto program = dir.path / "mount.sh";
  std::ofstream(program) << "#!/bin/sh\necho \"$@\" >> " << calls.string() << "\n";
  std::filesystem::permissions(program, std::filesystem::perms::owner_all);
  c.mount_command = program.string();
  rig r(c);
  container_side inside;
  inside.attach(r);
  create_request req = sandbox_request();
  req.archive_key = "ws1";
  auto created = r.lifecycle.create_session(req);
  REQUIRE(created.ok());
  const std::string sid = created->session_id;
  REQUIRE_FALSE(r.controls.pause(sid));
  inside.commands.clear();
  r.age(sid, 5s);
  r.sweep();
  REQUIRE(r.registry.find(sid)->dormant);
  CHECK_FALSE(r.has_container(sid));
  CHECK(read_file(calls) == "mount " + sid + " --key ws1\ncleanup " + sid + "\n");
  for (const auto& cmd : inside.commands) CHECK(cmd.at(0) != "sh");  // no tar of the workspace
  CHECK_FALSE(std::filesystem::exists(dir.path / "dockgate-dormant" / sid));

  REQUIRE_FALSE(r.controls.resume(sid));
  CHECK(r.has_container(sid));
  CHECK(read_file(calls) ==
        "mount " + sid + " --key ws1\ncleanup " + sid + "\nmount " + sid + " --key ws1\n");
  CHECK(inside.unpacked.empty());  // nothing to unpack: the bucket is the workspace
  auto k = r.engine.find(std::string(container_prefix) + sid);
  REQUIRE(k);
  CHECK(k->labels.contains("dockgate.workspace"));
}

TEST_CASE("dormancy: a session used while its workspace is archived stays live", "[dormant]") {
  temp_dir dir;
  config c = dormant_config(dir);
  c.dormant_idle = true;
  rig r(c);
  container_side inside;
  inside.attach(r);
  auto created = r.lifecycle.create_session(sandbox_request());
  REQUIRE(created.ok());
  const std::string sid = created->session_id;
  auto s = r.registry.find(sid);
  // An execd command arrives while tar runs (it takes no session lock, it marks its use).
  auto archive = r.engine.on_exec;
  r.engine.on_exec = [&](const auto& k, const dockgate::client::exec_options& o) {
    if (o.cmd.at(0) == "sh" && o.cmd.size() > 2 &&
        o.cmd.at(2).find("tar --null") != std::string::npos)
      s->last_used = std::chrono::steady_clock::now();
    return archive(k, o);
  };
  r.age(sid, 5s);
  r.sweep();
  CHECK(r.has_container(sid));
  CHECK_FALSE(s->dormant);
  CHECK_FALSE(s->paused);
  CHECK(r.engine.find(std::string(container_prefix) + sid)->state == "running");
  CHECK_FALSE(std::filesystem::exists(record_path(dir, sid)));
}

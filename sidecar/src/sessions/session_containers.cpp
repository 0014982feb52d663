// The session containers on the engine (docs/aivory-api.md, "Create: POST /sessions" and "The
// session container"): their create body, the list, commands run in them as the session user, the
// workspace, the kill sweep.
#include "sessions/session_containers.hpp"

#include <simdjson.h>

#include <iostream>

#include "dockgate/common/workspace_id.hpp"
#include "egress/egress_network.hpp"
#include "egress/egress_policy.hpp"
#include "engine/docker_engine.hpp"
#include "engine/labels.hpp"
#include "sessions/isolation/isolation.hpp"
#include "sessions/session.hpp"

namespace dockgate::sidecar {

using namespace std::chrono_literals;

namespace {

// Every process of the sandbox user but the container's init (PID 1: docker-init), its
// first child (the `sleep` that is the container's life: the child of PID 1 that started
// first, which no later process can be) and this shell is killed: first all stopped at
// once (kill(-1) walks the process table in the kernel, and a stopped process cannot fork
// or change its PID), then each killed, then the sleep resumed; repeated until a pass
// finds nothing to kill. A process past killing is left: a zombie of one thread (state Z
// or X and 1 in the thread count, from a whole stat line; a thread-group leader that exited
// while its other threads run shows Z with more, and is killed). So the sweep ends only
// once every process it killed is a zombie or gone: one still tearing itself down is
// killed again next pass, and a cell's answer never comes while what it started still
// runs. At most 1000 passes (without a pause: dash has no sleep builtin; the runner's own
// sweep waits 1 ms between passes, for at most 2 s). Builtins only (dash): the sweep itself
// adds nothing to the table.
// The cell runner does this sweep itself, step for step (sweep.py kill_sweep()), sparing
// itself where the shell spares its own PID.
// A stat line is the cell's to shape through its comm (up to 15 bytes, a newline or `) `
// or `*` included: /proc/self/comm is writable): fields are split with globbing off, and a
// line that is not a whole stat line (20 fields after the comm, a decimal start time) is
// no candidate. Without that a comm such as "x) 1 1\n" made `shift 19` fail, which ends a
// non-interactive dash, sweep and all, and "x) 1 /*/*" made a cell's process the one kept.
constexpr std::string_view kill_sweep_head =
    "keep=; kt=; for d in /proc/[0-9]*; do read -r st < $d/stat 2>/dev/null || continue; set -f; "
    "set -- ${st##*) }; set +f; "
    "[ \"$2\" = 1 ] && [ $# -ge 20 ] || continue; shift 19; case $1 in ''|*[!0-9]*) continue;; "
    "esac; "
    "if [ -z \"$kt\" ] || [ \"$1\" -lt \"$kt\" ]; then keep=${d#/proc/}; kt=$1; fi; done; "
    "pass=0; while [ $pass -lt 1000 ]; do pass=$((pass + 1)); kill -STOP -1 2>/dev/null; "
    "found=0; for d in /proc/[0-9]*; do p=${d#/proc/}; [ \"$p\" = 1 ] || [ \"$p\" = $$ ] || "
    "[ \"$p\" = \"$keep\" ] ";
constexpr std::string_view kill_sweep_tail =
    "&& continue; st=; read -r st < $d/stat 2>/dev/null; set -f; set -- ${st##*) }; set +f; "
    "[ $# -ge 20 ] && { [ \"$1\" = Z ] || [ \"$1\" = X ]; } && [ \"${18}\" = 1 ] && continue; "
    "kill -9 \"$p\" 2>/dev/null && found=1; done; kill -CONT -1 2>/dev/null; [ $found = 0 ] && "
    "break; done;";

// The judge of a sweep under gVisor (runsc), whose processes live in its own kernel: the
// host's `ps` (ContainerTop) cannot show them (dockerd matches the sandbox's PIDs, 1, 2, …,
// against the host's process table, so it "finds" the host's init). A fresh exec of the
// session user reads the guest's /proc instead: every process but itself and the
// keep-alive user's (uid 65534) that is not a zombie of one thread is one a cell left. Its
// word is taken only because the guest kernel's Yama ptrace scope (1 or more) keeps a
// process the cell left from attaching to it (not its descendant), and only as exactly
// "clean" with exit status 0: a left process can signal it (same uid) or write into its
// stdout through /proc/PID/fd, never make it end well with that output alone. Its status
// lines are read last-wins (Name, the cell's to shape, comes first). Builtins only.
constexpr std::string_view guest_judge =
    "read -r y < /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || y=; case $y in 1|2|3) ;; *) "
    "echo no-yama; exit 3;; esac; n=0; for d in /proc/[0-9]*; do [ \"${d#/proc/}\" = $$ ] && "
    "continue; u=; s=; t=; while read -r k a b c; do case $k in Uid:) u=$b;; State:) s=$a;; "
    "Threads:) t=$a;; esac; done < $d/status 2>/dev/null || continue; [ -z \"$u\" ] && continue; "
    "[ \"$u\" = 65534 ] && continue; { [ \"$s\" = Z ] || [ \"$s\" = X ]; } && [ \"$t\" = 1 ] "
    "&& continue; n=$((n + 1)); done; [ $n = 0 ] && echo clean || echo \"live $n\"";

}  // namespace

std::string kill_cell_processes() {
  return std::string(kill_sweep_head) + std::string(kill_sweep_tail);
}

void session_containers::append_labels(std::string& b, const std::string& sid, const session& s,
                                       body_kind kind, const std::string& claim_of) const {
  auto label = [&b](std::string_view name, std::string_view value) {
    if (b.back() != '{') b += ',';
    client::append_json_string(b, name);
    b += ':';
    client::append_json_string(b, value);
  };
  label(created_label, std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                                          std::chrono::system_clock::now().time_since_epoch())
                                          .count()));
  label(session_label, sid);
  label(instance_label, config_.instance);
  if (kind == body_kind::pool) label(pool_label, "1");
  if (kind == body_kind::claim) label(claim_label, claim_of);
  if (kind != body_kind::pool) {
    label(archive_label, s.archive_key);
    if (s.storage) label(storage_label, s.storage->label());
    if (s.ttl_seconds > 0) label(ttl_label, std::to_string(s.ttl_seconds));
    label(restore_label, s.restore_status);
    if (s.restored_generation) label(generation_label, *s.restored_generation);
    if (s.fuse) label(common::workspace_label, sid);  // the gate binds <root>/<sid> at /workspace
    if (!s.kernel.empty()) label(kernel_label, s.kernel);
    if (!s.image.empty()) label(image_label, s.image);
    if (!s.runtime.empty()) label(runtime_label, s.runtime);
    if (!s.idle_reaped) label(idle_reaped_label, "0");
    std::lock_guard g(s.facts_mutex);
    if (s.expires_at)
      label(expires_label, std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                                              s.expires_at->time_since_epoch())
                                              .count()));
    for (const auto& [k, v] : s.metadata) label(std::string(metadata_label_prefix) + k, v);
    if (s.egress_policy) label(egress_policy_label, egress_policy_text(*s.egress_policy));
  }
}

std::string session_containers::create_body(const std::string& sid, const session& s,
                                            body_kind kind, const std::string& claim_of) const {
  // The hardened host config of the seed (docs/aivory-api.md, "The session container"). The gate's
  // sandbox profile forces all of it anyway; asking for it too keeps the sidecar honest against a
  // looser profile. A warm pool container gets exactly this body (the host config is the same
  // whatever `kind` is); only its labels differ: none of a request's, since none is known yet.
  std::string b = "{\"Image\":";
  client::append_json_string(b, s.image.empty() ? config_.image : s.image);
  b += R"(,"Cmd":["sleep","infinity"],"User":)";
  client::append_json_string(b, keepalive_user);
  b += R"(,"WorkingDir":"/workspace","Labels":{)";
  append_labels(b, sid, s, kind, claim_of);
  // SANDBOX_NETWORK=allowlist: the container's own network (egress_network.cpp: alone on
  // it, no session sees another) and the proxy's address on its gateway in every way
  // clients look for it (curl and requests read the lower-case names, others the upper;
  // pip has its own). The cell needs no DNS: the proxy resolves the names it lets through.
  // Without the proxy's address (the network could not be made) the create names the
  // network anyway, and the daemon refuses it if it is not there: no session without its
  // wall. A pool claim's marker is never started: no network. The proxy lets the session
  // reach its own list (egress_policy.hpp: an OpenSandbox sandbox's networkPolicy) or else
  // the operator's; a pool container is only ever claimed by a session of the operator's.
  std::string network = "none";
  std::vector<std::string> env = kind == body_kind::pool ? std::vector<std::string>() : s.env;
  if (config_.network == "allowlist" && kind != body_kind::claim) {
    network = egress_network_name(config_, sid);
    const egress_rules rules =
        kind == body_kind::pool || !s.egress_policy ? operator_rules(config_) : *s.egress_policy;
    if (const std::string proxy = egress_proxy(sid, rules); !proxy.empty()) {
      for (std::string_view name :
           {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "PIP_PROXY"})
        env.push_back(std::string(name) + "=" + proxy);
      env.emplace_back("NO_PROXY=localhost,127.0.0.1,::1");
      env.emplace_back("no_proxy=localhost,127.0.0.1,::1");
    }
  }
  b += "}";
  if (!env.empty() || (config_.network == "allowlist" && kind != body_kind::claim)) {
    b += ",\"Env\":[";
    for (std::size_t i = 0; i < env.size(); ++i) {
      if (i) b += ',';
      client::append_json_string(b, env[i]);
    }
    b += "]";
  }
  const std::int64_t memory = s.memory_bytes > 0 ? s.memory_bytes : config_.memory_bytes;
  b += ",\"HostConfig\":{\"NetworkMode\":\"" + network + "\",\"Memory\":" + std::to_string(memory) +
       ",\"MemorySwap\":" + std::to_string(memory) +
       ",\"NanoCpus\":" + std::to_string(s.nano_cpus > 0 ? s.nano_cpus : config_.nano_cpus) +
       ",\"PidsLimit\":" + std::to_string(config_.pids_limit) +
       ",\"Ulimits\":[{\"Name\":\"nofile\",\"Soft\":" + std::to_string(config_.nofile_soft) +
       ",\"Hard\":" + std::to_string(config_.nofile_hard) +
       "}],\"Init\":true,\"SecurityOpt\":[\"no-new-privileges\"],\"CapDrop\":[\"ALL\"]";
  if (config_.read_only_rootfs) {
    // exec on /tmp and the home: dockerd mounts a tmpfs noexec unless told `exec`, and
    // noexec on memory the session user writes is no wall against a user who already runs
    // Python (docs/security.md, "What a cell writes it can run"); nosuid,nodev stay.
    b += ",\"ReadonlyRootfs\":true,\"Tmpfs\":{\"/tmp\":\"rw,nosuid,nodev,exec,size=" +
         config_.tmpfs_size +
         "\",\"/home/sandbox\":\"rw,nosuid,nodev,exec,size=" + config_.tmpfs_size + "\"";
    if (!s.fuse)
      b += ",\"/workspace\":\"rw,nosuid,nodev,size=" + config_.workspace_size + ",mode=1777\"";
    b += "}";
  }
  if (!config_.disk_size.empty()) b += ",\"StorageOpt\":{\"size\":\"" + config_.disk_size + "\"}";
  // The session's runtime, else SANDBOX_RUNTIMES' first (a pool container's: the default);
  // none listed: no Runtime, the engine's (or the gate's forced) default.
  if (const std::string runtime = s.runtime.empty() ? default_runtime(config_) : s.runtime;
      !runtime.empty()) {
    b += ",\"Runtime\":";
    client::append_json_string(b, runtime);
  }
  return b + "}}";
}

std::optional<std::vector<session_containers::listed>> session_containers::own(bool all) const {
  // Every session container the gate lets us see, then only this instance's: a container
  // without the instance label predates it and belongs to the "default" instance.
  auto list = engine_.list(session_label, all, 20s);
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  simdjson::dom::array arr;
  if (list.status != 200 || p.parse(list.body).get(doc) != simdjson::SUCCESS ||
      doc.get_array().get(arr) != simdjson::SUCCESS)
    return std::nullopt;
  std::vector<listed> out;
  for (simdjson::dom::element c : arr) {
    listed sc;
    std::string_view id, state;
    simdjson::dom::object labels;
    if (c["Id"].get_string().get(id) != simdjson::SUCCESS ||
        c["Labels"].get_object().get(labels) != simdjson::SUCCESS)
      continue;
    if (c["State"].get_string().get(state) == simdjson::SUCCESS) sc.state = std::string(state);
    for (auto [k, v] : labels) {
      std::string_view text;
      if (v.get_string().get(text) == simdjson::SUCCESS)
        sc.labels.emplace(std::string(k), std::string(text));
    }
    auto inst = sc.labels.find(std::string(instance_label));
    if (inst == sc.labels.end() ? config_.instance != "default" : inst->second != config_.instance)
      continue;
    sc.id = std::string(id);
    out.push_back(std::move(sc));
  }
  return out;
}

bool session_containers::running(const std::string& container) const {
  auto r = engine_.inspect(container, 20s);
  if (r.status != 200) return false;
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  bool running = false;
  return p.parse(r.body).get(doc) == simdjson::SUCCESS &&
         doc["State"]["Running"].get_bool().get(running) == simdjson::SUCCESS && running;
}

void session_containers::remove(const std::string& container) const {
  // SANDBOX_NETWORK=allowlist: the container's own network goes with it (read from the
  // daemon's record first: `container` may be a name or an ID).
  std::string network;
  if (config_.network == "allowlist") {
    auto r = engine_.inspect(container, 20s);
    simdjson::dom::parser p;
    simdjson::dom::element doc;
    std::string_view mode;
    if (r.status == 200 && p.parse(r.body).get(doc) == simdjson::SUCCESS &&
        doc["HostConfig"]["NetworkMode"].get_string().get(mode) == simdjson::SUCCESS &&
        is_egress_network(config_, mode))
      network = std::string(mode);
  }
  engine_.remove(container, 30s);
  if (!network.empty()) remove_egress_network(engine_, config_, network);
}

client::exec_result session_containers::run_in(const std::string& container,
                                               std::vector<std::string> cmd,
                                               std::chrono::milliseconds timeout,
                                               std::string stdin_data, bool attach_stdin,
                                               std::vector<std::string> env,
                                               std::size_t max_out) const {
  client::exec_options o;
  o.cmd = std::move(cmd);
  o.env = std::move(env);
  o.user = session_user;
  o.stdin_data = std::move(stdin_data);
  o.attach_stdin = attach_stdin;
  o.timeout = timeout;
  o.max_stdout = max_out;
  o.max_stderr = 64 * 1024;
  return engine_.exec(container, o);
}

std::string session_containers::make_workspace(const std::string& container,
                                               std::shared_ptr<cell_runner>* runner,
                                               std::string* probe_output) const {
  // Before the answer that names the session: no request can touch the folders earlier.
  const std::vector<std::string> mkdir = {"mkdir", "-p", "/workspace/uploads", "/workspace/outputs",
                                          "/workspace/skills"};
  // The isolation probe makes them (isolation/isolation.hpp): on the runner it is that one
  // request, the self-test folded into it; without one, an exec of its own after mkdir's.
  const bool probing = probe_output && !executors_.isolation_probe.empty();
  std::vector<std::string> probe =
      probing ? executors_.isolation_probe : std::vector<std::string>();
  if (probing) probe.insert(probe.end(), mkdir.begin() + 2, mkdir.end());
  if (runner && config_.cell_runner && executors_.start_runner) {
    // The same command through the runner (its own process, as the session user, like the
    // exec's); a runner that fails here is closed and the exec below says why, if anything.
    std::string why;
    if (auto started = executors_.start_runner(container, probing ? probe : mkdir,
                                               probing ? probe_output : nullptr, why)) {
      *runner = std::move(started);
      return {};
    }
    std::cerr << "dockgate-sidecar: container " << container.substr(0, 12)
              << ": cell runner not started (" << why << "); its first cell will start one"
              << std::endl;
  }
  auto mk = run_in(container, mkdir, 20s);
  if (!mk.started || mk.exit_code != 0)
    return "workspace init failed: " + (mk.error.empty() ? mk.stderr_data : mk.error);
  if (!probe.empty()) *probe_output = isolation_probe_answer(run_in(container, probe, 20s));
  return {};
}

std::string session_containers::run_isolation_probe(const std::string& container) const {
  if (executors_.isolation_probe.empty()) return {};
  return isolation_probe_answer(run_in(container, executors_.isolation_probe, 20s));
}

session_containers::sweep_outcome session_containers::sweep_cell_processes(
    const std::string& container, const std::string& runtime) const {
  run_in(container, {"sh", "-c", kill_cell_processes()}, 15s);
  return only_own_processes(container, runtime);
}

namespace {

// The host uid of the container's init among `rows` (ContainerTop's pid, uid, stat, nlwp),
// found by the daemon's State.Pid; "" when the engine cannot say.
std::string init_host_uid(const container_engine& engine, const std::string& container,
                          simdjson::dom::array rows) {
  auto r = engine.inspect(container, 20s);
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  std::int64_t pid = 0;
  if (r.status != 200 || p.parse(r.body).get(doc) != simdjson::SUCCESS ||
      doc["State"]["Pid"].get_int64().get(pid) != simdjson::SUCCESS || pid <= 0)
    return {};
  const std::string init = std::to_string(pid);
  for (simdjson::dom::element row : rows) {
    simdjson::dom::array cols;
    std::string_view row_pid, uid;
    if (row.get_array().get(cols) == simdjson::SUCCESS && cols.size() == 4 &&
        cols.at(0).get_string().get(row_pid) == simdjson::SUCCESS && row_pid == init &&
        cols.at(1).get_string().get(uid) == simdjson::SUCCESS)
      return std::string(uid);
  }
  return {};
}

}  // namespace

session_containers::sweep_outcome session_containers::only_own_processes(
    const std::string& container, const std::string& runtime) const {
  // gVisor's processes are out of the host's sight: the guest's own judge. A session on the
  // engine's default runtime (none named) is asked which runtime it runs on only when the
  // host's table does not say clean (never on runc's clean path): under gVisor the host's
  // table holds no row of the init's host PID (unknown) or the host's own processes
  // (tainted).
  const std::string named = runtime.empty() ? default_runtime(config_) : runtime;
  if (gvisor_runtime(named)) return guest_processes(container);
  const auto seen = host_processes(container);
  if (seen == sweep_outcome::clean || !named.empty()) return seen;
  return gvisor_runtime(runtime_of(container)) ? guest_processes(container) : seen;
}

session_containers::sweep_outcome session_containers::guest_processes(
    const std::string& container) const {
  auto judged = run_in(container, {"sh", "-c", std::string(guest_judge)}, 15s, {}, false, {}, 4096);
  if (!judged.started) return sweep_outcome::unknown;  // the engine could not be asked
  if (judged.exit_code == 0 && judged.stdout_data == "clean\n") return sweep_outcome::clean;
  if (judged.exit_code == 3 && judged.stdout_data == "no-yama\n") {
    std::cerr << "dockgate-sidecar: container " << container.substr(0, 12)
              << ": the guest kernel has no Yama ptrace scope: a sweep is never judged clean"
              << std::endl;
    return sweep_outcome::unknown;
  }
  return sweep_outcome::tainted;  // a process lives, or one stopped, killed or shaped the judge
}

std::string session_containers::runtime_of(const std::string& container) const {
  auto r = engine_.inspect(container, 20s);
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  std::string_view runtime;
  if (r.status != 200 || p.parse(r.body).get(doc) != simdjson::SUCCESS ||
      doc["HostConfig"]["Runtime"].get_string().get(runtime) != simdjson::SUCCESS)
    return {};
  return std::string(runtime);
}

session_containers::sweep_outcome session_containers::host_processes(
    const std::string& container) const {
  // `ps -o pid,uid,stat` on the host, limited by the daemon to the container's processes:
  // what a process in the container cannot shape (numeric uids, the kernel's states).
  // A zombie counts as gone only with no thread left: a thread-group leader that exited
  // while its other threads run shows as "Zl", alive.
  auto top = engine_.top(container, "-o%20pid%2Cuid%2Cstat%2Cnlwp", 20s);
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  simdjson::dom::array rows, titles;
  if (top.status != 200 || p.parse(top.body).get(doc) != simdjson::SUCCESS ||
      doc["Processes"].get_array().get(rows) != simdjson::SUCCESS ||
      doc["Titles"].get_array().get(titles) != simdjson::SUCCESS || titles.size() != 4)
    return sweep_outcome::unknown;
  // The keep-alive's uid as the host sees it: the uid of the container's init (the
  // daemon's State.Pid), which no cell can change. On an engine with userns-remap that is
  // the remapped uid (65534 + the subordinate range's start), not 65534.
  const std::string own_uid = init_host_uid(engine_, container, rows);
  if (own_uid.empty()) return sweep_outcome::unknown;
  for (simdjson::dom::element row : rows) {
    std::string_view uid, stat, threads;
    simdjson::dom::array cols;
    if (row.get_array().get(cols) != simdjson::SUCCESS || cols.size() != 4 ||
        cols.at(1).get_string().get(uid) != simdjson::SUCCESS ||
        cols.at(2).get_string().get(stat) != simdjson::SUCCESS ||
        cols.at(3).get_string().get(threads) != simdjson::SUCCESS)
      return sweep_outcome::unknown;
    if (uid != own_uid && !(stat.starts_with('Z') && threads == "1")) return sweep_outcome::tainted;
  }
  return sweep_outcome::clean;
}

std::string session_containers::image_id() const {
  auto r = engine_.image_inspect(config_.image, 10s);
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  std::string_view id;
  if (r.status != 200 || p.parse(r.body).get(doc) != simdjson::SUCCESS ||
      doc["Id"].get_string().get(id) != simdjson::SUCCESS)
    return {};
  return std::string(id);
}

bool session_containers::image_present() {
  const bool ready = engine_.image_inspect(config_.image, 10s).status == 200;
  if (ready) image_ready_ = true;
  return ready;
}

std::string session_containers::egress_proxy(const std::string& sid,
                                             const egress_rules& rules) const {
  std::string why;
  const std::string gw = egress_network(engine_, config_, egress_network_name(config_, sid), why);
  if (gw.empty()) {
    std::cerr << "dockgate-sidecar: " << why << ": the session gets no proxy" << std::endl;
    return {};
  }
  // The list before the container: none of its connections meets an older file.
  if (auto failed = write_egress_policy(config_, gw, rules)) {
    std::cerr << "dockgate-sidecar: " << *failed << ": the proxy refuses every name for it"
              << std::endl;
    return {};
  }
  return egress_proxy_url(config_, gw);
}

void session_containers::remove_unused_network(const std::string& sid) const {
  if (config_.network == "allowlist")
    remove_egress_network(engine_, config_, egress_network_name(config_, sid));
}

}  // namespace dockgate::sidecar

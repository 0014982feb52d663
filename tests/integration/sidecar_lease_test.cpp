// Two live sidecars never share an instance (instance_lease.hpp): a second start with the
// same SANDBOX_INSTANCE on the same engine refuses while the first lives, a restart after
// a crash takes the lease over and adopts the sessions, and a holder that lost its lease
// stops. Judged by real /exec answers, the lease container's labels as the daemon keeps
// them, and whether the processes are alive.
#include <sys/wait.h>

#include <fstream>

#include "sidecar_harness.hpp"

using namespace dockgate::test;
using namespace std::chrono_literals;

namespace {

// Whether `pid` (a child) has exited, without reaping it.
bool exited(pid_t pid) {
  siginfo_t info{};
  return ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
         info.si_pid == pid;
}

bool healthy(const std::string& port) {
  dockgate::client::transport ep{{dockgate::common::endpoint::kind::tcp, "", "127.0.0.1",
                                  static_cast<std::uint16_t>(std::stoi(port))},
                                 nullptr};
  return dockgate::client::http_request(ep, "GET", "/healthz", "", 5s, 1 << 20, "").status == 200;
}

// The lease container's name for `instance` under the test's API key, computed here with
// openssl's command line as docs/sidecar.md gives it: the first 16 hex digits of
// HMAC-SHA256(key, "dockgate-instance-lease\n" + instance).
std::string lease_container(const std::string& instance) {
  auto out = run("printf 'dockgate-instance-lease\\n%s' '" + instance +
                 "' | openssl dgst -sha256 -hmac '" + api_key + "'")
                 .output;
  return "dockgate-instance-" + instance + "-" + out.substr(out.rfind(' ') + 1, 16);
}

std::string lease_label(const std::string& instance, const std::string& label) {
  return run(direct() + " inspect -f '{{index .Config.Labels \"" + label + "\"}}' " +
             lease_container(instance) + " 2>/dev/null")
      .output;
}

std::string read_back(const dockgate::client::http_response& r) {
  return field(r.body, "data_base64");
}

// The sandbox profile under another owner: a second tenant's gate on the same engine.
std::string other_owner_policy() {
  std::ifstream in(repo_root() + "/compose/policies/sandbox.json");
  std::string policy((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string owner = "\"owner\": \"sandbox\"";
  REQUIRE(policy.find(owner) != std::string::npos);
  policy.replace(policy.find(owner), owner.size(), "\"owner\": \"another-tenant\"");
  return policy;
}

std::string engine_state(const std::string& container) {
  return run(direct() +
             " inspect -f '{{.State.Status}} {{index .Config.Labels \"dockgate.owner\"}}' " +
             container + " 2>/dev/null")
      .output;
}

}  // namespace

// The sessions here are cold (SANDBOX_WARM_POOL=0): what is judged is the lease, not
// whether a warm container's claim record was written before a SIGKILL.

TEST_CASE("sidecar lease: a second sidecar with the same instance refuses while the first lives",
          "[integration][sidecar][lease]") {
  proxy_process proxy("compose/policies/sandbox.json");
  const std::string instance = unique_name("lease");
  const std::vector<std::string> env = {"SANDBOX_INSTANCE=" + instance,
                                        "SANDBOX_INSTANCE_LEASE_S=6", "SANDBOX_WARM_POOL=0"};
  sidecar_process first(proxy, env);
  const std::string sid = new_session(first);
  REQUIRE(field(first.exec(sid, "open('/workspace/w.txt','w').write('kept')"), "exit_code") == "0");
  const std::string holder = lease_label(instance, "sandbox.lease.holder");
  INFO(first.log());
  CHECK(holder.size() == 33);  // 32 hex digits and the newline

  auto second = start_sidecar(proxy, env);
  int status = wait_exit(second->pid, 90s);
  if (status ==
      -1) {  // it did not refuse: stop it as an operator would (SIGTERM ends its sessions)
    ::kill(second->pid, SIGTERM);
    status = wait_exit(second->pid, 60s);
    CHECK(status == 1);  // (recorded as the failure it is)
  }
  const std::string said = second->log_text();
  INFO(said);
  CHECK(status == 1);
  CHECK(said.find("instance \"" + instance + "\" is held by a live sidecar: holder " +
                  holder.substr(0, 32) + " on host ") != std::string::npos);
  CHECK(said.find(", pid " + std::to_string(first.pid()) + ", since ") != std::string::npos);
  // The first one's session answers as before, its files in place; the lease is still its own.
  auto ran = first.call("POST", "/exec", exec_body(sid, "print(open('/workspace/w.txt').read())"));
  CHECK(ran.status == 200);
  CHECK(field(ran.body, "stdout") == "kept\n");
  CHECK(lease_label(instance, "sandbox.lease.holder") == holder);
  CHECK_FALSE(exited(first.pid()));
}

TEST_CASE("sidecar lease: two sidecars started at once with one instance: one runs, one refuses",
          "[integration][sidecar][lease]") {
  proxy_process proxy("compose/policies/sandbox.json");
  const std::string instance = unique_name("lease");
  const std::vector<std::string> env = {"SANDBOX_INSTANCE=" + instance,
                                        "SANDBOX_INSTANCE_LEASE_S=6", "SANDBOX_WARM_POOL=0"};
  auto a = start_sidecar(proxy, env);
  auto b = start_sidecar(proxy, env);
  // Bounded: one becomes healthy, the other exits; both settle within a lease and a bit.
  for (int i = 0;
       i < 1200 && !((healthy(a->port) && exited(b->pid)) || (healthy(b->port) && exited(a->pid)));
       ++i)
    std::this_thread::sleep_for(50ms);
  const bool a_runs = !exited(a->pid), b_runs = !exited(b->pid);
  INFO(a->log_text() << "----\n" << b->log_text());
  CHECK(a_runs != b_runs);
  auto& runner = a_runs ? a : b;
  auto& refused = a_runs ? b : a;
  CHECK(wait_exit(refused->pid, 5s) == 1);
  // It refuses naming the live holder. The two creates race (the gate serves them on two
  // threads at once): the loser's create meets the name while the winner's is still being
  // made, which the daemon cannot inspect yet; it waits for it instead of running out of
  // attempts with "it changed hands".
  const std::string why = refused->log_text();
  CHECK(why.find("is held by a live sidecar: holder ") != std::string::npos);
  // The lease is the running one's.
  CHECK(runner->log_text().find("holding the lease of instance " + instance + " (holder " +
                                lease_label(instance, "sandbox.lease.holder").substr(0, 32)) !=
        std::string::npos);
  ::kill(runner->pid, SIGTERM);
  CHECK(wait_exit(runner->pid, 60s) == 0);
}

TEST_CASE("sidecar lease: after a SIGKILL the restart takes the lease over and adopts the session",
          "[integration][sidecar][lease]") {
  proxy_process proxy("compose/policies/sandbox.json");
  const std::string instance = unique_name("lease");
  const std::vector<std::string> env = {"SANDBOX_INSTANCE=" + instance,
                                        "SANDBOX_INSTANCE_LEASE_S=6", "SANDBOX_WARM_POOL=0"};
  std::string sid, old_holder;
  {
    sidecar_process first(proxy, env);
    sid = new_session(first);
    REQUIRE(field(first.exec(sid, "open('/workspace/w.txt','w').write('kept')"), "exit_code") ==
            "0");
    old_holder = lease_label(instance, "sandbox.lease.holder");
    first.stop(SIGKILL);
  }
  // Same host, same PID namespace, its PID gone: provably gone, taken over at once.
  sidecar_process restarted(proxy, env);
  INFO(restarted.log());
  CHECK(restarted.log().find("is taken over: no such process runs on this host any more") !=
        std::string::npos);
  const std::string new_holder = lease_label(instance, "sandbox.lease.holder");
  CHECK(new_holder.size() == 33);
  CHECK(new_holder != old_holder);
  auto ran =
      restarted.call("POST", "/exec", exec_body(sid, "print(open('/workspace/w.txt').read())"));
  CHECK(ran.status == 200);
  CHECK(field(ran.body, "stdout") == "kept\n");
  CHECK(read_back(restarted.call("POST", "/files/get",
                                 R"({"session_id":")" + sid + R"(","path":"w.txt"})")) ==
        "a2VwdA==");
  // A clean stop gives the lease back.
  restarted.stop(SIGTERM);
  CHECK_FALSE(container_exists(lease_container(instance)));
}

TEST_CASE(
    "sidecar lease: a holder that cannot be proved gone is waited for until its lease expires",
    "[integration][sidecar][lease]") {
  proxy_process proxy("compose/policies/sandbox.json");
  const std::string instance = unique_name("lease");
  const std::vector<std::string> env = {"SANDBOX_INSTANCE=" + instance,
                                        "SANDBOX_INSTANCE_LEASE_S=6", "SANDBOX_WARM_POOL=0"};
  std::string sid;
  {
    sidecar_process first(proxy, env);
    sid = new_session(first);
    REQUIRE(field(first.exec(sid, "open('/workspace/w.txt','w').write('kept')"), "exit_code") ==
            "0");
    first.stop(SIGKILL);
  }
  // Its lease as a sidecar on another host would have left it: nothing here can tell
  // whether that holder lives, only its heartbeat can (written now, never renewed).
  const std::string lease = lease_container(instance);
  run(direct() + " rm -f " + lease);
  auto made = run(direct() + " run -d --name " + lease +
                  " --label dockgate.owner=sandbox --label sandbox.lease=" + instance +
                  " --label sandbox.lease.holder=feedfacefeedfacefeedfacefeedface" +
                  " --label sandbox.lease.host=elsewhere --label sandbox.lease.pid=4242" +
                  " --label 'sandbox.lease.process=another-boot pid:[1] 1' --user 1000:1000 "
                  "--read-only --tmpfs /tmp " +
                  runtime_image() + " sh -c 'echo 0 > /tmp/lease-beat && exec sleep infinity'");
  REQUIRE(made.status == 0);
  auto restarted = start_sidecar(proxy, env);
  bool up = false;
  for (int i = 0; i < 1200 && !(up = healthy(restarted->port)) && !exited(restarted->pid); ++i)
    std::this_thread::sleep_for(50ms);
  const std::string said = restarted->log_text();
  INFO(said);
  REQUIRE(up);
  CHECK(said.find(
            "has a lease (holder feedfacefeedfacefeedfacefeedface on host elsewhere, pid 4242") !=
        std::string::npos);
  CHECK(said.find("has expired: not renewed for 6 s; taking it over") != std::string::npos);
  CHECK(lease_label(instance, "sandbox.lease.holder").substr(0, 32) !=
        "feedfacefeedfacefeedfacefeedface");
  dockgate::client::transport ep{{dockgate::common::endpoint::kind::tcp, "", "127.0.0.1",
                                  static_cast<std::uint16_t>(std::stoi(restarted->port))},
                                 nullptr};
  auto ran = dockgate::client::http_request(
      ep, "POST", "/exec", exec_body(sid, "print(open('/workspace/w.txt').read())"), 60s, 1 << 20,
      "Authorization: Bearer " + api_key + "\r\n");
  CHECK(field(ran.body, "stdout") == "kept\n");
  ::kill(restarted->pid, SIGTERM);
  CHECK(wait_exit(restarted->pid, 60s) == 0);
  CHECK_FALSE(container_exists(lease));
}

TEST_CASE("sidecar lease: a holder whose lease is gone stops at once and leaves the sessions",
          "[integration][sidecar][lease]") {
  proxy_process proxy("compose/policies/sandbox.json");
  const std::string instance = unique_name("lease");
  sidecar_process holder(
      proxy, {"SANDBOX_INSTANCE=" + instance, "SANDBOX_INSTANCE_LEASE_S=6", "SANDBOX_WARM_POOL=0"});
  const std::string sid = new_session(holder);
  // Another sidecar took it over (as after a stall longer than the lease): the lease
  // container this one made is removed.
  run(direct() + " rm -f " + lease_container(instance));
  for (int i = 0; i < 600 && !exited(holder.pid()); ++i) std::this_thread::sleep_for(50ms);
  INFO(holder.log());
  CHECK(exited(holder.pid()));
  CHECK(holder.log().find("the instance lease was lost (") != std::string::npos);
  // It touched nothing on its way out: the session's container still runs.
  CHECK(run(direct() + " inspect -f '{{.State.Running}}' dockgate-sbx-" + sid).output == "true\n");
  run(direct() + " rm -f dockgate-sbx-" + sid);
}

TEST_CASE(
    "sidecar lease: another owner's container on the guessable name does not keep the sidecar from "
    "starting",
    "[integration][sidecar][lease]") {
  proxy_process proxy("compose/policies/sandbox.json");
  proxy_process other(other_owner_policy());
  const std::string instance = unique_name("lease");
  const std::vector<std::string> env = {"SANDBOX_INSTANCE=" + instance,
                                        "SANDBOX_INSTANCE_LEASE_S=6", "SANDBOX_WARM_POOL=0"};
  const std::string plain = "dockgate-instance-" + instance;
  // Another tenant of the engine takes the name first, through its own gate: a container
  // never started (this gate neither shows nor removes it).
  auto made = run(other.docker() + " create --name " + plain + " " + runtime_image() +
                  " sleep infinity 2>&1");
  INFO(made.output);
  REQUIRE(made.status == 0);
  REQUIRE(engine_state(plain) == "created another-tenant\n");
  {
    sidecar_process s(proxy, env);  // fails the test if it does not start
    const std::string sid = new_session(s);
    CHECK(field(s.exec(sid, "print('up')"), "stdout") == "up\n");
    // The engine's record: the lease is this sidecar's own running container, with its
    // labels; the other tenant's container is as it was.
    CHECK(lease_label(instance, "sandbox.lease") == instance + "\n");
    CHECK(engine_state(lease_container(instance)) == "running sandbox\n");
    CHECK(engine_state(plain) == "created another-tenant\n");
  }
  // Its sibling: the name taken by a running container made on the engine directly, with
  // labels of its own (a lease's, even): still no denial of service.
  run(direct() + " rm -f " + plain);
  REQUIRE(run(direct() + " run -d --name " + plain + " --label sandbox.lease=" + instance +
              " --label sandbox.lease.holder=feedfacefeedfacefeedfacefeedface " + runtime_image() +
              " sleep infinity")
              .status == 0);
  {
    sidecar_process s(proxy, env);
    CHECK(field(s.exec(new_session(s), "print('up')"), "stdout") == "up\n");
    CHECK(engine_state(lease_container(instance)) == "running sandbox\n");
    CHECK(run(direct() + " inspect -f '{{.State.Running}}' " + plain).output == "true\n");
  }
  run(direct() + " rm -f " + plain);
}

TEST_CASE("sidecar lease: a foreign container on the lease's own name is named, with what to do",
          "[integration][sidecar][lease]") {
  proxy_process proxy("compose/policies/sandbox.json");
  proxy_process other(other_owner_policy());
  const std::string instance = unique_name("lease");
  const std::vector<std::string> env = {"SANDBOX_INSTANCE=" + instance,
                                        "SANDBOX_INSTANCE_LEASE_S=5", "SANDBOX_WARM_POOL=0"};
  // As if the key had leaked: the keyed name itself, taken by another tenant.
  const std::string keyed = lease_container(instance);
  REQUIRE(
      run(other.docker() + " create --name " + keyed + " " + runtime_image() + " sleep infinity")
          .status == 0);
  auto refused = start_sidecar(proxy, env);
  int status = wait_exit(refused->pid, 60s);
  if (status == -1) {
    ::kill(refused->pid, SIGTERM);
    status = wait_exit(refused->pid, 60s);
  }
  const std::string said = refused->log_text();
  INFO(said);
  CHECK(status == 1);
  CHECK(said.find("the instance lease's name " + keyed +
                  " is taken on the engine by a container this gate does not show") !=
        std::string::npos);
  CHECK(said.find("Remove it on the engine (docker rm -f " + keyed +
                  ") or give this sidecar another SANDBOX_INSTANCE") != std::string::npos);
  CHECK(engine_state(keyed) == "created another-tenant\n");  // untouched
  // Done as told: the sidecar starts.
  run(direct() + " rm -f " + keyed);
  sidecar_process s(proxy, env);
  CHECK(engine_state(keyed) == "running sandbox\n");
}

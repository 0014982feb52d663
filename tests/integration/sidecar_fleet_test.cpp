// A fleet of sidecars on one store (issue 22): sessions in FUSE workspace mode have a
// record in the store and are held under their instance's store lease; a call that
// reaches another sidecar is forwarded to a live holder, and takes the session over once
// the holder's lease has expired, with every file its workspace held. Judged by the
// answers, the daemon's record of the session's container and the objects in the store.
#include <atomic>

#include "fuse_harness.hpp"

using namespace dockgate::test;
using namespace std::chrono_literals;

namespace {

std::string label_of(const std::string& container, const std::string& label) {
  auto r = run(direct() + " inspect -f '{{index .Config.Labels \"" + label + "\"}}' " + container +
               " 2>/dev/null");
  return r.status == 0 ? r.output.substr(0, r.output.find('\n')) : "";
}

std::string container_id(const std::string& container) {
  auto r = run(direct() + " inspect -f '{{.Id}}' " + container + " 2>/dev/null");
  return r.status == 0 ? r.output.substr(0, r.output.find('\n')) : "";
}

// A fleet member: its own gate and workspace root, the shared store prefix, a short lease.
std::vector<std::string> member_env(const fuse_setup& fs) {
  auto env = fs.env();
  env.push_back("SANDBOX_FLEET_URL=self");
  env.push_back("SANDBOX_INSTANCE_LEASE_S=5");
  env.push_back("SANDBOX_WARM_POOL=0");
  return env;
}

// PUT of an object under the prefix, as another sidecar of the fleet would write it
// (s3rver takes unsigned requests).
int put_object(const fuse_setup& fs, const std::string& key, const std::string& body) {
  const std::string file = fs.root + ".put";
  std::ofstream(file, std::ios::trunc) << body;
  return run("curl -sf -X PUT --data-binary @" + file + " " + env_or("DOCKGATE_TEST_S3_ENDPOINT") + "/" +
             env_or("DOCKGATE_TEST_S3_BUCKET") + "/" + fs.prefix + "/" + key + " -o /dev/null")
      .status;
}

}  // namespace

TEST_CASE("fleet: a call for a session held elsewhere is forwarded to its live holder, and takes it over with its files once the holder is gone",
          "[integration][sidecar][fuse][fleet]") {
  REQUIRE(!env_or("DOCKGATE_TEST_S3_ENDPOINT").empty());
  fuse_setup fa;
  fuse_setup fb;
  fb.prefix = fa.prefix;
  proxy_process pa(fa.policy);
  proxy_process pb(fb.policy);
  sidecar_process a(pa, member_env(fa));
  sidecar_process b(pb, member_env(fb));

  auto created = a.create(R"({"archive_key":"fleet-conv","idle_ttl_sec":900})");
  INFO(created.body << a.log());
  REQUIRE(created.status == 200);
  const std::string sid = field(created.body, "session_id");
  const std::string name = "dockgate-sbx-" + sid;
  const std::string instance_a = label_of(name, "sandbox.instance");
  REQUIRE(!instance_a.empty());
  // The record, beside the workspace prefix: what any member needs, and its holder.
  const std::string record = fa.object(".dockgate-fleet/sessions/" + sid + ".json");
  CHECK(field(record, "owner") == instance_a);
  CHECK(field(record, "archive_key") == "fleet-conv");
  CHECK(field(record, "idle_ttl_sec") == "900");
  CHECK(field(record, "storage") == "s3://" + env_or("DOCKGATE_TEST_S3_BUCKET") + "/" + fa.prefix + "/fleet-conv/");
  CHECK(record.find(env_or("DOCKGATE_TEST_S3_SECRET_KEY")) == std::string::npos);

  // Files written on A: an upload and a cell's output.
  CHECK(a.call("POST", "/files", "{\"session_id\":\"" + sid + R"(","path":"uploads/in.txt","data_base64":"ZnJvbSBB"})")
            .body == R"({"ok":true})");
  CHECK(field(a.exec(sid, "open('/workspace/outputs/cell.txt','w').write('cell on A')"), "exit_code") == "0");
  const std::string read_both =
      "print(open('/workspace/uploads/in.txt').read(), open('/workspace/outputs/cell.txt').read())";

  // Through B while A lives: forwarded to A, which still holds it (one container, A's).
  const std::string held_by_a = container_id(name);
  auto via_b = b.call("POST", "/exec", exec_body(sid, read_both));
  INFO(via_b.body << b.log());
  CHECK(via_b.status == 200);
  CHECK(field(via_b.body, "stdout") == "from A cell on A\n");
  CHECK(container_id(name) == held_by_a);
  CHECK(label_of(name, "sandbox.instance") == instance_a);
  CHECK(b.call("POST", "/files/list", "{\"session_id\":\"" + sid + "\"}").body.find("in.txt") != std::string::npos);

  // A's host dies. B answers 503 while A's lease lives, then takes the session over.
  a.stop(SIGKILL);
  dockgate::client::http_response again;
  for (int i = 0; i < 120; ++i) {
    again = b.call("POST", "/exec", exec_body(sid, read_both));
    if (again.status != 503) break;
    CHECK(field(again.body, "detail").find("held by instance " + instance_a) != std::string::npos);
    std::this_thread::sleep_for(250ms);
  }
  INFO(again.body << b.log());
  CHECK(again.status == 200);
  CHECK(field(again.body, "stdout") == "from A cell on A\n");
  // The daemon: the session's container is B's now, made by B's gate; the record names B.
  const std::string instance_b = label_of(name, "sandbox.instance");
  CHECK(!instance_b.empty());
  CHECK(instance_b != instance_a);
  CHECK(container_id(name) != held_by_a);
  CHECK(field(fa.object(".dockgate-fleet/sessions/" + sid + ".json"), "owner") == instance_b);
  CHECK(mounted(fb.root + "/" + sid));
  CHECK(b.log().find("session " + sid + " taken over from instance " + instance_a) != std::string::npos);

  // A comes back; B stops (SIGTERM): B hands the session over (its container and mount
  // go, the record stays, its store lease is released), so A's next call takes it over
  // at once, with no lease to wait for.
  sidecar_process a2(pa, member_env(fa));
  b.stop(SIGTERM);
  CHECK_FALSE(container_exists(name));
  CHECK_FALSE(mounted(fb.root + "/" + sid));
  CHECK(field(fa.object(".dockgate-fleet/sessions/" + sid + ".json"), "owner") == instance_b);
  CHECK(fa.object(".dockgate-fleet/instances/" + instance_b + ".json").empty());
  auto back = a2.call("POST", "/exec", exec_body(sid, read_both));
  INFO(back.body << a2.log());
  CHECK(back.status == 200);
  CHECK(field(back.body, "stdout") == "from A cell on A\n");
  CHECK(label_of(name, "sandbox.instance") == instance_a);

  // Ended: container, mount and record gone; the files stay in the store.
  CHECK(a2.call("DELETE", "/sessions/" + sid, "{}").body == R"({"ok":true})");
  CHECK_FALSE(container_exists(name));
  CHECK_FALSE(mounted(fa.root + "/" + sid));
  CHECK(fa.object(".dockgate-fleet/sessions/" + sid + ".json").empty());
  CHECK(fa.object("fleet-conv/uploads/in.txt") == "from A");
}

TEST_CASE("fleet: the store lease is refused while another holder renews it, waited for when it stops, and lost when rewritten",
          "[integration][sidecar][fuse][fleet]") {
  REQUIRE(!env_or("DOCKGATE_TEST_S3_ENDPOINT").empty());
  fuse_setup fs;
  proxy_process proxy(fs.policy);
  const std::string instance = "fleet-lease-" + std::to_string(::getpid());
  const std::string key = ".dockgate-fleet/instances/" + instance + ".json";
  auto lease = [&](int beat) {
    return R"({"instance":")" + instance + R"(","holder":"other-holder","url":"","host":"elsewhere","pid":1,"beat":)" +
           std::to_string(beat) + "}";
  };
  auto env = member_env(fs);
  env.push_back("SANDBOX_INSTANCE=" + instance);
  {
    // Another live holder (another engine, another host): rewritten every second.
    std::atomic<bool> renewing{true};
    REQUIRE(put_object(fs, key, lease(0)) == 0);
    std::thread holder([&] {
      for (int beat = 1; renewing; ++beat) {
        put_object(fs, key, lease(beat));
        std::this_thread::sleep_for(1s);
      }
    });
    auto refused = start_sidecar(proxy, env);
    const int status = wait_exit(refused->pid, 30s);
    renewing = false;
    holder.join();
    INFO(refused->log_text());
    CHECK(status == 1);
    CHECK(refused->log_text().find("is held by a live sidecar of the fleet: holder other-holder on host elsewhere") !=
          std::string::npos);
  }
  // The holder stops renewing: the start waits for its expiry, then holds the lease.
  auto runs = start_sidecar(proxy, env);
  std::string mine;
  for (int i = 0; i < 200 && field(mine = fs.object(key), "holder") == "other-holder"; ++i)
    std::this_thread::sleep_for(100ms);
  INFO(runs->log_text());
  CHECK(field(mine, "holder") != "other-holder");
  CHECK(field(mine, "instance") == instance);
  CHECK(field(mine, "url").starts_with("http://127.0.0.1:"));
  CHECK(wait_exit(runs->pid, 0s) == -1);
  // Another holder writes the lease: the sidecar stops at once, touching nothing.
  REQUIRE(put_object(fs, key, lease(100)) == 0);
  CHECK(wait_exit(runs->pid, 20s) == 1);
  CHECK(runs->log_text().find("the store lease was lost") != std::string::npos);
}

TEST_CASE("fleet: a store that ignores conditional writes is refused at start", "[integration][sidecar][fuse][fleet]") {
  REQUIRE(!env_or("DOCKGATE_TEST_S3_ENDPOINT").empty());
  // s3rver itself, without the layer of scripts/s3rver-conditional.js: it ignores
  // If-None-Match on PUT, as some S3-compatible stores do.
  const std::string bin = "/var/cache/dockgate/s3rver/node_modules/.bin/s3rver";
  REQUIRE(run("test -x " + bin).status == 0);
  fuse_setup fs;
  proxy_process proxy(fs.policy);
  const std::string port = free_tcp_port();
  const std::string data = proxy.dir() + "/plain-s3rver";
  run("mkdir -p " + data);
  const std::string pid = run(bin + " -d " + data + " -a 127.0.0.1 -p " + port +
                              " --silent --configure-bucket plain >/dev/null 2>&1 & echo $!")
                              .output;
  for (int i = 0; i < 100 && run("curl -s -o /dev/null http://127.0.0.1:" + port + "/").status != 0; ++i)
    std::this_thread::sleep_for(100ms);
  auto env = member_env(fs);
  auto store_env = fs.env("plain", "http://127.0.0.1:" + port);
  env.insert(env.begin(), store_env.begin(), store_env.end());
  auto refused = start_sidecar(proxy, env);
  const int status = wait_exit(refused->pid, 30s);
  run("kill " + pid);
  INFO(refused->log_text());
  CHECK(status == 1);
  CHECK(refused->log_text().find("does not honour conditional writes") != std::string::npos);
}

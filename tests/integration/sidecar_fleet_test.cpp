// A fleet of sidecars on one store (issue 22): sessions in FUSE workspace mode have a
// record in the store and are held under their instance's store lease; a call that
// reaches another sidecar is forwarded to a live holder, and takes the session over once
// the holder's lease has expired, with every file its workspace held. Judged by the
// answers, the daemon's record of the session's container and the objects in the store.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <mutex>
#include <set>

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

// The fleet's shared secret (SANDBOX_FLEET_KEY_FILE), one per test process.
std::string fleet_key_file(const std::string& name = "fleet.key",
                           const std::string& secret = "fleet-secret-0123456789abcdef-0123456789") {
  const std::string path = "/tmp/dockgate-test-" + std::to_string(::getpid()) + "-" + name;
  static struct removed_at_exit {
    std::vector<std::string> paths;
    ~removed_at_exit() {
      for (const auto& p : paths) std::remove(p.c_str());
    }
  } made;
  std::ofstream(path, std::ios::trunc) << secret << "\n";
  ::chmod(path.c_str(), 0600);
  if (std::find(made.paths.begin(), made.paths.end(), path) == made.paths.end())
    made.paths.push_back(path);
  return path;
}

// A fleet member: its own gate and workspace root, the shared store prefix, a short lease,
// the fleet's key.
std::vector<std::string> member_env(const fuse_setup& fs) {
  auto env = fs.env();
  env.push_back("SANDBOX_FLEET_URL=self");
  env.push_back("SANDBOX_FLEET_KEY_FILE=" + fleet_key_file());
  env.push_back("SANDBOX_INSTANCE_LEASE_S=5");
  env.push_back("SANDBOX_WARM_POOL=0");
  return env;
}

// Two members that list each other (SANDBOX_FLEET_MEMBERS), each at a port chosen ahead.
struct fleet_pair {
  std::string instance_a = unique_name("fa"), instance_b = unique_name("fb");
  std::string port_a = free_tcp_port(), port_b = free_tcp_port();
  std::vector<std::string> env(const fuse_setup& fs, bool a) const {
    auto e = member_env(fs);
    e.insert(e.begin(), {"SANDBOX_INSTANCE=" + (a ? instance_a : instance_b),
                         "SANDBOX_LISTEN=127.0.0.1:" + (a ? port_a : port_b),
                         "SANDBOX_FLEET_MEMBERS=" + instance_a + "=http://127.0.0.1:" + port_a +
                             "," + instance_b + "=http://127.0.0.1:" + port_b});
    return e;
  }
};

// A TCP listener on 127.0.0.1 standing for a server a store writer points a record at:
// it records every byte any connection sends it.
class listener {
 public:
  listener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd_, 16) == 0);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] {
      while (!stop_) {
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, 100) <= 0) continue;
        const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) continue;
        ++connections_;
        char buf[4096];
        for (int i = 0; i < 20; ++i) {  // up to 2 s of what it sends; it gets no answer
          pollfd q{c, POLLIN, 0};
          if (::poll(&q, 1, 100) <= 0) continue;
          const auto n = ::read(c, buf, sizeof buf);
          if (n <= 0) break;
          std::lock_guard g(m_);
          seen_.append(buf, static_cast<std::size_t>(n));
        }
        ::close(c);
      }
    });
  }
  ~listener() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int connections() const { return connections_; }
  std::string seen() {
    std::lock_guard g(m_);
    return seen_;
  }

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::mutex m_;
  std::string seen_;
  std::thread thread_;
};

// PUT of an object under the prefix, as another sidecar of the fleet would write it
// (s3rver takes unsigned requests).
int put_object(const fuse_setup& fs, const std::string& key, const std::string& body) {
  const std::string file = fs.root + ".put";
  std::ofstream(file, std::ios::trunc) << body;
  return run("curl -sf -X PUT --data-binary @" + file + " " + env_or("DOCKGATE_TEST_S3_ENDPOINT") +
             "/" + env_or("DOCKGATE_TEST_S3_BUCKET") + "/" + fs.prefix + "/" + key +
             " -o /dev/null")
      .status;
}

// A call to a member with exactly `headers`.
dockgate::client::http_response raw_call(const std::string& port, const std::string& method,
                                         const std::string& path, const std::string& body,
                                         const std::string& headers) {
  dockgate::client::transport ep{{dockgate::common::endpoint::kind::tcp, "", "127.0.0.1",
                                  static_cast<std::uint16_t>(std::stoi(port))},
                                 nullptr};
  return dockgate::client::http_request(ep, method, path, body, 120s, 1 << 20, headers);
}

// The X-Dockgate-Fleet value a member with `secret` sends, computed here with openssl's
// command line (as docs/sidecar.md describes it), not with the sidecar's code.
std::string fleet_signature_of(const std::string& secret, const std::string& from,
                               const std::string& to, const std::string& method,
                               const std::string& path, const std::string& body,
                               const std::string& nonce) {
  const std::string dir = "/tmp/dockgate-test-" + std::to_string(::getpid());
  std::ofstream(dir + "-body", std::ios::trunc) << body;
  auto hex = [](const std::string& out) {
    auto v = out.substr(out.rfind(' ') + 1);
    while (!v.empty() && v.back() == '\n') v.pop_back();
    return v;
  };
  const std::string body_hash = hex(run("openssl dgst -sha256 " + dir + "-body").output);
  const std::string when = std::to_string(std::time(nullptr));
  std::ofstream(dir + "-text", std::ios::trunc) << "dockgate-fleet-v1\n"
                                                << from << "\n"
                                                << to << "\n"
                                                << when << "\n"
                                                << nonce << "\n"
                                                << method << "\n"
                                                << path << "\n"
                                                << body_hash;
  const std::string mac =
      hex(run("openssl dgst -sha256 -hmac '" + secret + "' " + dir + "-text").output);
  std::remove((dir + "-body").c_str());
  std::remove((dir + "-text").c_str());
  return "v1 " + from + " " + to + " " + when + " " + nonce + " " + mac;
}

}  // namespace

TEST_CASE(
    "fleet: a call for a session held elsewhere is forwarded to its live holder, and takes it over "
    "with its files once the holder is gone",
    "[integration][sidecar][fuse][fleet]") {
  REQUIRE(!env_or("DOCKGATE_TEST_S3_ENDPOINT").empty());
  fuse_setup fa;
  fuse_setup fb;
  fb.prefix = fa.prefix;
  proxy_process pa(fa.policy);
  proxy_process pb(fb.policy);
  const fleet_pair fleet;
  sidecar_process a(pa, fleet.env(fa, true));
  sidecar_process b(pb, fleet.env(fb, false));

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
  CHECK(field(record, "storage") ==
        "s3://" + env_or("DOCKGATE_TEST_S3_BUCKET") + "/" + fa.prefix + "/fleet-conv/");
  CHECK(record.find(env_or("DOCKGATE_TEST_S3_SECRET_KEY")) == std::string::npos);

  // Files written on A: an upload and a cell's output.
  CHECK(
      a.call("POST", "/files",
             "{\"session_id\":\"" + sid + R"(","path":"uploads/in.txt","data_base64":"ZnJvbSBB"})")
          .body == R"({"ok":true})");
  CHECK(field(a.exec(sid, "open('/workspace/outputs/cell.txt','w').write('cell on A')"),
              "exit_code") == "0");
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
  CHECK(b.call("POST", "/files/list", "{\"session_id\":\"" + sid + "\"}").body.find("in.txt") !=
        std::string::npos);

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
  const std::string taken = fa.object(".dockgate-fleet/sessions/" + sid + ".json");
  CHECK(field(taken, "owner") == instance_b);
  CHECK(field(taken, "generation").starts_with("g."));
  CHECK(mounted(fb.root + "/" + sid));
  CHECK(b.log().find("session " + sid + " taken over from instance " + instance_a) !=
        std::string::npos);

  // A comes back; B stops (SIGTERM): B hands the session over (its container and mount
  // go, the record stays, its store lease is released), so A's next call takes it over
  // at once, with no lease to wait for.
  sidecar_process a2(pa, fleet.env(fa, true));
  b.stop(SIGTERM);
  CHECK_FALSE(container_exists(name));
  CHECK_FALSE(mounted(fb.root + "/" + sid));
  CHECK(field(fa.object(".dockgate-fleet/sessions/" + sid + ".json"), "owner") == instance_b);
  CHECK(field(fa.object(".dockgate-fleet/sessions/" + sid + ".json"), "handed_over") ==
        field(fa.object(".dockgate-fleet/sessions/" + sid + ".json"), "holder"));
  CHECK(fa.object(".dockgate-fleet/instances/" + instance_b + ".json").empty());
  auto back = a2.call("POST", "/exec", exec_body(sid, read_both));
  INFO(back.body << a2.log());
  CHECK(back.status == 200);
  CHECK(field(back.body, "stdout") == "from A cell on A\n");
  CHECK(label_of(name, "sandbox.instance") == instance_a);
  CHECK(field(fa.object(".dockgate-fleet/sessions/" + sid + ".json"), "generation") ==
        field(taken, "generation"));

  // Ended: container, mount and record gone; the files stay in the store.
  CHECK(a2.call("DELETE", "/sessions/" + sid, "{}").body == R"({"ok":true})");
  CHECK_FALSE(container_exists(name));
  CHECK_FALSE(mounted(fa.root + "/" + sid));
  CHECK(fa.object(".dockgate-fleet/sessions/" + sid + ".json").empty());
  // The files are where the key's next session mounts them: the generation B's takeover
  // made (A was gone, not stopped cleanly: a new generation), which A's takeover after B's
  // clean stop kept (nothing of B's wrote any more).
  const std::string current =
      field(fa.object(".dockgate-fleet/workspaces/fleet-conv.json"), "generation");
  CHECK(current.starts_with("g."));
  CHECK(fa.object(current + "/fleet-conv/uploads/in.txt") == "from A");
  CHECK(fa.object(current + "/fleet-conv/outputs/cell.txt") == "cell on A");
  auto next = a2.create(R"({"archive_key":"fleet-conv"})");
  REQUIRE(next.status == 200);
  const std::string next_sid = field(next.body, "session_id");
  CHECK(field(a2.exec(next_sid, read_both), "stdout") == "from A cell on A\n");
  CHECK(a2.call("DELETE", "/sessions/" + next_sid, "{}").status == 200);
}

TEST_CASE(
    "fleet: the store lease is refused while another holder renews it, waited for when it stops, "
    "and lost when rewritten",
    "[integration][sidecar][fuse][fleet]") {
  REQUIRE(!env_or("DOCKGATE_TEST_S3_ENDPOINT").empty());
  fuse_setup fs;
  proxy_process proxy(fs.policy);
  const std::string instance = "fleet-lease-" + std::to_string(::getpid());
  const std::string key = ".dockgate-fleet/instances/" + instance + ".json";
  auto lease = [&](int beat) {
    return R"({"instance":")" + instance +
           R"(","holder":"other-holder","url":"","host":"elsewhere","pid":1,"beat":)" +
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
    CHECK(refused->log_text().find(
              "is held by a live sidecar of the fleet: holder other-holder on host elsewhere") !=
          std::string::npos);
  }
  // The holder stops renewing: the start waits for its expiry, then holds the lease.
  auto runs = start_sidecar(proxy, env);
  std::string mine;
  // (s3rver writes an object in place: a read that meets a renewal mid-write is read again.)
  auto other_or_torn = [](const std::string& holder) {
    return holder == "other-holder" || holder == "<not json>" || holder == "<absent>";
  };
  for (int i = 0; i < 200 && other_or_torn(field(mine = fs.object(key), "holder")); ++i)
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

TEST_CASE("fleet: a store that ignores conditional writes is refused at start",
          "[integration][sidecar][fuse][fleet]") {
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
  for (int i = 0; i < 100 && run("curl -s -o /dev/null http://127.0.0.1:" + port + "/").status != 0;
       ++i)
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

TEST_CASE(
    "fleet: the store never chooses where a call goes, and the client's key never leaves the "
    "member it reached",
    "[integration][sidecar][fuse][fleet]") {
  REQUIRE(!env_or("DOCKGATE_TEST_S3_ENDPOINT").empty());
  fuse_setup fa;
  fuse_setup fb;
  fb.prefix = fa.prefix;
  proxy_process pa(fa.policy);
  proxy_process pb(fb.policy);
  const fleet_pair fleet;
  sidecar_process a(pa, fleet.env(fa, true));
  sidecar_process b(pb, fleet.env(fb, false));
  auto created = a.create(R"({"archive_key":"trust-conv"})");
  INFO(created.body << a.log());
  REQUIRE(created.status == 200);
  const std::string sid = field(created.body, "session_id");
  listener intruder;
  const std::string record_key = ".dockgate-fleet/sessions/" + sid + ".json";
  const std::string record = fa.object(record_key);
  const std::string owner_a = "\"owner\":\"" + fleet.instance_a + "\"";
  REQUIRE(record.find(owner_a) != std::string::npos);

  // 1. A store writer names a holder the operator never listed, with a live lease whose
  // url is the intruder's listener: B does not forward, and says why.
  std::string forged = record;
  forged.replace(forged.find(owner_a), owner_a.size(), "\"owner\":\"intruder\"");
  REQUIRE(put_object(fa, ".dockgate-fleet/instances/intruder.json",
                     R"({"instance":"intruder","holder":"h","url":")" + intruder.url() +
                         R"(","host":"elsewhere","pid":1,"beat":1})") == 0);
  REQUIRE(put_object(fa, record_key, forged) == 0);
  auto refused = b.call("POST", "/exec", exec_body(sid, "print('ran')"));
  INFO(refused.body << b.log());
  CHECK(refused.status == 503);
  CHECK(field(refused.body, "detail") ==
        "session " + sid +
            " is held by instance intruder, which is not a member of this sidecar's fleet "
            "(SANDBOX_FLEET_MEMBERS): the call is not forwarded");

  // 2. A store writer points the live holder's own lease at the listener: B forwards to
  // the holder where the operator listed it (A answers), or, if A has already seen its
  // lease rewritten and stopped, answers 503 naming it; never the listener.
  REQUIRE(put_object(fa, record_key, record) == 0);
  const std::string lease_key = ".dockgate-fleet/instances/" + fleet.instance_a + ".json";
  std::string lease = fa.object(lease_key);
  const auto url_at = lease.find("\"url\":\"");
  REQUIRE(url_at != std::string::npos);
  lease.replace(url_at, lease.find('"', url_at + 7) + 1 - url_at,
                "\"url\":\"" + intruder.url() + "\"");
  REQUIRE(put_object(fa, lease_key, lease) == 0);
  auto via_b = b.call("POST", "/exec", exec_body(sid, "print('ran')"));
  INFO(via_b.body << b.log());
  if (via_b.status == 200)
    CHECK(field(via_b.body, "stdout") == "ran\n");
  else
    CHECK(field(via_b.body, "detail").find("held by instance " + fleet.instance_a) !=
          std::string::npos);

  // The intruder's server heard nothing: no connection, no key.
  std::this_thread::sleep_for(500ms);
  CHECK(intruder.connections() == 0);
  CHECK(intruder.seen().find("Authorization") == std::string::npos);
  CHECK(intruder.seen().find(api_key) == std::string::npos);
}

TEST_CASE(
    "fleet: a call that says it was forwarded is served only with the fleet's credential, once",
    "[integration][sidecar][fuse][fleet]") {
  REQUIRE(!env_or("DOCKGATE_TEST_S3_ENDPOINT").empty());
  fuse_setup fa;
  proxy_process pa(fa.policy);
  const fleet_pair fleet;
  sidecar_process a(pa, fleet.env(fa, true));
  auto created = a.create(R"({"archive_key":"cred-conv"})");
  INFO(created.body << a.log());
  REQUIRE(created.status == 200);
  const std::string sid = field(created.body, "session_id");
  const std::string from_b = "X-Dockgate-Forwarded: " + fleet.instance_b + "\r\n";
  auto write_cell = [&](const std::string& name) {
    return exec_body(sid, "open('/workspace/outputs/" + name + "','w').write('ran')");
  };
  const std::string secret = "fleet-secret-0123456789abcdef-0123456789";

  // The client's own key does not make a forwarded call: refused before anything runs.
  const std::string body1 = write_cell("bearer.txt");
  auto with_bearer = raw_call(fleet.port_a, "POST", "/exec", body1,
                              "Authorization: Bearer " + api_key + "\r\n" + from_b);
  CHECK(with_bearer.status == 401);
  CHECK(field(with_bearer.body, "detail") ==
        "forwarded call refused: a forwarded call needs the fleet's credential (X-Dockgate-Fleet)");
  // Signed under another fleet's key: refused.
  const std::string body2 = write_cell("other-key.txt");
  auto other_key =
      raw_call(fleet.port_a, "POST", "/exec", body2,
               from_b + "X-Dockgate-Fleet: " +
                   fleet_signature_of("another-fleet-secret-0123456789abcdef", fleet.instance_b,
                                      fleet.instance_a, "POST", "/exec", body2,
                                      "00112233445566778899aabbccddeeff") +
                   "\r\n");
  CHECK(other_key.status == 401);
  // Signed for another call (the signature of one body sent with another): refused.
  const std::string body3 = write_cell("swapped.txt");
  auto swapped = raw_call(
      fleet.port_a, "POST", "/exec", body3,
      from_b + "X-Dockgate-Fleet: " +
          fleet_signature_of(secret, fleet.instance_b, fleet.instance_a, "POST", "/exec",
                             exec_body(sid, "print(1)"), "10112233445566778899aabbccddeeff") +
          "\r\n");
  CHECK(swapped.status == 401);
  // The fleet's credential, as a member makes it: served. Sent again: refused (replay).
  const std::string body4 = write_cell("genuine.txt");
  const std::string genuine =
      from_b + "X-Dockgate-Fleet: " +
      fleet_signature_of(secret, fleet.instance_b, fleet.instance_a, "POST", "/exec", body4,
                         "20112233445566778899aabbccddeeff") +
      "\r\n";
  auto served = raw_call(fleet.port_a, "POST", "/exec", body4, genuine);
  INFO(served.body << a.log());
  CHECK(served.status == 200);
  CHECK(field(served.body, "exit_code") == "0");
  CHECK(raw_call(fleet.port_a, "POST", "/exec", body4, genuine).status == 401);

  // The session's own record of what ran: only the genuine call's file.
  auto listed = a.exec(sid, "import os; print(sorted(os.listdir('/workspace/outputs')))");
  CHECK(field(listed, "stdout") == "['genuine.txt']\n");
}

TEST_CASE(
    "fleet: a holder stalled past its lease writes nothing the taker's session reads, and fences "
    "itself when it wakes",
    "[integration][sidecar][fuse][fleet][split-brain]") {
  REQUIRE(!env_or("DOCKGATE_TEST_S3_ENDPOINT").empty());
  fuse_setup fa;
  fuse_setup fb;
  fb.prefix = fa.prefix;
  proxy_process pa(fa.policy);
  proxy_process pb(fb.policy);
  sidecar_process a(pa, member_env(fa));
  sidecar_process b(pb, member_env(fb));

  auto created = a.create(R"({"archive_key":"split-brain","idle_ttl_sec":900})");
  INFO(created.body << a.log());
  REQUIRE(created.status == 200);
  const std::string sid = field(created.body, "session_id");
  const std::string name = "dockgate-sbx-" + sid;
  const std::string instance_a = label_of(name, "sandbox.instance");
  const std::string a_container = container_id(name);
  REQUIRE(!a_container.empty());

  // A's cell writes /workspace/loop.txt over and over (s3fs uploads it at every close).
  const std::string loop =
      "import time\ni = 0\nwhile True:\n    i += 1\n"
      "    with open('/workspace/loop.txt', 'w') as f: f.write('A %d' % i)\n"
      "    time.sleep(0.1)\n";
  std::thread cell([&] { a.call("POST", "/exec", exec_body(sid, loop, 300000)); });
  struct joiner {
    std::thread& t;
    pid_t held;
    ~joiner() {
      ::kill(held, SIGCONT);  // a failed check while A is stopped: its call ends with it
      if (t.joinable()) t.join();
    }
  } join_cell{cell, a.pid()};
  std::string seen;
  for (int i = 0; i < 200 && !(seen = fa.object("split-brain/loop.txt")).starts_with("A "); ++i)
    std::this_thread::sleep_for(100ms);
  REQUIRE(seen.starts_with("A "));

  // A's sidecar stalls past its lease. Its container lives on (on a host of its own it
  // would be on another engine, out of B's reach: renamed here, B's gate cannot find it by
  // the session's name), and its cell keeps writing through A's s3fs.
  REQUIRE(::kill(a.pid(), SIGSTOP) == 0);
  REQUIRE(run(direct() + " rename " + name + " " + name + "-on-a").status == 0);
  std::this_thread::sleep_for(8s);  // the lease (5 s) + 1 s, and more: B takes it over

  dockgate::client::http_response taken;
  for (int i = 0; i < 120; ++i) {
    taken = b.call("POST", "/exec",
                   exec_body(sid,
                             "open('/workspace/loop.txt','w').write('B')\n"
                             "open('/workspace/b.txt','w').write('from B')\nprint('ok')"));
    if (taken.status != 503) break;
    std::this_thread::sleep_for(250ms);
  }
  INFO(taken.body << b.log());
  REQUIRE(taken.status == 200);
  CHECK(field(taken.body, "stdout") == "ok\n");
  CHECK(b.log().find("session " + sid + " taken over from instance " + instance_a) !=
        std::string::npos);

  // Where B's session reads and writes, by its record; and what a next session of the key
  // mounts, by the key's record: a generation of B's, not the prefix A's s3fs writes.
  const std::string record = fa.object(".dockgate-fleet/sessions/" + sid + ".json");
  const std::string generation = field(record, "generation");
  INFO(record);
  CHECK(generation.starts_with("g."));
  CHECK(field(record, "storage") == "s3://" + env_or("DOCKGATE_TEST_S3_BUCKET") + "/" + fa.prefix +
                                        "/" + generation + "/split-brain/");
  CHECK(field(record, "copy_from") == "<absent>");
  CHECK(field(fa.object(".dockgate-fleet/workspaces/split-brain.json"), "generation") ==
        generation);
  // The objects B's session reads are those under its record's `storage`.
  const std::string place = field(record, "storage");
  const std::string root = "s3://" + env_or("DOCKGATE_TEST_S3_BUCKET") + "/" + fa.prefix + "/";
  REQUIRE(place.starts_with(root));
  const std::string b_dir = place.substr(root.size());
  const std::string b_file = b_dir + "loop.txt";

  // For 8 s after the takeover answered, the store's objects as s3rver has them: B's file
  // stays B's, while A's cell is still writing (its own prefix keeps changing: the stall
  // was real, and its writes went on).
  std::set<std::string> a_values;
  const auto until = std::chrono::steady_clock::now() + 8s;
  int b_reads = 0, b_intact = 0;
  while (std::chrono::steady_clock::now() < until) {
    const std::string mine = fa.object(b_file);
    ++b_reads;
    if (mine == "B")
      ++b_intact;
    else
      UNSCOPED_INFO("B's loop.txt read " << mine);
    a_values.insert(fa.object("split-brain/loop.txt"));
    std::this_thread::sleep_for(100ms);
  }
  CHECK(b_reads >=
        4);  // the store was read all along the window (each read may be slow on a loaded machine)
  CHECK(b_intact == b_reads);
  CHECK(a_values.size() > 3);  // the old holder's container wrote on after the answer
  CHECK(fa.object(b_dir + "b.txt") == "from B");
  auto read = b.call("POST", "/exec", exec_body(sid, "print(open('/workspace/loop.txt').read())"));
  CHECK(field(read.body, "stdout") == "B\n");

  // A wakes: its store lease is lost; it removes its container and its mount, then stops.
  REQUIRE(::kill(a.pid(), SIGCONT) == 0);
  int a_status = -1;
  for (int i = 0; i < 600 && a_status < 0; ++i) {
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(a.pid()), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        info.si_pid == a.pid())
      a_status = info.si_status;
    else
      std::this_thread::sleep_for(50ms);
  }
  INFO(a.log());
  CHECK(a_status == 1);
  CHECK(a.log().find("the store lease was lost") != std::string::npos);
  CHECK(a.log().find("fenced 1 session(s)") != std::string::npos);
  CHECK(container_id(a_container).empty());  // the daemon has no container of A's left
  CHECK_FALSE(mounted(fa.root + "/" + sid));
  CHECK(run("pgrep -f '[s]3fs .* " + fa.root + "/" + sid + "( |$)'").status != 0);  // no s3fs left
  // Nothing of A's writes any more; B's session is B's.
  const std::string last_a = fa.object("split-brain/loop.txt");
  std::this_thread::sleep_for(2s);
  CHECK(fa.object("split-brain/loop.txt") == last_a);
  CHECK(fa.object(b_file) == "B");
  CHECK(b.call("DELETE", "/sessions/" + sid, "{}").body == R"({"ok":true})");
}

TEST_CASE(
    "fleet: a takeover cut short mid-copy is redone from the generation it copied, never from the "
    "half-made one",
    "[integration][sidecar][fuse][fleet][split-brain]") {
  REQUIRE(!env_or("DOCKGATE_TEST_S3_ENDPOINT").empty());
  fuse_setup fs;
  proxy_process proxy(fs.policy);
  sidecar_process b(proxy, member_env(fs));
  // The store as a taker left it when it died mid-copy: the record names it (its lease is
  // gone), a new generation half made, and copy_from the generation it was copying.
  const std::string sid = "5e55100cafe0000000000000000000d1";
  const std::string half = "g.1111111111111111";
  REQUIRE(put_object(fs, "mid-copy/notes.txt", "whole") == 0);
  REQUIRE(put_object(fs, "mid-copy/more.txt", "more") == 0);
  REQUIRE(put_object(fs, half + "/mid-copy/notes.txt", "half") == 0);
  REQUIRE(
      put_object(
          fs, ".dockgate-fleet/sessions/" + sid + ".json",
          R"({"session_id":")" + sid + R"(","archive_key":"mid-copy","storage":"s3://)" +
              env_or("DOCKGATE_TEST_S3_BUCKET") + "/" + fs.prefix + "/" + half +
              R"(/mid-copy/","idle_ttl_sec":0,"kernel":"","owner":"died-mid-copy","holder":"gone",)"
              R"("created_at":"1","generation":")" +
              half + R"(","copy_from":""})") == 0);

  auto read = b.call(
      "POST", "/exec",
      exec_body(sid,
                "print(open('/workspace/notes.txt').read(), open('/workspace/more.txt').read())"));
  INFO(read.body << b.log());
  REQUIRE(read.status == 200);
  CHECK(field(read.body, "stdout") == "whole more\n");
  const std::string record = fs.object(".dockgate-fleet/sessions/" + sid + ".json");
  INFO(record);
  const std::string generation = field(record, "generation");
  CHECK(generation.starts_with("g."));
  CHECK(generation != half);
  CHECK(field(record, "copy_from") == "<absent>");
  CHECK(fs.object(generation + "/mid-copy/notes.txt") == "whole");
  CHECK(field(fs.object(".dockgate-fleet/workspaces/mid-copy.json"), "generation") == generation);
  CHECK(b.call("DELETE", "/sessions/" + sid, "{}").body == R"({"ok":true})");
}

TEST_CASE(
    "fleet: a stop that keeps its session containers hands nothing over in place: the takeover "
    "makes a new generation",
    "[integration][sidecar][fuse][fleet][split-brain]") {
  REQUIRE(!env_or("DOCKGATE_TEST_S3_ENDPOINT").empty());
  fuse_setup fa;
  fuse_setup fb;
  fb.prefix = fa.prefix;
  proxy_process pa(fa.policy);
  proxy_process pb(fb.policy);
  auto keeping = member_env(fa);
  keeping.push_back("SANDBOX_KEEP_SESSIONS_ON_STOP=1");
  sidecar_process a(pa, keeping);
  sidecar_process b(pb, member_env(fb));
  auto created = a.create(R"({"archive_key":"kept-on-stop"})");
  REQUIRE(created.status == 200);
  const std::string sid = field(created.body, "session_id");
  const std::string name = "dockgate-sbx-" + sid;
  CHECK(field(a.exec(sid, "open('/workspace/kept.txt','w').write('kept')"), "exit_code") == "0");
  // A stops and keeps its container (for its next start to adopt): it runs on, so the
  // record is not marked handed over, though the store lease is released.
  a.stop(SIGTERM);
  CHECK(container_exists(name));
  const std::string before = fa.object(".dockgate-fleet/sessions/" + sid + ".json");
  CHECK(field(before, "handed_over") == "<absent>");
  auto read = b.call("POST", "/exec", exec_body(sid, "print(open('/workspace/kept.txt').read())"));
  INFO(read.body << b.log());
  CHECK(read.status == 200);
  CHECK(field(read.body, "stdout") == "kept\n");
  const std::string after = fa.object(".dockgate-fleet/sessions/" + sid + ".json");
  CHECK(field(after, "generation").starts_with("g."));
  CHECK(field(after, "generation") != field(before, "generation"));
  CHECK(b.call("DELETE", "/sessions/" + sid, "{}").body == R"({"ok":true})");
  run(direct() + " rm -f " + name + " >/dev/null 2>&1");
}

TEST_CASE(
    "fleet: an OpenSandbox sandbox is served through any member (its lifecycle, execd with the "
    "query and Range) and taken over with its image, environment, metadata and entrypoint",
    "[integration][sidecar][fuse][fleet][opensandbox]") {
  REQUIRE(!env_or("DOCKGATE_TEST_S3_ENDPOINT").empty());
  fuse_setup fa;
  fuse_setup fb;
  fb.prefix = fa.prefix;
  proxy_process pa(fa.policy);
  proxy_process pb(fb.policy);
  const fleet_pair fleet;
  sidecar_process a(pa, fleet.env(fa, true));
  sidecar_process b(pb, fleet.env(fb, false));
  const std::string with_key = "OPEN-SANDBOX-API-KEY: " + api_key + "\r\n";
  auto made = raw_call(a.port(), "POST", "/v1/sandboxes",
                       R"({"image":{"uri":")" + runtime_image() +
                           R"("},"timeout":900,"resourceLimits":{},"entrypoint":["sleep","4242"],)"
                           R"("env":{"SECRET_TOKEN":"s3cr3t-value"},"metadata":{"team":"fleet"}})",
                       with_key);
  INFO(made.body << a.log());
  REQUIRE(made.status == 202);
  const std::string id = field(made.body, "id");
  const std::string name = "dockgate-sbx-" + id;
  const std::string instance_a = label_of(name, "sandbox.instance");
  // Its record says what a takeover needs, sealed: no reader of the store sees any of it.
  const std::string record = fa.object(".dockgate-fleet/sessions/" + id + ".json");
  CHECK(field(record, "facts_sealed").starts_with("v1:"));
  for (const char* secret : {"s3cr3t", "4242", "SECRET_TOKEN", "fleet\""})
    CHECK(record.find(secret) == std::string::npos);

  // Through B, while A holds it: the lifecycle and execd are forwarded to A.
  auto got = raw_call(b.port(), "GET", "/v1/sandboxes/" + id, "", with_key);
  INFO(got.body << b.log());
  CHECK(got.status == 200);
  CHECK(field(got.body, "id") == id);
  auto endpoint =
      raw_call(b.port(), "GET", "/v1/sandboxes/" + id + "/endpoints/44772", "", with_key);
  const std::string token = field(field(endpoint.body, "headers"), "X-EXECD-ACCESS-TOKEN");
  REQUIRE(!token.empty());
  const std::string with_token = "X-EXECD-ACCESS-TOKEN: " + token + "\r\n";
  const std::string proxy = "/v1/sandboxes/" + id + "/proxy/44772";
  auto wrote = raw_call(
      b.port(), "POST", proxy + "/command",
      R"({"command":"echo held-by-a > /workspace/probe.txt; echo $SECRET_TOKEN"})", with_token);
  CHECK(wrote.status == 200);
  CHECK(wrote.body.find("s3cr3t-value") != std::string::npos);
  auto part = raw_call(b.port(), "GET", proxy + "/files/download?path=/workspace/probe.txt", "",
                       with_token + "Range: bytes=0-3\r\n");
  CHECK(part.status == 206);
  CHECK(part.body == "held");
  CHECK(part.header("content-range") == "bytes 0-3/10");
  CHECK(label_of(name, "sandbox.instance") == instance_a);  // still A's one container
  // Another sandbox's token opens nothing, on B as on A.
  CHECK(raw_call(b.port(), "GET", proxy + "/ping", "", "X-EXECD-ACCESS-TOKEN: " + token + "0\r\n")
            .status == 401);

  // A second sandbox whose record a store writer changes (its facts moved onto it from the
  // first: another entrypoint and environment) is never taken over with them.
  auto other = raw_call(a.port(), "POST", "/v1/sandboxes",
                        R"({"image":{"uri":")" + runtime_image() +
                            R"("},"timeout":900,)"
                            R"("resourceLimits":{},"entrypoint":["tail","-f","/dev/null"]})",
                        with_key);
  REQUIRE(other.status == 202);
  const std::string other_id = field(other.body, "id");
  std::string forged = fa.object(".dockgate-fleet/sessions/" + other_id + ".json");
  const std::string theirs = field(forged, "facts_sealed");
  forged.replace(forged.find(theirs), theirs.size(), field(record, "facts_sealed"));
  REQUIRE(put_object(fa, ".dockgate-fleet/sessions/" + other_id + ".json", forged) == 0);

  // A's host dies: the next call through B takes the sandbox over, as its client made it.
  a.stop(SIGKILL);
  dockgate::client::http_response again;
  for (int i = 0; i < 120; ++i) {
    again = raw_call(b.port(), "POST", proxy + "/command",
                     R"({"command":"cat /workspace/probe.txt; echo $SECRET_TOKEN"})", with_token);
    if (again.status != 503) break;
    std::this_thread::sleep_for(250ms);
  }
  INFO(again.body << b.log());
  CHECK(again.status == 200);
  CHECK(again.body.find(R"(held-by-a\n)") != std::string::npos);
  CHECK(again.body.find(R"(s3cr3t-value\n)") != std::string::npos);
  // The daemon: B's container, with the client's metadata, its entrypoint running again as
  // the session user.
  CHECK(label_of(name, "sandbox.instance") != instance_a);
  CHECK(label_of(name, "sandbox.metadata.team") == "fleet");
  const std::string top = run(direct() + " top " + name + " -o pid,uid,args").output;
  INFO(top);
  CHECK(run("grep -c ' 1000 *sleep 4242$' <<'EOF'\n" + top + "EOF").output == "1\n");

  // The forged one: refused (503, why), no container of B's made for it.
  auto refused = raw_call(b.port(), "GET", "/v1/sandboxes/" + other_id, "", with_key);
  CHECK(refused.status == 503);
  CHECK(refused.body.find("do not open under this fleet's key") != std::string::npos);
  CHECK(label_of("dockgate-sbx-" + other_id, "sandbox.instance") == instance_a);
  run(direct() + " rm -f dockgate-sbx-" + other_id + " >/dev/null 2>&1");  // A's, left by its death

  // Deleted through B: no container, no record.
  CHECK(raw_call(b.port(), "DELETE", "/v1/sandboxes/" + id, "", with_key).status == 204);
  CHECK_FALSE(container_exists(name));
  CHECK(fa.object(".dockgate-fleet/sessions/" + id + ".json").empty());
}

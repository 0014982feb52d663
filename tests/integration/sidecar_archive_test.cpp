// Workspace archives that survive every mistake (issue 7), end to end: sidecar ->
// dockgate-proxy (sandbox.json) -> the real daemon, archives in a local directory and in
// s3rver. Each case is judged by the files the next session sees and by what is on
// storage, never by the sidecar's word alone.
#include <fstream>

#include "sidecar_harness.hpp"

using namespace dockgate::test;
using namespace std::chrono_literals;

namespace {

std::string env_or(const char* name, const char* fallback = "") {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

std::string s3_storage(const std::string& prefix) {
  return R"({"provider":"s3","prefix":")" + prefix + R"(","s3_bucket":")" +
         env_or("DOCKGATE_TEST_S3_BUCKET") + R"(","s3_endpoint":")" +
         env_or("DOCKGATE_TEST_S3_ENDPOINT") + R"(","s3_region":"us-east-1","s3_access_key":")" +
         env_or("DOCKGATE_TEST_S3_ACCESS_KEY") + R"(","s3_secret_key":")" +
         env_or("DOCKGATE_TEST_S3_SECRET_KEY") + R"("})";
}

// An object in the test bucket, read path-style (s3rver serves anonymous reads).
command_result s3_object(const std::string& key, const std::string& curl_args = "") {
  return run("curl -s " + curl_args + " " + env_or("DOCKGATE_TEST_S3_ENDPOINT") + "/" +
             env_or("DOCKGATE_TEST_S3_BUCKET") + "/" + key);
}
std::string s3_status(const std::string& key) {
  return s3_object(key, "-o /dev/null -w '%{http_code}'").output;
}

std::string sha256_of(const std::string& path) {
  auto r = run("sha256sum < " + path + " | cut -c1-64");
  return r.status == 0 ? r.output : "<missing>";
}

std::string members(const std::string& tgz_path) {
  return run("tar -tzf " + tgz_path + " | sort").output;
}

std::string restore_of(const dockgate::client::http_response& created) {
  return field(created.body, "restore");
}

std::string sid_of(const dockgate::client::http_response& created) {
  INFO(created.body);
  REQUIRE(created.status == 200);
  return field(created.body, "session_id");
}

std::string remove(const sidecar_process& sidecar, const std::string& sid,
                   const std::string& body = "{}") {
  return sidecar.call("DELETE", "/sessions/" + sid, body).body;
}

}  // namespace

TEST_CASE("archives: a symlink anywhere in the workspace no longer loses it",
          "[integration][sidecar][archive]") {
  proxy_process proxy("compose/policies/sandbox.json");
  const std::string store = proxy.dir() + "/archives";
  run("mkdir -p " + store);
  sidecar_process sidecar(proxy, {"SANDBOX_LOCAL_STORAGE_DIR=" + store});
  const std::string archive = store + "/workspaces/workspaces/k.tgz";

  // 1. A cell writes the user's work, a second one a symlink out of the workspace.
  auto first = sidecar.create(R"({"archive_key":"k","storage":{"provider":"local"}})");
  const std::string sid = sid_of(first);
  CHECK(restore_of(first) ==
        R"({"status":"none","key":"workspaces/workspaces/k.tgz","skipped":[]})");
  CHECK(field(sidecar.exec(sid, "open('/workspace/outputs/important.txt','w').write('my work')"),
              "exit_code") == "0");
  CHECK(field(sidecar.exec(sid, "import os; os.symlink('/etc/passwd', '/workspace/pw')"),
              "exit_code") == "0");
  // 2. The archive holds both.
  CHECK(remove(sidecar, sid) ==
        R"({"ok":true,"archive":{"status":"written","key":"workspaces/workspaces/k.tgz"}})");
  CHECK(members(archive) == "./outputs/\n./outputs/important.txt\n./pw\n");
  // 3. The next session gets both back, completely (no "Cannot utime" on the archive's root).
  auto second = sidecar.create(R"({"archive_key":"k","storage":{"provider":"local"}})");
  const std::string sid2 = sid_of(second);
  CHECK(restore_of(second) ==
        R"({"status":"restored","key":"workspaces/workspaces/k.tgz","skipped":[]})");
  auto seen = sidecar.exec(sid2,
                           "import os; print(open('/workspace/outputs/important.txt').read(), "
                           "os.readlink('/workspace/pw'))");
  CHECK(field(seen, "stdout") == "my work /etc/passwd\n");
  // 4. Deleting that session keeps the work, and the previous generation stays beside it.
  const std::string before = sha256_of(archive);
  CHECK(remove(sidecar, sid2) ==
        R"({"ok":true,"archive":{"status":"written","key":"workspaces/workspaces/k.tgz"}})");
  CHECK(members(archive).find("./outputs/important.txt") != std::string::npos);
  CHECK(sha256_of(store + "/workspaces/workspaces/k.prev.tgz") == before);
  CHECK(run("ls " + store + "/workspaces/workspaces | grep -c tmp").output == "0\n");
}

TEST_CASE(
    "archives: unusual members restore, unsafe ones are left out one by one and the archive is "
    "kept",
    "[integration][sidecar][archive][userns]") {
  proxy_process proxy("compose/policies/sandbox.json");
  const std::string store = proxy.dir() + "/archives";
  const std::string dir = store + "/workspaces/workspaces";
  run("mkdir -p " + dir);
  // Made on the host with Python's tarfile: what no tar of a real workspace contains.
  const std::string script = proxy.dir() + "/make_odd.py";
  std::ofstream(script)
      << "import io, sys, tarfile\n"
         "t = tarfile.open(sys.argv[1], 'w:gz', format=tarfile.GNU_FORMAT)\n"
         "def add(name, kind=tarfile.REGTYPE, data=b'', link=''):\n"
         "    ti = tarfile.TarInfo(name); ti.type = kind; ti.linkname = link; ti.mode = 0o6755\n"
         "    ti.size = len(data) if kind == tarfile.REGTYPE else 0\n"
         "    t.addfile(ti, io.BytesIO(data) if kind == tarfile.REGTYPE else None)\n"
         "add('./', tarfile.DIRTYPE)\n"
         "add('notes.txt', data=b'plain')\n"
         "add('/'.join(['deep'] * 60) + '/bottom.txt', data=b'deep')\n"
         "add('caf\\u00e9 \\u2713\\nnewline.txt', data=b'unicode')\n"
         "add('same.txt', tarfile.LNKTYPE, link='notes.txt')\n"
         "add('etc', tarfile.SYMTYPE, link='/etc')\n"
         "add('etc/evil.conf', data=b'through a symlink')\n"
         "add('out.txt', tarfile.LNKTYPE, link='../../outside')\n"
         "add('pipe', tarfile.FIFOTYPE)\n"
         "add('null', tarfile.CHRTYPE)\n"
         "add('/abs.txt', data=b'absolute')\n"
         "add('x/../../up.txt', data=b'climbs')\n"
         "add('last.txt', data=b'after all that')\n"
         "t.close()\n";
  auto made = run("python3 " + script + " " + dir + "/odd.tgz");
  REQUIRE(made.status == 0);
  const std::string original = sha256_of(dir + "/odd.tgz");
  sidecar_process sidecar(proxy, {"SANDBOX_LOCAL_STORAGE_DIR=" + store});
  auto created = sidecar.create(R"({"archive_key":"odd","storage":{"provider":"local"}})");
  const std::string sid = sid_of(created);
  CHECK(
      restore_of(created) ==
      R"({"status":"partial","key":"workspaces/workspaces/odd.tgz","skipped":[)"
      R"({"path":"etc/evil.conf","reason":"written through the symlink etc"},)"
      R"({"path":"out.txt","reason":"hard link to ../../outside, not a file of this archive"},)"
      R"({"path":"pipe","reason":"FIFO"},{"path":"null","reason":"device node"},)"
      R"({"path":"/abs.txt","reason":"absolute path"},{"path":"x/../../up.txt","reason":"path climbs out with .."}]})");
  const std::string check =
      "import os, stat\n"
      "w = '/workspace/'\n"
      "print(open(w + 'notes.txt').read(), open(w + '/'.join(['deep'] * 60) + "
      "'/bottom.txt').read())\n"
      "print(open(w + 'caf\\u00e9 \\u2713\\nnewline.txt').read(), open(w + 'last.txt').read())\n"
      "print(os.stat(w + 'same.txt').st_ino == os.stat(w + 'notes.txt').st_ino, os.readlink(w + "
      "'etc'))\n"
      "print(sorted(n for n in os.listdir(w) if n in ('pipe', 'null', 'out.txt', 'up.txt', "
      "'abs.txt')))\n"
      "print(oct(stat.S_IMODE(os.stat(w + 'notes.txt').st_mode)), "
      "os.path.exists('/etc/evil.conf'))\n";
  auto seen = sidecar.exec(sid, check);
  INFO(seen << sidecar.log());
  CHECK(field(seen, "stdout") ==
        "plain deep\nunicode after all that\nTrue /etc\n[]\n0o755 False\n");
  // The restore was partial: the workspace goes beside the archive, never over it.
  auto deleted = remove(sidecar, sid);
  CHECK(
      deleted ==
      R"({"ok":true,"archive":{"status":"conflict","key":"workspaces/workspaces/odd.conflict-)" +
          sid +
          R"(.tgz","reason":"the restore of this session was partial: the archive it came from is kept"}})");
  CHECK(sha256_of(dir + "/odd.tgz") == original);
  CHECK(members(dir + "/odd.conflict-" + sid + ".tgz").find("./last.txt") != std::string::npos);
  // The next session is told about it.
  auto again = sidecar.create(R"({"archive_key":"odd","storage":{"provider":"local"}})");
  CHECK(field(restore_of(again), "conflicts") ==
        "[\"workspaces/workspaces/odd.conflict-" + sid + ".tgz\"]");
  // discard removes the archive, its previous generation and its conflicts.
  CHECK(remove(sidecar, sid_of(again), R"({"discard":true})") ==
        R"({"ok":true,"archive":{"status":"discarded","key":"workspaces/workspaces/odd.tgz"}})");
  CHECK(run("ls " + dir).output == "");
}

TEST_CASE("archives: an archive in the older session format restores completely",
          "[integration][sidecar][archive]") {
  proxy_process proxy("compose/policies/sandbox.json");
  const std::string store = proxy.dir() + "/archives";
  const std::string old = proxy.dir() + "/old-workspace";
  // As the seed and earlier dockgate wrote it: `tar czf - -C /workspace .`, owned by uid
  // 1000, with the root's own "./" entry (mode 1777, as the tmpfs is).
  run("mkdir -p " + store + "/workspaces/workspaces " + old + "/outputs " + old +
      "/notes && chmod 1777 " + old + " && echo result > " + old +
      "/outputs/r.csv && echo idea > " + old + "/notes/n.md && tar --owner=1000 --group=1000 -C " +
      old + " -czf " + store + "/workspaces/workspaces/legacy.tgz .");
  sidecar_process sidecar(proxy, {"SANDBOX_LOCAL_STORAGE_DIR=" + store});
  auto created = sidecar.create(R"({"archive_key":"legacy","storage":{"provider":"local"}})");
  const std::string sid = sid_of(created);
  CHECK(field(restore_of(created), "status") == "restored");
  auto seen = sidecar.exec(
      sid, "print(open('/workspace/outputs/r.csv').read() + open('/workspace/notes/n.md').read())");
  CHECK(field(seen, "stdout") == "result\nidea\n\n");
  CHECK(field(remove(sidecar, sid), "archive") ==
        R"({"status":"written","key":"workspaces/workspaces/legacy.tgz"})");
}

TEST_CASE("archives: two live sessions with one key, the later is kept beside and reported",
          "[integration][sidecar][archive]") {
  proxy_process proxy("compose/policies/sandbox.json");
  const std::string store = proxy.dir() + "/archives";
  run("mkdir -p " + store);
  sidecar_process sidecar(proxy, {"SANDBOX_LOCAL_STORAGE_DIR=" + store});
  const std::string a =
      sid_of(sidecar.create(R"({"archive_key":"shared","storage":{"provider":"local"}})"));
  const std::string b =
      sid_of(sidecar.create(R"({"archive_key":"shared","storage":{"provider":"local"}})"));
  sidecar.exec(a, "open('/workspace/a.txt','w').write('from a')");
  sidecar.exec(b, "open('/workspace/b.txt','w').write('from b')");
  CHECK(field(remove(sidecar, a), "archive") ==
        R"({"status":"written","key":"workspaces/workspaces/shared.tgz"})");
  CHECK(field(remove(sidecar, b), "archive") ==
        R"({"status":"conflict","key":"workspaces/workspaces/shared.conflict-)" + b +
            R"(.tgz","reason":"another session wrote the archive after this one was restored"})");
  auto next = sidecar.create(R"({"archive_key":"shared","storage":{"provider":"local"}})");
  const std::string c = sid_of(next);
  CHECK(field(restore_of(next), "conflicts") ==
        "[\"workspaces/workspaces/shared.conflict-" + b + ".tgz\"]");
  CHECK(field(sidecar.exec(c, "import os; print(sorted(os.listdir('/workspace')))"), "stdout") ==
        "['a.txt', 'outputs', 'skills', 'uploads']\n");
  CHECK(members(store + "/workspaces/workspaces/shared.conflict-" + b + ".tgz").find("./b.txt") !=
        std::string::npos);
  remove(sidecar, c, R"({"discard":true})");
}

TEST_CASE("archives: a DELETE archives where the session was created, unusable storage is refused",
          "[integration][sidecar][archive][s3]") {
  REQUIRE(!env_or("DOCKGATE_TEST_S3_ENDPOINT").empty());  // scripts/test.sh starts s3rver
  proxy_process proxy("compose/policies/sandbox.json");
  const std::string store = proxy.dir() + "/archives";
  run("mkdir -p " + store);
  // No warm pool: the engine's container count is this test's measure of "nothing made",
  // and a pool refilling in the background would change it.
  sidecar_process sidecar(proxy, {"SANDBOX_LOCAL_STORAGE_DIR=" + store, "SANDBOX_WARM_POOL=0"});
  const std::string prefix = unique_name("del").substr(0, 24) + "/";
  const std::string key = prefix + "workspaces/conv.tgz";
  const std::string sid =
      sid_of(sidecar.create("{\"archive_key\":\"conv\",\"storage\":" + s3_storage(prefix) + "}"));
  sidecar.exec(sid, "open('/workspace/s3.txt','w').write('in the bucket')");

  // A block the sidecar cannot use is refused at create (no container) and at delete (the
  // session lives on).
  const std::string containers = "ps -aq --filter label=sandbox.session_id | wc -l";
  const std::string count = run(direct() + " " + containers).output;
  auto refused = sidecar.create(R"({"storage":{"provider":"local","prefix":"../../etc"}})");
  CHECK(refused.status == 400);
  CHECK(refused.body == R"({"detail":"invalid storage prefix"})");
  CHECK(sidecar.create(R"({"storage":{"provider":"oss"}})").body ==
        R"({"detail":"unsupported storage provider: oss"})");
  // An endpoint the operator did not list: refused before the sidecar connects anywhere
  // (issue 11: a client must not make the sidecar reach internal addresses).
  for (const std::string& endpoint :
       {std::string("http://169.254.169.254"), std::string("http://127.0.0.1:1"),
        std::string("http://localhost:2375")}) {
    auto elsewhere = sidecar.create(
        R"({"archive_key":"x","storage":{"provider":"s3","s3_bucket":"b","s3_endpoint":")" +
        endpoint + R"(","s3_access_key":"a","s3_secret_key":"s"}})");
    CHECK(elsewhere.status == 400);
    CHECK(elsewhere.body ==
          R"({"detail":"invalid storage.s3_endpoint: )" + endpoint +
              R"x( is not an allowed storage endpoint (SANDBOX_STORAGE_ENDPOINTS)"})x");
  }
  CHECK(run(direct() + " " + containers).output == count);
  auto bad_delete = sidecar.call("DELETE", "/sessions/" + sid, R"({"storage":{"provider":"s3"}})");
  CHECK(bad_delete.status == 400);
  CHECK(bad_delete.body == R"({"detail":"storage.s3_bucket is required"})");
  CHECK(field(sidecar.exec(sid, "print('alive')"), "stdout") == "alive\n");

  // No block at DELETE: the session's own storage (S3), not the default local directory.
  CHECK(remove(sidecar, sid) ==
        R"({"ok":true,"archive":{"status":"written","key":")" + key + R"("}})");
  CHECK(s3_status(key) == "200");
  CHECK(run("find " + store + " -type f | wc -l").output == "0\n");
  auto back = sidecar.create("{\"archive_key\":\"conv\",\"storage\":" + s3_storage(prefix) + "}");
  CHECK(field(sidecar.exec(sid_of(back), "print(open('/workspace/s3.txt').read())"), "stdout") ==
        "in the bucket\n");
  remove(sidecar, sid_of(back), "{\"discard\":true}");
  CHECK(s3_status(key) == "404");
}

TEST_CASE(
    "archives: over SANDBOX_MAX_ARCHIVE_BYTES the answer and the log say so, the last archive "
    "stays",
    "[integration][sidecar][archive]") {
  proxy_process proxy("compose/policies/sandbox.json");
  const std::string store = proxy.dir() + "/archives";
  run("mkdir -p " + store);
  sidecar_process sidecar(
      proxy, {"SANDBOX_LOCAL_STORAGE_DIR=" + store, "SANDBOX_MAX_ARCHIVE_BYTES=200000"});
  const std::string archive = store + "/workspaces/workspaces/capped.tgz";
  const std::string a =
      sid_of(sidecar.create(R"({"archive_key":"capped","storage":{"provider":"local"}})"));
  sidecar.exec(a, "open('/workspace/small.txt','w').write('small')");
  remove(sidecar, a);
  const std::string kept = sha256_of(archive);
  const std::string b =
      sid_of(sidecar.create(R"({"archive_key":"capped","storage":{"provider":"local"}})"));
  sidecar.exec(b, "import os; open('/workspace/big.bin','wb').write(os.urandom(1 << 20))");
  CHECK(
      remove(sidecar, b) ==
      R"x({"ok":true,"archive":{"status":"not_written","reason":"the workspace archive is larger than SANDBOX_MAX_ARCHIVE_BYTES (200000 bytes)"}})x");
  CHECK(sidecar.log().find("archive of session " + b) != std::string::npos);
  CHECK(sha256_of(archive) == kept);
}

TEST_CASE(
    "archives: a restarted sidecar archives adopted sessions where they belong, with their TTL",
    "[integration][sidecar][archive][s3]") {
  proxy_process proxy("compose/policies/sandbox.json");
  const std::string store = proxy.dir() + "/archives";
  run("mkdir -p " + store);
  const std::string prefix = unique_name("adopt").substr(0, 24) + "/";
  std::string local_sid, s3_sid, ttl_sid;
  {
    sidecar_process sidecar(proxy, {"SANDBOX_LOCAL_STORAGE_DIR=" + store});
    local_sid = sid_of(sidecar.create(
        R"({"archive_key":"loc","storage":{"provider":"local","prefix":"tenant-x/"}})"));
    s3_sid =
        sid_of(sidecar.create("{\"archive_key\":\"rem\",\"storage\":" + s3_storage(prefix) + "}"));
    ttl_sid = sid_of(
        sidecar.create(R"({"archive_key":"ttl","storage":{"provider":"local"},"idle_ttl_sec":1})"));
    for (const auto& s : {local_sid, s3_sid, ttl_sid})
      sidecar.exec(s, "open('/workspace/w.txt','w').write('kept')");
    sidecar.stop(SIGKILL);
  }
  sidecar_process restarted(
      proxy, {"SANDBOX_LOCAL_STORAGE_DIR=" + store, "SANDBOX_IDLE_REAPER_SWEEP_INTERVAL=1"});
  // The local session goes to its own prefix without any block.
  CHECK(field(remove(restarted, local_sid), "archive") ==
        R"({"status":"written","key":"tenant-x/workspaces/loc.tgz"})");
  CHECK(members(store + "/tenant-x/workspaces/loc.tgz").find("./w.txt") != std::string::npos);
  // The S3 session's secret was never stored: the app's usual DELETE block brings it.
  CHECK(field(remove(restarted, s3_sid, "{\"storage\":" + s3_storage(prefix) + "}"), "archive") ==
        R"({"status":"written","key":")" + prefix + R"(workspaces/rem.tgz"})");
  CHECK(s3_status(prefix + "workspaces/rem.tgz") == "200");
  // The 1 s TTL survived the restart (the global one is 1800 s): reaped and archived.
  for (int i = 0; i < 100 && container_exists("dockgate-sbx-" + ttl_sid); ++i)
    std::this_thread::sleep_for(100ms);
  CHECK_FALSE(container_exists("dockgate-sbx-" + ttl_sid));
  CHECK(members(store + "/workspaces/workspaces/ttl.tgz").find("./w.txt") != std::string::npos);
}

TEST_CASE("archives: SIGKILL of the sidecar during an archive leaves the previous one intact",
          "[integration][sidecar][archive]") {
  proxy_process proxy("compose/policies/sandbox.json");
  const std::string store = proxy.dir() + "/archives";
  run("mkdir -p " + store);
  const std::string archive = store + "/workspaces/workspaces/killed.tgz";
  std::string sid;
  {
    sidecar_process sidecar(proxy, {"SANDBOX_LOCAL_STORAGE_DIR=" + store});
    const std::string a =
        sid_of(sidecar.create(R"({"archive_key":"killed","storage":{"provider":"local"}})"));
    sidecar.exec(a, "open('/workspace/first.txt','w').write('first')");
    remove(sidecar, a);
    sid = sid_of(sidecar.create(R"({"archive_key":"killed","storage":{"provider":"local"}})"));
    // Enough incompressible data that the archive takes a while.
    sidecar.exec(sid,
                 "import os\nfor i in range(6): "
                 "open(f'/workspace/r{i}.bin','wb').write(os.urandom(24 << 20))");
    const std::string before = sha256_of(archive);
    std::thread deleting([&] { sidecar.call("DELETE", "/sessions/" + sid, "{}"); });
    std::this_thread::sleep_for(700ms);
    sidecar.stop(SIGKILL);
    deleting.join();
    CHECK(sha256_of(archive) == before);
    CHECK(members(archive) == "./first.txt\n./outputs/\n");
  }
  run(direct() + " rm -f dockgate-sbx-" + sid);
}

TEST_CASE("archives: two sidecars on one engine and one bucket keep to their own sessions",
          "[integration][sidecar][archive][s3]") {
  proxy_process proxy_a("compose/policies/sandbox.json");
  proxy_process proxy_b("compose/policies/sandbox.json");
  const std::string prefix = unique_name("pair").substr(0, 24) + "/";
  std::string a1;
  {
    sidecar_process a(proxy_a, {"SANDBOX_MAX_SESSIONS=1"});
    sidecar_process b(proxy_b, {"SANDBOX_MAX_SESSIONS=1"});
    a1 = sid_of(a.create("{\"archive_key\":\"moving\",\"storage\":" + s3_storage(prefix) + "}"));
    const std::string b1 = sid_of(b.create());  // A's session is not counted by B
    CHECK(a.create().status == 429);            // but by A
    CHECK(a.call("POST", "/exec", "{\"session_id\":\"" + b1 + "\",\"code\":\"print(1)\"}").status ==
          404);
    CHECK(a.call("POST", "/files/list", "{\"session_id\":\"" + b1 + "\"}").status == 404);
    CHECK(remove(a, b1) == R"({"ok":true})");
    CHECK(container_exists("dockgate-sbx-" + b1));  // A cannot remove B's session
    a.exec(a1, "open('/workspace/travels.txt','w').write('from A')");
    a.stop(SIGKILL);
    // A restarted sidecar A adopts its own session only; B keeps working.
    sidecar_process a_again(proxy_a, {"SANDBOX_MAX_SESSIONS=1"});
    CHECK(a_again.call("POST", "/exec", "{\"session_id\":\"" + b1 + "\",\"code\":\"print(1)\"}")
              .status == 404);
    CHECK(field(b.exec(b1, "print('b is fine')"), "stdout") == "b is fine\n");
    // Several sidecars behind one gate (same profile) keep apart by their instance too.
    sidecar_process c(proxy_a, {"SANDBOX_INSTANCE=behind-the-same-gate", "SANDBOX_MAX_SESSIONS=1"});
    CHECK(c.call("POST", "/exec", "{\"session_id\":\"" + a1 + "\",\"code\":\"print(1)\"}").status ==
          404);
    const std::string c1 = sid_of(c.create());
    CHECK(a_again.call("POST", "/files/list", "{\"session_id\":\"" + c1 + "\"}").status == 404);
    remove(c, c1);
    // Archived by A, resumed by B.
    CHECK(field(remove(a_again, a1, "{\"storage\":" + s3_storage(prefix) + "}"), "archive") ==
          R"({"status":"written","key":")" + prefix + R"(workspaces/moving.tgz"})");
    remove(b, b1);
    auto resumed = b.create("{\"archive_key\":\"moving\",\"storage\":" + s3_storage(prefix) + "}");
    CHECK(field(restore_of(resumed), "status") == "restored");
    CHECK(field(b.exec(sid_of(resumed), "print(open('/workspace/travels.txt').read())"),
                "stdout") == "from A\n");
    remove(b, sid_of(resumed), "{\"discard\":true,\"storage\":" + s3_storage(prefix) + "}");
  }
}

TEST_CASE("archives: S3 round trip byte for byte, a missing object restores nothing",
          "[integration][sidecar][archive][s3]") {
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy);
  const std::string prefix = unique_name("bytes").substr(0, 24) + "/";
  auto first = sidecar.create("{\"archive_key\":\"b\",\"storage\":" + s3_storage(prefix) + "}");
  CHECK(restore_of(first) ==
        R"({"status":"none","key":")" + prefix + R"(workspaces/b.tgz","skipped":[]})");
  const std::string sid = sid_of(first);
  const std::string digest =
      "import hashlib; print(hashlib.sha256(open('/workspace/blob.bin','rb').read()).hexdigest())";
  sidecar.exec(sid, "import os; open('/workspace/blob.bin','wb').write(os.urandom(3 << 20))");
  const std::string written = field(sidecar.exec(sid, digest), "stdout");
  REQUIRE(written.size() == 65);
  remove(sidecar, sid);
  const std::string local_copy = proxy.dir() + "/from-s3.tgz";
  REQUIRE(s3_object(prefix + "workspaces/b.tgz", "-o " + local_copy).status == 0);
  CHECK(run("tar -xzOf " + local_copy + " ./blob.bin | sha256sum | cut -c1-64").output == written);
  auto second = sidecar.create("{\"archive_key\":\"b\",\"storage\":" + s3_storage(prefix) + "}");
  CHECK(field(sidecar.exec(sid_of(second), digest), "stdout") == written);
  remove(sidecar, sid_of(second), "{\"discard\":true}");
}

TEST_CASE("storage API: put with a presigned URL, delete, gc, with the seed's bodies",
          "[integration][sidecar][storage][s3]") {
  proxy_process proxy("compose/policies/sandbox.json");
  const std::string store = proxy.dir() + "/archives";
  run("mkdir -p " + store);
  sidecar_process sidecar(proxy,
                          {"SANDBOX_LOCAL_STORAGE_DIR=" + store, "SANDBOX_STORAGE_MAX_TTL=7200"});
  const std::string prefix = unique_name("api").substr(0, 24);
  const std::string storage = s3_storage(prefix + "/");
  const std::string data = "AAECAwQF/w==";  // 00 01 02 03 04 05 ff

  auto put = sidecar.call("POST", "/storage/put",
                          "{\"key\":\"uploads/p.bin\",\"data_base64\":\"" + data +
                              "\",\"content_type\":\"image/png\",\"storage\":" + storage + "}");
  INFO(put.body);
  REQUIRE(put.status == 200);
  CHECK(field(put.body, "provider") == "s3");
  CHECK(field(put.body, "key") == prefix + "/uploads/p.bin");
  CHECK(field(put.body, "expires_in") == "3600");
  const std::string url = field(put.body, "url");
  CHECK(url.find("X-Amz-Signature=") != std::string::npos);
  CHECK(run("curl -sf '" + url + "' | base64 -w0").output ==
        data);  // fetched back through the presigned URL
  auto capped = sidecar.call("POST", "/storage/put",
                             "{\"key\":\"c.bin\",\"data_base64\":\"" + data +
                                 "\",\"expires_in\":999999,\"storage\":" + storage + "}");
  CHECK(field(capped.body, "expires_in") == "7200");
  CHECK(sidecar
            .call("POST", "/storage/put",
                  "{\"key\":\"../x\",\"data_base64\":\"" + data + "\",\"storage\":" + storage + "}")
            .body == R"({"detail":"invalid storage key"})");
  CHECK(sidecar
            .call("POST", "/storage/put",
                  "{\"key\":\"x\",\"data_base64\":\"!!\",\"storage\":" + storage + "}")
            .body == R"({"detail":"invalid base64"})");
  CHECK(sidecar
            .call("POST", "/storage/put",
                  "{\"data_base64\":\"" + data + "\",\"storage\":" + storage + "}")
            .status == 422);
  // Local storage: the object is written, then presigning is refused (as the seed does).
  auto local = sidecar.call("POST", "/storage/put",
                            "{\"key\":\"l.bin\",\"data_base64\":\"" + data +
                                "\",\"storage\":{\"provider\":\"local\",\"prefix\":\"p/\"}}");
  CHECK(local.status == 400);
  CHECK(local.body == R"({"detail":"presigned URLs are unsupported for local storage"})");
  CHECK(run("base64 -w0 " + store + "/p/l.bin").output == data);

  // delete: the whole key or the bare one; a missing object is fine.
  CHECK(sidecar
            .call("POST", "/storage/delete",
                  "{\"key\":\"" + prefix + "/uploads/p.bin\",\"storage\":" + storage + "}")
            .body == R"({"ok":true,"key":")" + prefix + R"(/uploads/p.bin"})");
  CHECK(s3_status(prefix + "/uploads/p.bin") == "404");
  CHECK(sidecar.call("POST", "/storage/delete", "{\"key\":\"c.bin\",\"storage\":" + storage + "}")
            .body == R"({"ok":true,"key":")" + prefix + R"(/c.bin"})");
  CHECK(sidecar.call("POST", "/storage/delete", "{\"key\":\"c.bin\",\"storage\":" + storage + "}")
            .status == 200);
  CHECK(
      sidecar.call("POST", "/storage/delete", "{\"key\":\"a/../../b\",\"storage\":" + storage + "}")
          .status == 400);

  // gc, local: only *.tgz under workspaces/ and anything under mineru/, strictly older.
  const std::string g = store + "/gc";
  run("mkdir -p " + g + "/workspaces " + g + "/mineru " + g + "/other && head -c 100 /dev/zero > " +
      g + "/workspaces/old.tgz && head -c 50 /dev/zero > " + g + "/mineru/old.pdf && touch " + g +
      "/workspaces/new.tgz " + g + "/workspaces/old.txt " + g +
      "/other/old.tgz && touch -d '3 days ago' " + g + "/workspaces/old.tgz " + g +
      "/mineru/old.pdf " + g + "/workspaces/old.txt " + g + "/other/old.tgz");
  const std::string gc_local =
      R"({"storage":{"provider":"local","prefix":"gc/"},"max_age_seconds":)";
  CHECK(sidecar.call("POST", "/storage/gc", gc_local + "0}").body ==
        R"({"deleted":0,"scanned":0,"freed_bytes":0})");
  CHECK(sidecar.call("POST", "/storage/gc", gc_local + "86400}").body ==
        R"({"deleted":2,"scanned":3,"freed_bytes":150})");
  CHECK(run("cd " + g + " && find . -type f | sort").output ==
        "./other/old.tgz\n./workspaces/new.tgz\n./workspaces/old.txt\n");
  CHECK(sidecar.call("POST", "/storage/gc", R"({"storage":{"provider":"local"}})").status == 422);
  // gc, S3.
  sidecar.call("POST", "/storage/put",
               "{\"key\":\"workspaces/x.tgz\",\"data_base64\":\"" + data +
                   "\",\"storage\":" + storage + "}");
  std::this_thread::sleep_for(2100ms);
  auto gc =
      sidecar.call("POST", "/storage/gc", "{\"storage\":" + storage + ",\"max_age_seconds\":1}");
  CHECK(gc.body == R"({"deleted":1,"scanned":1,"freed_bytes":7})");
  CHECK(s3_status(prefix + "/workspaces/x.tgz") == "404");
}

TEST_CASE("archives and storage API on Aliyun OSS through its S3-compatible API (virtual-hosted)",
          "[integration][sidecar][archive][s3][oss]") {
  const std::string port = env_or("DOCKGATE_TEST_S3_PORT");
  REQUIRE(!port.empty());
  proxy_process proxy("compose/policies/sandbox.json");
  // The bucket's virtual host resolves to s3rver in the sidecar's own mount namespace.
  const std::string host = env_or("DOCKGATE_TEST_S3_BUCKET") + ".s3.oss-cn-test.aliyuncs.com";
  const std::string hosts = proxy.dir() + "/hosts";
  run("printf '127.0.0.1 localhost\\n127.0.0.1 " + host + "\\n' > " + hosts);
  // (the operator lists this test endpoint: it is neither https nor the public one)
  sidecar_process sidecar(
      proxy, {"SANDBOX_STORAGE_ENDPOINTS=http://s3.oss-cn-test.aliyuncs.com:" + port}, hosts);
  const std::string prefix = unique_name("oss").substr(0, 24);
  const std::string storage = R"({"provider":"aliyun_oss","prefix":")" + prefix +
                              R"(/","oss_bucket":")" + env_or("DOCKGATE_TEST_S3_BUCKET") +
                              R"(","oss_endpoint":"http://oss-cn-test.aliyuncs.com:)" + port +
                              R"(","oss_access_key_id":"S3RVER","oss_access_key_secret":"S3RVER"})";
  auto created = sidecar.create("{\"archive_key\":\"o\",\"storage\":" + storage + "}");
  const std::string sid = sid_of(created);
  sidecar.exec(sid, "open('/workspace/oss.txt','w').write('on oss')");
  CHECK(field(remove(sidecar, sid), "archive") ==
        R"({"status":"written","key":")" + prefix + R"(/workspaces/o.tgz"})");
  CHECK(s3_status(prefix + "/workspaces/o.tgz") == "200");
  auto again = sidecar.create("{\"archive_key\":\"o\",\"storage\":" + storage + "}");
  CHECK(field(sidecar.exec(sid_of(again), "print(open('/workspace/oss.txt').read())"), "stdout") ==
        "on oss\n");
  remove(sidecar, sid_of(again), "{\"discard\":true}");
  CHECK(s3_status(prefix + "/workspaces/o.tgz") == "404");

  auto put =
      sidecar.call("POST", "/storage/put",
                   "{\"key\":\"k.txt\",\"data_base64\":\"b3Nz\",\"storage\":" + storage + "}");
  INFO(put.body << sidecar.log());
  CHECK(field(put.body, "provider") == "aliyun_oss");
  const std::string url = field(put.body, "url");
  CHECK(url.starts_with("http://" + host + ":" + port + "/" + prefix +
                        "/k.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256"));
  CHECK(url.find("%2Fcn-test%2Fs3%2Faws4_request") !=
        std::string::npos);  // signed for the OSS region
  CHECK(run("curl -sf --resolve " + host + ":" + port + ":127.0.0.1 '" + url + "'").output ==
        "oss");
}

TEST_CASE("archives: a session without a storage block leaves nothing on disk, as the seed's",
          "[integration][sidecar][archive]") {
  // The seed's storage without a block is "not effective": nothing archived, restored or
  // collected. SANDBOX_LOCAL_STORAGE_DIR serves `provider: local` blocks only.
  proxy_process proxy("compose/policies/sandbox.json");
  const std::string store = proxy.dir() + "/archives";
  run("mkdir -p " + store);
  auto on_disk = [&] { return run("find " + store + " -mindepth 1 | sort").output; };
  const std::string write = "open('/workspace/work.txt','w').write('work')";
  std::string reaped;
  {
    sidecar_process sidecar(
        proxy, {"SANDBOX_LOCAL_STORAGE_DIR=" + store, "SANDBOX_IDLE_REAPER_SWEEP_INTERVAL=1"});
    // Ended by DELETE: the seed's answer, byte for byte.
    auto deleted = sidecar.create(R"({"archive_key":"no_block"})");
    CHECK(field(restore_of(deleted), "status") == "none");
    const std::string a = sid_of(deleted);
    CHECK(field(sidecar.exec(a, write), "exit_code") == "0");
    CHECK(remove(sidecar, a) == R"({"ok":true})");
    // Ended by the idle reaper.
    reaped = sid_of(sidecar.create(R"({"archive_key":"no_block_reaped","idle_ttl_sec":1})"));
    CHECK(field(sidecar.exec(reaped, write), "exit_code") == "0");
    for (int i = 0; i < 100 && container_exists("dockgate-sbx-" + reaped); ++i)
      std::this_thread::sleep_for(100ms);
    CHECK_FALSE(container_exists("dockgate-sbx-" + reaped));
    // Ended by the sidecar's stop (SIGTERM).
    const std::string c = sid_of(sidecar.create());
    CHECK(field(sidecar.exec(c, write), "exit_code") == "0");
    // The storage API without a block: as the seed's, nothing to write to or collect.
    CHECK(sidecar.call("POST", "/storage/put", R"({"key":"x.txt","data_base64":"aGk="})").body ==
          R"({"detail":"storage backend not configured"})");
    CHECK(sidecar.call("POST", "/storage/gc", R"({"max_age_seconds":1})").body ==
          R"({"deleted":0,"scanned":0,"freed_bytes":0})");
    sidecar.stop(SIGTERM);
  }
  CHECK(on_disk() == "");
  sidecar_process sidecar(proxy, {"SANDBOX_LOCAL_STORAGE_DIR=" + store});
  // The next session with the key starts empty, as the seed's.
  auto again = sidecar.create(R"({"archive_key":"no_block"})");
  CHECK(field(restore_of(again), "status") == "none");
  const std::string b = sid_of(again);
  CHECK(field(sidecar.call("POST", "/files/list", R"({"session_id":")" + b + R"("})").body,
              "files") == "[]");
  CHECK(remove(sidecar, b) == R"({"ok":true})");
  // With a local block the directory is used.
  const std::string d =
      sid_of(sidecar.create(R"({"archive_key":"with_block","storage":{"provider":"local"}})"));
  CHECK(field(sidecar.exec(d, write), "exit_code") == "0");
  CHECK(field(remove(sidecar, d), "archive") ==
        R"({"status":"written","key":"workspaces/workspaces/with_block.tgz"})");
  CHECK(on_disk() == store + "/workspaces\n" + store + "/workspaces/workspaces\n" + store +
                         "/workspaces/workspaces/with_block.tgz\n");
}

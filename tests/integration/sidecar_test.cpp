// dockgate-sidecar end to end: sidecar -> dockgate-proxy (sandbox.json) -> the real
// daemon, with the offline python session image (scripts/runtime-image.sh).
#include "sidecar_harness.hpp"

using namespace dockgate::test;
using namespace std::chrono_literals;

TEST_CASE("sidecar: auth, health, a session that runs python, files, artifacts",
          "[integration][sidecar][userns]") {
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy);

  auto health = sidecar.call("GET", "/healthz", "", "");
  INFO(health.body << sidecar.log());
  CHECK(health.status == 200);
  CHECK(field(health.body, "ok") == "true");
  CHECK(field(health.body, "image_ready") == "true");
  CHECK(sidecar.call("POST", "/sessions", "{}", "").status == 401);
  CHECK(sidecar.call("POST", "/sessions", "{}", "wrong-key").body == R"({"error":"unauthorized"})");

  auto created = sidecar.call("POST", "/sessions", R"({"idle_ttl_sec": 600})");
  INFO(created.body);
  REQUIRE(created.status == 200);
  const std::string sid = field(created.body, "session_id");
  REQUIRE(sid.size() == 32);
  const std::string container = "dockgate-sbx-" + sid;

  // The session container as stored by the daemon: the hardening of the seed and the gate.
  auto inspect =
      run(direct() +
          " inspect --format "
          "'{{.Config.User}} {{.HostConfig.ReadonlyRootfs}} {{.HostConfig.NetworkMode}} {{json "
          ".HostConfig.CapDrop}} "
          "{{index .HostConfig.SecurityOpt 0}} {{len .HostConfig.SecurityOpt}} "
          "{{.HostConfig.PidsLimit}} {{.HostConfig.Privileged}} "
          "{{index .Config.Labels \"dockgate.owner\"}}' " +
          container);
  CHECK(inspect.output ==
        "65534:65534 true none [\"ALL\"] no-new-privileges 2 256 false sandbox\n");
  // The second entry is the sandbox profile's own seccomp profile (policy: "seccomp").
  CHECK(run(direct() + " inspect --format '{{index .HostConfig.SecurityOpt 1}}' " + container)
            .output.starts_with(R"(seccomp={"name":"dockgate-python",)"));

  // Python that prints and writes a PNG into outputs: the artifact comes back.
  const std::string code =
      "import base64, os\n"
      "png = "
      "base64.b64decode('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+"
      "M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==')\n"
      "open('/workspace/outputs/plot.png','wb').write(png)\n"
      "print('rows', 3)\n";
  auto ran = sidecar.call("POST", "/exec",
                          "{\"session_id\":\"" + sid + "\",\"code\":" + quoted(code) + "}");
  INFO(ran.body);
  REQUIRE(ran.status == 200);
  CHECK(field(ran.body, "stdout") == "rows 3\n");
  CHECK(field(ran.body, "exit_code") == "0");
  CHECK(
      field(ran.body, "files")
          .find(
              "{\"name\":\"plot.png\",\"mime_type\":\"image/png\",\"data_base64\":\"iVBORw0KGgo") !=
      std::string::npos);
  // Unchanged outputs are not returned again.
  auto again =
      sidecar.call("POST", "/exec", "{\"session_id\":\"" + sid + "\",\"code\":\"print(2)\"}");
  CHECK(field(again.body, "files") == "[]");

  // Upload a file and read it from code; list the workspace.
  auto put = sidecar.call("POST", "/files",
                          "{\"session_id\":\"" + sid +
                              "\",\"path\":\"uploads/data.csv\",\"data_base64\":\"YSxiCjEsMgo=\"}");
  CHECK(put.body == R"({"ok":true})");
  auto read_back = sidecar.call(
      "POST", "/exec",
      "{\"session_id\":\"" + sid +
          "\",\"code\":\"print(open('/workspace/uploads/data.csv').read().strip())\"}");
  CHECK(field(read_back.body, "stdout") == "a,b\n1,2\n");
  auto listed = sidecar.call("POST", "/files/list", "{\"session_id\":\"" + sid + "\"}");
  CHECK(field(listed.body, "files") ==
        R"([{"path":"outputs/plot.png","size":70},{"path":"uploads/data.csv","size":8}])");
  auto got =
      sidecar.call("POST", "/files/get",
                   "{\"session_id\":\"" + sid + "\",\"path\":\"/workspace/uploads/data.csv\"}");
  CHECK(got.body == R"({"data_base64":"YSxiCjEsMgo="})");
  CHECK(sidecar
            .call("POST", "/files",
                  "{\"session_id\":\"" + sid + "\",\"path\":\"../etc/x\",\"data_base64\":\"eA==\"}")
            .status == 400);
  CHECK(sidecar
            .call("POST", "/files",
                  "{\"session_id\":\"" + sid + "\",\"path\":\"x\",\"data_base64\":\"not base64!\"}")
            .body == R"({"detail":"invalid base64"})");
  auto reset = sidecar.call("POST", "/files/reset-inputs", "{\"session_id\":\"" + sid + "\"}");
  CHECK(reset.body == R"({"ok":true})");
  CHECK(sidecar
            .call("POST", "/files/get",
                  "{\"session_id\":\"" + sid + "\",\"path\":\"uploads/data.csv\"}")
            .status == 404);

  // A symlink to /etc/passwd in the workspace cannot be read through /files/get.
  sidecar.call("POST", "/exec",
               "{\"session_id\":\"" + sid +
                   "\",\"code\":\"import os; os.symlink('/etc/passwd', '/workspace/pw')\"}");
  auto escaped =
      sidecar.call("POST", "/files/get", "{\"session_id\":\"" + sid + "\",\"path\":\"pw\"}");
  CHECK(escaped.status == 400);
  CHECK(escaped.body == R"({"detail":"path resolves outside /workspace"})");

  // DELETE removes the container; unknown sessions answer ok too.
  CHECK(sidecar.call("DELETE", "/sessions/" + sid, "").body == R"({"ok":true})");
  CHECK_FALSE(container_exists(container));
  CHECK(sidecar.call("DELETE", "/sessions/" + sid, "").status == 200);
  CHECK(sidecar.call("DELETE", "/sessions/not-hex", "").status == 400);
  CHECK(sidecar.call("POST", "/exec", "{\"session_id\":\"" + sid + "\",\"code\":\"print(1)\"}")
            .status == 404);
}

TEST_CASE(
    "sidecar: a new session's workspace folders exist when it is answered, a cold one makes no "
    "exec for them",
    "[integration][sidecar][workspace]") {
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process cold(proxy, {"SANDBOX_WARM_POOL=0"});
  sidecar_process plain(proxy, {"SANDBOX_WARM_POOL=0", "SANDBOX_CELL_RUNNER=0",
                                "SANDBOX_INSTANCE=plain" + cold.port()});
  sidecar_process warm(proxy, {"SANDBOX_WARM_POOL=1", "SANDBOX_INSTANCE=warm" + cold.port()});

  // A cold session: its runner is started with it and makes the folders; the first answer
  // waited for that one exec, none for mkdir, and the first cell ran on that runner.
  const std::string t0 = now_stamp();
  const std::string sid = new_session(cold);
  const std::string container = "dockgate-sbx-" + sid;
  const std::string t1 = now_stamp();
  CHECK(workspace_folders(container) == made_folders);  // before any cell
  CHECK(processes(container) == "/sbin/docker-init -- sleep infinity\nsleep infinity\n<runner>\n");
  const std::string t2 = now_stamp();
  CHECK(field(cold.exec(sid, "import os\nprint(sorted(os.listdir('/workspace')))"), "stdout") ==
        "['outputs', 'skills', 'uploads']\n");
  const std::string t3 = now_stamp();
  CHECK(exec_creates(container, t0, t1) == 1);
  CHECK(mkdir_execs(container, t0, t3) == 0);
  CHECK(exec_creates(container, t2, t3) == 0);
  // A file upload right after create lands in them.
  const std::string sid2 = new_session(cold);
  CHECK(cold.call("POST", "/files",
                  "{\"session_id\":\"" + sid2 +
                      "\",\"path\":\"uploads/a.txt\",\"data_base64\":\"YQ==\"}")
            .status == 200);
  CHECK(workspace_folders("dockgate-sbx-" + sid2) == made_folders);

  // Without the runner the folders are one exec of their own, made the same.
  const std::string t4 = now_stamp();
  const std::string plain_sid = new_session(plain);
  CHECK(mkdir_execs("dockgate-sbx-" + plain_sid, t4, now_stamp()) == 1);
  CHECK(workspace_folders("dockgate-sbx-" + plain_sid) == made_folders);

  // A warm container's, made while it waited, are the same.
  for (int i = 0;
       i < 100 &&
       run(direct() + " ps -q --filter label=sandbox.instance=warm" + cold.port()).output.empty();
       ++i)
    std::this_thread::sleep_for(100ms);
  std::this_thread::sleep_for(1s);
  const std::string warm_sid = new_session(warm);
  CHECK(workspace_folders("dockgate-sbx-" + warm_sid) == made_folders);

  for (const auto& [sc, id] :
       {std::pair{&cold, sid}, {&cold, sid2}, {&plain, plain_sid}, {&warm, warm_sid}})
    sc->call("DELETE", "/sessions/" + id, "");
}

TEST_CASE("sidecar: timeouts kill every process of the cell, output is capped",
          "[integration][sidecar]") {
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy);
  const std::string sid = new_session(sidecar);
  const std::string container = "dockgate-sbx-" + sid;

  // A cell that starts a detached child and then loops forever.
  const std::string code =
      "import os, subprocess, time\n"
      "subprocess.Popen(['sleep', '1000'], start_new_session=True)\n"
      "while True: time.sleep(0.1)\n";
  const auto start = std::chrono::steady_clock::now();
  auto ran = sidecar.call(
      "POST", "/exec",
      "{\"session_id\":\"" + sid + "\",\"code\":" + quoted(code) + ",\"timeout_ms\":2000}");
  INFO(ran.body);
  CHECK(std::chrono::steady_clock::now() - start < 15s);
  CHECK(field(ran.body, "exit_code") == "124");
  CHECK(field(ran.body, "stderr").find("[sandbox] execution exceeded 2.000s and was killed") !=
        std::string::npos);
  // Nothing the cell started is still running: only the init, sleep infinity and the
  // session's cell runner (with, between cells, the pair it forks for the next one, which
  // `processes` leaves out by its ancestry and titles).
  const std::string left = processes(container);
  INFO(left);
  CHECK(left == "/sbin/docker-init -- sleep infinity\nsleep infinity\n<runner>\n");

  // Over 32 KiB of output: truncated with the seed's note.
  auto loud = sidecar.call("POST", "/exec",
                           "{\"session_id\":\"" + sid + "\",\"code\":\"print('x' * 100000)\"}");
  const std::string out = field(loud.body, "stdout");
  CHECK(out.size() == 32768 + std::string("\n... [truncated, stdout exceeded 32KB]").size());
  CHECK(out.ends_with("\n... [truncated, stdout exceeded 32KB]"));
  // Code over the cap.
  auto big = sidecar.call(
      "POST", "/exec",
      "{\"session_id\":\"" + sid + "\",\"code\":\"" + std::string(2 * 1024 * 1024, '#') + "\"}");
  CHECK((big.status == 413 || big.status == 422));
  sidecar.call("DELETE", "/sessions/" + sid, "");
}

TEST_CASE("sidecar: SANDBOX_MAX_SESSIONS gives 429, a restarted sidecar adopts its sessions",
          "[integration][sidecar]") {
  proxy_process proxy("compose/policies/sandbox.json");
  std::string sid;
  {
    sidecar_process sidecar(proxy, {"SANDBOX_MAX_SESSIONS=1"});
    auto first = sidecar.call("POST", "/sessions", "{}");
    REQUIRE(first.status == 200);
    sid = field(first.body, "session_id");
    auto second = sidecar.call("POST", "/sessions", "{}");
    CHECK(second.status == 429);
    CHECK(second.body == R"({"detail":"too many active sessions"})");
    // At once, with no wait: a session from the warm pool has its claim record before its
    // answer (docs/sidecar.md, Warm pool).
    sidecar.stop(SIGKILL);  // kill -9: no clean-up
  }
  // (A second sidecar of the same instance started here, as this test once did by
  // mistake, now refuses to start while it lives: the instance lease.)
  sidecar_process restarted(proxy, {"SANDBOX_MAX_SESSIONS=1"});
  auto ran = restarted.call("POST", "/exec",
                            "{\"session_id\":\"" + sid + "\",\"code\":\"print('still here')\"}");
  INFO(ran.body << restarted.log());
  CHECK(field(ran.body, "stdout") == "still here\n");
  CHECK(restarted.call("DELETE", "/sessions/" + sid, "").status == 200);
  CHECK_FALSE(container_exists("dockgate-sbx-" + sid));
}

TEST_CASE(
    "sidecar: stopped with SIGTERM, it archives and removes its sessions (unless asked to keep "
    "them)",
    "[integration][sidecar][archive]") {
  proxy_process proxy("compose/policies/sandbox.json");
  const std::string store = proxy.dir() + "/archives";
  run("mkdir -p " + store);
  std::string sid;
  {
    sidecar_process sidecar(proxy, {"SANDBOX_LOCAL_STORAGE_DIR=" + store});
    auto created = sidecar.call("POST", "/sessions",
                                R"({"archive_key":"on_stop","storage":{"provider":"local"}})");
    REQUIRE(created.status == 200);
    sid = field(created.body, "session_id");
    REQUIRE(field(sidecar
                      .call("POST", "/exec",
                            "{\"session_id\":\"" + sid +
                                "\",\"code\":\"open('/workspace/kept.txt','w').write('kept')\"}")
                      .body,
                  "exit_code") == "0");
    sidecar.stop(SIGTERM);
  }
  CHECK_FALSE(container_exists("dockgate-sbx-" + sid));
  CHECK(run("tar -xzOf " + store + "/workspaces/workspaces/on_stop.tgz ./kept.txt").output ==
        "kept");
  {
    sidecar_process sidecar(
        proxy, {"SANDBOX_LOCAL_STORAGE_DIR=" + store, "SANDBOX_KEEP_SESSIONS_ON_STOP=1"});
    auto created = sidecar.call("POST", "/sessions", "{}");
    REQUIRE(created.status == 200);
    sid = field(created.body, "session_id");
    sidecar.stop(SIGTERM);
  }
  CHECK(container_exists("dockgate-sbx-" + sid));
  sidecar_process adopter(proxy, {"SANDBOX_LOCAL_STORAGE_DIR=" + store});
  CHECK(adopter.call("DELETE", "/sessions/" + sid, "").status == 200);
  CHECK_FALSE(container_exists("dockgate-sbx-" + sid));
}

TEST_CASE(
    "sidecar: a reaped session workspace comes back under the same archive key, unsafe members are "
    "left out",
    "[integration][sidecar][archive][userns]") {
  proxy_process proxy("compose/policies/sandbox.json");
  const std::string store = proxy.dir() + "/archives";
  run("mkdir -p " + store);
  sidecar_process sidecar(proxy,
                          {"SANDBOX_LOCAL_STORAGE_DIR=" + store, "SANDBOX_IDLE_TTL_SECONDS=1",
                           "SANDBOX_IDLE_REAPER_SWEEP_INTERVAL=1"});
  auto first = sidecar.call("POST", "/sessions",
                            R"({"archive_key":"conv_42","storage":{"provider":"local"}})");
  REQUIRE(first.status == 200);
  const std::string sid = field(first.body, "session_id");
  auto wrote =
      sidecar.call("POST", "/exec",
                   "{\"session_id\":\"" + sid +
                       "\",\"code\":\"import os; os.makedirs('/workspace/notes', exist_ok=True); "
                       "open('/workspace/notes/kept.txt','w').write('remember me'); "
                       "open('/workspace/uploads/gone.txt','w').write('input')\"}");
  REQUIRE(field(wrote.body, "exit_code") == "0");
  // The reaper archives and removes the idle session.
  for (int i = 0; i < 100 && container_exists("dockgate-sbx-" + sid); ++i)
    std::this_thread::sleep_for(100ms);
  CHECK_FALSE(container_exists("dockgate-sbx-" + sid));
  const std::string archive = store + "/workspaces/workspaces/conv_42.tgz";
  REQUIRE(run("test -s " + archive).status == 0);
  CHECK(run("tar -tzf " + archive).output.find("uploads/gone.txt") ==
        std::string::npos);  // inputs are not archived
  CHECK(run("ls " + store + "/workspaces/workspaces/ | grep -c tmp").output ==
        "0\n");  // no half-written file

  auto second = sidecar.call("POST", "/sessions",
                             R"({"archive_key":"conv_42","storage":{"provider":"local"}})");
  REQUIRE(second.status == 200);
  const std::string sid2 = field(second.body, "session_id");
  auto read = sidecar.call("POST", "/exec",
                           "{\"session_id\":\"" + sid2 +
                               "\",\"code\":\"print(open('/workspace/notes/kept.txt').read())\"}");
  INFO(read.body << sidecar.log());
  CHECK(field(read.body, "stdout") == "remember me\n");
  sidecar.call("DELETE", "/sessions/" + sid2, R"({"discard":true})");
  CHECK(run("test -e " + archive).status != 0);  // discard removes the archive

  // A member that climbs out is left out (and named); the rest of the archive is restored.
  const std::string evil_dir = proxy.dir() + "/evil";
  run("mkdir -p " + evil_dir + "/x && echo pwned > " + proxy.dir() + "/evil.txt && echo fine > " +
      evil_dir + "/ok.txt && tar -C " + evil_dir + " -czf " + store +
      "/workspaces/workspaces/conv_evil.tgz --absolute-names x/../../evil.txt ok.txt");
  auto third = sidecar.call("POST", "/sessions",
                            R"({"archive_key":"conv_evil","storage":{"provider":"local"}})");
  REQUIRE(third.status == 200);
  CHECK(
      field(third.body, "restore") ==
      R"({"status":"partial","key":"workspaces/workspaces/conv_evil.tgz","skipped":[{"path":"x/../../evil.txt","reason":"path climbs out with .."}]})");
  const std::string sid3 = field(third.body, "session_id");
  auto listed = sidecar.call("POST", "/files/list", "{\"session_id\":\"" + sid3 + "\"}");
  CHECK(field(listed.body, "files") == R"([{"path":"ok.txt","size":5}])");
  sidecar.call("DELETE", "/sessions/" + sid3, R"({"discard":true})");
}

TEST_CASE("sidecar: at start-up a stopped session container is removed and its last archive kept",
          "[integration][sidecar][archive]") {
  proxy_process proxy("compose/policies/sandbox.json");
  const std::string store = proxy.dir() + "/archives";
  run("mkdir -p " + store);
  std::string sid;
  {
    sidecar_process sidecar(proxy, {"SANDBOX_LOCAL_STORAGE_DIR=" + store});
    // A first session archived under the key, then a second one with the same key.
    auto first = sidecar.call("POST", "/sessions",
                              R"({"archive_key":"conv_stop","storage":{"provider":"local"}})");
    const std::string sid1 = field(first.body, "session_id");
    sidecar.call(
        "POST", "/exec",
        "{\"session_id\":\"" + sid1 + "\",\"code\":\"open('/workspace/w.txt','w').write('x')\"}");
    sidecar.call("DELETE", "/sessions/" + sid1, "{}");
    auto second = sidecar.call("POST", "/sessions",
                               R"({"archive_key":"conv_stop","storage":{"provider":"local"}})");
    REQUIRE(second.status == 200);
    sid = field(second.body, "session_id");
    sidecar.stop(SIGKILL);
  }
  run(direct() + " stop -t 0 dockgate-sbx-" + sid);  // the container stops while no sidecar runs
  sidecar_process restarted(proxy, {"SANDBOX_LOCAL_STORAGE_DIR=" + store});
  CHECK_FALSE(container_exists("dockgate-sbx-" + sid));
  CHECK(run("tar -tzf " + store + "/workspaces/workspaces/conv_stop.tgz").output.find("w.txt") !=
        std::string::npos);
}

TEST_CASE("sidecar: DOCKER_TLS_VERIFY reaches the gate over TLS with a client certificate",
          "[integration][sidecar][tls]") {
  const std::string pki = make_pki();
  const std::string port = free_tcp_port();
  proxy_process proxy("compose/policies/sandbox.json",
                      {"--listen", "tls://127.0.0.1:" + port, "--tls-cert", pki + "/server.pem",
                       "--tls-key", pki + "/server.key", "--tls-client-ca", pki + "/ca.pem"});
  sidecar_process sidecar(proxy, {"DOCKER_HOST=tcp://127.0.0.1:" + port, "DOCKER_TLS_VERIFY=1",
                                  "DOCKER_CERT_PATH=" + pki});
  auto created = sidecar.call("POST", "/sessions", "{}");
  INFO(created.body << sidecar.log());
  REQUIRE(created.status == 200);
  const std::string sid = field(created.body, "session_id");
  auto ran =
      sidecar.call("POST", "/exec", "{\"session_id\":\"" + sid + "\",\"code\":\"print(6*7)\"}");
  CHECK(field(ran.body, "stdout") == "42\n");
  CHECK(proxy.audit_contains("\"subject\":\"O=dockgate,CN=ci-runner\"},\"profile\":\"sandbox\""));
  sidecar.call("DELETE", "/sessions/" + sid, "");
  run("rm -rf " + pki);
}

TEST_CASE("sidecar: artifact limits skip files with a warning", "[integration][sidecar]") {
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy,
                          {"SANDBOX_MAX_FILES_PER_EXEC=2", "SANDBOX_MAX_ARTIFACT_BYTES=1000"});
  const std::string sid = new_session(sidecar);
  // Four new files: a.txt, b.txt (kept), big.bin (over the per-file cap), d.txt (over the count).
  const std::string code =
      "import os\n"
      "os.makedirs('/workspace/outputs/sub', exist_ok=True)\n"
      "open('/workspace/outputs/a.txt','w').write('a')\n"
      "open('/workspace/outputs/big.bin','wb').write(b'x' * 5000)\n"
      "open('/workspace/outputs/sub/b.txt','w').write('b')\n"
      "open('/workspace/outputs/d.txt','w').write('d')\n";
  auto ran = sidecar.call("POST", "/exec",
                          "{\"session_id\":\"" + sid + "\",\"code\":" + quoted(code) + "}");
  INFO(ran.body);
  const std::string files = field(ran.body, "files");
  CHECK(files.find("\"name\":\"a.txt\"") != std::string::npos);
  CHECK(files.find("\"name\":\"big.bin\"") == std::string::npos);
  CHECK(files.find("\"name\":\"d.txt\"") !=
        std::string::npos);  // sorted by path: a, big (skipped), d, sub/b
  CHECK(files.find("\"name\":\"b.txt\"") == std::string::npos);
  CHECK(field(ran.body, "stderr") ==
        "[sandbox] skipped 2 output file(s) because artifact limits are 2 files, 1000 bytes per "
        "file, 52428800 bytes total");
  sidecar.call("DELETE", "/sessions/" + sid, "");
}

TEST_CASE("sidecar: archives in S3 (s3rver, SigV4 path-style) come back in the next session",
          "[integration][sidecar][archive][s3]") {
  const char* endpoint = std::getenv("DOCKGATE_TEST_S3_ENDPOINT");
  REQUIRE(endpoint);  // scripts/test.sh starts s3rver
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy);
  const std::string storage =
      std::string(R"({"provider":"s3","prefix":"tenant-a/","s3_bucket":")") +
      std::getenv("DOCKGATE_TEST_S3_BUCKET") + R"(","s3_endpoint":")" + endpoint +
      R"(","s3_region":"us-east-1","s3_access_key":")" +
      std::getenv("DOCKGATE_TEST_S3_ACCESS_KEY") + R"(","s3_secret_key":")" +
      std::getenv("DOCKGATE_TEST_S3_SECRET_KEY") + R"("})";
  const std::string key = unique_name("conv").substr(0, 20);
  auto first = sidecar.call("POST", "/sessions",
                            "{\"archive_key\":\"" + key + "\",\"storage\":" + storage + "}");
  REQUIRE(first.status == 200);
  const std::string sid = field(first.body, "session_id");
  sidecar.call("POST", "/exec",
               "{\"session_id\":\"" + sid +
                   "\",\"code\":\"open('/workspace/s3.txt','w').write('in the bucket')\"}");
  REQUIRE(sidecar.call("DELETE", "/sessions/" + sid, "{}").status == 200);
  // The object is there (s3rver refuses a request whose signature does not match).
  auto head = run("curl -s -o /dev/null -w '%{http_code}' " + std::string(endpoint) + "/" +
                  std::getenv("DOCKGATE_TEST_S3_BUCKET") + "/tenant-a/workspaces/" + key + ".tgz");
  INFO(sidecar.log());
  CHECK(head.output == "200");
  auto second = sidecar.call("POST", "/sessions",
                             "{\"archive_key\":\"" + key + "\",\"storage\":" + storage + "}");
  REQUIRE(second.status == 200);
  const std::string sid2 = field(second.body, "session_id");
  auto read = sidecar.call(
      "POST", "/exec",
      "{\"session_id\":\"" + sid2 + "\",\"code\":\"print(open('/workspace/s3.txt').read())\"}");
  CHECK(field(read.body, "stdout") == "in the bucket\n");
  // discard deletes the object.
  sidecar.call("DELETE", "/sessions/" + sid2, "{\"discard\":true,\"storage\":" + storage + "}");
  CHECK(run("curl -s -o /dev/null -w '%{http_code}' " + std::string(endpoint) + "/" +
            std::getenv("DOCKGATE_TEST_S3_BUCKET") + "/tenant-a/workspaces/" + key + ".tgz")
            .output == "404");
}

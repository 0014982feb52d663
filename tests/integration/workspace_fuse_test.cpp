// FUSE workspaces end to end (issue 8): dockgate-mount mounts a bucket prefix from s3rver
// with Debian's s3fs at <root>/<session>, the gate (sandbox.json with its workspace root
// moved under a test directory) binds it at /workspace, the sidecar runs sessions on it
// (SANDBOX_WORKSPACE_MODE=fuse). Judged by the daemon's record, the kernel's mount table,
// the bucket, and what a session sees from inside.
#include "fuse_harness.hpp"

using namespace dockgate::test;
using namespace std::chrono_literals;

TEST_CASE("FUSE workspaces: the AIStor contract through the sidecar and the gate",
          "[integration][sidecar][fuse][userns]") {
  REQUIRE(!env_or("DOCKGATE_TEST_S3_ENDPOINT").empty());
  fuse_setup fs;
  proxy_process proxy(fs.policy);
  sidecar_process sidecar(proxy, fs.env());

  const std::string t0 = now_stamp();
  auto created = sidecar.create(R"({"archive_key":"conv-a"})");
  const std::string t1 = now_stamp();
  INFO(created.body << sidecar.log());
  REQUIRE(created.status == 200);
  const std::string sid = field(created.body, "session_id");
  const std::string mountpoint = fs.root + "/" + sid;
  // The workspace's folders are there when the session is answered, the session user's,
  // made by its cell runner (started with it): one exec, none for mkdir.
  CHECK(exec_creates("dockgate-sbx-" + sid, t0, t1) == 1);
  CHECK(mkdir_execs("dockgate-sbx-" + sid, t0, t1) == 0);
  CHECK(workspace_folders("dockgate-sbx-" + sid) == made_folders);
  // The daemon's record: /workspace is the bind of this session's mount, nothing else.
  CHECK(run(direct() +
            " inspect --format '{{range .Mounts}}{{.Type}} {{.Source}} {{.Destination}};{{end}}' "
            "dockgate-sbx-" +
            sid)
            .output == "bind " + mountpoint + " /workspace;\n");
  CHECK(mounted(mountpoint));

  // A file written by one exec is read by another and is in the bucket.
  CHECK(field(sidecar.exec(sid, "open('/workspace/probe.txt','w').write('aimem-probe')"),
              "exit_code") == "0");
  CHECK(field(sidecar.exec(sid, "print(open('/workspace/probe.txt').read())"), "stdout") ==
        "aimem-probe\n");
  CHECK(run("curl -s " + env_or("DOCKGATE_TEST_S3_ENDPOINT") + "/" +
            env_or("DOCKGATE_TEST_S3_BUCKET") + "/" + fs.prefix + "/conv-a/probe.txt")
            .output == "aimem-probe");
  // Path and symlink escapes are refused.
  CHECK(
      sidecar
          .call("POST", "/files/get", "{\"session_id\":\"" + sid + "\",\"path\":\"../etc/passwd\"}")
          .status == 400);
  sidecar.exec(sid, "import os; os.symlink('/etc/passwd', '/workspace/pw')");
  CHECK(
      sidecar.call("POST", "/files/get", "{\"session_id\":\"" + sid + "\",\"path\":\"pw\"}").body ==
      R"({"detail":"path resolves outside /workspace"})");
  // The storage credentials are nowhere the sandbox can look: environment, /proc, files.
  // (The secret is spelled in hex, so the cell's own file does not hold it.)
  std::string secret;
  for (unsigned char ch : env_or("DOCKGATE_TEST_S3_SECRET_KEY")) {
    static constexpr char digits[] = "0123456789abcdef";
    secret += digits[ch >> 4];
    secret += digits[ch & 15];
  }
  const std::string search =
      "import os\n"
      "secret = bytes.fromhex('" +
      secret +
      "')\n"
      "hits = [k for k in os.environ if 'AIMEM' in k or 'AWS' in k]\n"
      "for pid in [p for p in os.listdir('/proc') if p.isdigit()]:\n"
      "    for f in ('environ', 'cmdline'):\n"
      "        try:\n"
      "            if secret in open(f'/proc/{pid}/{f}', 'rb').read(): "
      "hits.append(f'/proc/{pid}/{f}')\n"
      "        except OSError: pass\n"
      "for top in ('/workspace', '/tmp', '/home'):\n"
      "    for d, _, files in os.walk(top):\n"
      "        for n in files:\n"
      "            try:\n"
      "                if secret in open(os.path.join(d, n), 'rb').read(): "
      "hits.append(os.path.join(d, n))\n"
      "            except OSError: pass\n"
      "print(hits, os.path.ismount('/workspace'))\n";
  CHECK(field(sidecar.exec(sid, search), "stdout") == "[] True\n");

  // The session ends: container and mount are gone, the files stay in the bucket.
  CHECK(sidecar.call("DELETE", "/sessions/" + sid, "{}").body == R"({"ok":true})");
  CHECK_FALSE(container_exists("dockgate-sbx-" + sid));
  CHECK_FALSE(mounted(mountpoint));
  CHECK_FALSE(std::filesystem::exists(mountpoint));
  // A new session on the same key sees them.
  auto again = sidecar.create(R"({"archive_key":"conv-a"})");
  REQUIRE(again.status == 200);
  const std::string sid2 = field(again.body, "session_id");
  CHECK(field(sidecar.exec(sid2, "print(open('/workspace/probe.txt').read())"), "stdout") ==
        "aimem-probe\n");

  // A second gate+sidecar pair on the same bucket reads what the first one wrote.
  fuse_setup other;
  other.prefix = fs.prefix;
  proxy_process proxy_b(other.policy);
  sidecar_process sidecar_b(proxy_b, other.env());
  sidecar.exec(sid2, "open('/workspace/from-a.txt','w').write('written through A')");
  auto b = sidecar_b.create(R"({"archive_key":"conv-a"})");
  REQUIRE(b.status == 200);
  const std::string sid_b = field(b.body, "session_id");
  CHECK(field(sidecar_b.exec(sid_b, "print(open('/workspace/from-a.txt').read())"), "stdout") ==
        "written through A\n");
  sidecar_b.call("DELETE", "/sessions/" + sid_b, "{}");
  sidecar.call("DELETE", "/sessions/" + sid2, "{}");
}

TEST_CASE("FUSE workspaces: a failed mount is an error, a dead driver is found and cleaned",
          "[integration][sidecar][fuse]") {
  REQUIRE(!env_or("DOCKGATE_TEST_S3_ENDPOINT").empty());
  fuse_setup fs;
  proxy_process proxy(fs.policy);
  // dockgate-mount alone given a bucket (or key) the store does not know, through a
  // mount command that overrides its variable: the sidecar's own use of the store (the
  // sessions' records, its store lease) stays good, so the mount's failure is what answers.
  auto mount_with = [&](const std::string& name, const std::string& override_var) {
    const std::string script = fs.root + "-" + name + ".sh";
    std::ofstream(script) << "#!/bin/sh\n"
                          << override_var << " exec " << DOCKGATE_MOUNT_BIN << " \"$@\"\n";
    ::chmod(script.c_str(), 0755);
    auto env = fs.env();
    env.insert(env.begin(), "SANDBOX_MOUNT_COMMAND=" + script);
    return env;
  };
  {
    // A bucket that does not exist: s3fs exits 0, dockgate-mount sees no live mount.
    sidecar_process bad(proxy, mount_with("bucket", "AIMEM_BUCKET=no-such-bucket"));
    auto created = bad.create(R"({"archive_key":"conv-bad"})");
    INFO(created.body);
    CHECK(created.status == 500);
    CHECK(field(created.body, "detail")
              .starts_with("workspace mount failed: dockgate-mount: mount of no-such-bucket:/"));
    CHECK(field(created.body, "detail").find("bucket or key not found") !=
          std::string::npos);  // the driver's own word
    CHECK(run(direct() + " ps -aq --filter label=sandbox.archive_key=conv-bad").output == "");
    CHECK(run("ls -A " + fs.root + " | grep -v '^.dockgate-mount$' | wc -l").output ==
          "0\n");  // nothing left
  }
  {
    // A key the store does not know: the same.
    sidecar_process bad(proxy, mount_with("key", "AIMEM_ACCESS_KEY=NO-SUCH-KEY"));
    auto created = bad.create(R"({"archive_key":"conv-badkey"})");
    INFO(created.body);
    CHECK(created.status == 500);
    CHECK(field(created.body, "detail").find("workspace mount failed: ") == 0);
    CHECK(run(direct() + " ps -aq --filter label=sandbox.archive_key=conv-badkey").output == "");
    CHECK(run("ls -A " + fs.root + " | grep -v '^.dockgate-mount$' | wc -l").output == "0\n");
  }
  {
    // The sidecar's own store a bucket that does not exist: it does not start (it could
    // keep no session's record), and says why.
    auto refused = start_sidecar(proxy, fs.env("no-such-bucket"));
    CHECK(wait_exit(refused->pid, 60s) == 1);
    CHECK(refused->log_text().find("the fleet store refused a write: HTTP 404 NoSuchBucket") !=
          std::string::npos);
  }
  auto refused = run(fs.mount_cli("mount ../escape"));
  CHECK(refused.status != 0);
  CHECK(refused.output.find("invalid sandbox id") != std::string::npos);

  sidecar_process sidecar(proxy, fs.env());
  auto created = sidecar.create(R"({"archive_key":"conv-dead"})");
  REQUIRE(created.status == 200);
  const std::string sid = field(created.body, "session_id");
  const std::string mountpoint = fs.root + "/" + sid;
  // The driver dies: the mount is stale, and found so.
  REQUIRE(run("pkill -KILL -f '^s3fs .* " + mountpoint + " '").status == 0);
  for (int i = 0; i < 50 && run(fs.mount_cli("list")).output.find("stale") == std::string::npos;
       ++i)
    std::this_thread::sleep_for(100ms);
  CHECK(run(fs.mount_cli("list")).output.find(sid + "\tstale\t" + mountpoint) != std::string::npos);
  // reconcile cleans it (the gate refuses to start a container on it: sandbox_policy_test).
  auto cleaned = run(fs.mount_cli("reconcile"));
  INFO(cleaned.output);
  CHECK(cleaned.status == 0);
  CHECK(cleaned.output.find("cleaned\t" + mountpoint) != std::string::npos);
  CHECK_FALSE(mounted(mountpoint));
  CHECK_FALSE(std::filesystem::exists(mountpoint));
  sidecar.call("DELETE", "/sessions/" + sid, "{}");
  CHECK_FALSE(container_exists("dockgate-sbx-" + sid));
}

// workspace.host_binds end to end (issue 42): the sandbox profile with its workspace root
// moved under a test directory (fuse_harness.hpp) and host_binds on; a client's own bind
// of <root>/<id> lands as the gate's checked bind of the live FUSE mount (bindfs here, as
// dockgate-mount's s3fs is one) at the client's target. Judged by the daemon's record, the
// file the container wrote in the FUSE backing store, and the start re-check.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "fuse_harness.hpp"

using namespace dockgate::test;

namespace {

std::string post(const std::string& target, const std::string& body) {
  return "POST " + target +
         " HTTP/1.1\r\nHost: d\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

}  // namespace

TEST_CASE("workspace host binds: a client's bind of <root>/<id> becomes the checked FUSE bind",
          "[integration][workspace_binds]") {
  fuse_setup fs;
  std::string policy = fs.policy;
  const auto ws = policy.find("\"workspace\": {");
  REQUIRE(ws != std::string::npos);
  policy.insert(ws + 14, "\"host_binds\": true, ");
  proxy_process proxy(policy);

  const std::string id = unique_name("ws");
  const std::string backing = fs.root + "-backing";
  const std::string fuse_ws = fs.root + "/" + id;
  std::filesystem::create_directories(backing);
  ::chmod(backing.c_str(), 0777);  // the sandbox's user (65534) writes in it
  std::filesystem::create_directories(fuse_ws);
  std::filesystem::create_directories(fs.root + "/" + id + "-plain");
  std::filesystem::create_symlink(backing, fs.root + "/" + id + "-link");
  REQUIRE(run("bindfs -o nosuid,nodev " + backing + " " + fuse_ws).status == 0);
  struct cleanup {
    std::string backing;
    ~cleanup() { std::filesystem::remove_all(backing); }
  } guard{backing};  // fs unmounts and removes the root

  auto create = [&](const std::string& name, const std::string& host) {
    const std::string body =
        R"({"Image":")" + test_image() +
        R"(","Cmd":["sh","-c","echo from-container > /mnt/data/probe.txt"],"HostConfig":)" + host +
        "}";
    return raw_exchange(proxy.socket_path(), post("/v1.41/containers/create?name=" + name, body));
  };
  const auto good = unique_name("dg-hostbind");
  auto ok = create(good, R"({"Binds":[")" + fuse_ws + R"(:/mnt/data:rw"]})");
  INFO(ok.bytes);
  REQUIRE(ok.status() == 201);
  // The daemon's record: one bind, of the FUSE mount, at the client's target, private,
  // and the label the start re-check finds it by.
  CHECK(run(direct() +
            " inspect --format '{{range .Mounts}}{{.Type}} {{.Source}} {{.Destination}} "
            "{{.Propagation}} {{.RW}};{{end}} {{json .HostConfig.Binds}} "
            "{{index .Config.Labels \"dockgate.workspace\"}}' " +
            good)
            .output == "bind " + fuse_ws + " /mnt/data rprivate true; null " + id + "\n");
  // What the container writes there is in the FUSE file system's backing store.
  auto started =
      raw_exchange(proxy.socket_path(), post("/v1.41/containers/" + good + "/start", ""));
  INFO(started.bytes);
  REQUIRE(started.status() == 204);
  CHECK(run(direct() + " wait " + good).output == "0\n");
  CHECK(run("cat " + backing + "/probe.txt").output == "from-container\n");
  CHECK(proxy.audit_contains("workspace bound"));

  // Anything but one live FUSE workspace is refused, and the daemon has no such container.
  const std::pair<std::string, std::string> refused[] = {
      {R"({"Binds":[")" + fs.root + "/other/../" + id + R"(:/mnt/data"]})", "is not one workspace"},
      {R"({"Binds":[")" + fs.root + R"(:/mnt/data"]})", "is not one workspace"},
      {R"({"Binds":[")" + fuse_ws + R"(/deeper:/mnt/data"]})", "is not one workspace"},
      {R"({"Binds":[")" + fs.root + "/" + id + R"(-link:/mnt/data"]})", "passes through a symlink"},
      {R"({"Binds":[")" + fs.root + "/" + id + R"(-plain:/mnt/data"]})", "is not a FUSE mount"},
      {R"({"Binds":["/etc:/x"]})", "HostConfig.Binds is not allowed"},
      {R"({"Binds":[")" + fuse_ws + R"(:/proc/x"]})",
       "is not allowed (an absolute, clean path other than /, /proc"},
  };
  for (const auto& [host, why] : refused) {
    const auto name = unique_name("dg-badbind");
    auto r = create(name, host);
    INFO(host << " -> " << r.bytes);
    CHECK(r.status() == 403);
    CHECK(r.bytes.find(why) != std::string::npos);
    CHECK_FALSE(container_exists(name));
  }

  // At start the workspace is checked again, found by its label whatever the target: a
  // Mounts bind at another target whose FUSE mount went away does not start.
  const auto later = unique_name("dg-hostbind");
  REQUIRE(create(later, R"({"Mounts":[{"Type":"bind","Source":")" + fuse_ws +
                            R"(","Target":"/srv/other","ReadOnly":true}]})")
              .status() == 201);
  CHECK(run(direct() + " inspect --format '{{range .Mounts}}{{.Destination}} {{.RW}}{{end}}' " +
            later)
            .output == "/srv/other false\n");
  run("fusermount3 -u " + fuse_ws + " || umount -l " + fuse_ws);
  auto start = raw_exchange(proxy.socket_path(), post("/v1.41/containers/" + later + "/start", ""));
  INFO(start.bytes);
  CHECK(start.status() == 403);
  CHECK(start.bytes.find("not started: bind source") != std::string::npos);
  CHECK(run(direct() + " inspect --format '{{.State.Status}}' " + later).output == "created\n");
  run(direct() + " rm -f " + good + " " + later);
}

TEST_CASE("workspace host binds: a restart is checked as a start is, none is the daemon's own",
          "[integration][workspace_binds][redteam]") {
  // The daemon mounts a container's binds again at every start, a restart's included: a
  // workspace whose FUSE mount went away after the first start must not be bound raw (the
  // directory under the mount point, without the FUSE file system's checks) by a restart.
  fuse_setup fs;
  std::string policy = fs.policy;
  policy.insert(policy.find("\"workspace\": {") + 14, "\"host_binds\": true, ");
  policy.insert(policy.find("\"ContainerStart\",") + 17, " \"ContainerRestart\",");
  proxy_process proxy(policy);

  const std::string id = unique_name("ws");
  const std::string backing = fs.root + "-backing";
  const std::string fuse_ws = fs.root + "/" + id;
  std::filesystem::create_directories(backing);
  std::filesystem::create_directories(fuse_ws);
  REQUIRE(run("bindfs -o nosuid,nodev " + backing + " " + fuse_ws).status == 0);
  struct cleanup {
    std::string backing;
    ~cleanup() { std::filesystem::remove_all(backing); }
  } guard{backing};

  const auto name = unique_name("dg-restart");
  const std::string body = R"({"Image":")" + test_image() +
                           R"(","Cmd":["ls","/mnt/data"],"HostConfig":{"Binds":[")" + fuse_ws +
                           R"(:/mnt/data"]}})";
  REQUIRE(raw_exchange(proxy.socket_path(), post("/v1.41/containers/create?name=" + name, body))
              .status() == 201);
  REQUIRE(raw_exchange(proxy.socket_path(), post("/v1.41/containers/" + name + "/start", ""))
              .status() == 204);
  CHECK(run(direct() + " wait " + name).output == "0\n");
  const std::string started_at =
      run(direct() + " inspect --format '{{.State.StartedAt}}' " + name).output;

  // Nor may the daemon restart it on its own: under a profile that does not force
  // RestartPolicy "no" (sandbox.json does), a restart policy with a checked bind makes no
  // container (while the workspace is a live FUSE mount, so only that rule refuses it).
  {
    proxy_process loose(R"({"profiles":{"p":{"allow":["ContainerCreate"],"images":{"allow":["*"]},)"
                        R"("workspace":{"root":")" +
                        fs.root + R"(","host_binds":true}}}})");
    const auto restarting = unique_name("dg-restart");
    auto refused = raw_exchange(
        loose.socket_path(),
        post("/v1.41/containers/create?name=" + restarting,
             R"({"Image":")" + test_image() + R"(","Cmd":["true"],"HostConfig":{"Binds":[")" +
                 fuse_ws + R"(:/mnt/data"],"RestartPolicy":{"Name":"always"}}})"));
    INFO(refused.bytes);
    CHECK(refused.status() == 403);
    CHECK(refused.bytes.find("HostConfig.RestartPolicy") != std::string::npos);
    CHECK_FALSE(container_exists(restarting));
    run(direct() + " rm -f " + restarting + " >/dev/null 2>&1");
  }

  run("fusermount3 -u " + fuse_ws + " || umount -l " + fuse_ws);
  REQUIRE(run("touch " + fuse_ws + "/raw-directory").status == 0);
  auto restart =
      raw_exchange(proxy.socket_path(), post("/v1.41/containers/" + name + "/restart?t=0", ""));
  INFO(restart.bytes);
  CHECK(restart.status() == 403);
  CHECK(restart.bytes.find("not started: bind source") != std::string::npos);
  // The daemon did not run it again, so it never listed the raw directory.
  run(direct() + " wait " + name);
  CHECK(run(direct() + " inspect --format '{{.State.StartedAt}}' " + name).output == started_at);
  CHECK(run(direct() + " logs " + name + " 2>&1").output.find("raw-directory") ==
        std::string::npos);
  run(direct() + " rm -f " + name);
}

TEST_CASE("workspace host binds: an archive call is checked as a start is",
          "[integration][workspace_binds][redteam]") {
  // For every archive call (docker cp) the daemon mounts the container's binds again from
  // their host paths, running or not: after the workspace's FUSE mount went away, a PUT
  // would write into the bare directory under the mount point, as root, modes kept (a
  // setuid file on the host's disk, seen on dockerd 20.10). Judged by the host's files.
  fuse_setup fs;
  proxy_process proxy(
      R"({"profiles":{"p":{"allow":["ContainerCreate","PutContainerArchive","ContainerArchive",)"
      R"("ContainerArchiveInfo"],"images":{"allow":["*"]},"workspace":{"root":")" +
      fs.root + R"(","host_binds":true}}}})");
  const std::string id = unique_name("ws");
  const std::string backing = fs.root + "-backing";
  const std::string fuse_ws = fs.root + "/" + id;
  std::filesystem::create_directories(backing);
  std::filesystem::create_directories(fuse_ws);
  REQUIRE(run("bindfs -o nosuid,nodev " + backing + " " + fuse_ws).status == 0);
  struct cleanup {
    std::string backing;
    ~cleanup() { std::filesystem::remove_all(backing); }
  } guard{backing};
  const auto name = unique_name("dg-archive");
  REQUIRE(raw_exchange(
              proxy.socket_path(),
              post("/v1.41/containers/create?name=" + name,
                   R"({"Image":")" + test_image() + R"(","Cmd":["true"],"HostConfig":{"Binds":[")" +
                       fuse_ws + R"(:/mnt/data"]}})"))
              .status() == 201);
  // An archive of one file, "probe", made by tar on the host.
  const std::string src = fs.root + "-src";
  std::filesystem::create_directories(src);
  REQUIRE(run("echo probe > " + src + "/probe && tar -C " + src + " -cf " + src + ".tar probe")
              .status == 0);
  std::ifstream in(src + ".tar", std::ios::binary);
  const std::string tar((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto put = [&]() {
    return raw_exchange(proxy.socket_path(),
                        "PUT /v1.41/containers/" + name +
                            "/archive?path=/mnt/data HTTP/1.1\r\nHost: d\r\nContent-Type: "
                            "application/x-tar\r\nContent-Length: " +
                            std::to_string(tar.size()) + "\r\nConnection: close\r\n\r\n" + tar);
  };
  // With the FUSE mount live, the file lands in its backing store.
  auto live = put();
  INFO(live.bytes);
  CHECK(live.status() == 200);
  CHECK(std::filesystem::exists(backing + "/probe"));
  run("fusermount3 -u " + fuse_ws + " || umount -l " + fuse_ws);
  auto bare = put();
  INFO(bare.bytes);
  CHECK(bare.status() == 403);
  CHECK(bare.bytes.find("bind source") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(fuse_ws + "/probe"));
  auto read = raw_exchange(proxy.socket_path(),
                           "GET /v1.41/containers/" + name +
                               "/archive?path=/mnt/data HTTP/1.1\r\nHost: d\r\nConnection: "
                               "close\r\n\r\n");
  CHECK(read.status() == 403);
  run(direct() + " rm -f " + name);
  std::filesystem::remove_all(src);
  std::filesystem::remove(src + ".tar");
}

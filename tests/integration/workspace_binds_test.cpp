// workspace.host_binds end to end (issue 42): the sandbox profile with its workspace root
// moved under a test directory (fuse_harness.hpp) and host_binds on; a client's own bind
// of <root>/<id> lands as the gate's checked bind of the live FUSE mount (bindfs here, as
// dockgate-mount's s3fs is one) at the client's target. Judged by the daemon's record, the
// file the container wrote in the FUSE backing store, and the start re-check.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>

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

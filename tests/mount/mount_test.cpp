#include "dockgate/mount/mount.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>

#include "dockgate/common/host_path.hpp"

using namespace dockgate::mount;

namespace {
std::map<std::string, std::string> aimem() {
  return {{"AIMEM_BUCKET", "my-project"},    {"AIMEM_ENDPOINT", "https://aistor.example.com"},
          {"AIMEM_ACCESS_KEY", "AKEXAMPLE"}, {"AIMEM_SECRET_KEY", "secret-never-in-argv"},
          {"AIMEM_SESSION_TOKEN", "tok-9"},  {"AIMEM_PREFIX", "/agents/"}};
}
}  // namespace

TEST_CASE("dockgate-mount reads the AIStor example's variables", "[mount]") {
  auto r = load_config(aimem(), true);
  REQUIRE(r.value);
  CHECK(r.value->root == "/mnt/aimem");  // the example's default
  CHECK(r.value->prefix == "agents");
  CHECK(r.value->driver == "s3fs");
  auto missing =
      load_config({{"AIMEM_MOUNT_ROOT", "relative/dir"}, {"DOCKGATE_MOUNT_TIMEOUT", "0"}}, true);
  CHECK_FALSE(missing.value);
  CHECK(missing.errors.size() == 5);    // root, timeout, bucket, endpoint, credentials: all at once
  CHECK(load_config({}, false).value);  // cleanup, list, reconcile need no storage
  CHECK_FALSE(load_config({{"AIMEM_MOUNT_ROOT", "/mnt/../etc"}}, false).value);
  CHECK_FALSE(load_config({{"AIMEM_MOUNT_ROOT", "/"}}, false).value);
  CHECK_FALSE(load_config({{"AIMEM_PREFIX", "a/../../b"}}, false).value);
}

TEST_CASE("on an engine with userns-remap the files belong to the ids the sandbox user maps to",
          "[mount][userns]") {
  const std::string subuid =
      "alice:200000:65536\ndockremap:100000:500\nx:1\ndockremap:300000:65536\n";
  CHECK(subordinate_id(subuid, "dockremap", 0) == 100000u);
  CHECK(subordinate_id(subuid, "dockremap", 499) == 100499u);
  // Past the first range, the next one of the same user (dockerd concatenates them).
  CHECK(subordinate_id(subuid, "dockremap", 1000) == 300500u);
  CHECK(subordinate_id(subuid, "dockremap", 66036) == std::nullopt);
  CHECK(subordinate_id(subuid, "nobody", 1000) == std::nullopt);
  CHECK(subordinate_id("dockremap:4294967000:65536\n", "dockremap", 1000) == std::nullopt);
  // A remap user without ranges on this host is an error, not files owned by the wrong id.
  auto r = load_config({{"DOCKGATE_MOUNT_USERNS", "no-such-remap-user"}}, false);
  CHECK_FALSE(r.value);
  REQUIRE(r.errors.size() == 2);
  CHECK_THAT(r.errors[0], Catch::Contains("/etc/subuid"));
}

TEST_CASE("sandbox ids are plain names", "[mount]") {
  for (const char* ok : {"a", "0123abcd", "sbx-1_2.3", "conv_6211e497a1db"}) CHECK(valid_id(ok));
  for (const char* bad : {"", ".", "..", ".hidden", "-dash", "a/b", "../x", "a b", "a\nb"})
    CHECK_FALSE(valid_id(bad));
  CHECK_FALSE(valid_id(std::string(129, 'a')));
}

TEST_CASE("credentials reach the driver in its environment, never its command line", "[mount]") {
  const auto c = *load_config(aimem(), true).value;
  for (const std::string driver :
       {"s3fs", "rclone", "/opt/aistor/aimem mount {source} {mountpoint} --log {log}"}) {
    auto cfg = c;
    cfg.driver = driver;
    std::string error;
    auto d =
        driver_for(cfg, "sbx1", "/mnt/aimem/sbx1", "/mnt/aimem/.dockgate-mount/sbx1.log", error);
    REQUIRE(d);
    CAPTURE(driver);
    for (const auto& a : d->argv) {
      CHECK(a.find("secret-never-in-argv") == std::string::npos);
      CHECK(a.find("tok-9") == std::string::npos);
    }
    CHECK(std::find(d->env.begin(), d->env.end(), "AWS_SECRET_ACCESS_KEY=secret-never-in-argv") !=
          d->env.end());
    CHECK(std::find(d->env.begin(), d->env.end(), "AWS_SESSION_TOKEN=tok-9") != d->env.end());
    // Nothing of the caller's environment leaks in (AWS_CA_BUNDLE and the like).
    for (const auto& e : d->env) CHECK_FALSE(e.starts_with("AWS_CA_BUNDLE"));
  }
  std::string error;
  auto s3fs = driver_for(c, "conv-1", "/mnt/aimem/sbx1", "/x.log", error);
  REQUIRE(s3fs);
  CHECK(s3fs->argv[1] == "my-project:/agents/conv-1");
  for (const char* opt :
       {"allow_other", "nosuid", "nodev", "uid=1000", "gid=1000", "use_path_request_style"})
    CHECK(std::find(s3fs->argv.begin(), s3fs->argv.end(), opt) != s3fs->argv.end());
  auto custom = c;
  custom.driver = "/opt/aimem mount {source} {mountpoint}";
  auto t = driver_for(custom, "k", "/mnt/aimem/k", "/x.log", error);
  REQUIRE(t);
  CHECK(t->argv ==
        std::vector<std::string>{"/opt/aimem", "mount", "my-project:/agents/k", "/mnt/aimem/k"});
}

TEST_CASE("host paths: no symlink anywhere, nothing replaceable by another user",
          "[mount][host_path]") {
  using dockgate::common::open_directory_nofollow;
  const auto base =
      std::filesystem::temp_directory_path() / ("dg-walk-" + std::to_string(::getpid()));
  std::filesystem::create_directories(base / "root/inner");
  ::chmod(base.c_str(), 0755);
  ::chmod((base / "root").c_str(), 0755);
  std::filesystem::create_directory_symlink(base / "root", base / "link");
  std::string error;
  CHECK(open_directory_nofollow((base / "root/inner").string(), error, {true}));
  CHECK_FALSE(open_directory_nofollow((base / "link/inner").string(), error));
  CHECK(error.find("passes through a symlink") != std::string::npos);
  CHECK_FALSE(open_directory_nofollow((base / "link").string(), error));
  CHECK_FALSE(open_directory_nofollow("relative", error));
  CHECK_FALSE(open_directory_nofollow((base / "root/../root").string(), error));
  // A directory others may write (and not sticky): its entries could be swapped.
  ::chmod((base / "root").c_str(), 0777);
  CHECK(open_directory_nofollow((base / "root/inner").string(), error));  // without the option
  CHECK_FALSE(open_directory_nofollow((base / "root/inner").string(), error, {true}));
  CHECK(error.find("can be replaced by a user other than root") != std::string::npos);
  // Sticky (as /tmp): only the owner of an entry may rename it, and that is us.
  ::chmod((base / "root").c_str(), 01777);
  CHECK(open_directory_nofollow((base / "root/inner").string(), error, {true}));
  // ... unless the entry belongs to someone else.
  if (::geteuid() == 0) {
    REQUIRE(::chown((base / "root/inner").c_str(), 4242, 4242) == 0);
    CHECK_FALSE(open_directory_nofollow((base / "root/inner").string(), error, {true}));
  }
  std::filesystem::remove_all(base);
}

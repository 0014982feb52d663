// dockgate-mount never reaches its root or a mountpoint through a symlink (docs/mount.md):
// a root that is a symlink, and a mountpoint that is one, are refused, and nothing is
// mounted where they point. Runs dockgate-mount itself against s3rver (scripts/s3rver.sh);
// judged by the kernel's mount table (/proc/self/mountinfo) and the directories.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "harness.hpp"

using namespace dockgate::test;

namespace {

std::string env_or(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : "";
}

// Mount points at or under `dir`, as the kernel lists them.
std::vector<std::string> mounts_under(const std::string& dir) {
  std::vector<std::string> found;
  std::ifstream in("/proc/self/mountinfo");
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, point;
    fields >> id >> parent >> dev >> root >> point;
    if (point == dir || point.starts_with(dir + "/")) found.push_back(point);
  }
  return found;
}

struct scratch {
  std::string base = "/tmp/" + unique_name("dg-mount-link");
  std::string prefix = unique_name("links");
  scratch() {
    std::filesystem::create_directories(base);
    ::chmod(base.c_str(), 0755);
  }
  ~scratch() {
    for (const auto& m : mounts_under(base)) run("umount -l '" + m + "'");
    run("rm -rf '" + base + "'");
  }
  std::string mount_cli(const std::string& root, const std::string& args) const {
    return "AIMEM_BUCKET=" + env_or("DOCKGATE_TEST_S3_BUCKET") +
           " AIMEM_ENDPOINT=" + env_or("DOCKGATE_TEST_S3_ENDPOINT") +
           " AIMEM_ACCESS_KEY=" + env_or("DOCKGATE_TEST_S3_ACCESS_KEY") +
           " AIMEM_SECRET_KEY=" + env_or("DOCKGATE_TEST_S3_SECRET_KEY") +
           " AIMEM_MOUNT_ROOT=" + root + " AIMEM_PREFIX=" + prefix + " DOCKGATE_MOUNT_TIMEOUT=15 " +
           DOCKGATE_MOUNT_BIN + " " + args;
  }
};

bool is_symlink(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_symlink(std::filesystem::symlink_status(path, ec));
}

}  // namespace

TEST_CASE(
    "dockgate-mount refuses a symlinked root or mountpoint, nothing is mounted where it points",
    "[integration][mount][fuse]") {
  REQUIRE(!env_or("DOCKGATE_TEST_S3_ENDPOINT").empty());
  scratch s;
  const std::string root = s.base + "/root";
  std::filesystem::create_directories(root);
  ::chmod(root.c_str(), 0755);

  // The control: a plain root mounts (so a refusal below is the symlink's, not s3rver's).
  auto plain = run(s.mount_cli(root, "mount sbx-plain"));
  INFO(plain.output);
  REQUIRE(plain.status == 0);
  CHECK(mounts_under(root) == std::vector<std::string>{root + "/sbx-plain"});
  CHECK(run(s.mount_cli(root, "cleanup sbx-plain")).status == 0);
  CHECK(mounts_under(root).empty());

  // A root that is a symlink to a real directory.
  const std::string target = s.base + "/target";
  std::filesystem::create_directories(target);
  ::chmod(target.c_str(), 0755);
  std::filesystem::create_directory_symlink(target, s.base + "/root-link");
  auto via_root = run(s.mount_cli(s.base + "/root-link", "mount sbx-a"));
  INFO(via_root.output);
  CHECK(via_root.status != 0);
  CHECK(via_root.output.find("passes through a symlink") != std::string::npos);
  CHECK(mounts_under(s.base).empty());
  CHECK(std::filesystem::is_empty(target));  // not even the sandbox's directory was made
  CHECK(is_symlink(s.base + "/root-link"));

  // A mountpoint that is a symlink (to a directory outside the root).
  const std::string elsewhere = s.base + "/elsewhere";
  std::filesystem::create_directories(elsewhere);
  ::chmod(elsewhere.c_str(), 0755);
  std::filesystem::create_directory_symlink(elsewhere, root + "/sbx-b");
  auto via_point = run(s.mount_cli(root, "mount sbx-b"));
  INFO(via_point.output);
  CHECK(via_point.status != 0);
  CHECK(via_point.output.find("passes through a symlink") != std::string::npos);
  CHECK(mounts_under(s.base).empty());
  CHECK(std::filesystem::is_empty(elsewhere));
  CHECK(is_symlink(root + "/sbx-b"));
}

// dockgate-mount never reaches its root or a mountpoint through a symlink (docs/mount.md):
// a root that is a symlink, and a mountpoint that is one, are refused, and nothing is
// mounted where they point. Runs dockgate-mount itself against s3rver (scripts/s3rver.sh);
// judged by the kernel's mount table (/proc/self/mountinfo, read while the command runs) and
// the directories.
#include <sys/stat.h>

#include <algorithm>
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
           " AIMEM_MOUNT_ROOT=" + root + " AIMEM_PREFIX=" + prefix + " DOCKGATE_MOUNT_TIMEOUT=10 " +
           DOCKGATE_MOUNT_BIN + " " + args;
  }
};

struct watched_run {
  int status = -1;
  std::string output;
  std::vector<std::string> seen;  // mount points under the watched directory, at any moment
};

// Runs `command`, reading the kernel's mount table under `dir` until it exits (bounded):
// a mount made and undone within the command's run is seen too.
watched_run run_watching(const std::string& command, const std::string& dir) {
  watched_run r;
  background b(command);
  for (int i = 0; i < 1200 && r.status == -1; ++i) {
    for (const auto& m : mounts_under(dir))
      if (std::find(r.seen.begin(), r.seen.end(), m) == r.seen.end()) r.seen.push_back(m);
    r.status = b.wait(std::chrono::milliseconds(25));
  }
  while (auto line = b.read_line(std::chrono::milliseconds(500))) r.output += *line + "\n";
  return r;
}

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
  auto via_root = run_watching(s.mount_cli(s.base + "/root-link", "mount sbx-a"), target);
  INFO(via_root.output);
  CHECK(via_root.seen.empty());  // never mounted where the symlink points, not for a moment
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
  auto via_point = run_watching(s.mount_cli(root, "mount sbx-b"), elsewhere);
  INFO(via_point.output);
  CHECK(via_point.seen.empty());
  CHECK(via_point.status != 0);
  CHECK(via_point.output.find("passes through a symlink") != std::string::npos);
  CHECK(mounts_under(s.base).empty());
  CHECK(std::filesystem::is_empty(elsewhere));
  CHECK(is_symlink(root + "/sbx-b"));
}

#pragma once
// FUSE workspace helpers (workspace_fuse_test.cpp, sidecar_fleet_test.cpp): a workspace
// root of a test's own, the sandbox profile pointing at it, and the AIMEM_* variables for
// the test's s3rver.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "sidecar_harness.hpp"

namespace dockgate::test {

inline std::string env_or(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : "";
}

// A workspace root of its own and the sandbox profile pointing at it.
struct fuse_setup {
  std::string root = "/tmp/" + unique_name("dg-fuse-root");
  std::string prefix = unique_name("aimem");
  std::string policy;

  fuse_setup() {
    std::filesystem::create_directories(root);
    ::chmod(root.c_str(), 0755);
    std::ifstream in(repo_root() + "/compose/policies/sandbox.json");
    policy.assign((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    policy.replace(policy.find("\"/mnt/aimem\""), 12, "\"" + root + "\"");
  }
  ~fuse_setup() {
    run("for m in $(grep -o ' " + root + "/[^ ]*' /proc/mounts); do umount -l $m; done; rm -rf " +
        root);
  }
  // The AIMEM_* variables of the AIStor example, for s3rver.
  std::vector<std::string> env(
      const std::string& bucket = env_or("DOCKGATE_TEST_S3_BUCKET"),
      const std::string& endpoint = env_or("DOCKGATE_TEST_S3_ENDPOINT")) const {
    return {"SANDBOX_WORKSPACE_MODE=fuse",
            std::string("SANDBOX_MOUNT_COMMAND=") + DOCKGATE_MOUNT_BIN,
            "AIMEM_BUCKET=" + bucket,
            "AIMEM_ENDPOINT=" + endpoint,
            "AIMEM_ACCESS_KEY=" + env_or("DOCKGATE_TEST_S3_ACCESS_KEY"),
            "AIMEM_SECRET_KEY=" + env_or("DOCKGATE_TEST_S3_SECRET_KEY"),
            "AIMEM_MOUNT_ROOT=" + root,
            "AIMEM_PREFIX=" + prefix};
  }
  std::string mount_cli(const std::string& args) const {
    std::string line;
    for (const auto& e : env()) line += e + " ";
    return line + DOCKGATE_MOUNT_BIN + " " + args;
  }
  // An object of the store under this setup's prefix, read by plain HTTP (s3rver serves
  // anonymous reads): its body, or "" when absent.
  std::string object(const std::string& key) const {
    auto r = run("curl -sf " + env_or("DOCKGATE_TEST_S3_ENDPOINT") + "/" +
                 env_or("DOCKGATE_TEST_S3_BUCKET") + "/" + prefix + "/" + key);
    return r.status == 0 ? r.output : "";
  }
};

inline bool mounted(const std::string& path) {
  return run("grep -q ' " + path + " ' /proc/mounts").status == 0;
}

}  // namespace dockgate::test

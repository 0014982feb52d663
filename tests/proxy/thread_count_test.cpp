#include "thread_count.hpp"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

using dockgate::proxy::cgroup_cpu_limit;
namespace fs = std::filesystem;

namespace {

struct cgroup_tree {
  fs::path root = fs::temp_directory_path() / ("dg-cgroup-" + std::to_string(::getpid()));
  cgroup_tree() { fs::remove_all(root); }
  ~cgroup_tree() { fs::remove_all(root); }
  void cpu_max(const std::string& path, const std::string& text) {
    fs::create_directories(root / path);
    std::ofstream(root / path / "cpu.max") << text;
  }
};

}  // namespace

TEST_CASE("the default thread count: the tightest cpu.max on the cgroup's path, rounded up",
          "[options]") {
  cgroup_tree t;
  const std::string self = "0::/system.slice/docker-abc.scope\n";
  // No cpu.max anywhere (cgroup v1, or the root): no limit.
  CHECK(cgroup_cpu_limit(self, t.root.string()) == 0);
  t.cpu_max("system.slice/docker-abc.scope", "max 100000\n");
  CHECK(cgroup_cpu_limit(self, t.root.string()) == 0);
  // --cpus 1.5 on the container: two threads' worth.
  t.cpu_max("system.slice/docker-abc.scope", "150000 100000\n");
  CHECK(cgroup_cpu_limit(self, t.root.string()) == 2);
  // A tighter ancestor wins; a looser one does not.
  t.cpu_max("system.slice", "50000 100000\n");
  CHECK(cgroup_cpu_limit(self, t.root.string()) == 1);
  t.cpu_max("system.slice", "800000 100000\n");
  CHECK(cgroup_cpu_limit(self, t.root.string()) == 2);
  // Inside a container's cgroup namespace its own cgroup is "/".
  t.cpu_max("", "300000 100000\n");
  CHECK(cgroup_cpu_limit("0::/\n", t.root.string()) == 3);
  // What is not cgroup v2's line, or not a number, limits nothing.
  CHECK(cgroup_cpu_limit("12:cpu,cpuacct:/docker/abc\n", t.root.string()) == 0);
  t.cpu_max("odd", "lots 100000\n");
  CHECK(cgroup_cpu_limit("0::/odd\n", t.root.string()) == 3);  // the root's still counts
  CHECK(cgroup_cpu_limit("0::/../etc\n", t.root.string()) == 0);
}

// dockgate-mount: per-sandbox FUSE workspaces. Configuration from the AIStor example's
// AIMEM_* variables (see mount.hpp); the mountpoint is the last line of a successful mount.
#include <iostream>

#include "dockgate/common/environment.hpp"
#include "dockgate/mount/mount.hpp"

namespace {
int usage() {
  std::cerr << "usage: dockgate-mount mount <sandbox-id> [--key KEY]\n"
               "       dockgate-mount cleanup <sandbox-id>\n"
               "       dockgate-mount list\n"
               "       dockgate-mount reconcile\n";
  return 2;
}
}  // namespace

int main(int argc, char** argv) {
  using namespace dockgate::mount;
  if (argc < 2) return usage();
  const std::string verb = argv[1];
  if (verb == "-h" || verb == "--help") {
    usage();
    return 0;
  }
  const bool needs_id = verb == "mount" || verb == "cleanup";
  if ((needs_id && argc < 3) || (!needs_id && argc != 2)) return usage();
  std::string key;
  if (verb == "mount") {
    if (argc == 5 && std::string(argv[3]) == "--key")
      key = argv[4];
    else if (argc != 3)
      return usage();
  } else if (verb == "cleanup" && argc != 3) {
    return usage();
  }
  auto loaded = load_config(dockgate::common::process_environment(), verb == "mount");
  for (const auto& e : loaded.errors) std::cerr << "dockgate-mount: " << e << '\n';
  if (!loaded.value) return 1;
  const mount_config& c = *loaded.value;
  if (verb == "mount" || verb == "cleanup") {
    const auto o = verb == "mount" ? mount(c, argv[2], key) : cleanup(c, argv[2]);
    if (!o.ok) {
      std::cerr << "dockgate-mount: " << o.error << '\n';
      return 1;
    }
    std::cout << o.path << std::endl;
    return 0;
  }
  if (verb == "list") {
    for (const auto& e : list(c))
      std::cout << e.id << '\t' << to_string(e.what) << '\t' << e.path << '\t' << e.detail << '\n';
    return 0;
  }
  if (verb == "reconcile") {
    int failed = 0;
    for (const auto& o : reconcile(c)) {
      if (o.ok) {
        std::cout << "cleaned\t" << o.path << '\n';
      } else {
        std::cerr << "dockgate-mount: " << o.error << '\n';
        ++failed;
      }
    }
    return failed ? 1 : 0;
  }
  return usage();
}

// The default thread count (thread_count.hpp).
#include "thread_count.hpp"

#include <sched.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>
#include <thread>

namespace dockgate::proxy {

namespace {

// cpu.max: "max PERIOD" (no limit) or "QUOTA PERIOD", in microseconds.
std::size_t cpus_of(const std::string& cpu_max_file) {
  std::ifstream f(cpu_max_file);
  std::string quota_text;
  long long period = 0;
  if (!(f >> quota_text >> period) || quota_text == "max" || period <= 0) return 0;
  long long quota = 0;
  const auto [end, ec] =
      std::from_chars(quota_text.data(), quota_text.data() + quota_text.size(), quota);
  if (ec != std::errc() || end != quota_text.data() + quota_text.size() || quota <= 0) return 0;
  return static_cast<std::size_t>(std::max<long long>(1, (quota + period - 1) / period));
}

}  // namespace

std::size_t cgroup_cpu_limit(std::string_view proc_self_cgroup, const std::string& cgroup_root) {
  std::string path;
  for (std::size_t at = 0; at < proc_self_cgroup.size();) {
    auto end = proc_self_cgroup.find('\n', at);
    if (end == std::string_view::npos) end = proc_self_cgroup.size();
    const auto line = proc_self_cgroup.substr(at, end - at);
    if (line.starts_with("0::/")) path = std::string(line.substr(3));
    at = end + 1;
  }
  if (path.empty() || path.find("/..") != std::string::npos) return 0;
  std::size_t limit = 0;
  for (;;) {
    const std::size_t cpus = cpus_of(cgroup_root + (path == "/" ? "" : path) + "/cpu.max");
    if (cpus && (!limit || cpus < limit)) limit = cpus;
    if (path == "/") break;
    path.erase(path.rfind('/'));
    if (path.empty()) path = "/";
  }
  return limit;
}

std::size_t default_thread_count() {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  // (More CPUs than a cpu_set_t holds: the affinity call fails, and the machine's count is
  // taken instead.)
  std::size_t n = ::sched_getaffinity(0, sizeof cpus, &cpus) == 0
                      ? static_cast<std::size_t>(CPU_COUNT(&cpus))
                      : std::thread::hardware_concurrency();
  std::ifstream self("/proc/self/cgroup");
  std::stringstream text;
  text << self.rdbuf();
  if (const auto quota = cgroup_cpu_limit(text.str(), "/sys/fs/cgroup")) n = std::min(n, quota);
  return std::clamp<std::size_t>(n, 1, 64);
}

}  // namespace dockgate::proxy

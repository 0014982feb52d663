#include "proc_stats.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace dockgate::bench {

namespace {

// A /proc file is generated on read: one read of a buffer larger than the file gets it all.
std::string read_proc(pid_t pid, const char* name) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/%s", static_cast<int>(pid), name);
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string text(8192, '\0');
  ssize_t n = ::read(fd, text.data(), text.size());
  ::close(fd);
  text.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  return text;
}

}  // namespace

std::optional<long> rss_kib(pid_t pid) {
  const std::string status = read_proc(pid, "status");
  auto at = status.find("\nVmRSS:");
  if (at == std::string::npos) return std::nullopt;
  return std::strtol(status.c_str() + at + 7, nullptr, 10);
}

std::optional<long> open_fds(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/fd", static_cast<int>(pid));
  DIR* dir = ::opendir(path);
  if (!dir) return std::nullopt;
  long n = 0;
  while (const dirent* e = ::readdir(dir))
    if (e->d_name[0] != '.') ++n;
  ::closedir(dir);
  return n;
}

std::optional<double> cpu_us(pid_t pid) {
  const auto split = cpu_user_system_us(pid);
  if (!split) return std::nullopt;
  return split->first + split->second;
}

std::optional<std::pair<double, double>> cpu_user_system_us(pid_t pid) {
  const std::string stat = read_proc(pid, "stat");
  // The command name is in parentheses and may contain spaces: fields are counted from
  // the last ')', which is followed by the space before field 3 (state); utime and stime
  // are 14 and 15. (Until 2026-12-07 the loop went one field too far and read stime and
  // cutime: every CPU row before then counted system time only; docs/proxy.md.)
  auto close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  const char* p = stat.c_str() + close + 1;   // the space before field 3
  for (int field = 3; field < 14; ++field) {  // then the space before field 14
    p = std::strchr(p + 1, ' ');
    if (!p) return std::nullopt;
  }
  char* end = nullptr;
  const unsigned long long utime = std::strtoull(p, &end, 10);
  const unsigned long long stime = std::strtoull(end, nullptr, 10);
  const double tick_us = 1e6 / static_cast<double>(::sysconf(_SC_CLK_TCK));
  return std::pair{static_cast<double>(utime) * tick_us, static_cast<double>(stime) * tick_us};
}

std::optional<std::string> cpu_reader_problem() {
  // Half a second of user time (a tick is 10 ms; the kernel's split of a thread's runtime
  // into user and system time is by ticks, scaled to the precise total).
  const auto start = std::chrono::steady_clock::now();
  volatile unsigned long spin = 0;
  while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(500))
    for (int i = 0; i < 100000; ++i) spin = spin + static_cast<unsigned long>(i);
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  const double rusage_us = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
                           static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
  const auto proc_us = cpu_us(::getpid());
  if (!proc_us) return "cannot read /proc/self/stat";
  // Both count the same threads; /proc's figure is in ticks.
  if (*proc_us < rusage_us * 0.8 - 20000 || *proc_us > rusage_us * 1.2 + 20000)
    return "/proc/PID/stat says " + std::to_string(*proc_us / 1000) + " ms of CPU, getrusage " +
           std::to_string(rusage_us / 1000) + " ms";
  return std::nullopt;
}

namespace {
template <class T, class Read>
std::optional<T> summed(const std::vector<pid_t>& pids, Read read) {
  if (pids.empty()) return std::nullopt;
  T total{};
  for (pid_t pid : pids) {
    auto v = read(pid);
    if (!v) return std::nullopt;
    total += *v;
  }
  return total;
}
}  // namespace

std::optional<long> rss_kib(const std::vector<pid_t>& pids) {
  return summed<long>(pids, [](pid_t p) { return rss_kib(p); });
}
std::optional<long> open_fds(const std::vector<pid_t>& pids) {
  return summed<long>(pids, [](pid_t p) { return open_fds(p); });
}
std::optional<double> cpu_us(const std::vector<pid_t>& pids) {
  return summed<double>(pids, [](pid_t p) { return cpu_us(p); });
}

}  // namespace dockgate::bench

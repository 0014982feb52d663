#pragma once
// What the kernel says a process costs: resident memory and CPU time, read from /proc.

#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dockgate::bench {

// VmRSS of /proc/PID/status, in KiB.
std::optional<long> rss_kib(pid_t pid);

// Entries of /proc/PID/fd: open descriptors (a relay's connections, each side).
std::optional<long> open_fds(pid_t pid);

// utime + stime of /proc/PID/stat (every thread of the process), in microseconds. The
// kernel counts in clock ticks (usually 10 ms), so callers measure over whole rounds.
std::optional<double> cpu_us(pid_t pid);
// The two apart: {utime, stime}.
std::optional<std::pair<double, double>> cpu_user_system_us(pid_t pid);

// Why cpu_us cannot be trusted, if it cannot: it is checked against getrusage(2) for this
// process after half a second of user time (a reader that counts system time only, or
// the wrong fields, is found). dockgate-load runs it before it measures anything.
std::optional<std::string> cpu_reader_problem();

// The same, summed over the processes of one relay (nginx: its master and workers); none
// when any of them cannot be read.
std::optional<long> rss_kib(const std::vector<pid_t>& pids);
std::optional<long> open_fds(const std::vector<pid_t>& pids);
std::optional<double> cpu_us(const std::vector<pid_t>& pids);

}  // namespace dockgate::bench

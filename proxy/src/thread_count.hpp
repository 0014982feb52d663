#pragma once
// How many threads the gate serves with when --threads is not given: one per CPU it may
// run on (its affinity), and no more than its cgroups' CPU quota allows (cgroup v2
// cpu.max of its cgroup and every ancestor, as a container's `--cpus` sets it), rounded
// up: threads past the quota would only be throttled.

#include <cstddef>
#include <string>
#include <string_view>

namespace dockgate::proxy {

// The CPUs' worth of time cpu.max allows along the cgroup path named in `proc_self_cgroup`
// (the text of /proc/self/cgroup: its "0::PATH" line) under `cgroup_root` (the cgroup2
// mount, /sys/fs/cgroup), the tightest of them; 0 if none is limited.
std::size_t cgroup_cpu_limit(std::string_view proc_self_cgroup, const std::string& cgroup_root);

// 1 to 64: the affinity's CPU count, capped by cgroup_cpu_limit of this process.
std::size_t default_thread_count();

}  // namespace dockgate::proxy

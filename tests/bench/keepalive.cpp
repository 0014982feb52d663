#include "keepalive.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "bench_net.hpp"

namespace dockgate::bench {

namespace {

using clock_type = std::chrono::steady_clock;

// One connection's loop: request, whole response, repeat until `stop_at`. Latencies in µs.
bool drive_connection(const common::endpoint& ep, const std::string& request,
                      clock_type::time_point stop_at, std::vector<double>& latencies) {
  int fd = connect_to(ep);
  if (fd < 0) return false;
  std::string buf;
  bool ok = true;
  while (clock_type::now() < stop_at) {
    auto t0 = clock_type::now();
    if (!send_all(fd, request) || read_response(fd, buf) != 200) {
      ok = false;
      break;
    }
    latencies.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
  }
  ::close(fd);
  return ok;
}

// The same with a connection per request: connect, request, whole response, close.
bool drive_connections(const common::endpoint& ep, const std::string& request,
                       clock_type::time_point stop_at, std::vector<double>& latencies) {
  std::string buf;
  while (clock_type::now() < stop_at) {
    auto t0 = clock_type::now();
    int fd = connect_to(ep);
    if (fd < 0) return false;
    buf.clear();
    const bool ok = send_all(fd, request) && read_response(fd, buf) == 200;
    ::close(fd);
    if (!ok) return false;
    latencies.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
  }
  return true;
}

}  // namespace

keepalive_result run_keepalive(const common::endpoint& ep, const std::string& request,
                               int connections, double seconds, bool per_request) {
  std::vector<std::vector<double>> latencies(static_cast<std::size_t>(connections));
  std::atomic<std::size_t> errors{0};
  const auto start = clock_type::now();
  const auto stop_at = start + std::chrono::duration_cast<clock_type::duration>(
                                   std::chrono::duration<double>(seconds));
  std::vector<std::thread> threads;
  for (auto& lat : latencies) {
    threads.emplace_back([&] {
      lat.reserve(100000);
      if (!(per_request ? drive_connections : drive_connection)(ep, request, stop_at, lat))
        ++errors;
    });
  }
  for (auto& t : threads) t.join();

  keepalive_result r;
  r.seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  r.errors = errors;
  std::vector<double> all;
  for (auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  r.requests = all.size();
  if (all.empty()) return r;
  std::sort(all.begin(), all.end());
  r.p50_us = all[all.size() / 2];
  r.p99_us = all[std::min(all.size() - 1, all.size() * 99 / 100)];
  return r;
}

}  // namespace dockgate::bench

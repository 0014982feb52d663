// dockgate-load: a keep-alive HTTP load client for the Docker API, to compare the proxy
// with the direct socket in one run.
//
//   dockgate-load --direct unix:///var/run/docker.sock --proxy unix:///run/dockgate.sock
//                 [--connections N] [--seconds S] [--rounds R] [--container ID]
//
// For each target (GET /_ping, and GET /containers/ID/json when --container is given) it
// runs R rounds alternating direct and proxy, each round N keep-alive connections for S
// seconds, and prints requests/s, p50 and p99 latency (medians over the rounds) and the
// proxy/direct ratios. Alternating rounds spreads the noise of a shared machine over both.
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dockgate/common/endpoint.hpp"

namespace {

using clock_type = std::chrono::steady_clock;
using dockgate::common::endpoint;

int connect_to(const endpoint& ep) {
  if (ep.scheme == endpoint::kind::unix_socket) {
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, ep.path.c_str(), sizeof a.sun_path - 1);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd);
      return -1;
    }
    return fd;
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(ep.host.c_str(), std::to_string(ep.port).c_str(), &hints, &res) != 0) return -1;
  int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  int rc = ::connect(fd, res->ai_addr, res->ai_addrlen);
  ::freeaddrinfo(res);
  if (rc != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Reads one response (Content-Length or chunked body). Returns false on error.
bool read_response(int fd, std::string& buf) {
  std::size_t head_end;
  auto fill = [&]() {
    char tmp[65536];
    ssize_t n = ::recv(fd, tmp, sizeof tmp, 0);
    if (n <= 0) return false;
    buf.append(tmp, static_cast<std::size_t>(n));
    return true;
  };
  while ((head_end = buf.find("\r\n\r\n")) == std::string::npos)
    if (!fill()) return false;
  head_end += 4;
  std::string head = buf.substr(0, head_end);
  for (auto& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (head.compare(0, 9, "http/1.1 ") != 0 || head.compare(9, 3, "200") != 0) return false;
  if (auto cl = head.find("\r\ncontent-length:"); cl != std::string::npos) {
    std::size_t len = std::strtoull(head.c_str() + cl + 17, nullptr, 10);
    while (buf.size() < head_end + len)
      if (!fill()) return false;
    buf.erase(0, head_end + len);
    return true;
  }
  if (head.find("transfer-encoding: chunked") == std::string::npos) return false;
  std::size_t pos = head_end;
  for (;;) {
    std::size_t eol;
    while ((eol = buf.find("\r\n", pos)) == std::string::npos)
      if (!fill()) return false;
    std::size_t size = std::strtoull(buf.c_str() + pos, nullptr, 16);
    while (buf.size() < eol + 2 + size + 2)
      if (!fill()) return false;
    pos = eol + 2 + size + 2;
    if (size == 0) break;
  }
  buf.erase(0, pos);
  return true;
}

struct round_result {
  double rps = 0;
  double p50_us = 0;
  double p99_us = 0;
  std::size_t errors = 0;
};

round_result run_round(const endpoint& ep, const std::string& request, int connections, double seconds) {
  std::vector<std::vector<double>> latencies(static_cast<std::size_t>(connections));
  std::atomic<std::size_t> errors{0};
  const auto stop_at = clock_type::now() + std::chrono::duration<double>(seconds);
  const auto start = clock_type::now();
  std::vector<std::thread> threads;
  for (int i = 0; i < connections; ++i) {
    threads.emplace_back([&, i] {
      auto& lat = latencies[static_cast<std::size_t>(i)];
      lat.reserve(200000);
      int fd = connect_to(ep);
      if (fd < 0) {
        ++errors;
        return;
      }
      std::string buf;
      while (clock_type::now() < stop_at) {
        auto t0 = clock_type::now();
        if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size()) ||
            !read_response(fd, buf)) {
          ++errors;
          break;
        }
        lat.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
      }
      ::close(fd);
    });
  }
  for (auto& t : threads) t.join();
  const double elapsed = std::chrono::duration<double>(clock_type::now() - start).count();
  std::vector<double> all;
  for (auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  round_result r;
  r.errors = errors;
  if (all.empty()) return r;
  std::sort(all.begin(), all.end());
  r.rps = static_cast<double>(all.size()) / elapsed;
  r.p50_us = all[all.size() / 2];
  r.p99_us = all[std::min(all.size() - 1, all.size() * 99 / 100)];
  return r;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: dockgate-load --direct URL --proxy URL [--connections N] [--seconds S] "
               "[--rounds R] [--container ID]\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::optional<endpoint> direct, proxy;
  int connections = 4;
  double seconds = 2;
  int rounds = 3;
  std::string container;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) usage();
    std::string v = argv[++i];
    if (a == "--direct") direct = dockgate::common::parse_endpoint(v);
    else if (a == "--proxy") proxy = dockgate::common::parse_endpoint(v);
    else if (a == "--connections") connections = std::atoi(v.c_str());
    else if (a == "--seconds") seconds = std::atof(v.c_str());
    else if (a == "--rounds") rounds = std::atoi(v.c_str());
    else if (a == "--container") container = v;
    else usage();
  }
  if (!direct || !proxy || connections < 1 || rounds < 1 || seconds <= 0) usage();

  struct target {
    std::string name;
    std::string request;
  };
  std::vector<target> targets = {{"GET /_ping", "GET /v1.41/_ping HTTP/1.1\r\nHost: docker\r\n\r\n"}};
  if (!container.empty())
    targets.push_back({"GET /containers/{id}/json",
                       "GET /v1.41/containers/" + container + "/json HTTP/1.1\r\nHost: docker\r\n\r\n"});

  std::printf("%d connection(s), %d round(s) of %.1f s per side, keep-alive\n", connections, rounds, seconds);
  std::printf("%-28s %-7s %12s %10s %10s\n", "request", "via", "req/s", "p50 us", "p99 us");
  int failures = 0;
  for (const auto& t : targets) {
    std::vector<double> rps[2], p50[2], p99[2];
    for (int r = 0; r < rounds; ++r) {
      for (int side = 0; side < 2; ++side) {
        auto res = run_round(side == 0 ? *direct : *proxy, t.request, connections, seconds);
        if (res.errors) {
          std::fprintf(stderr, "%s via %s: %zu error(s)\n", t.name.c_str(), side ? "proxy" : "direct", res.errors);
          ++failures;
        }
        rps[side].push_back(res.rps);
        p50[side].push_back(res.p50_us);
        p99[side].push_back(res.p99_us);
      }
    }
    for (int side = 0; side < 2; ++side)
      std::printf("%-28s %-7s %12.0f %10.1f %10.1f\n", t.name.c_str(), side ? "proxy" : "direct",
                  median(rps[side]), median(p50[side]), median(p99[side]));
    std::printf("%-28s %-7s %11.2fx %9.2fx %9.2fx\n", t.name.c_str(), "ratio",
                median(rps[1]) / median(rps[0]), median(p50[1]) / median(p50[0]),
                median(p99[1]) / median(p99[0]));
  }
  return failures ? 1 : 0;
}

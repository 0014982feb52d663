// dockgate-load: end-to-end load client for the Docker API, comparing relays in front of
// the Docker socket with the socket itself in one run.
//
//   dockgate-load --target direct=unix:///run/docker.sock --target dockgate=unix:///run/dg.sock
//                 [--target haproxy=unix:///run/hap.sock] [--relay-pid NAME=PID[,PID...]]...
//                 [--versus A=B]...
//                 [--dockerd-pid PID] [--container ID] [--list] [--smoke]
//                 [--connections 1,10,50] [--per-request 1,10|none] [--seconds S] [--rounds R]
//                 [--exec-bytes N] [--exec-rounds R] [--held 1000,10000|none] [--held-stall S]
//
// The first target is the reference (the daemon's own socket): every ratio is a target's
// value divided by its value. Scenarios, each run for R rounds that go through the targets
// in turn (so the noise of a shared machine falls on all of them), medians over rounds:
//   - keep-alive GET /_ping with each --connections count; GET /_ping with a connection per
//     request (connect, one request, close: the docker CLI's way) with each --per-request
//     count of client threads; with --container, GET
//     /containers/ID/json and (with --list) GET /containers/json on 10 connections;
//   - with --container, a hijacked exec streaming --exec-bytes of a TTY (MiB/s), for
//     --exec-rounds rounds (default 2);
//   - with --relay-pid, the resident memory each held GET /events costs the relay, and its
//     resident memory and open descriptors at the start and idle after the load;
//   - with --dockerd-pid and --relay-pid, CPU time per request of the relay process and of
//     dockerd (for the reference target: dockerd alone).
// --versus A=B adds a column of A ÷ B (dockgate against the bare relay).
// Prints the details as it goes, then one markdown table. Exit status 1 when a request
// failed or a stream came back short, never because of a ratio.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_net.hpp"
#include "exec_stream.hpp"
#include "held_streams.hpp"
#include "keepalive.hpp"
#include "proc_stats.hpp"

namespace {

using dockgate::common::endpoint;
namespace bench = dockgate::bench;

struct target {
  std::string name;
  endpoint ep;
  // The processes between client and daemon (nginx: master and workers); none for direct.
  std::vector<pid_t> relay_pid;
};

struct options {
  std::vector<target> targets;
  std::vector<std::pair<std::string, std::string>> versus;  // --versus A=B: a column A ÷ B
  std::optional<pid_t> dockerd_pid;
  std::string container;
  bool list = false;
  std::vector<int> connections = {1, 10, 50};
  std::vector<int> per_request = {1, 10};  // client threads opening a connection per request
  double seconds = 4;
  int rounds = 3;
  int exec_rounds = 2;  // 512 MiB through a TTY takes dockerd tens of seconds on a busy machine
  std::uint64_t exec_bytes = 512ull << 20;
  std::vector<int> held = {1000, 10000};
  double held_stall_seconds = 10;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(
      stderr,
      "dockgate-load: %s\nusage: dockgate-load --target NAME=URL... [--relay-pid NAME=PID]... "
      "[--dockerd-pid PID] [--container ID] [--list] [--smoke] [--connections 1,10,50] "
      "[--per-request 1,10|none] [--seconds S] [--rounds R] [--exec-bytes N] [--exec-rounds R] "
      "[--held 1000,10000|none] "
      "[--held-stall S]\n",
      why.c_str());
  std::exit(2);
}

std::vector<int> parse_counts(const std::string& text) {
  std::vector<int> out;
  std::istringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    int n = std::atoi(item.c_str());
    if (n < 1) usage("bad count list: " + text);
    out.push_back(n);
  }
  return out;
}

std::pair<std::string, std::string> split_pair(const std::string& text) {
  auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0) usage("expected NAME=VALUE: " + text);
  return {text.substr(0, eq), text.substr(eq + 1)};
}

options parse_options(int argc, char** argv) {
  options o;
  std::map<std::string, std::vector<pid_t>> relay_pids;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--list") {
      o.list = true;
      continue;
    }
    if (a == "--smoke") {  // seconds for the whole bench, every scenario still measured
      o.seconds = 0.5;
      o.rounds = 1;
      o.exec_rounds = 1;
      o.exec_bytes = 16ull << 20;
      o.held = {100, 500};
      o.held_stall_seconds = 3;
      continue;
    }
    if (i + 1 >= argc) usage("missing value after " + a);
    const std::string v = argv[++i];
    if (a == "--target") {
      auto [name, url] = split_pair(v);
      std::string error;
      auto ep = dockgate::common::parse_endpoint(url, &error);
      if (!ep) usage(url + ": " + error);
      o.targets.push_back({name, *ep, {}});
    } else if (a == "--relay-pid") {
      auto [name, pid] = split_pair(v);
      // PID[,PID...]: a relay of several processes is measured as their sum.
      for (std::size_t at = 0; at <= pid.size();) {
        const auto comma = std::min(pid.find(',', at), pid.size());
        relay_pids[name].push_back(
            static_cast<pid_t>(std::atol(pid.substr(at, comma - at).c_str())));
        at = comma + 1;
      }
    } else if (a == "--versus") {
      o.versus.push_back(split_pair(v));
    } else if (a == "--dockerd-pid") {
      o.dockerd_pid = static_cast<pid_t>(std::atol(v.c_str()));
    } else if (a == "--container") {
      o.container = v;
    } else if (a == "--connections") {
      o.connections = parse_counts(v);
    } else if (a == "--per-request") {
      o.per_request = v == "none" ? std::vector<int>{} : parse_counts(v);
    } else if (a == "--seconds") {
      o.seconds = std::atof(v.c_str());
    } else if (a == "--rounds") {
      o.rounds = std::atoi(v.c_str());
    } else if (a == "--exec-rounds") {
      o.exec_rounds = std::atoi(v.c_str());
    } else if (a == "--exec-bytes") {
      o.exec_bytes = std::strtoull(v.c_str(), nullptr, 10);
    } else if (a == "--held") {
      o.held = v == "none" ? std::vector<int>{} : parse_counts(v);
    } else if (a == "--held-stall") {
      o.held_stall_seconds = std::atof(v.c_str());
    } else {
      usage("unknown argument " + a);
    }
  }
  if (o.targets.size() < 2) usage("give the reference target and at least one relay");
  if (o.rounds < 1 || o.exec_rounds < 1 || o.seconds <= 0 || o.exec_bytes == 0)
    usage("rounds, seconds and exec bytes must be positive");
  for (auto& [name, pid] : relay_pids) {
    auto t = std::find_if(o.targets.begin(), o.targets.end(),
                          [&](const target& x) { return x.name == name; });
    if (t == o.targets.end() || t == o.targets.begin())
      usage("--relay-pid for an unknown relay: " + name);
    t->relay_pid = pid;
  }
  return o;
}

// Held streams need one descriptor each, and a relay two.
void raise_descriptor_limit() {
  rlimit lim{};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  rlimit want{std::max<rlim_t>(lim.rlim_max, 65536), std::max<rlim_t>(lim.rlim_max, 65536)};
  if (::setrlimit(RLIMIT_NOFILE, &want) != 0) {  // raising the hard limit needs CAP_SYS_RESOURCE
    lim.rlim_cur = lim.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &lim);
  }
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t mid = v.size() / 2;
  return v.size() % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

// The final table: one row per measured quantity, one column per target, then the ratios
// of each relay to the reference.
struct row {
  std::string label;
  std::vector<std::optional<double>> values;  // per target
  int decimals = 0;
};

class report {
 public:
  // `versus`: more ratio columns, target ÷ target, by index (dockgate ÷ the bare relay).
  report(const std::vector<target>& targets,
         std::vector<std::pair<std::size_t, std::size_t>> versus)
      : targets_(targets), versus_(std::move(versus)) {}

  void add(row r) { rows_.push_back(std::move(r)); }
  void note(std::string text) { notes_.push_back(std::move(text)); }

  void print() const {
    std::printf("\n| scenario |");
    for (auto& t : targets_) std::printf(" %s |", t.name.c_str());
    for (std::size_t i = 1; i < targets_.size(); ++i)
      std::printf(" %s ÷ %s |", targets_[i].name.c_str(), targets_[0].name.c_str());
    for (auto [a, b] : versus_)
      std::printf(" %s ÷ %s |", targets_[a].name.c_str(), targets_[b].name.c_str());
    std::printf("\n|---|");
    for (std::size_t i = 1; i < 2 * targets_.size() + versus_.size(); ++i) std::printf("---:|");
    std::printf("\n");
    for (auto& r : rows_) print_row(r);
    for (auto& n : notes_) std::printf("\n%s", n.c_str());
    std::printf("\n");
  }

 private:
  void print_row(const row& r) const {
    std::printf("| %s |", r.label.c_str());
    for (auto& v : r.values) {
      if (v)
        std::printf(" %.*f |", r.decimals, *v);
      else
        std::printf(" — |");
    }
    for (std::size_t i = 1; i < r.values.size(); ++i) {
      if (r.values[0] && r.values[i] && *r.values[0] > 0)
        std::printf(" %.2f |", *r.values[i] / *r.values[0]);
      else
        std::printf(" — |");
    }
    for (auto [a, b] : versus_) {
      if (r.values[a] && r.values[b] && *r.values[b] > 0)
        std::printf(" %.2f |", *r.values[a] / *r.values[b]);
      else
        std::printf(" — |");
    }
    std::printf("\n");
  }

  const std::vector<target>& targets_;
  std::vector<std::pair<std::size_t, std::size_t>> versus_;
  std::vector<row> rows_;
  std::vector<std::string> notes_;
};

// CPU time of the relay (for the reference: nothing) and of dockerd, in µs.
struct cpu_sample {
  std::optional<double> relay_us;
  std::optional<std::pair<double, double>> dockerd_us;  // user, system
};

cpu_sample sample_cpu(const target& t, const options& o) {
  cpu_sample s;
  if (!t.relay_pid.empty()) s.relay_us = bench::cpu_us(t.relay_pid);
  if (o.dockerd_pid) s.dockerd_us = bench::cpu_user_system_us(*o.dockerd_pid);
  return s;
}

// Accumulates CPU time over the rounds of one scenario for one target.
struct cpu_total {
  double relay_us = 0, dockerd_us = 0, dockerd_user_us = 0;
  bool relay = true, dockerd = true;

  void add(const cpu_sample& before, const cpu_sample& after) {
    relay = relay && before.relay_us && after.relay_us;
    dockerd = dockerd && before.dockerd_us && after.dockerd_us;
    if (relay) relay_us += *after.relay_us - *before.relay_us;
    if (dockerd) {
      dockerd_user_us += after.dockerd_us->first - before.dockerd_us->first;
      dockerd_us += after.dockerd_us->first + after.dockerd_us->second - before.dockerd_us->first -
                    before.dockerd_us->second;
    }
  }
};

// Per-unit CPU rows (unit: request or MiB). The reference's "relay" is dockerd itself.
void add_cpu_rows(report& rep, const std::string& label, const std::string& unit,
                  const std::vector<target>& targets, const std::vector<cpu_total>& cpu,
                  const std::vector<double>& units) {
  row relay{label + ": CPU µs/" + unit + " of the relay (direct: dockerd)", {}, 1};
  row daemon{label + ": CPU µs/" + unit + " of dockerd", {}, 1};
  for (std::size_t i = 0; i < targets.size(); ++i) {
    const bool reference = i == 0;
    const bool have_relay =
        reference ? cpu[i].dockerd : (!targets[i].relay_pid.empty() && cpu[i].relay);
    const double relay_us = reference ? cpu[i].dockerd_us : cpu[i].relay_us;
    relay.values.push_back(have_relay && units[i] > 0 ? std::optional(relay_us / units[i])
                                                      : std::nullopt);
    daemon.values.push_back(cpu[i].dockerd && units[i] > 0
                                ? std::optional(cpu[i].dockerd_us / units[i])
                                : std::nullopt);
  }
  rep.add(std::move(relay));
  rep.add(std::move(daemon));
}

int keepalive_scenario(const options& o, report& rep, const std::string& label,
                       const std::string& request, int connections, bool per_request = false) {
  const std::size_t n = o.targets.size();
  std::vector<std::vector<double>> rps(n), p50(n), p99(n);
  std::vector<cpu_total> cpu(n);
  std::vector<double> requests(n, 0);
  int failures = 0;
  for (int r = 0; r < o.rounds; ++r) {
    for (std::size_t i = 0; i < n; ++i) {
      const auto before = sample_cpu(o.targets[i], o);
      const auto res =
          bench::run_keepalive(o.targets[i].ep, request, connections, o.seconds, per_request);
      cpu[i].add(before, sample_cpu(o.targets[i], o));
      if (res.errors) {
        std::fprintf(stderr, "%s via %s: %zu connection(s) failed\n", label.c_str(),
                     o.targets[i].name.c_str(), res.errors);
        ++failures;
      }
      rps[i].push_back(res.rps());
      p50[i].push_back(res.p50_us);
      p99[i].push_back(res.p99_us);
      requests[i] += static_cast<double>(res.requests);
    }
  }
  row rate{label + ": req/s", {}, 0}, tail{label + ": p99 µs", {}, 0};
  for (std::size_t i = 0; i < n; ++i) {
    std::printf("%-40s %-9s %9.0f req/s  p50 %8.1f µs  p99 %8.1f µs", label.c_str(),
                o.targets[i].name.c_str(), median(rps[i]), median(p50[i]), median(p99[i]));
    if (cpu[i].dockerd && requests[i] > 0)  // the daemon's user and system time apart
      std::printf("  dockerd user %.1f + sys %.1f µs/req", cpu[i].dockerd_user_us / requests[i],
                  (cpu[i].dockerd_us - cpu[i].dockerd_user_us) / requests[i]);
    std::printf("\n");
    rate.values.push_back(median(rps[i]));
    tail.values.push_back(median(p99[i]));
  }
  rep.add(std::move(rate));
  rep.add(std::move(tail));
  add_cpu_rows(rep, label, "req", o.targets, cpu, requests);
  return failures;
}

int exec_scenario(const options& o, report& rep) {
  const std::size_t n = o.targets.size();
  const std::string label = "exec stream " + std::to_string(o.exec_bytes >> 20) + " MiB (TTY)";
  std::vector<std::vector<double>> rate(n);
  std::vector<cpu_total> cpu(n);
  std::vector<double> mib(n, 0);
  int failures = 0;
  for (int r = 0; r < o.exec_rounds; ++r) {
    for (std::size_t i = 0; i < n; ++i) {
      const auto before = sample_cpu(o.targets[i], o);
      const auto res = bench::run_exec_stream(o.targets[i].ep, o.container, o.exec_bytes);
      cpu[i].add(before, sample_cpu(o.targets[i], o));
      if (!res.error.empty()) {
        std::fprintf(stderr, "%s via %s: %s\n", label.c_str(), o.targets[i].name.c_str(),
                     res.error.c_str());
        ++failures;
      }
      std::printf("%-40s %-9s %9.1f MiB/s  (status %d, %.2f s)\n", label.c_str(),
                  o.targets[i].name.c_str(), res.mib_per_s(), res.status, res.seconds);
      rate[i].push_back(res.mib_per_s());
      mib[i] += static_cast<double>(res.bytes) / (1 << 20);
    }
  }
  row r{label + ": MiB/s", {}, 0};
  for (std::size_t i = 0; i < n; ++i) r.values.push_back(median(rate[i]));
  rep.add(std::move(r));
  add_cpu_rows(rep, "exec stream", "MiB", o.targets, cpu, mib);
  return failures;
}

struct held_measure {
  int held = 0, failed = 0;
  double seconds = 0;
  long rss_before = 0, rss_after = 0;  // KiB, before the first connection, with all held
  long fds_before = 0, fds_left = 0;   // descriptors before, and once the clients' close settled
};

// The relay's descriptor count once it stops falling (closing thousands of connections
// takes a loaded relay a while): unchanged for 1 s, back to `floor`, or 10 s passed.
long settled_fds(const std::vector<pid_t>& pid, long floor) {
  long last = bench::open_fds(pid).value_or(0);
  int unchanged_ms = 0;
  for (int waited_ms = 0; last > floor && unchanged_ms < 1000 && waited_ms < 10000;
       waited_ms += 250) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    const long now = bench::open_fds(pid).value_or(0);
    unchanged_ms = now == last ? unchanged_ms + 250 : 0;
    last = now;
  }
  return last;
}

held_measure hold_and_measure(const options& o, const target& t, int count) {
  held_measure m;
  m.rss_before = bench::rss_kib(t.relay_pid).value_or(0);
  m.fds_before = bench::open_fds(t.relay_pid).value_or(0);
  {
    bench::held_streams streams(t.ep, bench::request("GET", "/v1.41/events"));
    const auto start = std::chrono::steady_clock::now();
    streams.hold(count, std::chrono::milliseconds(static_cast<long>(o.held_stall_seconds * 1000)));
    m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // Let the relay settle its buffers: dockgate gives the blocks of the opening burst
    // back at its next quiet watchdog tick (within 2 s); HAProxy keeps its pools.
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    m.rss_after = bench::rss_kib(t.relay_pid).value_or(0);
    m.held = streams.held();
    m.failed = streams.failed();
  }
  m.fds_left = settled_fds(t.relay_pid, m.fds_before);
  return m;
}

// A relay that notices a closed client only when it next writes to it keeps an idle event
// stream (and its dockerd subscription) until then. One event (an exec created on the
// reference target) makes every relay write, so the next scenario starts clean.
void release_dead_streams(const options& o) {
  std::string error;
  if (!o.container.empty() && bench::create_exec(o.targets[0].ep, o.container, 1, error).empty())
    std::fprintf(stderr, "%s\n", error.c_str());
  std::this_thread::sleep_for(std::chrono::seconds(1));
}

// What N held GET /events cost each relay: the growth of its VmRSS from before the first
// connection to when every stream has its response head, divided by the streams held.
void held_scenario(const options& o, report& rep, int count) {
  const std::string label = "held GET /events ×" + std::to_string(count);
  row r{label + ": KiB RSS per stream", {std::nullopt}, 1};
  // How many of the N got their head (a relay at its descriptor limit leaves the rest in its
  // accept queue): the KiB are over those.
  row held{label + ": streams held", {std::nullopt}, 0};
  for (std::size_t i = 1; i < o.targets.size(); ++i) {
    const auto& t = o.targets[i];
    if (t.relay_pid.empty()) {
      r.values.push_back(std::nullopt);
      held.values.push_back(std::nullopt);
      continue;
    }
    const auto m = hold_and_measure(o, t, count);
    std::printf(
        "%-40s %-9s held %d of %d (%d failed) in %.1f s; VmRSS %ld -> %ld KiB; descriptors %ld "
        "before, "
        "%ld once the clients' close settled\n",
        label.c_str(), t.name.c_str(), m.held, count, m.failed, m.seconds, m.rss_before,
        m.rss_after, m.fds_before, m.fds_left);
    if (m.held < count)
      rep.note(label + " via " + t.name + ": " + std::to_string(m.held) + " of " +
               std::to_string(count) + " streams got their head (" + std::to_string(m.failed) +
               " failed, the rest waited in the accept queue); KiB per stream is over the " +
               std::to_string(m.held) + " held.");
    if (m.fds_left > m.fds_before + 2) {
      release_dead_streams(o);
      const long after_event = settled_fds(t.relay_pid, m.fds_before);
      rep.note(label + " via " + t.name + ": " + std::to_string(m.fds_left - m.fds_before) +
               " more descriptors open than before, after the count stopped falling once the "
               "clients closed "
               "(closed streams kept until the relay next writes to them); after one event: " +
               std::to_string(after_event - m.fds_before) + " more.");
    }
    r.values.push_back(m.held > 0
                           ? std::optional(static_cast<double>(m.rss_after - m.rss_before) / m.held)
                           : std::nullopt);
    held.values.push_back(static_cast<double>(m.held));
  }
  rep.add(std::move(held));
  rep.add(std::move(r));
}

// One value per relay, read from /proc (the reference has no process of its own).
template <class Read>
row relay_row(const options& o, const std::string& label, Read read) {
  row r{label, {std::nullopt}, 0};
  for (std::size_t i = 1; i < o.targets.size(); ++i) {
    const auto& t = o.targets[i];
    auto v = !t.relay_pid.empty() ? read(t.relay_pid) : std::nullopt;
    r.values.push_back(v ? std::optional(static_cast<double>(*v)) : std::nullopt);
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  const options o = parse_options(argc, argv);
  raise_descriptor_limit();
  if (auto problem = bench::cpu_reader_problem()) {
    std::fprintf(stderr, "dockgate-load: the CPU reader disagrees with getrusage: %s\n",
                 problem->c_str());
    return 1;
  }
  std::vector<std::pair<std::size_t, std::size_t>> versus;
  auto index_of = [&](const std::string& name) {
    auto it = std::find_if(o.targets.begin(), o.targets.end(),
                           [&](const target& t) { return t.name == name; });
    if (it == o.targets.end()) usage("--versus names an unknown target: " + name);
    return static_cast<std::size_t>(it - o.targets.begin());
  };
  for (auto& [a, b] : o.versus) versus.emplace_back(index_of(a), index_of(b));
  report rep(o.targets, versus);
  const row rss_start = relay_row(o, "VmRSS KiB at start",
                                  [](const std::vector<pid_t>& p) { return bench::rss_kib(p); });
  const row fds_start = relay_row(o, "open descriptors at start",
                                  [](const std::vector<pid_t>& p) { return bench::open_fds(p); });

  std::printf("%d round(s) of %.1f s per target and scenario; targets:", o.rounds, o.seconds);
  for (auto& t : o.targets) std::printf(" %s (%s)", t.name.c_str(), t.ep.to_string().c_str());
  std::printf("\n");

  int failures = 0;
  const std::string ping = bench::request("GET", "/v1.41/_ping");
  for (int c : o.connections)
    failures += keepalive_scenario(o, rep, "GET /_ping ×" + std::to_string(c) + " conn", ping, c);
  for (int c : o.per_request)
    failures += keepalive_scenario(
        o, rep, "GET /_ping ×" + std::to_string(c) + " conn, a connection per request", ping, c,
        true);
  if (!o.container.empty()) {
    failures +=
        keepalive_scenario(o, rep, "GET /containers/{id}/json ×10 conn",
                           bench::request("GET", "/v1.41/containers/" + o.container + "/json"), 10);
    if (o.list)
      failures += keepalive_scenario(o, rep, "GET /containers/json ×10 conn",
                                     bench::request("GET", "/v1.41/containers/json"), 10);
    failures += exec_scenario(o, rep);
  }
  for (int n : o.held) held_scenario(o, rep, n);

  std::this_thread::sleep_for(std::chrono::seconds(2));  // every connection closed and reaped
  rep.add(rss_start);
  rep.add(relay_row(o, "VmRSS KiB idle after the load",
                    [](const std::vector<pid_t>& p) { return bench::rss_kib(p); }));
  rep.add(fds_start);
  rep.add(relay_row(o, "open descriptors idle after the load",
                    [](const std::vector<pid_t>& p) { return bench::open_fds(p); }));
  rep.print();
  if (failures) std::fprintf(stderr, "dockgate-load: %d scenario run(s) had errors\n", failures);
  return failures ? 1 : 0;
}

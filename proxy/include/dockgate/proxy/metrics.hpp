#pragma once
// Prometheus metrics of the gate, kept by each gate thread for its connections (the first
// thread's also hold the process's facts: limit, reloads, daemon), summed with add() and
// rendered in the text exposition format (0.0.4) on the metrics listener. Recording an allowed
// request does not allocate once its operation and status have been seen.

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace dockgate::proxy {

// One --audit sink as /metrics shows it (audit_sink.hpp): whether its last write took all
// that was queued, what waits in memory for it, what it lost (its queue full) and how many
// writes failed.
struct audit_sink_health {
  std::string sink;  // the --audit value: stdout, file:PATH, journald, syslog:ADDR
  bool up = true;
  std::uint64_t pending_bytes = 0;
  std::uint64_t pending_lines = 0;
  std::uint64_t lost_lines = 0;
  std::uint64_t lost_bytes = 0;
  std::uint64_t write_errors = 0;
};

class metrics {
 public:
  // One finished request (the audit line's facts). `profile` is the client's profile
  // ("" when no profile matched: rendered as "none").
  void record(std::string_view profile, std::string_view operation, bool denied, unsigned status,
              std::string_view rule, double seconds);
  void upstream_error() { ++upstream_errors_; }
  // Responses streaming to a client (events, logs -f, pulls), and hijacked sessions.
  void stream(int delta) { streams_ += delta; }
  void hijack(int delta) { hijacks_ += delta; }
  void connection(int delta) { connections_ += delta; }
  void connection_limit(std::size_t n) { connection_limit_ = static_cast<std::int64_t>(n); }
  // A policy load: the one at start (loaded, no reload counted) or a SIGHUP's, which either
  // applied or was refused (the current policy kept). `unix_seconds` is when it happened.
  void policy_loaded(double unix_seconds) {
    last_reload_ok_ = true, last_load_time_ = unix_seconds;
  }
  void policy_reload(bool applied, double unix_seconds) {
    ++(applied ? reloads_ok_ : reloads_failed_);
    last_reload_ok_ = applied;
    if (applied) last_load_time_ = unix_seconds;
  }
  // Whether the daemon answered a ping, asked when metrics are scraped.
  void daemon_up(bool up) { daemon_up_ = up; }
  // The audit sinks' health, a process fact read when metrics are scraped (not summed).
  void audit_sinks(std::vector<audit_sink_health> sinks) { audit_sinks_ = std::move(sinks); }
  // Another thread's counts of requests and what is open now, added to these.
  void add(const metrics& other);
  std::string render() const;

  static constexpr std::array<double, 14> buckets{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                  0.1,    0.25,  0.5,    1,     2.5,  5,     10};

 private:
  struct outcome {
    bool denied;
    unsigned status;
    auto operator<=>(const outcome&) const = default;
  };
  template <typename V>
  using by_name = std::map<std::string, V, std::less<>>;
  by_name<by_name<std::map<outcome, std::uint64_t>>> requests_;  // profile -> operation -> outcome
  by_name<by_name<std::uint64_t>> refusals_;                     // profile -> rule
  template <typename V>
  static V& slot(by_name<V>& m, std::string_view key) {
    auto it = m.find(key);
    if (it == m.end()) it = m.emplace(std::string(key), V{}).first;
    return it->second;
  }
  std::array<std::uint64_t, buckets.size()> bucket_counts_{};
  std::uint64_t count_ = 0;
  double sum_ = 0;
  std::uint64_t upstream_errors_ = 0;
  std::int64_t streams_ = 0;
  std::int64_t hijacks_ = 0;
  std::int64_t connections_ = 0;
  std::int64_t connection_limit_ = 0;
  std::uint64_t reloads_ok_ = 0;
  std::uint64_t reloads_failed_ = 0;
  bool last_reload_ok_ = true;
  double last_load_time_ = 0;
  bool daemon_up_ = false;
  std::vector<audit_sink_health> audit_sinks_;
};

}  // namespace dockgate::proxy

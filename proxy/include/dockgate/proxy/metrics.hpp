#pragma once
// Prometheus metrics of the gate, kept by the proxy's one thread and rendered in the text
// exposition format (0.0.4) on the metrics listener. Recording an allowed request does not
// allocate once its operation and status have been seen.

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

namespace dockgate::proxy {

class metrics {
 public:
  // One finished request (the audit line's facts).
  void record(std::string_view operation, bool denied, unsigned status, std::string_view rule, double seconds);
  void upstream_error() { ++upstream_errors_; }
  // Responses streaming to a client (events, logs -f, pulls), and hijacked sessions.
  void stream(int delta) { streams_ += delta; }
  void hijack(int delta) { hijacks_ += delta; }
  std::string render() const;

  static constexpr std::array<double, 14> buckets{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                  0.1,    0.25,  0.5,    1,     2.5,  5,     10};

 private:
  struct outcome {
    bool denied;
    unsigned status;
    auto operator<=>(const outcome&) const = default;
  };
  std::map<std::string, std::map<outcome, std::uint64_t>, std::less<>> requests_;
  std::map<std::string, std::uint64_t, std::less<>> refusals_;
  std::array<std::uint64_t, buckets.size()> bucket_counts_{};
  std::uint64_t count_ = 0;
  double sum_ = 0;
  std::uint64_t upstream_errors_ = 0;
  std::int64_t streams_ = 0;
  std::int64_t hijacks_ = 0;
};

}  // namespace dockgate::proxy

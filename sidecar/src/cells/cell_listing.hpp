#pragma once
// What the clean-up after a cell reports (the plain clean-up's script, the runner's and the
// kernel driver's listing, all in one format): the memory cgroup's OOM-kill count after and
// before the cell, and /workspace/outputs before and after it. Internal to the sidecar.

#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace dockgate::sidecar {

struct cell_listing {
  std::int64_t oom_before = 0;
  std::int64_t oom_after = 0;
  std::map<std::string, std::string> before;  // path -> "mtime\tsize"
  std::map<std::string, std::string> after;
};

// The clean-up's output: "<oom now>\n<oom before>\n" then the before records, an empty
// field, the after records (NUL-separated triples).
inline cell_listing parse_cell_listing(std::string_view text) {
  cell_listing l;
  auto line = [&]() {
    const auto nl = text.find('\n');
    const std::string_view v = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    return std::strtoll(std::string(v).c_str(), nullptr, 10);
  };
  l.oom_after = line();
  l.oom_before = line();
  auto field = [&]() -> std::optional<std::string_view> {
    const auto nul = text.find('\0');
    if (nul == std::string_view::npos) return std::nullopt;
    const std::string_view v = text.substr(0, nul);
    text.remove_prefix(nul + 1);
    return v;
  };
  auto* into = &l.before;
  while (auto path = field()) {
    if (path->empty()) {  // the separator between before and after
      into = &l.after;
      continue;
    }
    auto mtime = field();
    auto size = field();
    if (!mtime || !size) break;
    (*into)[std::string(*path)] = std::string(*mtime) + "\t" + std::string(*size);
  }
  return l;
}

}  // namespace dockgate::sidecar

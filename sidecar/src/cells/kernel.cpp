// Kernel sessions: the driver's hello and status frames, its requests, its start.
// See kernel.hpp for the invariant (the driver is trusted no more than the runner).
#include "cells/kernel.hpp"

#include <algorithm>
#include <charconv>

#include "dockgate/client/engine.hpp"
#include "engine/container_engine.hpp"

namespace dockgate::sidecar {

namespace {

// A plain decimal: no sign, no leading zero, the whole view.
template <typename T>
std::optional<T> decimal(std::string_view s) {
  T v{};
  if (s.empty() || s.front() < '0' || s.front() > '9' || (s.size() > 1 && s.front() == '0'))
    return std::nullopt;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

// The next space-separated word of `s` (exactly one space between words).
std::string_view word(std::string_view& s) {
  const auto sp = s.find(' ');
  std::string_view w = s.substr(0, sp);
  s = sp == std::string_view::npos ? std::string_view{} : s.substr(sp + 1);
  return w;
}

}  // namespace

std::optional<std::string> kernel_name(std::string_view requested) {
  if (requested == "python" || requested == "python3") return std::string("python");
  return std::nullopt;
}

std::optional<kernel_hello> parse_kernel_hello(std::string_view payload) {
  constexpr std::string_view prefix = "dockgate-kernel 1 ";
  if (!payload.starts_with(prefix)) return std::nullopt;
  payload.remove_prefix(prefix.size());
  const auto sp = payload.find(' ');
  if (sp == std::string_view::npos) return std::nullopt;
  auto pid = decimal<int>(payload.substr(0, sp));
  if (!pid || *pid == 0) return std::nullopt;
  const std::string_view st = payload.substr(sp + 1);
  kernel_hello h;
  h.pid = *pid;
  if (st == "ready")
    h.st = kernel_hello::state::ready;
  else if (st == "missing")
    h.st = kernel_hello::state::missing;
  else if (st == "failed")
    h.st = kernel_hello::state::failed;
  else
    return std::nullopt;
  return h;
}

std::optional<kernel_status> parse_kernel_status(std::string_view payload) {
  auto flag = [](std::string_view w) -> std::optional<bool> {
    if (w == "0") return false;
    if (w == "1") return true;
    return std::nullopt;
  };
  // Exactly three words, one space between each (word() cannot tell "5" from "5 ").
  if (std::count(payload.begin(), payload.end(), ' ') != 2) return std::nullopt;
  auto restarted = flag(word(payload));
  auto died = flag(word(payload));
  auto count = decimal<std::int64_t>(word(payload));
  if (!restarted || !died || !count) return std::nullopt;
  return kernel_status{*restarted, *died, *count};
}

std::string kernel_cell_request(std::string_view code, std::int64_t timeout_ms,
                                std::int64_t grace_ms, std::string_view outputs,
                                std::uint32_t cap) {
  const std::string t = std::to_string(timeout_ms), g = std::to_string(grace_ms);
  return runner_request('K', cap, {{code}, {t, g}, {outputs}});
}

std::shared_ptr<cell_runner> start_kernel_driver(const container_engine& engine,
                                                 const std::string& container,
                                                 std::chrono::milliseconds timeout,
                                                 std::string* error) {
  std::string hello;
  // -I, as the runner: nothing the session's files can change is imported by the driver
  // (the kernel it starts is a plain `python3 -m ipykernel_launcher`, as a cell's python3).
  auto driver = cell_runner::start_program(
      engine, container, {"python3", "-I", "-c", std::string(kernel_program), "dockgate-kernel"},
      [](std::string_view payload) -> std::optional<int> {
        auto h = parse_kernel_hello(payload);
        if (!h || h->st != kernel_hello::state::ready) return std::nullopt;
        return h->pid;
      },
      timeout, error, &hello);
  if (driver) return driver;
  if (auto h = parse_kernel_hello(hello)) {
    *error = h->st == kernel_hello::state::missing
                 ? "kernel unavailable: the session image has no IPython kernel (install Debian's "
                   "python3-ipykernel and python3-jupyter-client in it)"
                 : "kernel unavailable: the IPython kernel did not start";
  } else {
    *error = "kernel unavailable: the kernel driver did not start (" + *error + ")";
  }
  return nullptr;
}

}  // namespace dockgate::sidecar

// Kernel sessions: the driver's hello and status frames, its requests, its start.
// See kernel.hpp for the invariant (the driver is trusted no more than the runner).
#include "cells/kernel.hpp"

#include <simdjson.h>

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

// Why a kept kernel (an OpenSandbox context) did not start, naming what the image lacks.
std::string kept_kernel_error(std::string_view hello, const std::string& why) {
  if (auto h = parse_kernel_hello(hello))
    return h->st == kernel_hello::state::missing
               ? "the sandbox image has no IPython kernel: /code needs python3 with the "
                 "ipykernel and jupyter_client packages (pip install ipykernel)"
               : "the IPython kernel did not start in the sandbox";
  // The engine's own words for an exec of a program the image lacks (runc: "executable
  // file not found in $PATH").
  if (why.find("not found") != std::string::npos || why.find("no such file") != std::string::npos)
    return "the sandbox image has no python3: /code needs python3 with the ipykernel and "
           "jupyter_client packages";
  return "the kernel driver did not start in the sandbox (" + why + ")";
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

std::string kernel_code_request(std::string_view code, std::uint32_t cap) {
  return runner_request('J', cap, {{code}});
}

std::optional<code_value> parse_code_value(std::string_view payload) {
  const auto sp = payload.find(' ');
  if (sp == std::string_view::npos) return std::nullopt;
  auto count = decimal<std::int64_t>(payload.substr(0, sp));
  if (!count) return std::nullopt;
  simdjson::dom::parser parser;
  simdjson::dom::object bundle;
  const std::string json(payload.substr(sp + 1));
  if (parser.parse(json).get(bundle) != simdjson::SUCCESS) return std::nullopt;
  code_value v{*count, {}};
  for (auto [key, value] : bundle) {
    std::string_view text;
    if (key.empty() || value.get_string().get(text) != simdjson::SUCCESS) return std::nullopt;
    v.data.emplace_back(std::string(key), std::string(text));
  }
  return v;
}

std::optional<code_fault> parse_code_fault(std::string_view payload) {
  simdjson::dom::parser parser;
  simdjson::dom::object doc;
  const std::string json(payload);
  if (parser.parse(json).get(doc) != simdjson::SUCCESS || doc.size() != 3) return std::nullopt;
  code_fault f;
  std::string_view ename, evalue;
  simdjson::dom::array tb;
  if (doc["ename"].get_string().get(ename) != simdjson::SUCCESS ||
      doc["evalue"].get_string().get(evalue) != simdjson::SUCCESS ||
      doc["traceback"].get_array().get(tb) != simdjson::SUCCESS)
    return std::nullopt;
  f.ename = std::string(ename);
  f.evalue = std::string(evalue);
  for (auto line : tb) {
    std::string_view text;
    if (line.get_string().get(text) != simdjson::SUCCESS) return std::nullopt;
    f.traceback.emplace_back(text);
  }
  return f;
}

std::shared_ptr<cell_runner> start_kernel_driver(const container_engine& engine,
                                                 const std::string& container,
                                                 std::chrono::milliseconds timeout,
                                                 std::string* error,
                                                 const std::optional<std::string>& keep_cwd) {
  std::string hello;
  // -I, as the runner: nothing the session's files can change is imported by the driver
  // (the kernel it starts is a plain `python3 -m ipykernel_launcher`, as a cell's python3).
  std::vector<std::string> argv{"python3", "-I", "-c", std::string(kernel_program),
                                "dockgate-kernel"};
  if (keep_cwd) {
    argv.push_back("keep");
    // The driver resolves "" itself: its own working directory, the container's.
    argv.push_back(keep_cwd->empty() ? "." : *keep_cwd);
  }
  auto driver = cell_runner::start_program(
      engine, container, std::move(argv),
      [](std::string_view payload) -> std::optional<int> {
        auto h = parse_kernel_hello(payload);
        if (!h || h->st != kernel_hello::state::ready) return std::nullopt;
        return h->pid;
      },
      timeout, error, &hello);
  if (driver) return driver;
  if (keep_cwd) {
    *error = kept_kernel_error(hello, *error);
    return nullptr;
  }
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

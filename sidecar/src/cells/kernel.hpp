#pragma once
// Kernel sessions (POST /sessions {"kernel": "python"}): a real IPython kernel in the
// session's container, held by the kernel driver (the program: sidecar/runner/kernel.py),
// which speaks the cell runner's framing (runner.hpp) on one hijacked exec. This header:
// the decisions about it, as values (unit-tested), and its start. Internal to the sidecar.
//
// Invariant: the driver is trusted no more than the runner. Its hello and status frames are
// parsed strictly; anything else is a fault that ends it (the session's next cell sweeps
// the container from the host's view and starts a new driver, with a new kernel).

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cells/runner.hpp"

namespace dockgate::sidecar {

// The driver's source, embedded at build time (kernel_program.cpp.in).
extern const std::string_view kernel_program;

// The kernel a session asks for, by the name it is known by: "python" (also Jupyter's
// kernelspec name "python3"); nullopt for any other name (400).
std::optional<std::string> kernel_name(std::string_view requested);

// The driver's hello: "dockgate-kernel 1 <PID> <state>".
struct kernel_hello {
  enum class state { ready, missing, failed };
  int pid = 0;
  state st = state::failed;
  bool operator==(const kernel_hello&) const = default;
};
std::optional<kernel_hello> parse_kernel_hello(std::string_view payload);

// A status frame: "<restarted 0|1> <died 0|1> <execution count>".
struct kernel_status {
  bool restarted = false;  // this request ran in (or left) a new kernel: the old state is gone
  bool died = false;       // the kernel's process ended while the cell ran
  std::int64_t execution_count = 0;
  bool operator==(const kernel_status&) const = default;
};
std::optional<kernel_status> parse_kernel_status(std::string_view payload);

// A cell's request: its code, its timeout and the kill grace after the interrupt, the
// outputs directory. (A restart is the sidecar's own: the driver ended, the container swept
// as judged from the host, a new driver started: kernel_cells.cpp.)
std::string kernel_cell_request(std::string_view code, std::int64_t timeout_ms,
                                std::int64_t grace_ms, std::string_view outputs, std::uint32_t cap);

// The driver started in `container` as the session user; it answers once its kernel is
// ready. nullptr with `error` set (the image's missing packages named when that is why).
// `keep_cwd` set: the driver's keep mode (an OpenSandbox /code context: it never sweeps, its
// kernel starts in that directory, "" the container's own), its errors in OpenSandbox's words.
std::shared_ptr<cell_runner> start_kernel_driver(const container_engine& engine,
                                                 const std::string& container,
                                                 std::chrono::milliseconds timeout,
                                                 std::string* error,
                                                 const std::optional<std::string>& keep_cwd = {});

// Keep mode (OpenSandbox's /code contexts): a cell's request, its code only (no timeout: an
// interrupt ends it, as execd's cells), answered with value and fault frames beside the
// output (runner.hpp run_request's `structured`), no listing.
std::string kernel_code_request(std::string_view code, std::uint32_t cap);

// A value frame: "<execution count> <JSON object of MIME type -> string>" (count 0: a
// display, not a cell's result). Parsed strictly: a plain decimal, one space, an object
// whose keys are non-empty and whose values are all strings; nullopt for anything else.
struct code_value {
  std::int64_t execution_count = 0;
  std::vector<std::pair<std::string, std::string>> data;  // in the driver's order
  bool operator==(const code_value&) const = default;
};
std::optional<code_value> parse_code_value(std::string_view payload);

// A fault frame: the JSON object {"ename": string, "evalue": string, "traceback": [string]},
// those three keys and nothing else; nullopt for anything else.
struct code_fault {
  std::string ename, evalue;
  std::vector<std::string> traceback;
  bool operator==(const code_fault&) const = default;
};
std::optional<code_fault> parse_code_fault(std::string_view payload);

}  // namespace dockgate::sidecar

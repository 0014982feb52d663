#pragma once
// The cell contract: what a cell is asked (cell_request, parsed by a front) and what it
// answers (cell_result, which a front writes in its API's shape), whichever executor ran
// it (plain execs, the cell runner, the kernel: executors.hpp). Internal to the sidecar
// library.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cells/kernel.hpp"

namespace dockgate::sidecar {

// A cell as a front parsed it: the session, the code (within SANDBOX_MAX_CODE_BYTES: a
// parse-time limit), the timeout asked for (none or 0: SANDBOX_DEFAULT_EXEC_TIMEOUT_MS;
// clamped to 1 s .. SANDBOX_EXEC_TIMEOUT_CAP_MS by cells).
struct cell_request {
  std::string session_id;
  std::string code;
  std::optional<std::int64_t> timeout_ms;
};

// A file of /workspace/outputs the cell made or changed, as read after it.
struct cell_artifact {
  std::string name;  // the file's name (valid UTF-8)
  std::string mime_type;
  std::string data;  // its bytes
  bool operator==(const cell_artifact&) const = default;
};

// The kernel block of a kernel session's answer.
struct cell_kernel {
  std::string name;
  kernel_status status;  // restarted: the kernel's state before this cell is gone
  bool operator==(const cell_kernel&) const = default;
};

struct cell_result {
  std::string stdout_text;  // valid UTF-8, "[truncated ...]" past the cap
  std::string stderr_text;  // valid UTF-8, with the sandbox's "[sandbox] ..." notes
  std::int64_t exit_code = 0;
  std::vector<cell_artifact> files;
  std::optional<cell_kernel> kernel;  // a kernel session's cells only
  bool timed_out = false;             // killed at its timeout (exit 124)
  bool oom = false;                   // killed by the memory cgroup
  bool operator==(const cell_result&) const = default;
};

// POST /sessions/{id}/restart's answer: the new kernel.
struct kernel_restart {
  cell_kernel kernel;
};

}  // namespace dockgate::sidecar
